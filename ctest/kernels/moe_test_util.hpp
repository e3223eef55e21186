// Shared by the MoE kernel tests (test_moe.cpp, test_moe_replay.cpp): views from formulas,
// host copies, skewed router probabilities and the plain host references of top-k and routing.
// Views live in the memory space of the execution space a test runs on (a template argument:
// the tests are typed over ../exec_spaces.hpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "../exec_spaces.hpp"
#include "paraxis/kernels/moe.hpp"

namespace pk = paraxis::kernels;
using paraxis::bf16;
template <class T, class Space>
using V1 = pk::View1<T, Space>;
template <class T, class Space>
using V2 = pk::View2<T, Space>;

namespace moe_test {

// ---------------------------------------------------------------- helpers

template <class T, class Space, class F>
V2<T, Space> make2(const char* name, int rows, int cols, F f) {
  V2<T, Space> v(std::string(name), rows, cols);
  auto h = Kokkos::create_mirror_view(v);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) h(i, j) = static_cast<T>(f(i, j));
  Kokkos::deep_copy(v, h);
  return v;
}

template <class V>
auto host(const V& v) {
  return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
}

// Entries as doubles; bf16 goes through float (its only conversion).
template <class V>
std::vector<double> to_vec2(const V& v) {
  auto h = host(v);
  using T = typename V::non_const_value_type;
  std::vector<double> out(h.extent(0) * h.extent(1));
  for (std::size_t i = 0; i < h.extent(0); ++i)
    for (std::size_t j = 0; j < h.extent(1); ++j) {
      if constexpr (std::is_same_v<T, bf16>)
        out[i * h.extent(1) + j] = static_cast<float>(h(i, j));
      else
        out[i * h.extent(1) + j] = static_cast<double>(h(i, j));
    }
  return out;
}

template <class Space>
V2<int, Space> upload_idx(const std::vector<int>& idx, int N, int k) {
  return make2<int, Space>("idx", N, k, [&](int n, int j) { return idx[n * k + j]; });
}

// Softmax rows of a smooth formula, skewed towards expert 0 so capacity binds.
std::vector<double> skewed_probs(int N, int E, double skew) {
  std::vector<double> p(static_cast<std::size_t>(N) * E);
  for (int n = 0; n < N; ++n) {
    double z = 0;
    for (int e = 0; e < E; ++e) {
      const double l = std::sin(0.7 * n + 1.3 * e) + (e == 0 ? skew : 0.0) + 0.01 * e;
      p[n * E + e] = std::exp(l);
      z += p[n * E + e];
    }
    for (int e = 0; e < E; ++e) p[n * E + e] /= z;
  }
  return p;
}

// ---------------------------------------------------------------- host references

// Top-k by sorting expert indices on (prob descending, index ascending).
void ref_topk(const std::vector<double>& p, int N, int E, int k, std::vector<int>& idx,
              std::vector<double>& gate) {
  idx.assign(N * k, 0);
  gate.assign(N * k, 0);
  for (int n = 0; n < N; ++n) {
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return p[n * E + a] > p[n * E + b]; });
    for (int j = 0; j < k; ++j) {
      idx[n * k + j] = order[j];
      gate[n * k + j] = p[n * E + order[j]];
    }
  }
}

struct RefRouting {
  std::vector<int> counts, requested, dropped, offsets, token_slot, slot_token, slot_k;
  int rows = 0;
};

// Two passes in the plain order of the definition: rank within expert in assignment order,
// then lay out expert by expert.
RefRouting ref_routing(const std::vector<int>& idx, int N, int k, int E, int capacity) {
  RefRouting r;
  r.counts.assign(E, 0);
  r.requested.assign(E, 0);
  r.dropped.assign(E, 0);
  r.offsets.assign(E + 1, 0);
  r.token_slot.assign(N * k, -1);
  std::vector<bool> kept(N * k);
  for (int a = 0; a < N * k; ++a) {
    const int e = idx[a];
    kept[a] = capacity == 0 || r.requested[e] < capacity;
    ++r.requested[e];
    (kept[a] ? r.counts[e] : r.dropped[e])++;
  }
  for (int e = 0; e < E; ++e) {
    r.offsets[e + 1] = r.offsets[e] + r.counts[e];
    for (int a = 0; a < N * k; ++a) {
      if (idx[a] != e || !kept[a]) continue;
      r.token_slot[a] = static_cast<int>(r.slot_token.size());
      r.slot_token.push_back(a / k);
      r.slot_k.push_back(a % k);
    }
  }
  r.rows = r.offsets[E];
  return r;
}

template <class V>
std::vector<int> ivec(const V& v, int n) {
  auto h = host(v);
  return std::vector<int>(h.data(), h.data() + n);
}

template <class Space>
void expect_routing_matches(const pk::MoeRouting<Space>& r, const RefRouting& ref, int N, int k,
                            int E) {
  EXPECT_EQ(r.rows, ref.rows);
  EXPECT_EQ(r.tokens, N);
  EXPECT_EQ(ivec(r.counts, E), ref.counts);
  EXPECT_EQ(ivec(r.requested, E), ref.requested);
  EXPECT_EQ(ivec(r.dropped, E), ref.dropped);
  EXPECT_EQ(ivec(r.offsets, E + 1), ref.offsets);
  EXPECT_EQ(ivec(r.slot_token, ref.rows), ref.slot_token);
  EXPECT_EQ(ivec(r.slot_k, ref.rows), ref.slot_k);
  EXPECT_EQ(ivec(r.token_slot, N * k), ref.token_slot);
  for (int e = 0; e < E; ++e) {
    EXPECT_EQ(r.counts_host(e), ref.counts[e]);
    EXPECT_EQ(r.dropped_host(e), ref.dropped[e]);
    EXPECT_EQ(r.offsets_host(e + 1), ref.offsets[e + 1]);
  }
}

}  // namespace moe_test
