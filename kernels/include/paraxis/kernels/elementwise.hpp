// Elementwise kernels of a GPT block and of the optimizer path: residual add, bias add and its
// gradient, scaling, precision conversion, row gather, the sum of squares behind the gradient
// norm, and GELU (tanh form) forward/backward. Arithmetic in acc_t of the storage type; every
// output element has one owner, and reductions run in a fixed order (bitwise reproducible).
//
// Two paths, chosen at compile time by where the execution space runs (row_lanes.hpp): on the
// host a RangePolicy over rows (rank 1: chunks) whose loops walk raw pointers and vectorize
// (an MDRangePolicy on a host space runs its tiles one element at a time, and GELU called
// libm's tanh per element: 0.4 GB/s against a 30-50 GB/s copy); on a device, and for host
// Views with strided rows, one thread per element as before. GELU evaluates the same formula
// on both (math::vexp).
#pragma once

#include <cstring>
#include <vector>

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/math.hpp"
#include "paraxis/kernels/row_lanes.hpp"

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

// Elements per work item of the host path on rank-1 Views.
inline constexpr int kHostChunk = 4096;

// Host path over View v's index space: f(p, n) for each row (rank 2) or chunk (rank 1), where
// p(w) is the pointer to the row or chunk's first element in View w (w of v's shape, unit
// stride: checked by the caller with rows_contiguous) and n its length.
template <class ExecSpace, class V, class F>
void host_rows(const ExecSpace& space, const char* label, const V& v, const F& f) {
  if constexpr (V::rank == 1) {
    const int n = static_cast<int>(v.extent(0));
    Kokkos::parallel_for(
        label, Kokkos::RangePolicy<ExecSpace>(space, 0, (n + kHostChunk - 1) / kHostChunk),
        [=](const int c) {
          const int j0 = c * kHostChunk;
          const auto p = [j0](const auto& w) { return w.data() + j0; };
          f(p, n - j0 < kHostChunk ? n - j0 : kHostChunk);
        });
  } else {
    const int n = static_cast<int>(v.extent(1));
    Kokkos::parallel_for(label,
                         Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<int>(v.extent(0))),
                         [=](const int i) {
                           const auto p = [i](const auto& w) { return row_ptr(w, i); };
                           f(p, n);
                         });
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
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(Y, X)) {
      detail::host_rows(space, "paraxis::add_inplace", Y, [=](const auto& p, const int n) {
        const auto y = p(Y);
        const auto x = p(X);
        detail::store_row(y, n, [=](int k) { return static_cast<A>(y[k]) + static_cast<A>(x[k]); });
      });
      return;
    }
  }
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
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(Y, b)) {
      // A narrower bias (bf16) is widened to A once, not once per row: the same values (the
      // widening is exact), bf16 rows in L2 0.103-0.108 -> 0.074-0.089 ns an element
      // (docs/perf-log/2026-12-05-kernels-round5.md).
      std::vector<A> wide;
      const A* bp = nullptr;
      if constexpr (std::is_same_v<value_t<BV>, A>) {
        bp = b.data();
      } else {
        wide.assign(b.data(), b.data() + b.extent(0));
        bp = wide.data();
      }
      detail::host_rows(space, "paraxis::bias_add", Y, [=](const auto& p, const int n) {
        const auto y = p(Y);
        detail::store_row(y, n, [=](int k) { return static_cast<A>(y[k]) + bp[k]; });
      });
      return;
    }
  }
  detail::for_each_index(
      space, "paraxis::bias_add", Y, KOKKOS_LAMBDA(const int i, const int j) {
        Y(i, j) = static_cast<T>(static_cast<A>(Y(i, j)) + static_cast<A>(b(j)));
      });
}

namespace detail {
// out[c] += sum over rows i < n of dY(i, j0 + c), c < w <= W, rows added in order from 0 into
// a zeroed sum. dY of the sums' type: four rows per pass over the sums, ((s + d0) + d1) + d2) +
// d3 (the same additions in the same order as one row at a time), a quarter of the loads and
// stores of the sums, which stay in memory (L1) for a width known only at run time. Narrower
// dY (bf16) one row per pass: four converted rows at a time ran slower past the cache
// (docs/perf-log/2026-12-05-kernels-round4.md).
template <int W, class DYV, class A>
inline void bias_grad_block(const DYV& dY, int n, int j0, int w, A* KOKKOS_RESTRICT out) {
  constexpr bool four = sizeof(value_t<DYV>) >= sizeof(A);
  A s[W];
  for (int c = 0; c < w; ++c) s[c] = 0;
  int i = 0;
  for (; four && i + 4 <= n; i += 4) {
    const auto* KOKKOS_RESTRICT d0 = row_ptr(dY, i) + j0;
    const auto* KOKKOS_RESTRICT d1 = row_ptr(dY, i + 1) + j0;
    const auto* KOKKOS_RESTRICT d2 = row_ptr(dY, i + 2) + j0;
    const auto* KOKKOS_RESTRICT d3 = row_ptr(dY, i + 3) + j0;
    for (int c = 0; c < w; ++c)
      s[c] = (((s[c] + static_cast<A>(d0[c])) + static_cast<A>(d1[c])) + static_cast<A>(d2[c])) +
             static_cast<A>(d3[c]);
  }
  for (; i < n; ++i) {
    const auto* KOKKOS_RESTRICT d = row_ptr(dY, i) + j0;
    for (int c = 0; c < w; ++c) s[c] += static_cast<A>(d[c]);
  }
  for (int c = 0; c < w; ++c) out[c] += s[c];
}
}  // namespace detail

// db(j) += sum_i dY(i, j): one thread per column, rows summed in order (deterministic).
template <class ExecSpace, class DYV, class DBV>
void bias_grad_accumulate(const ExecSpace& space, const DYV& dY, const DBV& db) {
  static_assert(DYV::rank == 2 && DBV::rank == 1, "bias_grad_accumulate: dY rank 2, db rank 1");
  assert_accessible<ExecSpace, DYV, DBV>();
  require_shape("paraxis::bias_grad_accumulate", "db", db, {dY.extent(1)});
  using A = value_t<DBV>;
  const int n = static_cast<int>(dY.extent(0));
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(dY, db)) {
      // A block of columns per work item, walked row by row (contiguous reads, vectorized over
      // the columns; bias_grad_block); each column's sum still adds its rows in order from 0,
      // so the result is bitwise the device path's.
      constexpr int kCols = 256;
      const int m = static_cast<int>(dY.extent(1));
      Kokkos::parallel_for("paraxis::bias_grad_accumulate",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, (m + kCols - 1) / kCols),
                           [=](const int blk) {
                             const int j0 = blk * kCols, w = m - j0 < kCols ? m - j0 : kCols;
                             detail::bias_grad_block<kCols>(dY, n, j0, w, db.data() + j0);
                           });
      return;
    }
  }
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
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(X)) {
      detail::host_rows(space, "paraxis::scale_inplace", X, [=](const auto& p, const int n) {
        const auto x = p(X);
        detail::store_row(x, n, [=](int k) { return a * static_cast<A>(x[k]); });
      });
      return;
    }
  }
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
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(X, index, Y)) {
      Kokkos::parallel_for(k, Kokkos::RangePolicy<ExecSpace>(space, 0, rows), [=](const int i) {
        const auto x = detail::row_ptr(X, index(i));
        const auto y = detail::row_ptr(Y, i);
        if constexpr (std::is_same_v<TY, value_t<XV>>) {
          // One type: a copy (a bf16 signalling NaN kept). memcpy: GCC 12 left the loop over
          // bf16 structs scalar here (0.30 ns an element, fp32 0.13).
          std::memcpy(static_cast<void*>(y), static_cast<const void*>(x), C * sizeof(TY));
        } else {
          detail::store_row(y, C, [=](int j) { return static_cast<A>(x[j]); });
        }
      });
      return;
    }
  }
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
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(src, dst)) {
      detail::host_rows(space, "paraxis::convert", dst, [=](const auto& p, const int n) {
        const auto in = p(src);
        const auto out = p(dst);
        detail::store_row(out, n, [=](int k) { return static_cast<acc_t<D>>(in[k]); });
      });
      return;
    }
  }
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
// GELU, tanh approximation: 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3), evaluated as
// x sigma(2z) = x / (1 + e^(-2z)) (the same function: 0.5 (1 + tanh z) = 1 / (1 + e^(-2z))),
// which needs one vexp and no 1 + t difference near t = -1 (accurate for large negative x).
// -2z is capped where e^(-2z) is still finite, so that 1 - sigma = e sigma below never meets
// inf * 0 (gelu is then x e^(-cap), below 1e-34 |x|).
template <class A>
KOKKOS_INLINE_FUNCTION A gelu_exp(A x) {
  const A c = static_cast<A>(0.7978845608028654);  // sqrt(2/pi)
  const A k = static_cast<A>(0.044715);
  const A cap = static_cast<A>(sizeof(A) == 4 ? 80 : 700);
  const A y = static_cast<A>(-2) * c * (x + k * x * x * x);
  // min(y, cap) on the bits as signed integers (the order of the floats for y >= 0, every
  // negative y below cap), written as a mask blend: a compare and select here (float or
  // integer) gets split by GCC into a path computing vexp(y) under a mask and a constant path
  // for vexp(cap), 29 vector instructions per 16 elements against 20 with the blend (0.38 ->
  // 0.30 ns an element; docs/perf-log/2026-12-05-kernels-round3.md). The halves cannot
  // overflow and, cap's bits being even, (yb >> 1) < (cb >> 1) exactly when yb < cb: bitwise
  // the select's result for every y. A NaN y may become cap; x itself is NaN then, and so is
  // the result.
  using I = typename math::detail::ExpConsts<A>::Int;
  const I yb = math::detail::bit_cast<I>(y), cb = math::detail::bit_cast<I>(cap);
  const I below = ((yb >> 1) - (cb >> 1)) >> (8 * sizeof(I) - 1);  // all ones when yb < cb
  return math::vexp_bounded(math::detail::bit_cast<A>((yb & below) | (cb & ~below)));
}
template <class A>
KOKKOS_INLINE_FUNCTION A gelu(A x) {
  return x / (static_cast<A>(1) + gelu_exp(x));
}
// d/dx [x sigma(2z)] = sigma + 2 x z' sigma (1 - sigma), z' = sqrt(2/pi) (1 + 3 * 0.044715 x^2),
// with 1 - sigma = e sigma (e = e^(-2z)): no cancellation.
template <class A>
KOKKOS_INLINE_FUNCTION A gelu_derivative(A x) {
  const A c = static_cast<A>(0.7978845608028654);
  const A k = static_cast<A>(0.044715);
  const A e = gelu_exp(x);
  const A sig = static_cast<A>(1) / (static_cast<A>(1) + e);
  const A dz = c * (static_cast<A>(1) + static_cast<A>(3) * k * x * x);
  return sig + static_cast<A>(2) * x * dz * sig * (e * sig);
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
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(X, Y)) {
      detail::host_rows(space, "paraxis::gelu_forward", X, [=](const auto& p, const int n) {
        const auto x = p(X);
        const auto y = p(Y);
        detail::store_row(y, n, [=](int k) { return detail::gelu(static_cast<A>(x[k])); });
      });
      return;
    }
  }
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
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(X, dY, dX)) {
      detail::host_rows(space, "paraxis::gelu_backward", X, [=](const auto& p, const int n) {
        const auto x = p(X);
        const auto dy = p(dY);
        const auto dx = p(dX);
        detail::store_row(dx, n, [=](int k) {
          return detail::gelu_derivative(static_cast<A>(x[k])) * static_cast<A>(dy[k]);
        });
      });
      return;
    }
  }
  detail::for_each_index(
      space, "paraxis::gelu_backward", X, KOKKOS_LAMBDA(const int i, const int j) {
        detail::at(dX, i, j) =
            static_cast<TX>(detail::gelu_derivative(static_cast<A>(detail::at(X, i, j))) *
                            static_cast<A>(detail::at(dY, i, j)));
      });
}

}  // namespace paraxis::kernels
