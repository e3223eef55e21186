// Shards, runs and coverage (format.hpp); the checksum through the system's xxHash.
#include "checkpoint/format.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <new>
#include <sstream>
#include <stdexcept>

namespace paraxis::checkpoint {

namespace {

[[noreturn]] void bad(const std::string& tensor, const std::string& what) {
  throw std::invalid_argument("checkpoint: tensor '" + tensor + "': " + what);
}

}  // namespace

bool operator==(const TensorInfo& a, const TensorInfo& b) {
  return a.name == b.name && a.shape == b.shape && a.dtype == b.dtype;
}

std::size_t dtype_size(const std::string& dtype) {
  if (dtype == "f64" || dtype == "i64" || dtype == "u64") return 8;
  if (dtype == "f32") return 4;
  if (dtype == "bf16") return 2;
  if (dtype == "bytes") return 1;
  throw std::invalid_argument("checkpoint: dtype '" + dtype +
                              "'; expected one of f64, f32, bf16, i64, u64, bytes");
}

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

std::string to_string(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Shard normalized(const Shard& in) {
  Shard s = in;
  const auto& t = s.tensor;
  if (t.name.empty()) throw std::invalid_argument("checkpoint: a tensor without a name");
  try {
    dtype_size(t.dtype);
  } catch (const std::invalid_argument& e) {
    bad(t.name, e.what());
  }
  for (const auto d : t.shape)
    if (d < 0) bad(t.name, "shape " + to_string(t.shape) + " has a negative dimension");
  const std::size_t dims = t.shape.size();
  if (s.offset.empty() && s.extent.empty()) {
    s.offset.assign(dims, 0);
    s.extent = t.shape;
  }
  if (s.offset.size() != dims || s.extent.size() != dims)
    bad(t.name, "box offset " + to_string(s.offset) + " extent " + to_string(s.extent) +
                    "; expected " + std::to_string(dims) + " values each (shape " +
                    to_string(t.shape) + ")");
  for (std::size_t d = 0; d < dims; ++d)
    if (s.offset[d] < 0 || s.extent[d] < 0 || s.offset[d] + s.extent[d] > t.shape[d])
      bad(t.name, "box offset " + to_string(s.offset) + " extent " + to_string(s.extent) +
                      " leaves the shape " + to_string(t.shape) + " in dimension " +
                      std::to_string(d));
  const std::int64_t n = element_count(s.extent);
  if (s.end == -1) s.end = n;
  if (s.begin < 0 || s.end < s.begin || s.end > n)
    bad(t.name, "element range [" + std::to_string(s.begin) + ", " + std::to_string(in.end) +
                    ") of a box of " + std::to_string(n) +
                    " elements; expected 0 <= begin <= "
                    "end <= " +
                    std::to_string(n) + " (end -1: the whole box)");
  return s;
}

std::int64_t shard_elements(const Shard& s) {
  const Shard n = normalized(s);
  return n.end - n.begin;
}

std::vector<Run> runs_of(const Shard& s) {
  std::vector<Run> runs;
  if (s.end <= s.begin) return runs;
  const auto& shape = s.tensor.shape;
  const std::size_t dims = shape.size();
  if (dims == 0) return {Run{0, 0, 1}};
  // The box's rows: dimension k and every dimension after it (all of which the box spans
  // whole) are contiguous in the tensor, so a row of `unit` elements is one run.
  std::size_t k = dims - 1;
  std::int64_t inner = 1;
  while (k > 0 && s.offset[k] == 0 && s.extent[k] == shape[k]) {
    inner *= shape[k];
    --k;
  }
  const std::int64_t unit = s.extent[k] * inner;
  std::vector<std::int64_t> stride(dims, 1);
  for (std::size_t d = dims - 1; d > 0; --d) stride[d - 1] = stride[d] * shape[d];
  for (std::int64_t r = s.begin / unit; r * unit < s.end; ++r) {
    // The tensor element where row r starts: r unravelled over the box's dimensions before k.
    std::int64_t g = s.offset[k] * inner, rest = r;
    for (std::size_t d = k; d-- > 0;) {
      g += (s.offset[d] + rest % s.extent[d]) * stride[d];
      rest /= s.extent[d];
    }
    const std::int64_t lo = std::max(s.begin, r * unit), hi = std::min(s.end, (r + 1) * unit);
    const Run run{g + (lo - r * unit), lo - s.begin, hi - lo};
    if (!runs.empty() && runs.back().global + runs.back().count == run.global)
      runs.back().count += run.count;
    else
      runs.push_back(run);
  }
  return runs;
}

std::vector<Piece> overlap(const std::vector<Run>& to, const std::vector<Run>& from) {
  std::vector<Piece> pieces;
  std::size_t i = 0, j = 0;
  while (i < to.size() && j < from.size()) {
    const auto& a = to[i];
    const auto& b = from[j];
    const std::int64_t lo = std::max(a.global, b.global);
    const std::int64_t hi = std::min(a.global + a.count, b.global + b.count);
    if (lo < hi)
      pieces.push_back(Piece{lo, a.local + (lo - a.global), b.local + (lo - b.global), hi - lo});
    if (a.global + a.count < b.global + b.count)
      ++i;
    else
      ++j;
  }
  return pieces;
}

std::string coverage_error(const TensorInfo& tensor, const std::vector<Shard>& shards,
                           const std::vector<std::string>& labels) {
  struct Owned {
    Run run;
    std::size_t shard;
  };
  std::vector<Owned> all;
  for (std::size_t i = 0; i < shards.size(); ++i)
    for (const auto& r : runs_of(shards[i])) all.push_back({r, i});
  std::sort(all.begin(), all.end(),
            [](const Owned& a, const Owned& b) { return a.run.global < b.run.global; });
  const std::int64_t total = element_count(tensor.shape);
  std::ostringstream os;
  os << "tensor '" << tensor.name << "' (shape " << to_string(tensor.shape) << ", " << total
     << " elements): ";
  std::int64_t next = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& o = all[i];
    if (o.run.global > next) {
      os << "elements [" << next << ", " << o.run.global << ") are written by no shard (a gap)";
      return os.str();
    }
    if (o.run.global < next) {
      // The earlier run that reaches past this one's start.
      std::size_t prev = i;
      while (prev-- > 0)
        if (all[prev].run.global + all[prev].run.count > o.run.global) break;
      os << "element " << o.run.global << " is written twice (an overlap), by "
         << labels[all[prev].shard] << " and by " << labels[o.shard];
      return os.str();
    }
    next = o.run.global + o.run.count;
  }
  if (next < total) {
    os << "elements [" << next << ", " << total << ") are written by no shard (a gap)";
    return os.str();
  }
  return "";
}

namespace {

std::string hex_of(XXH64_hash_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace

std::string checksum(const void* data, std::size_t bytes) {
  return hex_of(XXH3_64bits(data, bytes));
}

Checksum::Checksum() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Checksum::~Checksum() {
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void Checksum::update(const void* data, std::size_t bytes) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, bytes);
}

std::string Checksum::hex() const {
  return hex_of(XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_)));
}

}  // namespace paraxis::checkpoint
