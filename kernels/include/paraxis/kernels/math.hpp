// Device-safe math for paraxis kernels. Kokkos 3.4 (Debian's Trilinos) ships exp/log/... in
// Kokkos::Experimental; Kokkos >= 3.7 and 4.x have them in Kokkos:: (4.x dropped the
// Experimental spellings). std:: functions are not callable from CUDA device code without
// relaxed constexpr, so kernels call these wrappers only.
//
// vexp and vtanh: exp and tanh written out (range reduction, polynomial, exponent by integer
// bit operations; no branch, no call, no table), so that a loop calling them vectorizes: a
// libm call per element costs a few ns and keeps a memory-bound kernel far from bandwidth.
// Host and device run the same code (the same results on every backend, up to the
// compiler's contraction of a*b+c into fused multiply-adds; on a GPU the dozen extra FMAs per
// element are free beside the memory traffic). Their error bounds are asserted by
// kernels_test_math against std::exp / std::tanh over the whole range.
//
// Also home of fixed_order_sum: the deterministic reduction every host-returned sum uses.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if KOKKOS_VERSION < 30700
#define PARAXIS_KOKKOS_MATH Kokkos::Experimental
#else
#define PARAXIS_KOKKOS_MATH Kokkos
#endif

namespace paraxis::kernels::math {

template <class A>
KOKKOS_INLINE_FUNCTION A exp(A x) {
  return PARAXIS_KOKKOS_MATH::exp(x);
}
template <class A>
KOKKOS_INLINE_FUNCTION A log(A x) {
  return PARAXIS_KOKKOS_MATH::log(x);
}
template <class A>
KOKKOS_INLINE_FUNCTION A tanh(A x) {
  return PARAXIS_KOKKOS_MATH::tanh(x);
}
template <class A>
KOKKOS_INLINE_FUNCTION A sqrt(A x) {
  return PARAXIS_KOKKOS_MATH::sqrt(x);
}
template <class A>
KOKKOS_INLINE_FUNCTION A fabs(A x) {
  return PARAXIS_KOKKOS_MATH::fabs(x);
}
template <class A>
KOKKOS_INLINE_FUNCTION A fmax(A x, A y) {
  return PARAXIS_KOKKOS_MATH::fmax(x, y);
}
// Most negative finite value: the identity of a running max (no host-only numeric_limits
// inside kernels).
template <class A>
KOKKOS_INLINE_FUNCTION A lowest() {
  return Kokkos::reduction_identity<A>::max();
}

namespace detail {

// Constants of vexp/vtanh per precision (scalars only: usable in CUDA device code). x = n ln2
// + r, |r| <= ln2/2: n by adding the shifter 1.5 * 2^(mantissa bits) (the sum's low bits are
// n, rounded to nearest), r by Cody-Waite (ln2_hi has enough trailing zero bits that
// n * ln2_hi is exact for every n in range).
template <class A>
struct ExpConsts;
template <>
struct ExpConsts<float> {
  using Int = std::int32_t;
  using UInt = std::uint32_t;
  static constexpr int mantissa = 23, bias = 127;
  // Above hi the result is +inf (e^88.73 > FLT_MAX), below lo it is 0 (flushed); tanh is 1 in
  // fp32 from tanh_one on.
  static constexpr float hi = 89.0f, lo = -104.0f, tanh_one = 9.5f;
  static constexpr float log2e = 1.44269504088896340736f, shifter = 12582912.0f;
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440054690583e-4f;
};
template <>
struct ExpConsts<double> {
  using Int = std::int64_t;
  using UInt = std::uint64_t;
  static constexpr int mantissa = 52, bias = 1023;
  static constexpr double hi = 710.0, lo = -746.0, tanh_one = 19.5;
  static constexpr double log2e = 1.442695040888963407359925, shifter = 6755399441055744.0;
  static constexpr double ln2_hi = 0.6931471805592082091607153,
                          ln2_lo = 7.37100256516779890183404e-13;
};

// 2 g(r), where e^r = 1 + r + r^2 g(r): a Chebyshev fit of (e^r - 1 - r) / r^2 on
// [-ln2/2, ln2/2] (mpmath's chebyfit, coefficients doubled), degree 4 in fp32 and 10 in fp64;
// relative error of e^r 1.0e-8 (fp32, 0.17 ulp) and 2.3e-19 (fp64) before rounding.
KOKKOS_INLINE_FUNCTION float exp_g2(float r) {
  float g = 2 * 1.3926183587713494542e-3f;
  g = g * r + 2 * 8.3631790527225773704e-3f;
  g = g * r + 2 * 4.16665546172045742025e-2f;
  g = g * r + 2 * 0.166665769896987756828f;
  return g * r + 1.0f;
}
KOKKOS_INLINE_FUNCTION double exp_g2(double r) {
  double g = 2 * 2.09146869680868772326e-9;
  g = g * r + 2 * 2.51052170047207451643e-8;
  g = g * r + 2 * 2.75572736431102953278e-7;
  g = g * r + 2 * 2.75572554002064244297e-6;
  g = g * r + 2 * 2.48015873255477412163e-5;
  g = g * r + 2 * 1.98412698748206252712e-4;
  g = g * r + 2 * 1.38888888888837483046e-3;
  g = g * r + 2 * 8.33333333332613512578e-3;
  g = g * r + 2 * 4.16666666666666697546e-2;
  g = g * r + 2 * 0.166666666666666709907;
  return g * r + 1.0;
}

template <class To, class From>
KOKKOS_INLINE_FUNCTION To bit_cast(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast: sizes differ");
  To t;
  memcpy(&t, &f, sizeof(To));
  return t;
}

// The reduction shared by vexp and vtanh: n (the integer bits of the shifted sum minus the
// shifter's), r, and the returned h = 2 (1 + r g(r)), so that e^r - 1 = r h / 2 and
// 2 e^r = 2 + r h. x must lie within [lo, hi] or be NaN (NaN propagates through r and h).
template <class A>
KOKKOS_INLINE_FUNCTION A exp_reduce(A x, typename ExpConsts<A>::Int& n, A& r) {
  using C = ExpConsts<A>;
  using I = typename C::Int;
  const A shifter = C::shifter;
  const A t = x * C::log2e + shifter;
  const A nf = t - shifter;
  r = (x - nf * C::ln2_hi) - nf * C::ln2_lo;
  n = bit_cast<I>(t) - bit_cast<I>(shifter);
  return exp_g2(r) * r + static_cast<A>(2);
}

}  // namespace detail

// e^x for float and double, vectorizable. Relative error within a few ulps (bound asserted by
// kernels_test_math); +inf above ln(max) (x = +inf included), NaN for NaN, and 0 for results
// below 2^(2 - bias) (about 2.4e-38 in fp32, 4.5e-308 in fp64; x = -inf included): subnormal
// results are flushed, an absolute error below twice the smallest normal number.
template <class A>
KOKKOS_INLINE_FUNCTION A vexp(A x) {
  using C = detail::ExpConsts<A>;
  using I = typename C::Int;
  using U = typename C::UInt;
  // x clamped to [lo, hi] by two integer minima of its bits: as unsigned numbers every value
  // above lo in magnitude among the negatives (-inf included) is above lo's bits, and every
  // positive one below them; as signed numbers the negatives are below everything and the
  // positives in order. (Float compares here made GCC split off the clamped cases as
  // constant paths and blend them back: a third more instructions per element.)
  const A lo = C::lo, hi = C::hi;  // copies: bit_cast takes a reference (CUDA device code
                                   // may not bind one to a host static member)
  const U lo_bits = detail::bit_cast<U>(lo);
  const I hi_bits = detail::bit_cast<I>(hi);
  const U u = detail::bit_cast<U>(x);
  I c = static_cast<I>(u < lo_bits ? u : lo_bits);
  c = c < hi_bits ? c : hi_bits;
  I n;
  A r;
  const A h = detail::exp_reduce(detail::bit_cast<A>(c), n, r);
  // 2^(n-1) * 2 e^r: the exponent field n - 1 + bias stays below the Inf field even at the
  // largest n (so e^88.7 is finite in fp32), and is clamped to 0 (the scale 0.0) for the
  // flushed results.
  I k = n + static_cast<I>(C::bias - 1);
  k = k > 0 ? k : 0;
  const A e = (h * r + static_cast<A>(2)) * detail::bit_cast<A>(static_cast<U>(k) << C::mantissa);
  return x == x ? e : x;  // NaN in, NaN out (the clamp made it finite)
}

namespace detail {
// vexp_bounded's fp32 polynomial: e^r = 1 + r q(r) on [-ln2/2, ln2/2], q of degree 4 (a minimax
// fit of the relative error by iterated reweighted least squares, coefficients rounded to
// float): relative error 9.5e-8 before rounding (0.8 of 2^-23), one FMA fewer than vexp's.
KOKKOS_INLINE_FUNCTION float exp_bounded_poly(float r) {
  float q = 8.290312253e-03f;
  q = q * r + 4.189793020e-02f;
  q = q * r + 1.666763574e-01f;
  q = q * r + 4.999915063e-01f;
  q = q * r + 9.999997020e-01f;
  return q * r + 1.0f;
}
}  // namespace detail

// The largest argument of vexp_bounded (its result is then below 2^127).
template <class A>
KOKKOS_INLINE_FUNCTION constexpr A exp_bounded_max() {
  return static_cast<A>(sizeof(A) == 4 ? 88.0 : 709.0);
}

// e^x for x <= exp_bounded_max<A>() (88 in fp32): the exponential of the row kernels, whose
// arguments are x - max, x - logsumexp (<= 0) or GELU's capped -2z (<= 80). fp32: cheaper than
// vexp (15 vector instructions per 16 elements against 27 with GCC 12 on AVX-512): no overflow
// path, a degree-5 polynomial (2.5 ulp bound, worst measured 2.0; kernels_test_math), the scale
// 2^n built by one shift of the rounding sum's bits (the shifter carries the exponent bias), and
// one compare for the flush: x < -87 gives exactly 0 (-inf included; e^-87 < 2 FLT_MIN), NaN
// gives NaN. Above exp_bounded_max the result is wrong (not +inf). fp64: vexp itself (the
// verification precision keeps its bits and its 1.5 ulp).
template <class A>
KOKKOS_INLINE_FUNCTION A vexp_bounded(A x) {
  if constexpr (sizeof(A) != 4) {
    return vexp(x);
  } else {
    using U = std::uint32_t;
    const float lo = -87.0f;
    const float xc = lo > x ? lo : x;  // NaN stays NaN
    // t = x log2e + (1.5 * 2^23 + 127): its low bits hold n + 127, the biased exponent of 2^n
    // (1..127 here), so that t's bits shifted by 23 are 2^n.
    const float shifter = 12582912.0f + 127.0f;
    const float t = xc * 1.44269504088896340736f + shifter;
    const float nf = t - shifter;
    const float r = (xc - nf * 0.693359375f) - nf * -2.12194440054690583e-4f;
    const float scale = detail::bit_cast<float>(detail::bit_cast<U>(t) << 23);
    const float e = detail::exp_bounded_poly(r) * scale;
    return x < lo ? 0.0f : e;
  }
}

// tanh(x) for float and double, vectorizable: -expm1(-2|x|) / (2 + expm1(-2|x|)) with the
// sign of x, where expm1(y) = 2^n (e^r - 1) + (2^n - 1) keeps its relative accuracy near 0
// (e^r - 1 = r h / 2 is never formed as a difference of two numbers near 1). |x| >= tanh_one
// gives +-1 (tanh rounds to 1 there); NaN gives NaN.
template <class A>
KOKKOS_INLINE_FUNCTION A vtanh(A x) {
  using C = detail::ExpConsts<A>;
  using I = typename C::Int;
  using U = typename C::UInt;
  const U sign = detail::bit_cast<U>(x) & (static_cast<U>(1) << (8 * sizeof(A) - 1));
  A a = detail::bit_cast<A>(detail::bit_cast<U>(x) ^ sign);  // |x|
  const A one_at = C::tanh_one;
  a = one_at < a ? one_at : a;
  I n;
  A r;
  const A h = detail::exp_reduce(static_cast<A>(-2) * a, n, r);
  // n >= -28 (fp32) / -57 (fp64) here: 2^n is a normal number.
  const A s = detail::bit_cast<A>(static_cast<U>(n + static_cast<I>(C::bias)) << C::mantissa);
  const A u = s * (r * h * static_cast<A>(0.5)) + (s - static_cast<A>(1));  // expm1(-2|x|)
  const A t = -u / (static_cast<A>(2) + u);
  return detail::bit_cast<A>(detail::bit_cast<U>(t) | sign);
}

}  // namespace paraxis::kernels::math

namespace paraxis::kernels::detail {

// Number of partial sums in fixed_order_sum: fixed, so the result does not depend on the
// backend, the thread count or the launch configuration.
inline constexpr int kFixedOrderChunks = 2048;

// Deterministic sum of term(k) for k in [0, n): partial p sums the contiguous block
// [p*B, (p+1)*B) in order, then the host adds the C partials in order. Bitwise identical on
// every call and on every backend. Contiguous blocks, not a stride of C: on a CPU a stride
// walks the whole array once per partial (a 67 MB gradient took 0.4 s this way, 10 ms now).
template <class ExecSpace, class Term>
double fixed_order_sum(const ExecSpace& space, const char* label, std::size_t n, const Term& term) {
  if (n == 0) return 0.0;
  const long long count = static_cast<long long>(n);
  const int chunks =
      n < static_cast<std::size_t>(kFixedOrderChunks) ? static_cast<int>(n) : kFixedOrderChunks;
  Kokkos::View<double*, typename ExecSpace::memory_space> partial(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "paraxis::fixed_order_sum"), chunks);
  const long long block = (count + chunks - 1) / chunks;
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(space, 0, chunks), KOKKOS_LAMBDA(const int p) {
        double s = 0.0;
        const long long end = (p + 1) * block < count ? (p + 1) * block : count;
        for (long long k = p * block; k < end; ++k) s += term(k);
        partial(p) = s;
      });
  auto host = Kokkos::create_mirror_view(partial);
  Kokkos::deep_copy(space, host, partial);
  space.fence();
  double total = 0.0;
  for (int p = 0; p < chunks; ++p) total += host(p);
  return total;
}

}  // namespace paraxis::kernels::detail
