// The row reductions of the row kernels, written once: max, sum and sum of exponentials of a
// row, used by softmax (row and causal), attention's fused softmax, LayerNorm, cross-entropy
// and vocabulary-parallel cross-entropy (the MoE router's softmax is softmax_forward; the MoE
// gather and combine reduce nothing along a row). Two forms of each, with the same meaning:
//   - range_max / range_sum / range_sum_exp (device path): a Kokkos nested-range reduction
//     over a TeamThreadRange (one team per row) or a ThreadVectorRange (one thread per row,
//     lanes over the row: fused attention), in the manner of kokkos-kernels' team kernels.
//     Deterministic for a fixed launch configuration (Kokkos' reduction order; no atomics).
//   - row_max / lane_sum / row_sum_exp(_into) (host path, row_lanes.hpp for lane_sum): plain loops
//     the compiler vectorizes: the max as an integer max of order-preserving keys (exact, so
//     any order gives the same bits), sums in a fixed number of lanes combined in a fixed order.
// The element is given as a function of the column, f(j) -> A, so a kernel supplies its own
// load (a View, a raw pointer, a bf16 conversion, a scale, a mask) and the reduction stays one
// piece of code. Exponentials are math::vexp_bounded (vectorizable; the arguments are <= 0; bound
// in math.hpp).
#pragma once

#include "paraxis/kernels/math.hpp"
#include "paraxis/kernels/row_lanes.hpp"

namespace paraxis::kernels::detail {

// max_{j in range} f(j); the lowest finite value for an empty range.
template <class A, class Range, class F>
KOKKOS_INLINE_FUNCTION A range_max(const Range& range, const F& f) {
  A m;
  Kokkos::parallel_reduce(
      range, [&](const int j, A& v) { v = math::fmax(v, f(j)); }, Kokkos::Max<A>(m));
  return m;
}

// sum_{j in range} f(j); 0 for an empty range.
template <class A, class Range, class F>
KOKKOS_INLINE_FUNCTION A range_sum(const Range& range, const F& f) {
  A s = 0;
  Kokkos::parallel_reduce(
      range, [&](const int j, A& v) { v += f(j); }, s);
  return s;
}

// sum_{j in range} exp(f(j) - mx), exp by math::vexp_bounded. `each(j, e)` sees every exponential e
// (a kernel that keeps them, as softmax does in P); pass no_op otherwise.
struct NoOp {
  template <class... T>
  KOKKOS_INLINE_FUNCTION void operator()(const T&...) const {}
};
template <class A, class Range, class F, class Each = NoOp>
KOKKOS_INLINE_FUNCTION A range_sum_exp(const Range& range, A mx, const F& f,
                                       const Each& each = Each()) {
  return range_sum<A>(range, [&](const int j) {
    const A e = math::vexp_bounded(f(j) - mx);
    each(j, e);
    return e;
  });
}

// Host path. max_{j < n} f(j) (n >= 1; no NaN among the f(j)): an integer max of order keys,
// exact, so the loop vectorizes and its order does not matter.
template <class A, class F>
inline A row_max(int n, const F& f) {
  using U = typename math::detail::ExpConsts<A>::UInt;
  U mkey = 0;  // below every non-NaN key
  for (int j = 0; j < n; ++j) {
    const U k = order_key(f(j));
    mkey = mkey > k ? mkey : k;
  }
  return from_order_key<A>(mkey);
}

// sum_{j < n} exp(f(j) - mx), exp by math::vexp_bounded, with the exponentials written to out[0, n)
// and zeros to out[n, len) (len >= n: a masked row padded to whole lane blocks); the sum runs
// over out[0, len) in lane_sum's order. out may be the storage f reads (element j read before it
// is written). One plain vexp loop, which the compiler vectorizes whole; a mask inside it
// instead (f(j) selecting a lowest value for j >= n) left GCC 12 a scalar loop.
template <class A, class F>
inline A row_sum_exp_into(int n, int len, A mx, const F& f, A* out) {
  for (int j = 0; j < n; ++j) out[j] = math::vexp_bounded(f(j) - mx);
  for (int j = n; j < len; ++j) out[j] = A(0);
  return lane_sum<A>(len, [&](int j) { return out[j]; });
}

// sum_{j < n} exp(f(j) - mx) without keeping the exponentials, in lane_sum's lanes and order
// (bitwise equal to row_sum_exp_into's sum). Nothing but the exponential inside the lane loop:
// with a store there as well (an early version of row_sum_exp_into), GCC 12 left vexp partly
// scalar, 2.6x (fp32) to 8x (bf16) slower per element (docs/perf-log/2026-12-05-kernels.md).
// Not inlined (GCC): inlined into the body of a `#pragma omp parallel for` (Kokkos 4.x OpenMP's
// RangePolicy ParallelFor), GCC 12 left these lanes scalar (cross-entropy forward bf16 at
// 0.9 GB/s a thread, 8x slower than as a function of its own: round 3b of
// docs/perf-log/2026-12-05-kernels-round3.md). Only here: lane_sum's other callers (LayerNorm)
// were vectorized inlined and lost up to half their rate as calls.
template <class A, class F>
PARAXIS_LANES_NOINLINE A row_sum_exp(int n, A mx, const F& f) {
  return lane_sum<A>(n, [&](int j) { return math::vexp_bounded(f(j) - mx); });
}

// A row of raw storage read as A: the f(j) of the host reductions above.
template <class A, class T>
struct RowAs {
  const T* x;
  A operator()(int j) const { return static_cast<A>(x[j]); }
};
template <class A, class T>
RowAs<A, T> row_as(const T* x) {
  return RowAs<A, T>{x};
}

}  // namespace paraxis::kernels::detail
