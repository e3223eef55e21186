// LayerNorm over the hidden dimension: Y = (X - mean) * rstd * gamma + beta, with the biased
// variance and rstd = 1/sqrt(var + eps). One team per row; the row statistics come from team
// reductions (fixed order for a fixed team size, no atomics). The backward pass writes dX per
// row and accumulates dgamma/dbeta one thread per column, rows in order, so repeated calls are
// bitwise identical.
#pragma once

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/math.hpp"

namespace paraxis::kernels {

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
  Kokkos::parallel_for(
      "paraxis::layernorm_fwd", Policy(space, static_cast<int>(N), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank();
        A sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, h),
            [&](const int j, A& s) { s += static_cast<A>(X(i, j)); }, sum);
        const A mu = sum * inv_h;
        // Two-pass variance: no cancellation when |mean| >> std.
        A sq = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, h),
            [&](const int j, A& s) {
              const A d = static_cast<A>(X(i, j)) - mu;
              s += d * d;
            },
            sq);
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
  Kokkos::parallel_for(
      "paraxis::layernorm_bwd_dx", Policy(space, n, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank();
        const A mu = static_cast<A>(mean(i)), r = static_cast<A>(rstd(i));
        A sum_g = 0, sum_gx = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, h),
            [&](const int j, A& s) { s += static_cast<A>(dY(i, j)) * static_cast<A>(gamma(j)); },
            sum_g);
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, h),
            [&](const int j, A& s) {
              const A xhat = (static_cast<A>(X(i, j)) - mu) * r;
              s += static_cast<A>(dY(i, j)) * static_cast<A>(gamma(j)) * xhat;
            },
            sum_gx);
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
