// GEMM: C = alpha * op(A) * op(B) + beta * C, op in {N, T}, plus a batched form over the
// leading extent of rank-3 Views (one GEMM per head). Accumulates in fp32 for fp32/bf16
// storage and in fp64 when any operand is fp64. beta == 0 ignores C's previous contents.
//
// Variants behind one interface:
//   portable  a Kokkos implementation (any execution space, any storage type)
//   vendor    KokkosBlas::gemm (OpenBLAS on host, cuBLAS on CUDA), float/double only,
//             available when paraxis was built with Kokkos Kernels
//   automatic vendor where it applies, portable otherwise
#pragma once

#include "paraxis/kernels/common.hpp"

namespace paraxis::kernels {

enum class Trans : char { N = 'N', T = 'T' };
enum class GemmVariant { automatic, portable, vendor };

const char* to_string(GemmVariant v);

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
    os << kernel << ": shape mismatch: op" << static_cast<char>(ta) << "(A) of A"
       << shape_string(A) << ", op" << static_cast<char>(tb) << "(B) of B" << shape_string(B)
       << ", C" << shape_string(C);
    throw std::invalid_argument(os.str());
  }
}

template <class AV, class BV, class CV>
using gemm_acc_t = std::conditional_t<std::is_same_v<value_t<AV>, double> ||
                                          std::is_same_v<value_t<BV>, double> ||
                                          std::is_same_v<value_t<CV>, double>,
                                      double, float>;

// Reference-quality portable kernel: one thread per C entry. Replaced by the packed,
// register-blocked kernel in gemm_portable.hpp.
template <class ExecSpace, class AV, class BV, class CV>
void gemm_portable_batched(const ExecSpace& space, Trans ta, Trans tb, double alpha,
                           const AV& A, const BV& B, double beta, const CV& C) {
  using Acc = gemm_acc_t<AV, BV, CV>;
  using TC = value_t<CV>;
  const int batch = static_cast<int>(C.extent(0));
  const int m = static_cast<int>(C.extent(1));
  const int n = static_cast<int>(C.extent(2));
  const int k = static_cast<int>(ta == Trans::N ? A.extent(2) : A.extent(1));
  const bool tA = ta == Trans::T, tB = tb == Trans::T;
  const Acc a = static_cast<Acc>(alpha), b = static_cast<Acc>(beta);
  Kokkos::parallel_for(
      "paraxis::gemm_portable",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>(space, {0, 0, 0}, {batch, m, n}),
      KOKKOS_LAMBDA(const int p, const int i, const int j) {
        Acc s = 0;
        for (int l = 0; l < k; ++l) {
          const Acc x = static_cast<Acc>(tA ? A(p, l, i) : A(p, i, l));
          const Acc y = static_cast<Acc>(tB ? B(p, j, l) : B(p, l, j));
          s += x * y;
        }
        const Acc prev = b == Acc(0) ? Acc(0) : b * static_cast<Acc>(C(p, i, j));
        C(p, i, j) = static_cast<TC>(a * s + prev);
      });
}

}  // namespace detail

template <class ExecSpace, class AV, class BV, class CV>
void gemm_batched(const ExecSpace& space, Trans ta, Trans tb, double alpha, const AV& A,
                  const BV& B, double beta, const CV& C,
                  GemmVariant variant = GemmVariant::automatic) {
  static_assert(AV::rank == 3 && BV::rank == 3 && CV::rank == 3, "gemm_batched: rank-3 Views");
  assert_accessible<ExecSpace, AV, BV, CV>();
  detail::check_gemm_shapes("paraxis::gemm_batched", ta, tb, A, B, C, 1);
  if (variant == GemmVariant::vendor)
    throw std::invalid_argument("paraxis::gemm_batched: no vendor variant for batched GEMM");
  detail::gemm_portable_batched(space, ta, tb, alpha, A, B, beta, C);
}

template <class ExecSpace, class AV, class BV, class CV>
void gemm(const ExecSpace& space, Trans ta, Trans tb, double alpha, const AV& A, const BV& B,
          double beta, const CV& C, GemmVariant variant = GemmVariant::automatic) {
  static_assert(AV::rank == 2 && BV::rank == 2 && CV::rank == 2, "gemm: rank-2 Views");
  assert_accessible<ExecSpace, AV, BV, CV>();
  detail::check_gemm_shapes("paraxis::gemm", ta, tb, A, B, C, 0);
  if (variant == GemmVariant::vendor)
    throw std::invalid_argument("paraxis::gemm: vendor variant not available in this build");
  // View a rank-2 GEMM as a batch of one.
  auto A1 = Kokkos::View<typename AV::value_type***, Kokkos::LayoutRight,
                         typename AV::memory_space, Kokkos::MemoryUnmanaged>(
      A.data(), 1, A.extent(0), A.extent(1));
  auto B1 = Kokkos::View<typename BV::value_type***, Kokkos::LayoutRight,
                         typename BV::memory_space, Kokkos::MemoryUnmanaged>(
      B.data(), 1, B.extent(0), B.extent(1));
  auto C1 = Kokkos::View<typename CV::value_type***, Kokkos::LayoutRight,
                         typename CV::memory_space, Kokkos::MemoryUnmanaged>(
      C.data(), 1, C.extent(0), C.extent(1));
  detail::gemm_portable_batched(space, ta, tb, alpha, A1, B1, beta, C1);
}

}  // namespace paraxis::kernels
