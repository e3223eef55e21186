// Row softmax and the batched causal (masked, scaled) softmax of attention, forward and
// backward. One team per row: max, sum of exponentials and the row dot product of the
// backward pass are team reductions (fixed order for a fixed team size, no atomics).
//
// In-place use is allowed: P may alias S, and dS may alias dP. Within a pass each element is
// read by the thread that writes it; a row's earlier passes finish before later ones start
// (their reduction result is only known once every thread of the team has contributed, and a
// team barrier separates the exponentials stored in P from their rescaling).
#pragma once

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/math.hpp"

namespace paraxis::kernels {

// P(r, :) = softmax(S(r, :)), max-subtracted.
template <class ExecSpace, class SV, class PV>
void softmax_forward(const ExecSpace& space, const SV& S, const PV& P) {
  static_assert(SV::rank == 2 && PV::rank == 2, "softmax_forward: S[R,C], P[R,C]");
  assert_accessible<ExecSpace, SV, PV>();
  require_shape("paraxis::softmax_forward", "P", P, {S.extent(0), S.extent(1)});
  using A = acc_t<value_t<SV>>;
  using TP = value_t<PV>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const int c = static_cast<int>(S.extent(1));
  Kokkos::parallel_for(
      "paraxis::softmax_fwd", Policy(space, static_cast<int>(S.extent(0)), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int r = team.league_rank();
        A mx;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, c),
            [&](const int j, A& m) { m = math::fmax(m, static_cast<A>(S(r, j))); },
            Kokkos::Max<A>(mx));
        // When P holds A exactly, keep the exponentials in P and rescale: one exp per element
        // instead of two (bitwise the same result). Narrower P (bf16) recomputes them rather
        // than rounding twice.
        constexpr bool keep = std::is_same_v<TP, A>;
        A sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, c),
            [&](const int j, A& s) {
              const A ex = math::exp(static_cast<A>(S(r, j)) - mx);
              // Plain `if` (folded, keep is constexpr): CUDA's extended lambdas may not
              // first-capture a variable (here P) inside an `if constexpr`.
              if (keep) P(r, j) = static_cast<TP>(ex);
              s += ex;
            },
            sum);
        const A inv = static_cast<A>(1) / sum;
        if constexpr (keep)
          team.team_barrier();  // P written above may be rescaled by another thread
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, c), [&](const int j) {
          if constexpr (keep)
            P(r, j) = static_cast<TP>(static_cast<A>(P(r, j)) * inv);
          else
            P(r, j) = static_cast<TP>(math::exp(static_cast<A>(S(r, j)) - mx) * inv);
        });
      });
}

// dS = P * (dP - rowsum(P * dP)) (dS overwritten).
template <class ExecSpace, class PV, class DPV, class DSV>
void softmax_backward(const ExecSpace& space, const PV& P, const DPV& dP, const DSV& dS) {
  static_assert(PV::rank == 2 && DPV::rank == 2 && DSV::rank == 2,
                "softmax_backward: P[R,C], dP[R,C], dS[R,C]");
  assert_accessible<ExecSpace, PV, DPV, DSV>();
  require_shape("paraxis::softmax_backward", "dP", dP, {P.extent(0), P.extent(1)});
  require_shape("paraxis::softmax_backward", "dS", dS, {P.extent(0), P.extent(1)});
  using A = acc_t<value_t<PV>>;
  using TS = value_t<DSV>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const int c = static_cast<int>(P.extent(1));
  Kokkos::parallel_for(
      "paraxis::softmax_bwd", Policy(space, static_cast<int>(P.extent(0)), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int r = team.league_rank();
        A dot = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, c),
            [&](const int j, A& s) { s += static_cast<A>(P(r, j)) * static_cast<A>(dP(r, j)); },
            dot);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, c), [&](const int j) {
          const A p = static_cast<A>(P(r, j));
          dS(r, j) = static_cast<TS>(p * (static_cast<A>(dP(r, j)) - dot));
        });
      });
}

// P(b, i, j) = softmax over j <= i of scale * S(b, i, j); P = 0 for j > i (causal mask).
template <class ExecSpace, class SV, class PV>
void causal_softmax_forward(const ExecSpace& space, const SV& S, double scale, const PV& P) {
  static_assert(SV::rank == 3 && PV::rank == 3, "causal_softmax_forward: S[B,T,T], P[B,T,T]");
  assert_accessible<ExecSpace, SV, PV>();
  const std::size_t B = S.extent(0), T = S.extent(1);
  require_shape("paraxis::causal_softmax_forward", "S", S, {B, T, T});
  require_shape("paraxis::causal_softmax_forward", "P", P, {B, T, T});
  using A = acc_t<value_t<SV>>;
  using TP = value_t<PV>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const int t = static_cast<int>(T);
  const A sc = static_cast<A>(scale);
  Kokkos::parallel_for(
      "paraxis::causal_softmax_fwd", Policy(space, static_cast<int>(B * T), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int b = team.league_rank() / t, i = team.league_rank() % t;
        A mx;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, i + 1),
            [&](const int j, A& m) { m = math::fmax(m, sc * static_cast<A>(S(b, i, j))); },
            Kokkos::Max<A>(mx));
        constexpr bool keep = std::is_same_v<TP, A>;  // as in softmax_forward
        A sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, i + 1),
            [&](const int j, A& s) {
              const A ex = math::exp(sc * static_cast<A>(S(b, i, j)) - mx);
              if (keep) P(b, i, j) = static_cast<TP>(ex);  // not if constexpr: see above
              s += ex;
            },
            sum);
        const A inv = static_cast<A>(1) / sum;
        if constexpr (keep) team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, t), [&](const int j) {
          if (j > i) {
            P(b, i, j) = static_cast<TP>(A(0));
          } else if constexpr (keep) {
            P(b, i, j) = static_cast<TP>(static_cast<A>(P(b, i, j)) * inv);
          } else {
            P(b, i, j) = static_cast<TP>(math::exp(sc * static_cast<A>(S(b, i, j)) - mx) * inv);
          }
        });
      });
}

// dS = scale * P * (dP - sum_j P * dP) for j <= i, 0 where masked: the gradient with respect
// to the unscaled scores S of causal_softmax_forward.
template <class ExecSpace, class PV, class DPV, class DSV>
void causal_softmax_backward(const ExecSpace& space, const PV& P, const DPV& dP, double scale,
                             const DSV& dS) {
  static_assert(PV::rank == 3 && DPV::rank == 3 && DSV::rank == 3,
                "causal_softmax_backward: P[B,T,T], dP[B,T,T], dS[B,T,T]");
  assert_accessible<ExecSpace, PV, DPV, DSV>();
  const std::size_t B = P.extent(0), T = P.extent(1);
  require_shape("paraxis::causal_softmax_backward", "P", P, {B, T, T});
  require_shape("paraxis::causal_softmax_backward", "dP", dP, {B, T, T});
  require_shape("paraxis::causal_softmax_backward", "dS", dS, {B, T, T});
  using A = acc_t<value_t<PV>>;
  using TS = value_t<DSV>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const int t = static_cast<int>(T);
  const A sc = static_cast<A>(scale);
  Kokkos::parallel_for(
      "paraxis::causal_softmax_bwd", Policy(space, static_cast<int>(B * T), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int b = team.league_rank() / t, i = team.league_rank() % t;
        A dot = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, i + 1),
            [&](const int j, A& s) {
              s += static_cast<A>(P(b, i, j)) * static_cast<A>(dP(b, i, j));
            },
            dot);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, t), [&](const int j) {
          dS(b, i, j) = j <= i ? static_cast<TS>(sc * static_cast<A>(P(b, i, j)) *
                                                 (static_cast<A>(dP(b, i, j)) - dot))
                               : static_cast<TS>(A(0));
        });
      });
}

}  // namespace paraxis::kernels
