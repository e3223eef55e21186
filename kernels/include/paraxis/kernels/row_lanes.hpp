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
#include <cstddef>
#include <type_traits>

#include "paraxis/kernels/math.hpp"

// GCC vectorizes the lane loop below as an outer loop and keeps the lanes in memory unless the
// lane loop is unrolled first (then they stay in registers: about twice as fast); other
// compilers (and nvcc's host pass) get plain loops.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && \
    !defined(__INTEL_LLVM_COMPILER)
#define PARAXIS_UNROLL_LANES _Pragma("GCC unroll 32")
#else
#define PARAXIS_UNROLL_LANES
#endif

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

// Asks the cache for the `bytes` bytes at p (a row about to be read or written), one request per
// 64-byte line. Rows gathered by index (embedding tables, expert buffers) defeat the hardware
// prefetcher: without this each row starts with a full memory latency. A hint only (no effect
// where the compiler has no prefetch builtin).
inline void prefetch_row(const void* p, std::size_t bytes) {
#if defined(__GNUC__)
  const char* c = static_cast<const char*>(p);
  for (std::size_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o);
#else
  (void)p;
  (void)bytes;
#endif
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

// sum_{j < n} f(j): element j < n - n % L goes to lane j % L (in order of j within a lane); the
// lanes are combined by combine_lanes, then the last n % L terms added in order. The result
// depends on n and the terms only. (The tail is kept out of the lanes so that they are only
// ever indexed by constants and stay in registers.)
template <class A, class F>
inline A lane_sum(int n, const F& f) {
  constexpr int L = kLanes<A>;
  A acc[L] = {};
  int j = 0;
  for (; j + L <= n; j += L) {
    PARAXIS_UNROLL_LANES
    for (int l = 0; l < L; ++l) acc[l] += f(j + l);
  }
  A s = combine_lanes(acc);
  for (; j < n; ++j) s += f(j);
  return s;
}

// Order-preserving unsigned keys of float/double bit patterns: key(a) < key(b) iff a < b for
// non-NaN a, b (negative values have their bits inverted, non-negative ones the sign bit
// set). An unsigned max reduction vectorizes where a floating max (NaN rules) does not.
template <class A>
inline auto order_key(A v) {
  using U = typename math::detail::ExpConsts<A>::UInt;
  constexpr U sign = static_cast<U>(1) << (8 * sizeof(A) - 1);
  const U u = math::detail::bit_cast<U>(v);
  return static_cast<U>(u ^ (static_cast<U>(0 - (u >> (8 * sizeof(A) - 1))) | sign));
}
template <class A, class U>
inline A from_order_key(U k) {
  constexpr U sign = static_cast<U>(1) << (8 * sizeof(A) - 1);
  return math::detail::bit_cast<A>(
      static_cast<U>(k ^ (static_cast<U>(0 - ((~k) >> (8 * sizeof(A) - 1))) | sign)));
}

}  // namespace paraxis::kernels::detail
