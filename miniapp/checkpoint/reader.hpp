// Reading a checkpoint (docs/checkpoint.md): per rank, no collective. Opening a folder parses
// and checks index.json (format version, consistency, coverage) and that every data file it
// names exists with at least the bytes it records; reads verify each shard's checksum. Any
// problem is a std::runtime_error naming the file, the tensor and what is wrong, so that nothing
// is trained from a partly-read checkpoint.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <list>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/format.hpp"
#include "checkpoint/index.hpp"

namespace paraxis::checkpoint {

class Reader {
 public:
  // A step-<N> folder (resolve() finds one from a root or `latest`). Throws std::runtime_error.
  explicit Reader(std::string folder);

  // The folder a resume reads: given a step folder, itself (an error when it has no
  // index.json); given a root (or its `latest` file), the folder `latest` names when it is
  // complete, else the newest complete step-<N>; errors name what is missing.
  static std::string resolve(const std::string& root_or_folder_or_latest);

  const std::string& folder() const { return folder_; }
  const nlohmann::json& meta() const { return index_.meta; }
  long step() const { return index_.step; }
  int ranks() const { return index_.ranks; }
  std::vector<TensorInfo> tensors() const;
  bool has(const std::string& tensor) const;
  const TensorInfo& info(const std::string& tensor) const;  // throws naming it when absent
  const Index& index() const { return index_; }

  // The whole global tensor in row-major order, assembled from its shards.
  std::vector<std::byte> read(const std::string& tensor) const;
  // A region (box and flat range, as a Shard; its tensor must match the saved one's shape and
  // dtype) in the region's own flat order: reads only the shards that overlap it.
  std::vector<std::byte> read(const Shard& region) const;

  std::size_t bytes() const;  // data bytes of every shard
  // Data bytes this Reader has read so far (shards are read whole, to verify them).
  std::size_t bytes_read() const { return bytes_read_; }
  // Verified shards are kept for the next reads, the most recently used first, up to this many
  // bytes (default 256 MiB; 0: none): a loader whose pieces cut a saved shard several times (a
  // resharded load) reads and checks it once.
  void set_cache_limit(std::size_t bytes);

 private:
  std::string folder_;
  Index index_;
  mutable std::size_t bytes_read_ = 0;
  mutable std::list<std::pair<std::string, std::vector<std::byte>>> cache_;
  mutable std::size_t cache_bytes_ = 0;
  std::size_t cache_limit_ = std::size_t{256} << 20;
};

}  // namespace paraxis::checkpoint
