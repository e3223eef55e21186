// LayerNorm over the hidden dimension: Y = (X - mean) * rstd * gamma + beta, with the biased
// variance and rstd = 1/sqrt(var + eps). Two-pass statistics (mean, then sum of squared
// deviations): no cancellation when |mean| >> std. Deterministic everywhere, no atomics:
//   - device path: one team per row, statistics from row_reduce.hpp's team reductions (fixed
//     order for a fixed team size); dgamma/dbeta one thread per column, rows in order (coalesced on
//     a GPU).
//   - host path (row_lanes.hpp's lane_sum): one row per iteration of a RangePolicy, statistics
//   summed in
//     fixed lanes (vectorized); the backward pass fuses dgamma/dbeta into the dX pass: fixed
//     blocks of kLnRowBlock rows each sum their rows in order into per-column partials, which
//     are then added in block order. The blocks do not depend on the thread count, so every
//     host space gives the same bits.
#pragma once

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/math.hpp"
#include "paraxis/kernels/row_reduce.hpp"

namespace paraxis::kernels {

namespace detail {
// Rows per block of the host backward pass: the per-block dgamma/dbeta partials (2 x H values)
// stay in cache, and their extra traffic is 2/kLnRowBlock of one [N,H] array.
inline constexpr int kLnRowBlock = 64;

// Rows up to this width are converted once into an A buffer on the stack when stored in
// another type (bf16), so the row's three passes convert once instead of three times.
inline constexpr int kLnRowBuf = 4096;

// v (rank 1, on the host) as A values: v itself when it holds A, else a converted copy (so that
// per-row loops over gamma/beta do not convert them again for every row).
template <class A, class ExecSpace, class V>
Kokkos::View<const A*, Kokkos::HostSpace> as_acc_vector(const ExecSpace& space, const V& v) {
  if constexpr (std::is_same_v<value_t<V>, A>) {
    return Kokkos::View<const A*, Kokkos::HostSpace>(v.data(), v.extent(0));
  } else {
    Kokkos::View<A*, Kokkos::HostSpace> c(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "paraxis::layernorm_acc_vector"),
        v.extent(0));
    Kokkos::parallel_for("paraxis::layernorm_acc_vector",
                         Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<int>(v.extent(0))),
                         [=](const int j) { c(j) = static_cast<A>(v(j)); });
    return c;
  }
}

// f(row as A values): the row itself when it holds A (or is wider than kLnRowBuf), else the
// row converted into a stack buffer once.
template <class A, class T, class F>
inline void with_row_in_acc(const T* x, int h, const F& f) {
  if constexpr (!std::is_same_v<T, A>) {
    if (h <= kLnRowBuf) {
      A buf[kLnRowBuf];
      for (int j = 0; j < h; ++j) buf[j] = static_cast<A>(x[j]);
      f(static_cast<const A*>(buf));
      return;
    }
  }
  f(x);
}
}  // namespace detail

namespace detail {

// One row of the host forward pass: mu, r (= rstd) and y. KOKKOS_RESTRICT: the rows do not
// overlap, which the compiler needs to vectorize the output loop.
template <class A, class TX, class TG, class TB, class TY>
inline void layernorm_forward_row(int h, A inv_h, A eps, const TX* KOKKOS_RESTRICT x,
                                  const TG* KOKKOS_RESTRICT g, const TB* KOKKOS_RESTRICT b,
                                  TY* KOKKOS_RESTRICT y, A& mu, A& r) {
  mu = lane_sum<A>(h, [&](int j) { return static_cast<A>(x[j]); }) * inv_h;
  const A m = mu;
  const A sq = lane_sum<A>(h, [&](int j) {
    const A d = static_cast<A>(x[j]) - m;
    return d * d;
  });
  r = static_cast<A>(1) / math::sqrt(sq * inv_h + eps);
  const A rr = r;
  store_row(y, h, [&](int j) {
    return (static_cast<A>(x[j]) - m) * rr * static_cast<A>(g[j]) + static_cast<A>(b[j]);
  });
}

// One row of the host backward pass: dx written, the row's dgamma/dbeta terms added to the
// block partials pg/pb.
template <class A, class TD, class TX, class TG, class TO>
inline void layernorm_backward_row(int h, A inv_h, A mu, A r, const TD* KOKKOS_RESTRICT dy,
                                   const TX* KOKKOS_RESTRICT x, const TG* KOKKOS_RESTRICT gm,
                                   TO* KOKKOS_RESTRICT dx, A* KOKKOS_RESTRICT pg,
                                   A* KOKKOS_RESTRICT pb) {
  // Two reductions, each in lanes (row_lanes.hpp); the row is in L1 for the second.
  const A sum_g =
      lane_sum<A>(h, [&](int j) { return static_cast<A>(dy[j]) * static_cast<A>(gm[j]); });
  const A sum_gx = lane_sum<A>(h, [&](int j) {
    return static_cast<A>(dy[j]) * static_cast<A>(gm[j]) * ((static_cast<A>(x[j]) - mu) * r);
  });
  const A mg = sum_g * inv_h, mgx = sum_gx * inv_h;
  // dx first (bf16: rounded 32 at a time, store_row), then the partials (the same terms).
  store_row(dx, h, [&](int j) {
    const A xhat = (static_cast<A>(x[j]) - mu) * r;
    return r * (static_cast<A>(dy[j]) * static_cast<A>(gm[j]) - mg - xhat * mgx);
  });
  for (int j = 0; j < h; ++j) {
    const A d = static_cast<A>(dy[j]);
    pg[j] += d * ((static_cast<A>(x[j]) - mu) * r);
    pb[j] += d;
  }
}

}  // namespace detail

template <class ExecSpace, class XV, class GV, class BV, class YV, class MV, class RV>
void layernorm_forward(const ExecSpace& space, const XV& X, const GV& gamma, const BV& beta,
                       double eps, const YV& Y, const MV& mean, const RV& rstd) {
  static_assert(XV::rank == 2 && GV::rank == 1 && BV::rank == 1 && YV::rank == 2 && MV::rank == 1 &&
                    RV::rank == 1,
                "layernorm_forward: X[N,H], gamma[H], beta[H], Y[N,H], mean[N], rstd[N]");
  assert_accessible<ExecSpace, XV, GV, BV, YV, MV, RV>();
  const std::size_t N = X.extent(0), H = X.extent(1);
  const char* k = "paraxis::layernorm_forward";
  require_shape(k, "gamma", gamma, {H});
  require_shape(k, "beta", beta, {H});
  require_shape(k, "Y", Y, {N, H});
  require_shape(k, "mean", mean, {N});
  require_shape(k, "rstd", rstd, {N});
  using A = acc_t<value_t<XV>>;
  using TY = value_t<YV>;
  using MT = value_t<MV>;
  using RT = value_t<RV>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const int h = static_cast<int>(H);
  const A inv_h = static_cast<A>(1.0 / static_cast<double>(H));
  const A e = static_cast<A>(eps);
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(X, gamma, beta, Y)) {
      const auto g = detail::as_acc_vector<A>(space, gamma);
      const auto b = detail::as_acc_vector<A>(space, beta);
      Kokkos::parallel_for(
          "paraxis::layernorm_fwd_host", Kokkos::RangePolicy<ExecSpace>(space, 0, h > 0 ? N : 0),
          [=](const int i) {
            A mu, r;
            auto* y = detail::row_ptr(Y, i);
            detail::with_row_in_acc<A>(detail::row_ptr(X, i), h, [&](const auto* x) {
              detail::layernorm_forward_row(h, inv_h, e, x, g.data(), b.data(), y, mu, r);
            });
            mean(i) = static_cast<MT>(mu);
            rstd(i) = static_cast<RT>(r);
          });
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::layernorm_fwd", Policy(space, static_cast<int>(N), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank();
        const auto range = Kokkos::TeamThreadRange(team, h);
        const A mu =
            detail::range_sum<A>(range, [&](const int j) { return static_cast<A>(X(i, j)); }) *
            inv_h;
        // Two-pass variance: no cancellation when |mean| >> std.
        const A sq = detail::range_sum<A>(range, [&](const int j) {
          const A d = static_cast<A>(X(i, j)) - mu;
          return d * d;
        });
        const A r = static_cast<A>(1) / math::sqrt(sq * inv_h + e);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, h), [&](const int j) {
          Y(i, j) = static_cast<TY>((static_cast<A>(X(i, j)) - mu) * r * static_cast<A>(gamma(j)) +
                                    static_cast<A>(beta(j)));
        });
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          mean(i) = static_cast<MT>(mu);
          rstd(i) = static_cast<RT>(r);
        });
      });
}

namespace detail {

// The host path of layernorm_backward (see the file comment); shapes already checked.
template <class A, class ExecSpace, class DYV, class XV, class GV, class MV, class RV, class DXV,
          class DGV, class DBV>
void layernorm_backward_host(const ExecSpace& space, const DYV& dY, const XV& X, const GV& gamma,
                             const MV& mean, const RV& rstd, const DXV& dX, const DGV& dgamma,
                             const DBV& dbeta) {
  using GA = value_t<DGV>;
  using BA = value_t<DBV>;
  constexpr int RB = kLnRowBlock;
  const int n = static_cast<int>(X.extent(0)), h = static_cast<int>(X.extent(1));
  const int blocks = (n + RB - 1) / RB;
  const A inv_h = static_cast<A>(1.0 / static_cast<double>(h));
  const auto gm = as_acc_vector<A>(space, gamma);
  // part(b, 0..h) = dgamma partial of block b, part(b, h..2h) = dbeta partial.
  Kokkos::View<A**, Kokkos::LayoutRight, Kokkos::HostSpace> part(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "paraxis::layernorm_bwd_partials"), blocks,
      2 * static_cast<std::size_t>(h));
  Kokkos::parallel_for("paraxis::layernorm_bwd_host",
                       Kokkos::RangePolicy<ExecSpace>(space, 0, blocks), [=](const int blk) {
                         A* pg = &part(blk, 0);
                         A* pb = pg + h;
                         for (int j = 0; j < h; ++j) pg[j] = pb[j] = 0;
                         const int end = (blk + 1) * RB < n ? (blk + 1) * RB : n;
                         for (int i = blk * RB; i < end; ++i) {
                           const A mu = static_cast<A>(mean(i)), r = static_cast<A>(rstd(i));
                           auto* dx = row_ptr(dX, i);
                           with_row_in_acc<A>(row_ptr(dY, i), h, [&](const auto* dy) {
                             with_row_in_acc<A>(row_ptr(X, i), h, [&](const auto* x) {
                               layernorm_backward_row(h, inv_h, mu, r, dy, x, gm.data(), dx, pg,
                                                      pb);
                             });
                           });
                         }
                       });
  // Blocks added in order, per column; columns in chunks of C (vectorized across a chunk).
  constexpr int C = 64;
  Kokkos::parallel_for("paraxis::layernorm_bwd_host_dgamma_dbeta",
                       Kokkos::RangePolicy<ExecSpace>(space, 0, (h + C - 1) / C), [=](const int c) {
                         const int j0 = c * C, w = h - j0 < C ? h - j0 : C;
                         A sg[C] = {}, sb[C] = {};
                         for (int blk = 0; blk < blocks; ++blk) {
                           const A* pg = &part(blk, j0);
                           const A* pb = pg + h;
                           for (int l = 0; l < w; ++l) {
                             sg[l] += pg[l];
                             sb[l] += pb[l];
                           }
                         }
                         auto* dg = dgamma.data() + j0;
                         auto* db = dbeta.data() + j0;
                         for (int l = 0; l < w; ++l) {
                           dg[l] = static_cast<GA>(static_cast<A>(dg[l]) + sg[l]);
                           db[l] = static_cast<BA>(static_cast<A>(db[l]) + sb[l]);
                         }
                       });
}

}  // namespace detail

// dX (written) = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)), g = dY * gamma;
// dgamma(j) += sum_i dY(i,j) xhat(i,j); dbeta(j) += sum_i dY(i,j).
template <class ExecSpace, class DYV, class XV, class GV, class MV, class RV, class DXV, class DGV,
          class DBV>
void layernorm_backward(const ExecSpace& space, const DYV& dY, const XV& X, const GV& gamma,
                        const MV& mean, const RV& rstd, const DXV& dX, const DGV& dgamma,
                        const DBV& dbeta) {
  static_assert(DYV::rank == 2 && XV::rank == 2 && GV::rank == 1 && MV::rank == 1 &&
                    RV::rank == 1 && DXV::rank == 2 && DGV::rank == 1 && DBV::rank == 1,
                "layernorm_backward: dY[N,H], X[N,H], gamma[H], mean[N], rstd[N], dX[N,H], "
                "dgamma[H], dbeta[H]");
  assert_accessible<ExecSpace, DYV, XV, GV, MV, RV, DXV, DGV, DBV>();
  const std::size_t N = X.extent(0), H = X.extent(1);
  const char* k = "paraxis::layernorm_backward";
  require_shape(k, "dY", dY, {N, H});
  require_shape(k, "gamma", gamma, {H});
  require_shape(k, "mean", mean, {N});
  require_shape(k, "rstd", rstd, {N});
  require_shape(k, "dX", dX, {N, H});
  require_shape(k, "dgamma", dgamma, {H});
  require_shape(k, "dbeta", dbeta, {H});
  using A = acc_t<value_t<XV>>;
  using TX = value_t<DXV>;
  using GA = value_t<DGV>;
  using BA = value_t<DBV>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const int n = static_cast<int>(N), h = static_cast<int>(H);
  const A inv_h = static_cast<A>(1.0 / static_cast<double>(H));
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(dY, X, gamma, dX, dgamma, dbeta)) {
      detail::layernorm_backward_host<A>(space, dY, X, gamma, mean, rstd, dX, dgamma, dbeta);
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::layernorm_bwd_dx", Policy(space, n, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank();
        const A mu = static_cast<A>(mean(i)), r = static_cast<A>(rstd(i));
        const auto range = Kokkos::TeamThreadRange(team, h);
        const A sum_g = detail::range_sum<A>(range, [&](const int j) {
          return static_cast<A>(dY(i, j)) * static_cast<A>(gamma(j));
        });
        const A sum_gx = detail::range_sum<A>(range, [&](const int j) {
          const A xhat = (static_cast<A>(X(i, j)) - mu) * r;
          return static_cast<A>(dY(i, j)) * static_cast<A>(gamma(j)) * xhat;
        });
        const A mg = sum_g * inv_h, mgx = sum_gx * inv_h;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, h), [&](const int j) {
          const A xhat = (static_cast<A>(X(i, j)) - mu) * r;
          const A g = static_cast<A>(dY(i, j)) * static_cast<A>(gamma(j));
          dX(i, j) = static_cast<TX>(r * (g - mg - xhat * mgx));
        });
      });
  Kokkos::parallel_for(
      "paraxis::layernorm_bwd_dgamma_dbeta", Kokkos::RangePolicy<ExecSpace>(space, 0, h),
      KOKKOS_LAMBDA(const int j) {
        A sg = 0, sb = 0;
        for (int i = 0; i < n; ++i) {
          const A dy = static_cast<A>(dY(i, j));
          sg += dy * (static_cast<A>(X(i, j)) - static_cast<A>(mean(i))) * static_cast<A>(rstd(i));
          sb += dy;
        }
        dgamma(j) = static_cast<GA>(static_cast<A>(dgamma(j)) + sg);
        dbeta(j) = static_cast<BA>(static_cast<A>(dbeta(j)) + sb);
      });
}

}  // namespace paraxis::kernels
