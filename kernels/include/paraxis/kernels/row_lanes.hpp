// Host-side building blocks of the memory-bound kernels (LayerNorm, embedding, AdamW, the MoE
// gather/combine). On a host execution space (Serial, OpenMP, Threads) a Kokkos team per row
// runs its row loop one element at a time, and a floating-point reduction through a lambda
// cannot be vectorized (the compiler may not reassociate it). These kernels therefore take,
// at compile time, a host path: a RangePolicy over rows (or row blocks) whose loops walk raw
// row pointers and reduce into a fixed number of independent partial sums (lanes), combined in
// a fixed order. The compiler turns the lanes into vector registers; the order of every
// addition is fixed by the code alone, so results are bitwise identical on every call, every
// rank, every host space and every thread count (no atomics).
//
// The device path (team or MDRange parallelism) stays as it was; kernels choose with
// `if constexpr (detail::host_exec_v<ExecSpace>)` and fall back to it on the host too when a
// View's rows are not contiguous (a strided subview).
#pragma once

#include <Kokkos_Core.hpp>
#include <type_traits>

namespace paraxis::kernels::detail {

// True when ExecSpace runs on the host (its memory space is HostSpace).
template <class ExecSpace>
inline constexpr bool host_exec_v =
    std::is_same_v<typename ExecSpace::memory_space, Kokkos::HostSpace>;

// Partial sums per reduction: 32 floats / 16 doubles = 128 bytes, four 256-bit (or two
// 512-bit) registers, enough independent add chains to hide the adder's latency.
template <class A>
inline constexpr int kLanes = static_cast<int>(128 / sizeof(A));

// Row i of a rank-2 View as a pointer; valid for j < extent(1) when rows are contiguous.
template <class V>
typename V::pointer_type row_ptr(const V& v, std::size_t i) {
  return v.data() + i * v.stride(0);
}

// True when every rank-2 View given has unit stride along its second index (rows contiguous),
// and every rank-1 View unit stride: the condition for the pointer loops of the host path.
template <class... Vs>
bool rows_contiguous(const Vs&... vs) {
  auto unit = [](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (V::rank == 1)
      return v.extent(0) <= 1 || v.stride(0) == 1;
    else
      return v.extent(1) <= 1 || v.stride(1) == 1;
  };
  return (unit(vs) && ...);
}

// Adds the lanes pairwise (l and l + W for W = L/2, L/4, ..., 1): a fixed order. Each stage has
// a constant trip count, so it stays in vector registers.
template <int W, class A, int L>
inline void fold_lanes(A (&acc)[L]) {
  for (int l = 0; l < W; ++l) acc[l] += acc[l + W];
  if constexpr (W > 1) fold_lanes<W / 2>(acc);
}
template <class A, int L>
inline A combine_lanes(A (&acc)[L]) {
  static_assert(L >= 2 && (L & (L - 1)) == 0, "combine_lanes: a power of two of lanes");
  fold_lanes<L / 2>(acc);
  return acc[0];
}

// sum_{j < n} f(j): element j goes to lane j % L (in order of j within a lane), then
// combine_lanes. The result depends on n and the terms only.
template <class A, class F>
inline A lane_sum(int n, const F& f) {
  constexpr int L = kLanes<A>;
  A acc[L] = {};
  int j = 0;
  for (; j + L <= n; j += L)
    for (int l = 0; l < L; ++l) acc[l] += f(j + l);
  for (int l = 0; j + l < n; ++l) acc[l] += f(j + l);
  return combine_lanes(acc);
}

// Two sums in one pass over j < n: f(j, a, b) returns its terms in a and b.
template <class A, class F>
inline void lane_sum2(int n, const F& f, A& sum_a, A& sum_b) {
  constexpr int L = kLanes<A>;
  A acc_a[L] = {}, acc_b[L] = {};
  int j = 0;
  for (; j + L <= n; j += L)
    for (int l = 0; l < L; ++l) {
      A a, b;
      f(j + l, a, b);
      acc_a[l] += a;
      acc_b[l] += b;
    }
  for (int l = 0; j + l < n; ++l) {
    A a, b;
    f(j + l, a, b);
    acc_a[l] += a;
    acc_b[l] += b;
  }
  sum_a = combine_lanes(acc_a);
  sum_b = combine_lanes(acc_b);
}

}  // namespace paraxis::kernels::detail
