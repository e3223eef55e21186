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

#include "paraxis/kernels/bf16.hpp"
#include "paraxis/kernels/math.hpp"

// The host rows' bf16 stores round 32 floats at a time with AVX512-BF16's vcvtne2ps2bf16 where
// the compiler targets it (x86 host code only; never in device code).
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && !defined(__CUDA_ARCH__) && \
    !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
#define PARAXIS_HOST_BF16_CVT 1
#include <immintrin.h>
#else
#define PARAXIS_HOST_BF16_CVT 0
#endif

// GCC vectorizes the lane loop below as an outer loop and keeps the lanes in memory unless the
// lane loop is unrolled first (then they stay in registers: about twice as fast); other
// compilers (and nvcc's host pass) get plain loops.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && \
    !defined(__INTEL_LLVM_COMPILER)
#define PARAXIS_UNROLL_LANES _Pragma("GCC unroll 32")
#define PARAXIS_LANES_NOINLINE __attribute__((noinline))
#else
#define PARAXIS_UNROLL_LANES
#define PARAXIS_LANES_NOINLINE
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

// sum_{j < valid} f(j, true) in lane_sum(n)'s lanes and order, for valid <= n, where f(j, false)
// is a zero term (a select of f's operands, which keeps an FMA an FMA): whole lane blocks up to
// valid, the block holding valid (if it lies within n) with f(j, j < valid), then lane_sum's
// tail; the zero blocks after it are not added. Bitwise lane_sum(n, [&](int j) { return f(j,
// j < valid); }): a +0 term leaves a lane or the sum unchanged, as neither is ever -0 (the
// lanes start at +0, and x + y is -0 only for x = y = -0). For rows masked at every length
// (causal attention): no select in the whole blocks, no work past the mask's block.
template <class A, class F>
inline A lane_sum_masked(int n, int valid, const F& f) {
  constexpr int L = kLanes<A>;
  A acc[L] = {};
  int j = 0;
  for (; j + L <= valid; j += L) {
    PARAXIS_UNROLL_LANES
    for (int l = 0; l < L; ++l) acc[l] += f(j + l, true);
  }
  if (j < valid && j + L <= n) {
    PARAXIS_UNROLL_LANES
    for (int l = 0; l < L; ++l) acc[l] += f(j + l, j + l < valid);
    j += L;
  }
  A s = combine_lanes(acc);
  for (; j < valid; ++j) s += f(j, true);
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

// Rounds t[0..31] into y[0..31] as bf16: bitwise bf16(t[j]) for every input. vcvtne2ps2bf16
// rounds to nearest even and quietens NaN exactly as bf16::round_from_float (checked for all
// 2^32 floats: no difference but at subnormal inputs, which it reads as zero), so a block
// holding a subnormal takes the scalar definition instead. Per 32 elements: one instruction and
// a two-instruction subnormal test, against ~20 for the integer rounding GCC vectorizes
// (bf16 scale in the cache 0.117 -> 0.066 ns an element; the 2026-12-05 round-3 kernels log).
inline void round_store_bf16x32(paraxis::bf16* y, const float* t) {
#if PARAXIS_HOST_BF16_CVT
  const __m512 lo = _mm512_loadu_ps(t), hi = _mm512_loadu_ps(t + 16);
  constexpr int kSubnormal = 0x20;  // vfpclassps category: denormal, either sign
  if ((_mm512_fpclass_ps_mask(lo, kSubnormal) | _mm512_fpclass_ps_mask(hi, kSubnormal)) == 0) {
    _mm512_storeu_si512(static_cast<void*>(y), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    return;
  }
#endif
  for (int j = 0; j < 32; ++j) y[j] = paraxis::bf16(t[j]);
}

// y[k] = T(f(k)) for k < n, f(k) an acc_t<T> value (f may read y[k]: each block is computed
// before it is stored). bf16 with PARAXIS_HOST_BF16_CVT: blocks of 32 computed into floats,
// then round_store_bf16x32; bitwise the plain loop's result.
template <class T, class F>
inline void store_row(T* y, int n, const F& f) {
  int k = 0;
  if constexpr (std::is_same_v<T, paraxis::bf16> && PARAXIS_HOST_BF16_CVT) {
    for (; k + 32 <= n; k += 32) {
      float t[32];
      for (int j = 0; j < 32; ++j) t[j] = f(k + j);
      round_store_bf16x32(y + k, t);
    }
  }
  for (; k < n; ++k) y[k] = static_cast<T>(f(k));
}

}  // namespace paraxis::kernels::detail
