// Device-safe math for paraxis kernels. Kokkos 3.4 (Debian's Trilinos) ships exp/log/... in
// Kokkos::Experimental; Kokkos >= 3.7 and 4.x have them in Kokkos:: (4.x dropped the
// Experimental spellings). std:: functions are not callable from CUDA device code without
// relaxed constexpr, so kernels call these wrappers only.
//
// Also home of fixed_order_sum: the deterministic reduction every host-returned sum uses.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstddef>

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
