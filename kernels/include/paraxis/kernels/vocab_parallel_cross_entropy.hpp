// Vocabulary-parallel softmax cross-entropy (Megatron-LM's vocab_parallel_cross_entropy): each
// tensor-parallel rank holds logits[N, Vl] for the vocabulary columns [vocab_offset,
// vocab_offset + Vl) and no rank ever holds a full row. Columns whose global index is >= vocab
// are padding (the vocabulary rounded up to a multiple of tp) and take no part in the softmax.
//
// The loss is split into local passes; the caller reduces across the tensor-parallel group
// between them (these kernels never communicate):
//   1. vocab_parallel_ce_local_max      -> max_local[N]     caller: all-reduce max
//   2. vocab_parallel_ce_local_sumexp   -> sumexp_local[N], target_logit_local[N]
//                                                          caller: all-reduce sum (both)
//   3. vocab_parallel_ce_finish         -> lse[N] and the summed loss (identical on every rank)
//   backward: vocab_parallel_ce_backward (no communication: lse is already global)
// A shard may hold no valid column at all (a small vocabulary on many ranks): its local max is
// the lowest finite value and its sums are 0, the identities of the reductions.
// The row max and sum of exponentials are row_reduce.hpp's, as in cross_entropy.hpp: on host
// spaces its vectorized row loops, on devices a team per row (one thread per element
// backward).
#pragma once

#include <sstream>

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/cross_entropy.hpp"
#include "paraxis/kernels/math.hpp"
#include "paraxis/kernels/row_reduce.hpp"

namespace paraxis::kernels {

namespace detail {
// Number of this shard's columns that lie inside the vocabulary (0..Vl).
template <class LV>
int vocab_shard_valid(const char* kernel, const LV& logits, int vocab_offset, int vocab) {
  if (vocab < 1 || vocab_offset < 0) {
    std::ostringstream os;
    os << kernel << ": vocab = " << vocab << ", vocab_offset = " << vocab_offset
       << ", expected vocab >= 1 and vocab_offset >= 0";
    throw std::invalid_argument(os.str());
  }
  const long long vl = static_cast<long long>(logits.extent(1));
  const long long valid = static_cast<long long>(vocab) - vocab_offset;
  return static_cast<int>(valid < 0 ? 0 : (valid > vl ? vl : valid));
}
}  // namespace detail

// max_local(i) = max_{j < valid} logits(i, j), the lowest finite value when the shard holds
// no valid column (written).
template <class ExecSpace, class LV, class MV>
void vocab_parallel_ce_local_max(const ExecSpace& space, const LV& logits, int vocab_offset,
                                 int vocab, const MV& max_local) {
  static_assert(LV::rank == 2 && MV::rank == 1,
                "vocab_parallel_ce_local_max: logits[N,Vl], max_local[N]");
  assert_accessible<ExecSpace, LV, MV>();
  const char* k = "paraxis::vocab_parallel_ce_local_max";
  const std::size_t N = logits.extent(0);
  require_shape(k, "max_local", max_local, {N});
  const int vv = detail::vocab_shard_valid(k, logits, vocab_offset, vocab);
  using A = acc_t<value_t<LV>>;
  using MT = value_t<MV>;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(logits)) {
      Kokkos::parallel_for(
          "paraxis::vocab_parallel_ce_max", Kokkos::RangePolicy<ExecSpace>(space, 0, int(N)),
          [=](const int i) {
            max_local(i) = static_cast<MT>(
                vv > 0 ? detail::row_max<A>(vv, detail::row_as<A>(detail::row_ptr(logits, i)))
                       : math::lowest<A>());
          });
      return;
    }
  }
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  Kokkos::parallel_for(
      "paraxis::vocab_parallel_ce_max", Policy(space, static_cast<int>(N), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank();
        const A mx = detail::range_max<A>(Kokkos::TeamThreadRange(team, vv), [&](const int j) {
          return static_cast<A>(logits(i, j));
        });
        Kokkos::single(Kokkos::PerTeam(team),
                       [&]() { max_local(i) = static_cast<MT>(vv > 0 ? mx : math::lowest<A>()); });
      });
}

// Given the global row maximum gmax (after the max all-reduce):
//   sumexp_local(i)       = sum_{j < valid} exp(logits(i, j) - gmax(i))
//   target_logit_local(i) = logits(i, targets(i) - vocab_offset) if the target lies in this
//                           shard, else 0
// (written). Throws std::invalid_argument if a target lies outside [0, vocab).
template <class ExecSpace, class LV, class TV, class MV, class SV, class ZV>
void vocab_parallel_ce_local_sumexp(const ExecSpace& space, const LV& logits, const TV& targets,
                                    int vocab_offset, int vocab, const MV& gmax,
                                    const SV& sumexp_local, const ZV& target_logit_local) {
  static_assert(LV::rank == 2 && TV::rank == 1 && MV::rank == 1 && SV::rank == 1 && ZV::rank == 1,
                "vocab_parallel_ce_local_sumexp: logits[N,Vl], targets[N], gmax[N], "
                "sumexp_local[N], target_logit_local[N]");
  static_assert(std::is_same_v<value_t<TV>, int>, "vocab_parallel_ce_local_sumexp: int targets");
  assert_accessible<ExecSpace, LV, TV, MV, SV, ZV>();
  const char* k = "paraxis::vocab_parallel_ce_local_sumexp";
  const std::size_t N = logits.extent(0);
  require_shape(k, "targets", targets, {N});
  require_shape(k, "gmax", gmax, {N});
  require_shape(k, "sumexp_local", sumexp_local, {N});
  require_shape(k, "target_logit_local", target_logit_local, {N});
  const int vv = detail::vocab_shard_valid(k, logits, vocab_offset, vocab);
  detail::check_targets(space, k, targets, vocab);
  using A = acc_t<value_t<LV>>;
  using ST = value_t<SV>;
  using ZT = value_t<ZV>;
  const int off = vocab_offset;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(logits)) {
      Kokkos::parallel_for("paraxis::vocab_parallel_ce_sumexp",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, int(N)), [=](const int i) {
                             const auto* x = detail::row_ptr(logits, i);
                             sumexp_local(i) = static_cast<ST>(detail::row_sum_exp<A>(
                                 vv, static_cast<A>(gmax(i)), detail::row_as<A>(x)));
                             const int t = targets(i) - off;
                             target_logit_local(i) =
                                 static_cast<ZT>((t >= 0 && t < vv) ? static_cast<A>(x[t]) : A(0));
                           });
      return;
    }
  }
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  Kokkos::parallel_for(
      "paraxis::vocab_parallel_ce_sumexp", Policy(space, static_cast<int>(N), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank();
        const A sum =
            detail::range_sum_exp<A>(Kokkos::TeamThreadRange(team, vv), static_cast<A>(gmax(i)),
                                     [&](const int j) { return static_cast<A>(logits(i, j)); });
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          sumexp_local(i) = static_cast<ST>(sum);
          const int t = targets(i) - off;
          target_logit_local(i) =
              static_cast<ZT>((t >= 0 && t < vv) ? static_cast<A>(logits(i, t)) : A(0));
        });
      });
}

// After the sum all-reduces: lse(i) = gmax(i) + log(sumexp(i)) (written); returns the
// fixed-order sum over rows of lse(i) - target_logit(i), bitwise identical on every rank that
// holds the same reduced inputs.
template <class ExecSpace, class MV, class SV, class ZV, class LSEV>
acc_t<value_t<SV>> vocab_parallel_ce_finish(const ExecSpace& space, const MV& gmax,
                                            const SV& sumexp, const ZV& target_logit,
                                            const LSEV& lse) {
  static_assert(MV::rank == 1 && SV::rank == 1 && ZV::rank == 1 && LSEV::rank == 1,
                "vocab_parallel_ce_finish: gmax[N], sumexp[N], target_logit[N], lse[N]");
  assert_accessible<ExecSpace, MV, SV, ZV, LSEV>();
  const char* k = "paraxis::vocab_parallel_ce_finish";
  const std::size_t N = gmax.extent(0);
  require_shape(k, "sumexp", sumexp, {N});
  require_shape(k, "target_logit", target_logit, {N});
  require_shape(k, "lse", lse, {N});
  using A = acc_t<value_t<SV>>;
  using LT = value_t<LSEV>;
  Kokkos::parallel_for(
      "paraxis::vocab_parallel_ce_lse",
      Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<int>(N)), KOKKOS_LAMBDA(const int i) {
        lse(i) = static_cast<LT>(static_cast<A>(gmax(i)) + math::log(static_cast<A>(sumexp(i))));
      });
  const double total = detail::fixed_order_sum(
      space, "paraxis::vocab_parallel_ce_sum", N, KOKKOS_LAMBDA(const long long i) {
        return static_cast<double>(static_cast<A>(lse(i)) - static_cast<A>(target_logit(i)));
      });
  return static_cast<A>(total);
}

// dlogits(i, j) = scale * (softmax(i, j) - [vocab_offset + j == targets(i)]) for the shard's
// valid columns, 0 for padding columns (written). lse is the global one from
// vocab_parallel_ce_finish.
template <class ExecSpace, class LV, class TV, class SV, class DV>
void vocab_parallel_ce_backward(const ExecSpace& space, const LV& logits, const TV& targets,
                                const SV& lse, int vocab_offset, int vocab, double scale,
                                const DV& dlogits) {
  static_assert(LV::rank == 2 && TV::rank == 1 && SV::rank == 1 && DV::rank == 2,
                "vocab_parallel_ce_backward: logits[N,Vl], targets[N], lse[N], dlogits[N,Vl]");
  static_assert(std::is_same_v<value_t<TV>, int>, "vocab_parallel_ce_backward: int targets");
  assert_accessible<ExecSpace, LV, TV, SV, DV>();
  const char* k = "paraxis::vocab_parallel_ce_backward";
  const std::size_t N = logits.extent(0), Vl = logits.extent(1);
  require_shape(k, "targets", targets, {N});
  require_shape(k, "lse", lse, {N});
  require_shape(k, "dlogits", dlogits, {N, Vl});
  const int vv = detail::vocab_shard_valid(k, logits, vocab_offset, vocab);
  using A = acc_t<value_t<LV>>;
  using DT = value_t<DV>;
  const A sc = static_cast<A>(scale);
  const int off = vocab_offset;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(logits, dlogits)) {
      const int width = static_cast<int>(Vl);
      Kokkos::parallel_for("paraxis::vocab_parallel_ce_bwd",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, int(N)), [=](const int i) {
                             detail::ce_row_backward<A>(
                                 detail::row_ptr(logits, i), detail::row_ptr(dlogits, i), vv, width,
                                 static_cast<A>(lse(i)), sc, targets(i) - off);
                           });
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::vocab_parallel_ce_bwd",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(
          space, {0, 0}, {static_cast<int>(N), static_cast<int>(Vl)}),
      KOKKOS_LAMBDA(const int i, const int j) {
        if (j >= vv) {
          dlogits(i, j) = static_cast<DT>(A(0));
          return;
        }
        const A p = math::vexp_bounded(static_cast<A>(logits(i, j)) - static_cast<A>(lse(i)));
        const A onehot = off + j == targets(i) ? A(1) : A(0);
        dlogits(i, j) = static_cast<DT>(sc * (p - onehot));
      });
}

}  // namespace paraxis::kernels
