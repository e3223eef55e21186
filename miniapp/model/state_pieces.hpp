// The training state of one rank as pieces of global tensors, for checkpoints
// (docs/checkpoint.md): what a rank holds of a parameter tensor — a block of the logical tensor
// (tensor parallelism, experts, the vocabulary padded to a multiple of tp) and, under ZeRO, a
// flat range of that block — expressed as boxes of the logical tensor, padding left out, so that
// a checkpoint written under one layout can be read under any other. The trainers describe their
// state through StateSink / StateSource; the driver connects them to the checkpoint files. Plain
// C++ (no Kokkos): part of paraxis_model_core.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "model/param_layout.hpp"

namespace paraxis::model {

// A box of a tensor's shard [rows x cols] in the flat layout, in logical coordinates: rows
// [row0, row0 + rows) x cols [col0, col0 + cols) of the logical tensor (a vector: cols = 1,
// col0 = 0). Its elements sit in the flat layout from `flat` on, row after row, `stride` apart
// (the shard's own column count).
struct LogicalBox {
  std::int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  std::size_t flat = 0, stride = 1;
  std::size_t size() const { return static_cast<std::size_t>(rows * cols); }
};

// The part of the flat range [lo, hi) (flat-layout indices) inside tensor s, as boxes of the
// logical tensor, padding dropped: at most three (a partial first row, whole rows, a partial
// last row). Throws std::invalid_argument when [lo, hi) is not inside the tensor.
std::vector<LogicalBox> logical_boxes(const TensorSpec& s, std::size_t lo, std::size_t hi);

// The logical shape of tensor s: {logical_rows} for a vector, {logical_rows, logical_cols}.
std::vector<std::int64_t> logical_shape(const TensorSpec& s);

// One piece of a global tensor: its name and logical shape, the element type ("f64", "f32"),
// and the box (offset and extent per dimension of `shape`).
struct StatePiece {
  std::string tensor;
  std::vector<std::int64_t> shape;
  std::string dtype;
  std::vector<std::int64_t> offset, extent;
  std::size_t elements() const;
};

// The checkpoint's name of a state element type: "f64" or "f32" (master weights and moments are
// never bf16: bf16 training keeps fp32 master copies).
template <class V>
const char* state_dtype() {
  static_assert(sizeof(V) == 8 || sizeof(V) == 4, "state elements are f64 or f32");
  return sizeof(V) == 8 ? "f64" : "f32";
}

// The piece of state `kind` ("master", "adam_m", "adam_v") of tensor s covering `box`.
StatePiece state_piece(const std::string& kind, const TensorSpec& s, const LogicalBox& box,
                       const std::string& dtype);

// Where a rank's state goes (a checkpoint being written) and where it comes from (one being
// read). data is the piece's elements in row-major order of its box.
class StateSink {
 public:
  virtual ~StateSink() = default;
  virtual void add(const StatePiece& piece, const void* data, std::size_t bytes) = 0;
};
class StateSource {
 public:
  virtual ~StateSource() = default;
  virtual void read(const StatePiece& piece, void* out, std::size_t bytes) const = 0;
  // false: a source that only records which pieces a load asks for (read once's first pass,
  // docs/checkpoint.md); read() then gets out = nullptr, and a trainer that honours it skips
  // the rest of its load (the state is left as it was).
  virtual bool fills() const { return true; }
  // A read whose `out` the trainer leaves alone until settle() (its place in the trainer's
  // buffer, or a buffer it scatters afterwards): the source may fill it then, in the order it
  // chooses (read once's reads straight into place, docs/checkpoint.md). `out` stays valid until
  // settle() returns or throws; a load that throws before settle() leaves it unfilled.
  virtual void read_later(const StatePiece& piece, void* out, std::size_t bytes) const {
    read(piece, out, bytes);
  }
  // Every read_later() so far filled (throws as read() does). A trainer calls it once, after its
  // last read_later() and before it uses what they fill.
  virtual void settle() const {}
};

// Host helpers: the box's elements out of / into a flat host array (row by row, `stride`
// apart; each row is contiguous in both).
// Whether the box's elements are contiguous in the flat array (one row, or whole rows back to
// back): then a piece is read or written in place, with no gather or scatter.
inline bool contiguous(const LogicalBox& b) {
  return b.rows <= 1 || b.stride == static_cast<std::size_t>(b.cols);
}
template <class V>
std::vector<V> gather_box(const V* flat, const LogicalBox& b) {
  std::vector<V> out(b.size());
  for (std::int64_t r = 0; r < b.rows; ++r) {
    const V* row = flat + b.flat + static_cast<std::size_t>(r) * b.stride;
    std::copy(row, row + b.cols, out.begin() + r * b.cols);
  }
  return out;
}
template <class V>
void scatter_box(V* flat, const LogicalBox& b, const std::vector<V>& in) {
  for (std::int64_t r = 0; r < b.rows; ++r)
    std::copy(in.begin() + r * b.cols, in.begin() + (r + 1) * b.cols,
              flat + b.flat + static_cast<std::size_t>(r) * b.stride);
}

// A trainer's load through a StateSource (read_later): a piece contiguous in its destination is
// read in place; another into a buffer of its own, scattered into the destination by settle().
// A source whose fills() is false (read once's first pass) is only told the pieces.
template <class V>
class PieceReads {
 public:
  PieceReads(const StateSource& source, std::string dtype)
      : source_(source), dtype_(std::move(dtype)), fill_(source.fills()) {}
  // The piece `kind` of tensor s covering `box`, into `dst` at `at` (box's place there).
  void load(const std::string& kind, const TensorSpec& s, const LogicalBox& box, V* dst,
            const LogicalBox& at) {
    const StatePiece piece = state_piece(kind, s, box, dtype_);
    const std::size_t bytes = box.size() * sizeof(V);
    if (!fill_) return source_.read(piece, nullptr, bytes);
    for (std::int64_t r = 0; r < (contiguous(at) ? 1 : at.rows); ++r) {
      const std::size_t lo = at.flat + static_cast<std::size_t>(r) * at.stride;
      covered_.push_back(
          {dst, lo, lo + (contiguous(at) ? at.size() : static_cast<std::size_t>(at.cols))});
    }
    if (contiguous(at)) return source_.read_later(piece, dst + at.flat, bytes);
    scatters_.push_back({dst, at, std::vector<V>(box.size())});
    source_.read_later(piece, scatters_.back().data.data(), bytes);
  }
  // Every destination filled (StateSource::settle, then the scatters).
  void settle() {
    if (!fill_) return;
    source_.settle();
    for (const auto& sc : scatters_) scatter_box(sc.dst, sc.at, sc.data);
    scatters_.clear();
  }
  // After settle(): the elements of dst[0, n) that no piece covered (the alignment padding) set
  // to 0, so that a load need not zero its whole buffer before the reads.
  void zero_rest(V* dst, std::size_t n) const {
    std::vector<std::pair<std::size_t, std::size_t>> runs;
    for (const auto& c : covered_)
      if (c.dst == dst) runs.emplace_back(c.lo, c.hi);
    std::sort(runs.begin(), runs.end());
    std::size_t at = 0;
    for (const auto& [lo, hi] : runs) {
      if (lo > at) std::fill(dst + at, dst + std::min(lo, n), V(0));
      at = std::max(at, hi);
    }
    if (at < n) std::fill(dst + at, dst + n, V(0));
  }

 private:
  struct Scatter {
    V* dst;
    LogicalBox at;
    std::vector<V> data;
  };
  const StateSource& source_;
  std::string dtype_;
  bool fill_;
  struct Run {
    const V* dst;
    std::size_t lo, hi;  // [lo, hi) of dst
  };
  std::deque<Scatter> scatters_;  // stable addresses: the source fills their buffers later
  std::vector<Run> covered_;      // what the pieces fill
};

}  // namespace paraxis::model
