// Pieces of the training state as boxes of logical tensors (state_pieces.hpp).
#include "model/state_pieces.hpp"

#include <algorithm>
#include <stdexcept>

namespace paraxis::model {

std::vector<std::int64_t> logical_shape(const TensorSpec& s) {
  if (s.cols == 0) return {s.logical_rows};
  return {s.logical_rows, s.logical_cols};
}

std::vector<LogicalBox> logical_boxes(const TensorSpec& s, std::size_t lo, std::size_t hi) {
  if (lo < s.offset || hi > s.offset + s.size() || lo > hi)
    throw std::invalid_argument("logical_boxes: [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + ") is not inside tensor " + s.name + " [" +
                                std::to_string(s.offset) + ", " +
                                std::to_string(s.offset + s.size()) + ")");
  std::vector<LogicalBox> out;
  if (lo == hi) return out;
  const std::size_t C = s.cols ? static_cast<std::size_t>(s.cols) : 1;
  const std::int64_t lrows = s.logical_rows, lcols = s.cols ? s.logical_cols : 1;
  const std::size_t a = lo - s.offset, b = hi - s.offset;
  // Rows [r, r + n) of the shard, columns [c0, c1): clipped to the logical tensor.
  auto add = [&](std::size_t r, std::size_t n, std::size_t c0, std::size_t c1) {
    if (n == 0 || c1 <= c0) return;
    const std::int64_t g0 = s.row_offset + static_cast<std::int64_t>(r);
    const std::int64_t gc0 = s.col_offset + static_cast<std::int64_t>(c0);
    const std::int64_t rows = std::min<std::int64_t>(static_cast<std::int64_t>(n), lrows - g0);
    const std::int64_t cols =
        std::min<std::int64_t>(static_cast<std::int64_t>(c1 - c0), lcols - gc0);
    if (rows <= 0 || cols <= 0) return;  // padding only
    LogicalBox box;
    box.row0 = g0;
    box.rows = rows;
    box.col0 = gc0;
    box.cols = cols;
    box.flat = s.offset + r * C + c0;
    box.stride = C;
    out.push_back(box);
  };
  const std::size_t ra = a / C, ca = a % C, rb = (b - 1) / C, cb = (b - 1) % C + 1;
  if (ra == rb) {
    add(ra, 1, ca, cb);
    return out;
  }
  std::size_t first_full = ra, end_full = rb + 1;
  if (ca > 0) {
    add(ra, 1, ca, C);
    first_full = ra + 1;
  }
  if (cb < C) end_full = rb;
  add(first_full, end_full - first_full, 0, C);
  if (cb < C) add(rb, 1, 0, cb);
  return out;
}

std::size_t StatePiece::elements() const {
  std::size_t n = 1;
  for (auto e : extent) n *= static_cast<std::size_t>(e);
  return n;
}

StatePiece state_piece(const std::string& kind, const TensorSpec& s, const LogicalBox& box,
                       const std::string& dtype) {
  StatePiece p;
  p.tensor = kind + "/" + s.name;
  p.shape = logical_shape(s);
  p.dtype = dtype;
  if (s.cols == 0) {
    p.offset = {box.row0};
    p.extent = {box.rows};
  } else {
    p.offset = {box.row0, box.col0};
    p.extent = {box.rows, box.cols};
  }
  return p;
}

}  // namespace paraxis::model
