// An in-memory checkpoint for the trainers' save_state / load_state (model/state_pieces.hpp):
// every global tensor whole, with a count per element of the pieces that wrote it, so that a
// test sees a gap or a double write; shared over MPI so that every rank can read what any rank
// wrote (resuming under another layout, or on one rank). The files and their format are the
// checkpoint library's (docs/checkpoint.md); this is the state's own contract, without them.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/state_pieces.hpp"

namespace ptest {

class StateStore final : public paraxis::model::StateSink, public paraxis::model::StateSource {
 public:
  struct Tensor {
    std::vector<std::int64_t> shape;
    std::string dtype;
    std::vector<double> values;
    std::vector<int> writes;
  };

  void add(const paraxis::model::StatePiece& p, const void* data, std::size_t bytes) override {
    pieces_.push_back({p, std::vector<char>(static_cast<const char*>(data),
                                            static_cast<const char*>(data) + bytes)});
    place(p, static_cast<const char*>(data), bytes);
  }

  void read(const paraxis::model::StatePiece& p, void* out, std::size_t bytes) const override {
    const auto it = tensors_.find(p.tensor);
    if (it == tensors_.end()) throw std::runtime_error("state store: no tensor " + p.tensor);
    const Tensor& t = it->second;
    if (t.dtype != p.dtype || t.shape != p.shape)
      throw std::runtime_error("state store: " + p.tensor + " has another dtype or shape");
    if (bytes != p.elements() * size_of(p.dtype))
      throw std::runtime_error("state store: wrong byte count for " + p.tensor);
    std::size_t k = 0;
    for_each(p, t.shape, [&](std::size_t g) {
      if (t.writes[g] != 1)
        throw std::runtime_error("state store: element of " + p.tensor + " written " +
                                 std::to_string(t.writes[g]) + " times");
      store(out, k++, t.values[g], p.dtype);
    });
  }

  // Every rank's pieces, to every rank (collective over comm).
  void share(MPI_Comm comm) {
    std::vector<char> mine;
    for (const auto& [p, data] : pieces_) {
      put_string(mine, p.tensor);
      put_string(mine, p.dtype);
      put_vec(mine, p.shape);
      put_vec(mine, p.offset);
      put_vec(mine, p.extent);
      put_vec(mine, data);
    }
    int n = static_cast<int>(mine.size()), ranks = 0, me = 0;
    MPI_Comm_size(comm, &ranks);
    MPI_Comm_rank(comm, &me);
    std::vector<int> sizes(ranks), displs(ranks, 0);
    MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm);
    for (int r = 1; r < ranks; ++r) displs[r] = displs[r - 1] + sizes[r - 1];
    std::vector<char> all(static_cast<std::size_t>(displs.back() + sizes.back()));
    MPI_Allgatherv(mine.data(), n, MPI_CHAR, all.data(), sizes.data(), displs.data(), MPI_CHAR,
                   comm);
    for (int r = 0; r < ranks; ++r) {
      if (r == me) continue;
      const char* at = all.data() + displs[r];
      const char* end = at + sizes[r];
      while (at < end) {
        paraxis::model::StatePiece p;
        p.tensor = get_string(at);
        p.dtype = get_string(at);
        p.shape = get_vec<std::int64_t>(at);
        p.offset = get_vec<std::int64_t>(at);
        p.extent = get_vec<std::int64_t>(at);
        const auto data = get_vec<char>(at);
        place(p, data.data(), data.size());
      }
    }
  }

  // Whether every element of every tensor was written exactly once; else the first that was not.
  std::string coverage_problem() const {
    for (const auto& [name, t] : tensors_)
      for (std::size_t i = 0; i < t.writes.size(); ++i)
        if (t.writes[i] != 1)
          return name + " element " + std::to_string(i) + " written " +
                 std::to_string(t.writes[i]) + " times";
    return "";
  }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }

 private:
  static std::size_t size_of(const std::string& dtype) { return dtype == "f64" ? 8 : 4; }
  static double load(const char* p, std::size_t k, const std::string& dtype) {
    if (dtype == "f64") {
      double x;
      std::memcpy(&x, p + 8 * k, 8);
      return x;
    }
    float x;
    std::memcpy(&x, p + 4 * k, 4);
    return x;
  }
  static void store(void* out, std::size_t k, double v, const std::string& dtype) {
    if (dtype == "f64") {
      std::memcpy(static_cast<char*>(out) + 8 * k, &v, 8);
    } else {
      const float x = static_cast<float>(v);
      std::memcpy(static_cast<char*>(out) + 4 * k, &x, 4);
    }
  }
  template <class F>
  static void for_each(const paraxis::model::StatePiece& p, const std::vector<std::int64_t>& shape,
                       F&& f) {
    const bool matrix = shape.size() == 2;
    const std::int64_t rows = p.extent[0], cols = matrix ? p.extent[1] : 1;
    const std::int64_t gcols = matrix ? shape[1] : 1;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        f(static_cast<std::size_t>((p.offset[0] + r) * gcols + (matrix ? p.offset[1] : 0) + c));
  }
  void place(const paraxis::model::StatePiece& p, const char* data, std::size_t bytes) {
    Tensor& t = tensors_[p.tensor];
    std::size_t n = 1;
    for (auto e : p.shape) n *= static_cast<std::size_t>(e);
    if (t.values.empty()) {
      t.shape = p.shape;
      t.dtype = p.dtype;
      t.values.assign(n, 0.0);
      t.writes.assign(n, 0);
    }
    if (t.shape != p.shape || t.dtype != p.dtype || bytes != p.elements() * size_of(p.dtype))
      throw std::runtime_error("state store: inconsistent piece of " + p.tensor);
    std::size_t k = 0;
    for_each(p, t.shape, [&](std::size_t g) {
      t.values[g] = load(data, k++, p.dtype);
      ++t.writes[g];
    });
  }
  static void put_string(std::vector<char>& b, const std::string& s) {
    put_vec(b, std::vector<char>(s.begin(), s.end()));
  }
  template <class V>
  static void put_vec(std::vector<char>& b, const std::vector<V>& v) {
    const std::uint64_t n = v.size();
    const char* np = reinterpret_cast<const char*>(&n);
    b.insert(b.end(), np, np + 8);
    const char* d = reinterpret_cast<const char*>(v.data());
    b.insert(b.end(), d, d + n * sizeof(V));
  }
  static std::string get_string(const char*& at) {
    const auto v = get_vec<char>(at);
    return std::string(v.begin(), v.end());
  }
  template <class V>
  static std::vector<V> get_vec(const char*& at) {
    std::uint64_t n;
    std::memcpy(&n, at, 8);
    at += 8;
    std::vector<V> v(n);
    std::memcpy(v.data(), at, n * sizeof(V));
    at += n * sizeof(V);
    return v;
  }

  std::vector<std::pair<paraxis::model::StatePiece, std::vector<char>>> pieces_;
  std::map<std::string, Tensor> tensors_;
};

}  // namespace ptest
