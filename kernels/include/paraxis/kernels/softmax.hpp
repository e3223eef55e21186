// Row softmax and the batched causal (masked, scaled) softmax of attention, forward and
// backward. Two paths, chosen at compile time by where the execution space runs:
//   - host (Serial, OpenMP, Threads; row_lanes.hpp): a RangePolicy over rows; each row is
//     plain loops over raw row pointers that the compiler vectorizes: the max as an integer
//     max of order-preserving keys of the floats (exact, so any order gives the same bits),
//     exponentials by math::vexp (no libm call), sums and the backward's dot product in a
//     fixed number of lanes combined in a fixed order (row_lanes.hpp: lane_sum). A team per
//     row on a host space runs one element at a time: 1 GB/s against a 50 GB/s copy.
//   - device (and host Views whose rows are strided): one team per row; max, sum of
//     exponentials and the backward's dot product are team reductions (fixed order for a
//     fixed team size, no atomics).
// Both are deterministic: the same bits on every call (and, for the host path, whatever the
// thread count). Both use math::vexp.
//
// In-place use is allowed: P may alias S, and dS may alias dP. Within a pass each element is
// read by the thread (host: the loop iteration) that writes it; a row's earlier passes finish
// before later ones start (their reduction result is only known once every element has
// contributed, and on the device a team barrier separates the exponentials stored in P from
// their rescaling).
#pragma once

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/math.hpp"
#include "paraxis/kernels/row_reduce.hpp"

namespace paraxis::kernels {

namespace detail {

// Exponentials kept on the stack per row when P is narrower than the accumulation type (bf16):
// rows up to this long (32 KiB of floats on the stack; attention rows are the sequence, GPT-2
// and Llama rows up to 8,192) compute each exponential once; longer rows recompute the rest.
inline constexpr int kSoftmaxRowBuffer = 8192;

// One row of the forward pass on the host: p[j] = e_j / sum_k e_k for j < len, where
// e_j = exp(x_j - max_k x_k), x_j = sc s[j] when Scaled (s[j] otherwise); p[j] = 0 for
// len <= j < width (the causal mask). p may alias s.
// A masked row (len < width) is summed up to len rounded up to a multiple of the lanes (at most
// width), the masked elements in that stretch taking part as exponential 0: whole lane blocks
// instead of a scalar tail per row (the causal rows have every length), and those elements are
// zeros in P anyway.
template <class A>
inline int padded_length(int len, int width) {
  constexpr int L = kLanes<A>;
  const int n = (len + L - 1) / L * L;
  return len == width ? len : (n < width ? n : width);
}

template <bool Scaled, class A, class TS, class TP>
void softmax_row_host(const TS* s, TP* p, int len_, int width, A sc) {
  const int len = padded_length<A>(len_, width), valid = len_;
  auto x = [s, sc](int j) { return Scaled ? sc * static_cast<A>(s[j]) : static_cast<A>(s[j]); };
  const A mx = row_max<A>(valid, x);
  A inv;
  if constexpr (std::is_same_v<TP, A>) {
    // P holds A exactly: keep the exponentials in P and rescale (one exp per element).
    inv = static_cast<A>(1) / row_sum_exp_into<A>(valid, len, mx, x, p);
    for (int j = 0; j < len; ++j) p[j] *= inv;
  } else {
    // Narrower P: round once, from the exponential in A (buffered, or recomputed).
    A buf[kSoftmaxRowBuffer];
    const int nb = len < kSoftmaxRowBuffer ? len : kSoftmaxRowBuffer;
    A sum = row_sum_exp_into<A>(valid < nb ? valid : nb, nb, mx, x, buf);
    // Past the buffer (rows over kSoftmaxRowBuffer) masked elements read as the lowest finite
    // value, exponential 0. Their input is read all the same (inside the row): a conditional
    // read is a masked load GCC 12 does not vectorize.
    auto xm = [&](int j) {
      const A v = x(j);
      return j < valid ? v : math::lowest<A>();
    };
    if (len > nb) sum += row_sum_exp<A>(len - nb, mx, [&](int j) { return xm(nb + j); });
    inv = static_cast<A>(1) / sum;
    store_row(p, nb, [&](int j) { return buf[j] * inv; });
    for (int j = nb; j < len; ++j) p[j] = static_cast<TP>(math::vexp_bounded(xm(j) - mx) * inv);
  }
  for (int j = len; j < width; ++j) p[j] = static_cast<TP>(A(0));
}

// One row of the backward pass on the host: dot = sum_{j < len} p[j] dp[j], then
// ds[j] = p[j] (dp[j] - dot) (times sc first when Scaled, as the causal kernel has it) for
// j < len and 0 for len <= j < width. ds may alias dp.
// Masked rows (len < width): the dot in lane_sum's order over the row padded as in
// softmax_row_host (lane_sum_masked: the padding's zero terms are not added), the unmasked
// prefix of dS computed, the rest of the row zero-filled.
template <bool Scaled, class A, class TP, class TDP, class TS>
void softmax_backward_row_host(const TP* p, const TDP* dp, TS* ds, int len_, int width, A sc) {
  const int len = padded_length<A>(len_, width), valid = len_;
  auto pdp = [&](int j) { return static_cast<A>(p[j]) * static_cast<A>(dp[j]); };
  auto grad = [&](int j, A dot) {
    const A pj = Scaled ? sc * static_cast<A>(p[j]) : static_cast<A>(p[j]);
    return pj * (static_cast<A>(dp[j]) - dot);
  };
  if (len == valid) {  // no select (a third faster in bf16); masked past len when len < width
    const A dot = lane_sum<A>(len, pdp);
    store_row(ds, len, [&](int j) { return grad(j, dot); });
    for (int j = len; j < width; ++j) ds[j] = static_cast<TS>(A(0));
    return;
  }
  // Whole vector blocks, the select only in the mask's block (0.35 -> 0.14 ns an element in L2,
  // fp32). Each term p dp is added to its lane as the unmasked rows add it (one FMA where the
  // compiler contracts, as GCC does by default). Bitwise the former select-per-block code for
  // bf16 P and dP (products exact in fp32 for P in [0, 1], unless below FLT_MIN); fp32, fp64 masked
  // rows differ from it by the products' roundings, which GCC 12 had applied in some lanes and
  // not others by row length (docs/perf-log/2026-12-05-kernels-round6.md).
  const A dot = lane_sum_masked<A>(len, valid, [&](int j, bool in) {
    return (in ? static_cast<A>(p[j]) : A(0)) * (in ? static_cast<A>(dp[j]) : A(0));
  });
  store_row(ds, valid, [&](int j) { return grad(j, dot); });
  for (int j = valid; j < width; ++j) ds[j] = static_cast<TS>(A(0));
}

// Row (b, i) of a rank-3 View as a pointer, and whether the last index has unit stride.
template <class V>
typename V::pointer_type row_ptr3(const V& v, std::size_t b, std::size_t i) {
  return v.data() + b * v.stride(0) + i * v.stride(1);
}
template <class... Vs>
bool rows_contiguous3(const Vs&... vs) {
  return ((vs.extent(2) <= 1 || vs.stride(2) == 1) && ...);
}

}  // namespace detail

// P(r, :) = softmax(S(r, :)), max-subtracted.
template <class ExecSpace, class SV, class PV>
void softmax_forward(const ExecSpace& space, const SV& S, const PV& P) {
  static_assert(SV::rank == 2 && PV::rank == 2, "softmax_forward: S[R,C], P[R,C]");
  assert_accessible<ExecSpace, SV, PV>();
  require_shape("paraxis::softmax_forward", "P", P, {S.extent(0), S.extent(1)});
  using A = acc_t<value_t<SV>>;
  using TP = value_t<PV>;
  const int c = static_cast<int>(S.extent(1));
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(S, P)) {
      Kokkos::parallel_for("paraxis::softmax_fwd",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, int(S.extent(0))),
                           [=](const int r) {
                             detail::softmax_row_host<false>(detail::row_ptr(S, r),
                                                             detail::row_ptr(P, r), c, c, A(1));
                           });
      return;
    }
  }
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  Kokkos::parallel_for(
      "paraxis::softmax_fwd", Policy(space, static_cast<int>(S.extent(0)), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int r = team.league_rank();
        const auto range = Kokkos::TeamThreadRange(team, c);
        auto x = [&](const int j) { return static_cast<A>(S(r, j)); };
        const A mx = detail::range_max<A>(range, x);
        // When P holds A exactly, keep the exponentials in P and rescale: one exp per element
        // instead of two (bitwise the same result). Narrower P (bf16) recomputes them rather
        // than rounding twice.
        constexpr bool keep = std::is_same_v<TP, A>;
        const A sum = detail::range_sum_exp<A>(range, mx, x, [&](const int j, const A ex) {
          // Plain `if` (folded, keep is constexpr): CUDA's extended lambdas may not
          // first-capture a variable (here P) inside an `if constexpr`.
          if (keep) P(r, j) = static_cast<TP>(ex);
        });
        const A inv = static_cast<A>(1) / sum;
        if constexpr (keep)
          team.team_barrier();  // P written above may be rescaled by another thread
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, c), [&](const int j) {
          if constexpr (keep)
            P(r, j) = static_cast<TP>(static_cast<A>(P(r, j)) * inv);
          else
            P(r, j) = static_cast<TP>(math::vexp_bounded(static_cast<A>(S(r, j)) - mx) * inv);
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
  const int c = static_cast<int>(P.extent(1));
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(P, dP, dS)) {
      Kokkos::parallel_for(
          "paraxis::softmax_bwd", Kokkos::RangePolicy<ExecSpace>(space, 0, int(P.extent(0))),
          [=](const int r) {
            detail::softmax_backward_row_host<false>(detail::row_ptr(P, r), detail::row_ptr(dP, r),
                                                     detail::row_ptr(dS, r), c, c, A(1));
          });
      return;
    }
  }
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  Kokkos::parallel_for(
      "paraxis::softmax_bwd", Policy(space, static_cast<int>(P.extent(0)), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int r = team.league_rank();
        const A dot = detail::range_sum<A>(Kokkos::TeamThreadRange(team, c), [&](const int j) {
          return static_cast<A>(P(r, j)) * static_cast<A>(dP(r, j));
        });
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
  const int t = static_cast<int>(T);
  const A sc = static_cast<A>(scale);
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous3(S, P)) {
      Kokkos::parallel_for(
          "paraxis::causal_softmax_fwd", Kokkos::RangePolicy<ExecSpace>(space, 0, int(B * T)),
          [=](const int row) {
            const int b = row / t, i = row % t;
            detail::softmax_row_host<true>(detail::row_ptr3(S, b, i), detail::row_ptr3(P, b, i),
                                           i + 1, t, sc);
          });
      return;
    }
  }
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  Kokkos::parallel_for(
      "paraxis::causal_softmax_fwd", Policy(space, static_cast<int>(B * T), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int b = team.league_rank() / t, i = team.league_rank() % t;
        const auto range = Kokkos::TeamThreadRange(team, i + 1);
        auto x = [&](const int j) { return sc * static_cast<A>(S(b, i, j)); };
        const A mx = detail::range_max<A>(range, x);
        constexpr bool keep = std::is_same_v<TP, A>;  // as in softmax_forward
        const A sum = detail::range_sum_exp<A>(range, mx, x, [&](const int j, const A ex) {
          if (keep) P(b, i, j) = static_cast<TP>(ex);  // not if constexpr: see above
        });
        const A inv = static_cast<A>(1) / sum;
        if constexpr (keep) team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, t), [&](const int j) {
          if (j > i) {
            P(b, i, j) = static_cast<TP>(A(0));
          } else if constexpr (keep) {
            P(b, i, j) = static_cast<TP>(static_cast<A>(P(b, i, j)) * inv);
          } else {
            P(b, i, j) =
                static_cast<TP>(math::vexp_bounded(sc * static_cast<A>(S(b, i, j)) - mx) * inv);
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
  const int t = static_cast<int>(T);
  const A sc = static_cast<A>(scale);
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous3(P, dP, dS)) {
      Kokkos::parallel_for("paraxis::causal_softmax_bwd",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, int(B * T)),
                           [=](const int row) {
                             const int b = row / t, i = row % t;
                             detail::softmax_backward_row_host<true>(
                                 detail::row_ptr3(P, b, i), detail::row_ptr3(dP, b, i),
                                 detail::row_ptr3(dS, b, i), i + 1, t, sc);
                           });
      return;
    }
  }
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  Kokkos::parallel_for(
      "paraxis::causal_softmax_bwd", Policy(space, static_cast<int>(B * T), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int b = team.league_rank() / t, i = team.league_rank() % t;
        const A dot = detail::range_sum<A>(Kokkos::TeamThreadRange(team, i + 1), [&](const int j) {
          return static_cast<A>(P(b, i, j)) * static_cast<A>(dP(b, i, j));
        });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, t), [&](const int j) {
          dS(b, i, j) = j <= i ? static_cast<TS>(sc * static_cast<A>(P(b, i, j)) *
                                                 (static_cast<A>(dP(b, i, j)) - dot))
                               : static_cast<TS>(A(0));
        });
      });
}

}  // namespace paraxis::kernels
