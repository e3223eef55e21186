// The checkpoint format's vocabulary (docs/checkpoint.md, "Format"): a global tensor, the shard
// of it one rank wrote (a box of the tensor and a flat element range within the box), the
// mapping of a shard onto the tensor's row-major element order (runs), and the coverage rule
// (every element written exactly once). Pure functions: the writer checks coverage before it
// commits, the reader checks it again when it opens an index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace paraxis::checkpoint {

// Version 2 added index.json's `lineage` (lineage.hpp); version 1 indexes are still read (no
// lineage recorded).
inline constexpr int kFormatVersion = 2;
inline constexpr int kOldestReadableFormatVersion = 1;
inline constexpr const char* kFormatName = "paraxis-checkpoint";
inline constexpr const char* kChecksumName = "XXH3_64bits";

// A global tensor: its name (unique in a checkpoint), global shape (an empty shape is a scalar)
// and element type: "f64", "f32", "bf16", "i64", "u64" or "bytes" (1-byte elements).
struct TensorInfo {
  std::string name;
  std::vector<std::int64_t> shape;
  std::string dtype;
};
bool operator==(const TensorInfo& a, const TensorInfo& b);

// The part of a tensor one rank writes (or a loader wants): the box offset[d] .. offset[d] +
// extent[d] of the global tensor and, within the box's row-major order, the elements
// [begin, end) (end = -1: to the end of the box), so that a ZeRO partition of a tensor-parallel
// slice is one shard. Empty offset and extent: the box is the whole tensor.
struct Shard {
  TensorInfo tensor;
  std::vector<std::int64_t> offset, extent;
  std::int64_t begin = 0, end = -1;
};

// Bytes per element of a dtype; throws std::invalid_argument naming it when unknown.
std::size_t dtype_size(const std::string& dtype);
// Elements of a shape (1 for a scalar).
std::int64_t element_count(const std::vector<std::int64_t>& shape);

// The shard with its box spelt out (offset/extent per dimension) and end resolved; throws
// std::invalid_argument naming the tensor and the offending value unless the tensor is valid
// (name, dtype, shape >= 0) and the box and range lie inside it.
Shard normalized(const Shard& s);
// Elements in the shard (end - begin of the normalized shard).
std::int64_t shard_elements(const Shard& s);

// A contiguous piece of a shard in the tensor's global row-major order: elements
// [global, global + count) of the tensor are elements [local, local + count) of the shard's
// flat range (0 = the shard's first element).
struct Run {
  std::int64_t global = 0, local = 0, count = 0;
};
// The runs of a normalized shard, increasing in both global and local, adjacent runs merged.
std::vector<Run> runs_of(const Shard& normalized_shard);

// The elements two shards of the same tensor share, from their runs: per contiguous piece, its
// first tensor element, its position in each shard's flat range and its length. Increasing in
// global; empty when they do not meet.
struct Piece {
  std::int64_t global = 0, to_local = 0, from_local = 0, count = 0;
};
std::vector<Piece> overlap(const std::vector<Run>& to, const std::vector<Run>& from);

// Coverage of one tensor: the shards (normalized) must cover every element exactly once.
// Returns "" when they do, else a sentence naming the tensor, the first gap or overlap (element
// indices) and, for an overlap, the two shards by their `labels` (parallel to shards).
std::string coverage_error(const TensorInfo& tensor, const std::vector<Shard>& shards,
                           const std::vector<std::string>& labels);

// "[a, b, c]", for messages.
std::string to_string(const std::vector<std::int64_t>& v);

// The 64-bit XXH3 checksum of the bytes, as 16 lower-case hex digits.
std::string checksum(const void* data, std::size_t bytes);

// The same checksum taken piece by piece (a shard read in chunks, each hashed while it is still
// in the processor's cache): update() with consecutive pieces, then hex() of all of them.
class Checksum {
 public:
  Checksum();
  ~Checksum();
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;
  void update(const void* data, std::size_t bytes);
  std::string hex() const;

 private:
  void* state_;  // XXH3_state_t, kept out of this header
};

}  // namespace paraxis::checkpoint
