// Reading a checkpoint (docs/checkpoint.md): per rank, no collective. Opening a folder parses
// and checks index.json (format version, consistency, coverage) and that every data file it
// names exists with at least the bytes it records; reads verify each shard's checksum. Any
// problem is a std::runtime_error naming the file, the tensor and what is wrong, so that nothing
// is trained from a partly-read checkpoint.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "checkpoint/format.hpp"
#include "checkpoint/index.hpp"
#include "checkpoint/posix_file.hpp"

namespace paraxis::checkpoint {

// Where a Reader's time went (seconds, this rank): reading shards (pread: from storage or the
// page cache) and verifying their checksums. The rest of a resume is assembling the pieces.
struct ReadTimes {
  double storage_s = 0, verify_s = 0;
};

class Reader {
 public:
  // A step-<N> folder (resolve() finds one from a root or `latest`). Throws std::runtime_error.
  explicit Reader(std::string folder);
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

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
  // The same into `out` (`bytes`: the region's elements times the dtype's size, else throws). A
  // region that is one whole saved shard not held in memory is read straight into `out` and
  // verified there: no copy, nothing kept.
  void read_into(const Shard& region, void* out, std::size_t bytes) const;
  // The saved shard that is exactly `region` (the common case of a resume in the layout that
  // saved), or -1; checks the region as read_into does (throws).
  long whole_shard(const Shard& region, std::size_t bytes) const;

  // The saved shards, numbered 0 .. shard_count() - 1 in the index's order (tensor by tensor).
  std::size_t shard_count() const { return shards_.size(); }
  const ShardRecord& shard(std::size_t s) const { return *shards_[s]; }
  // The saved shards a region overlaps (the ones read() of it reads), increasing.
  std::vector<std::size_t> shards_of(const Shard& region) const;
  // The shards sorted by data file and offset (the order a sequential read takes).
  std::vector<std::size_t> in_file_order(std::vector<std::size_t> shards) const;
  // Shard s read from storage and verified (throws naming the file and the tensor).
  std::vector<std::byte> read_shard(std::size_t s) const;
  void read_shard_into(std::size_t s, std::byte* out) const;  // the same into shard(s).bytes
  // Holds shard s's bytes (verified by whoever read them: read_once.hpp) for every later read,
  // until the Reader is destroyed or forget_kept(), outside the cache's limit.
  void keep(std::size_t s, std::vector<std::byte> bytes) const;
  // The same for bytes held elsewhere (memory shared by the ranks of a host: read_once.hpp),
  // which must stay valid until forget_kept() or the Reader's end.
  void keep_view(std::size_t s, const std::byte* data) const;
  void forget_kept() const;
  // Read once through the host's page cache (read_once.hpp): shard s read from storage and
  // verified, through a small buffer of the Reader's, so that the other ranks of this host find
  // its bytes in the page cache (throws as a read does).
  void read_for_host(std::size_t s) const;
  // Shard s was read into this host's page cache (read_for_host, here or on another rank of the
  // host): its reads take the page cache's bytes without any storage access (preadv2
  // RWF_NOWAIT), and read from storage only what is no longer there (then counted in
  // bytes_read() and reread_bytes()). Verified as ever.
  // `ready` (memory the host's ranks share, read_once.hpp): wait until it is 1 (read and
  // verified there) first; 2: the reading rank failed (throws naming the file and tensor).
  void in_host_cache(std::size_t s, const int* ready = nullptr) const;
  // Adds another Reader's reads of the same folder (a thread's: read_once.hpp) to these figures.
  void count(const Reader& other) const;
  // Whether the data files' file system serves reads from the page cache only (RWF_NOWAIT).
  bool host_cache_readable() const;
  // Bytes copied from the host's page cache for shards in_host_cache() (no storage access), and
  // of those, bytes that had left the cache and were read from storage again.
  std::size_t cached_bytes() const { return cached_bytes_; }
  std::size_t reread_bytes() const { return reread_bytes_; }
  const ReadTimes& times() const { return times_; }

  std::size_t bytes() const;  // data bytes of every shard
  // Data bytes this Reader has read so far (shards are read whole, to verify them).
  std::size_t bytes_read() const { return bytes_read_; }
  // Verified shards are kept for the next reads, the most recently used first, up to this many
  // bytes (default 256 MiB; 0: none): a loader whose pieces cut a saved shard several times (a
  // resharded load) reads and checks it once.
  void set_cache_limit(std::size_t bytes);

 private:
  const TensorRecord& record(const std::string& tensor) const;
  const std::byte* held(std::size_t s) const;  // kept or cached, else null
  const std::byte* fetch(std::size_t s, std::vector<std::byte>& buf) const;
  void read_verified(std::size_t s, std::byte* out) const;
  std::string read_hashed(std::size_t s, std::byte* out, bool reuse) const;
  void check(std::size_t s, const std::string& sum) const;   // throws naming the file, tensor
  const posix::InFile& file(const std::string& name) const;  // opened once

  std::string folder_;
  Index index_;
  std::vector<const ShardRecord*> shards_;               // by shard number
  std::vector<std::size_t> first_shard_;                 // per tensor: its first shard number
  std::unordered_map<std::string, std::size_t> tensor_;  // name -> position in the index
  mutable std::size_t bytes_read_ = 0;
  mutable ReadTimes times_;
  mutable std::unordered_map<std::size_t, const std::byte*> kept_;  // owned_ or another's
  mutable std::unordered_map<std::size_t, std::vector<std::byte>> owned_;
  mutable std::list<std::pair<std::size_t, std::vector<std::byte>>> cache_;
  mutable std::unordered_map<std::string, std::unique_ptr<posix::InFile>> files_;
  mutable std::unordered_map<std::size_t, const int*> host_cached_;  // in the host's page cache
  mutable std::vector<std::byte> bounce_;                            // read_for_host's buffer
  mutable std::size_t cached_bytes_ = 0, reread_bytes_ = 0;
  mutable std::size_t cache_bytes_ = 0;
  std::size_t cache_limit_ = std::size_t{256} << 20;
};

}  // namespace paraxis::checkpoint
