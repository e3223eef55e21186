// Elementwise kernels of a GPT block and of the optimizer path: residual add, bias add and its
// gradient, scaling, precision conversion, the sum of squares behind the gradient norm, and
// GELU (tanh form) forward/backward. Arithmetic in acc_t of the storage type; every output
// element has one owner, and reductions run in a fixed order (bitwise reproducible).
#pragma once

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/math.hpp"

namespace paraxis::kernels {

namespace detail {

template <class VA, class VB>
void require_same_extents(const char* kernel, const char* arg, const VA& v, const VB& ref) {
  static_assert(int(VA::rank) == int(VB::rank), "paraxis kernel: Views of different rank");
  if constexpr (VA::rank == 1) {
    require_shape(kernel, arg, v, {ref.extent(0)});
  } else if constexpr (VA::rank == 2) {
    require_shape(kernel, arg, v, {ref.extent(0), ref.extent(1)});
  } else {
    require_shape(kernel, arg, v, {ref.extent(0), ref.extent(1), ref.extent(2)});
  }
}

// Runs f(i, j) over a rank-1 (j ignored, 0) or rank-2 index space of View v's extents.
template <class ExecSpace, class V, class F>
void for_each_index(const ExecSpace& space, const char* label, const V& v, const F& f) {
  static_assert(V::rank == 1 || V::rank == 2, "paraxis kernel: rank-1 or rank-2 Views");
  if constexpr (V::rank == 1) {
    Kokkos::parallel_for(
        label, Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<int>(v.extent(0))),
        KOKKOS_LAMBDA(const int i) { f(i, 0); });
  } else {
    Kokkos::parallel_for(
        label,
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(
            space, {0, 0}, {static_cast<int>(v.extent(0)), static_cast<int>(v.extent(1))}),
        KOKKOS_LAMBDA(const int i, const int j) { f(i, j); });
  }
}

// Element (i, j) of a rank-1 (j ignored) or rank-2 View.
template <class V>
KOKKOS_INLINE_FUNCTION typename V::reference_type at(const V& v, int i, int j) {
  if constexpr (V::rank == 1) {
    (void)j;
    return v(i);
  } else {
    return v(i, j);
  }
}

}  // namespace detail

// Y += X (rank 1 or 2, same shape).
template <class ExecSpace, class YV, class XV>
void add_inplace(const ExecSpace& space, const YV& Y, const XV& X) {
  static_assert(int(YV::rank) == int(XV::rank) && (YV::rank == 1 || YV::rank == 2),
                "add_inplace: Y and X must both be rank 1 or both rank 2");
  assert_accessible<ExecSpace, YV, XV>();
  detail::require_same_extents("paraxis::add_inplace", "X", X, Y);
  using T = value_t<YV>;
  using A = acc_t<T>;
  detail::for_each_index(
      space, "paraxis::add_inplace", Y, KOKKOS_LAMBDA(const int i, const int j) {
        auto& y = detail::at(Y, i, j);
        y = static_cast<T>(static_cast<A>(y) + static_cast<A>(detail::at(X, i, j)));
      });
}

// Y(i, j) += b(j).
template <class ExecSpace, class YV, class BV>
void bias_add(const ExecSpace& space, const YV& Y, const BV& b) {
  static_assert(YV::rank == 2 && BV::rank == 1, "bias_add: Y rank 2, b rank 1");
  assert_accessible<ExecSpace, YV, BV>();
  require_shape("paraxis::bias_add", "b", b, {Y.extent(1)});
  using T = value_t<YV>;
  using A = acc_t<T>;
  detail::for_each_index(
      space, "paraxis::bias_add", Y, KOKKOS_LAMBDA(const int i, const int j) {
        Y(i, j) = static_cast<T>(static_cast<A>(Y(i, j)) + static_cast<A>(b(j)));
      });
}

// db(j) += sum_i dY(i, j): one thread per column, rows summed in order (deterministic).
template <class ExecSpace, class DYV, class DBV>
void bias_grad_accumulate(const ExecSpace& space, const DYV& dY, const DBV& db) {
  static_assert(DYV::rank == 2 && DBV::rank == 1, "bias_grad_accumulate: dY rank 2, db rank 1");
  assert_accessible<ExecSpace, DYV, DBV>();
  require_shape("paraxis::bias_grad_accumulate", "db", db, {dY.extent(1)});
  using A = value_t<DBV>;
  const int n = static_cast<int>(dY.extent(0));
  Kokkos::parallel_for(
      "paraxis::bias_grad_accumulate",
      Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<int>(dY.extent(1))),
      KOKKOS_LAMBDA(const int j) {
        A s = 0;
        for (int i = 0; i < n; ++i) s += static_cast<A>(dY(i, j));
        db(j) += s;
      });
}

// X *= alpha (rank 1 or 2).
template <class ExecSpace, class XV>
void scale_inplace(const ExecSpace& space, const XV& X, double alpha) {
  static_assert(XV::rank == 1 || XV::rank == 2, "scale_inplace: rank-1 or rank-2 View");
  assert_accessible<ExecSpace, XV>();
  using T = value_t<XV>;
  using A = acc_t<T>;
  const A a = static_cast<A>(alpha);
  detail::for_each_index(
      space, "paraxis::scale_inplace", X, KOKKOS_LAMBDA(const int i, const int j) {
        auto& x = detail::at(X, i, j);
        x = static_cast<T>(a * static_cast<A>(x));
      });
}

// Y(i, :) = X(index(i), :) for i < rows: a row permutation (expert-parallel dispatch between
// source order and expert order). Rows of Y at and beyond `rows` are untouched; every output
// row has one owner, so the copy is exact and deterministic.
template <class ExecSpace, class XV, class IV, class YV>
void gather_rows(const ExecSpace& space, const XV& X, const IV& index, int rows, const YV& Y) {
  static_assert(XV::rank == 2 && IV::rank == 1 && YV::rank == 2,
                "gather_rows: X[R,C], index[>=rows], Y[>=rows,C]");
  static_assert(std::is_same_v<value_t<IV>, int>, "gather_rows: int index");
  assert_accessible<ExecSpace, XV, IV, YV>();
  const char* k = "paraxis::gather_rows";
  if (rows < 0 || index.extent(0) < static_cast<std::size_t>(rows) ||
      Y.extent(0) < static_cast<std::size_t>(rows) || Y.extent(1) != X.extent(1)) {
    std::ostringstream os;
    os << k << ": rows = " << rows << ", index has " << index.extent(0) << " entries, Y is "
       << shape_string(Y) << ", X is " << shape_string(X)
       << "; expected index and Y with at least `rows` rows and Y as wide as X";
    throw std::invalid_argument(os.str());
  }
  using A = acc_t<value_t<XV>>;
  using TY = value_t<YV>;
  const int C = static_cast<int>(X.extent(1));
  if (rows == 0 || C == 0) return;
  Kokkos::parallel_for(
      k, Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {rows, C}),
      KOKKOS_LAMBDA(const int i, const int j) {
        Y(i, j) = static_cast<TY>(static_cast<A>(X(index(i), j)));
      });
}

// dst = src converted to dst's storage type (rounding to nearest even into bf16).
template <class ExecSpace, class SV, class DV>
void convert(const ExecSpace& space, const SV& src, const DV& dst) {
  static_assert(int(SV::rank) == int(DV::rank) && (SV::rank == 1 || SV::rank == 2),
                "convert: src and dst must both be rank 1 or both rank 2");
  assert_accessible<ExecSpace, SV, DV>();
  detail::require_same_extents("paraxis::convert", "dst", dst, src);
  using D = value_t<DV>;
  detail::for_each_index(
      space, "paraxis::convert", dst, KOKKOS_LAMBDA(const int i, const int j) {
        detail::at(dst, i, j) = static_cast<D>(detail::at(src, i, j));
      });
}

// sum of x^2 in fp64, reduced in a fixed order (detail::fixed_order_sum): the same value on
// every call, whatever the backend's thread count.
template <class ExecSpace, class XV>
double sum_squares(const ExecSpace& space, const XV& X) {
  static_assert(XV::rank == 1 || XV::rank == 2, "sum_squares: rank-1 or rank-2 View");
  assert_accessible<ExecSpace, XV>();
  if constexpr (XV::rank == 1) {
    return detail::fixed_order_sum(
        space, "paraxis::sum_squares", X.extent(0), KOKKOS_LAMBDA(const long long k) {
          const double x = static_cast<double>(X(k));
          return x * x;
        });
  } else {
    const long long cols = static_cast<long long>(X.extent(1));
    return detail::fixed_order_sum(
        space, "paraxis::sum_squares", X.extent(0) * X.extent(1), KOKKOS_LAMBDA(const long long k) {
          const double x = static_cast<double>(X(k / cols, k % cols));
          return x * x;
        });
  }
}

namespace detail {
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class A>
KOKKOS_INLINE_FUNCTION A gelu(A x) {
  const A c = static_cast<A>(0.7978845608028654);  // sqrt(2/pi)
  const A k = static_cast<A>(0.044715);
  const A t = math::tanh(c * (x + k * x * x * x));
  return static_cast<A>(0.5) * x * (static_cast<A>(1) + t);
}
template <class A>
KOKKOS_INLINE_FUNCTION A gelu_derivative(A x) {
  const A c = static_cast<A>(0.7978845608028654);
  const A k = static_cast<A>(0.044715);
  const A t = math::tanh(c * (x + k * x * x * x));
  const A half = static_cast<A>(0.5), one = static_cast<A>(1);
  return half * (one + t) + half * x * (one - t * t) * c * (one + static_cast<A>(3) * k * x * x);
}
}  // namespace detail

// Y = gelu(X) (rank 1 or 2).
template <class ExecSpace, class XV, class YV>
void gelu_forward(const ExecSpace& space, const XV& X, const YV& Y) {
  static_assert(int(XV::rank) == int(YV::rank) && (XV::rank == 1 || XV::rank == 2),
                "gelu_forward: X and Y must both be rank 1 or both rank 2");
  assert_accessible<ExecSpace, XV, YV>();
  detail::require_same_extents("paraxis::gelu_forward", "Y", Y, X);
  using A = acc_t<value_t<XV>>;
  using TY = value_t<YV>;
  detail::for_each_index(
      space, "paraxis::gelu_forward", X, KOKKOS_LAMBDA(const int i, const int j) {
        detail::at(Y, i, j) = static_cast<TY>(detail::gelu(static_cast<A>(detail::at(X, i, j))));
      });
}

// dX = gelu'(X) * dY (dX overwritten; rank 1 or 2).
template <class ExecSpace, class XV, class DYV, class DXV>
void gelu_backward(const ExecSpace& space, const XV& X, const DYV& dY, const DXV& dX) {
  static_assert(int(XV::rank) == int(DYV::rank) && int(XV::rank) == int(DXV::rank) &&
                    (XV::rank == 1 || XV::rank == 2),
                "gelu_backward: X, dY, dX of the same rank (1 or 2)");
  assert_accessible<ExecSpace, XV, DYV, DXV>();
  detail::require_same_extents("paraxis::gelu_backward", "dY", dY, X);
  detail::require_same_extents("paraxis::gelu_backward", "dX", dX, X);
  using A = acc_t<value_t<XV>>;
  using TX = value_t<DXV>;
  detail::for_each_index(
      space, "paraxis::gelu_backward", X, KOKKOS_LAMBDA(const int i, const int j) {
        detail::at(dX, i, j) =
            static_cast<TX>(detail::gelu_derivative(static_cast<A>(detail::at(X, i, j))) *
                            static_cast<A>(detail::at(dY, i, j)));
      });
}

}  // namespace paraxis::kernels
