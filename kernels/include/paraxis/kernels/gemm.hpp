// GEMM: C = alpha * op(A) * op(B) + beta * C, op in {N, T}, plus a batched form over the
// leading extent of rank-3 Views (one GEMM per head). Accumulates in fp32 for fp32/bf16
// storage and in fp64 when any operand is fp64. beta == 0 ignores C's previous contents.
//
// Variants behind one interface:
//   portable  the packed Kokkos kernel of gemm_portable.hpp (any execution space, any
//             storage type, any layout)
//   vendor    KokkosBlas::gemm (OpenBLAS on host, cuBLAS on CUDA): available when paraxis was
//             built with Kokkos Kernels and A, B, C share one value type (float or double) and
//             one layout (LayoutRight or LayoutLeft; batched: LayoutRight); see
//             gemm_vendor_applies
//   automatic vendor where it applies, portable otherwise
#pragma once

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/gemm_portable.hpp"

#ifdef PARAXIS_HAVE_KOKKOSKERNELS
#include <KokkosBlas3_gemm.hpp>
#endif

namespace paraxis::kernels {

enum class GemmVariant { automatic, portable, vendor };

const char* to_string(GemmVariant v);

// What `automatic` resolves to in this process: GemmVariant::automatic (vendor where it
// applies, the default) or GemmVariant::portable (never the vendor path). A benchmarking
// switch (deck key hardware.gemm) so a whole training step can be measured on either
// implementation; explicit portable/vendor requests are not affected.
void set_automatic_gemm(GemmVariant v);
GemmVariant automatic_gemm();

// Whether the vendor GEMM can take these View types (rank 2 for gemm, rank 3 for
// gemm_batched). Decided at compile time, so `automatic` costs nothing.
template <class AV, class BV, class CV>
constexpr bool gemm_vendor_applies() {
#ifdef PARAXIS_HAVE_KOKKOSKERNELS
  using T = value_t<CV>;
  using L = typename CV::array_layout;
  constexpr bool same_value =
      std::is_same_v<value_t<AV>, T> && std::is_same_v<value_t<BV>, T> &&
      (std::is_same_v<T, float> ||
       std::is_same_v<T, double>)&&!std::is_const_v<typename CV::value_type>;
  constexpr bool same_layout =
      std::is_same_v<typename AV::array_layout, L> && std::is_same_v<typename BV::array_layout, L>;
  // A rank-3 View's per-batch matrix keeps a BLAS layout only if the batch index is slowest.
  constexpr bool layout_ok = CV::rank == 2 ? (std::is_same_v<L, Kokkos::LayoutRight> ||
                                              std::is_same_v<L, Kokkos::LayoutLeft>)
                                           : std::is_same_v<L, Kokkos::LayoutRight>;
  constexpr bool same_space =
      std::is_same_v<typename AV::memory_space, typename CV::memory_space> &&
      std::is_same_v<typename BV::memory_space, typename CV::memory_space>;
  constexpr bool same_rank = int(AV::rank) == int(CV::rank) && int(BV::rank) == int(CV::rank);
  return same_value && same_layout && layout_ok && same_space && same_rank;
#else
  return false;
#endif
}

namespace detail {

template <class AV, class BV, class CV>
void check_gemm_shapes(const char* kernel, Trans ta, Trans tb, const AV& A, const BV& B,
                       const CV& C, unsigned first) {
  const std::size_t m = ta == Trans::N ? A.extent(first) : A.extent(first + 1);
  const std::size_t ka = ta == Trans::N ? A.extent(first + 1) : A.extent(first);
  const std::size_t kb = tb == Trans::N ? B.extent(first) : B.extent(first + 1);
  const std::size_t n = tb == Trans::N ? B.extent(first + 1) : B.extent(first);
  if (ka != kb || C.extent(first) != m || C.extent(first + 1) != n ||
      (first == 1 && (A.extent(0) != C.extent(0) || B.extent(0) != C.extent(0)))) {
    std::ostringstream os;
    os << kernel << ": shape mismatch: op" << static_cast<char>(ta) << "(A) of A" << shape_string(A)
       << ", op" << static_cast<char>(tb) << "(B) of B" << shape_string(B) << ", C"
       << shape_string(C);
    throw std::invalid_argument(os.str());
  }
}

template <class AV, class BV, class CV>
[[noreturn]] void throw_no_vendor(const char* kernel) {
  std::ostringstream os;
  os << kernel << ": GemmVariant::vendor does not apply: ";
#ifdef PARAXIS_HAVE_KOKKOSKERNELS
  os << "it needs A, B, C of one value type (float or double, C non-const), one layout "
        "(LayoutRight or LayoutLeft; batched: LayoutRight) and one memory space";
#else
  os << "paraxis was built without Kokkos Kernels (PARAXIS_ENABLE_KOKKOSKERNELS)";
#endif
  os << "; use GemmVariant::portable or automatic";
  throw std::invalid_argument(os.str());
}

#ifdef PARAXIS_HAVE_KOKKOSKERNELS
template <class ExecSpace, class AV, class BV, class CV>
void gemm_vendor_2d(const ExecSpace& space, Trans ta, Trans tb, double alpha, const AV& A,
                    const BV& B, double beta, const CV& C) {
  using T = value_t<CV>;
  const char tas[2] = {static_cast<char>(ta), '\0'};
  const char tbs[2] = {static_cast<char>(tb), '\0'};
  KokkosBlas::gemm(tas, tbs, static_cast<T>(alpha), A, B, static_cast<T>(beta), C);
  (void)space;
}
#else
// Declared only: without Kokkos Kernels gemm_vendor_applies() is false, so the calls below sit
// in discarded `if constexpr` branches and are never instantiated, but the qualified name must
// still exist when the templates are parsed.
template <class ExecSpace, class AV, class BV, class CV>
void gemm_vendor_2d(const ExecSpace& space, Trans ta, Trans tb, double alpha, const AV& A,
                    const BV& B, double beta, const CV& C);
#endif

// KokkosBlas::gemm returns early when K == 0 instead of scaling C, and BLAS wants non-empty
// leading dimensions: empty problems go to the portable kernel, which handles them exactly.
template <class AV, class CV>
bool gemm_empty(Trans ta, const AV& A, const CV& C) {
  constexpr unsigned r0 = CV::rank - 2;
  const std::size_t k = ta == Trans::N ? A.extent(r0 + 1) : A.extent(r0);
  return k == 0 || C.extent(r0) == 0 || C.extent(r0 + 1) == 0;
}

}  // namespace detail

template <class ExecSpace, class AV, class BV, class CV>
void gemm_batched(const ExecSpace& space, Trans ta, Trans tb, double alpha, const AV& A,
                  const BV& B, double beta, const CV& C,
                  GemmVariant variant = GemmVariant::automatic) {
  static_assert(AV::rank == 3 && BV::rank == 3 && CV::rank == 3, "gemm_batched: rank-3 Views");
  assert_accessible<ExecSpace, AV, BV, CV>();
  detail::check_gemm_shapes("paraxis::gemm_batched", ta, tb, A, B, C, 1);
  constexpr bool vendor_ok = gemm_vendor_applies<AV, BV, CV>();
  if (variant == GemmVariant::vendor && !vendor_ok)
    detail::throw_no_vendor<AV, BV, CV>("paraxis::gemm_batched");
  if (variant == GemmVariant::automatic) variant = automatic_gemm();
  if constexpr (vendor_ok) {
    if (variant != GemmVariant::portable && !detail::gemm_empty(ta, A, C)) {
      // One vendor call per batch entry: the batches of a transformer (heads) are few and
      // large, so the loop costs little next to the GEMMs themselves.
      Kokkos::Profiling::pushRegion("paraxis::gemm_batched[vendor]");
      space.fence();
      for (std::size_t p = 0; p < C.extent(0); ++p) {
        auto Ap = Kokkos::subview(A, p, Kokkos::ALL(), Kokkos::ALL());
        auto Bp = Kokkos::subview(B, p, Kokkos::ALL(), Kokkos::ALL());
        auto Cp = Kokkos::subview(C, p, Kokkos::ALL(), Kokkos::ALL());
        static_assert(std::is_same_v<typename decltype(Cp)::array_layout, Kokkos::LayoutRight>,
                      "gemm_batched: a LayoutRight batch entry must stay LayoutRight");
        detail::gemm_vendor_2d(space, ta, tb, alpha, Ap, Bp, beta, Cp);
      }
      Kokkos::Profiling::popRegion();
      return;
    }
  }
  detail::gemm_portable(space, ta, tb, alpha, A, B, beta, C);
}

template <class ExecSpace, class AV, class BV, class CV>
void gemm(const ExecSpace& space, Trans ta, Trans tb, double alpha, const AV& A, const BV& B,
          double beta, const CV& C, GemmVariant variant = GemmVariant::automatic) {
  static_assert(AV::rank == 2 && BV::rank == 2 && CV::rank == 2, "gemm: rank-2 Views");
  assert_accessible<ExecSpace, AV, BV, CV>();
  detail::check_gemm_shapes("paraxis::gemm", ta, tb, A, B, C, 0);
  constexpr bool vendor_ok = gemm_vendor_applies<AV, BV, CV>();
  if (variant == GemmVariant::vendor && !vendor_ok)
    detail::throw_no_vendor<AV, BV, CV>("paraxis::gemm");
  if (variant == GemmVariant::automatic) variant = automatic_gemm();
  if constexpr (vendor_ok) {
    if (variant != GemmVariant::portable && !detail::gemm_empty(ta, A, C)) {
      // KokkosBlas::gemm runs on the Views' default execution space instance; fencing `space`
      // first orders it after work the caller queued there.
      space.fence();
      detail::gemm_vendor_2d(space, ta, tb, alpha, A, B, beta, C);
      return;
    }
  }
  detail::gemm_portable(space, ta, tb, alpha, A, B, beta, C);
}

}  // namespace paraxis::kernels
