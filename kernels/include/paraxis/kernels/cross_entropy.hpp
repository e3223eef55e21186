// Softmax cross-entropy over (possibly padded) vocabulary logits. Columns j >= vocab_valid are
// padding (a vocabulary rounded up for tensor-parallel shards) and take no part in the
// softmax: they get no probability and a zero gradient. The forward pass returns the summed
// loss as a host value through detail::fixed_order_sum, so it is bitwise reproducible.
//
// Two paths, chosen at compile time by where the execution space runs (as softmax.hpp):
//   - host (Serial, OpenMP, Threads): a RangePolicy over rows, each row plain loops over raw
//     pointers that the compiler vectorizes: row_reduce.hpp's row_max and row_sum_exp. A team
//     per row on a host space runs one element at a time (0.4 GB/s against a 26 GB/s copy).
//   - device (and host Views whose rows are strided): a team per row for the forward pass
//     (row_reduce.hpp's range_max and range_sum_exp), one thread per element backward.
// Both deterministic; both use math::vexp. vocab_parallel_cross_entropy.hpp shares the rows.
#pragma once

#include <sstream>

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/math.hpp"
#include "paraxis/kernels/row_reduce.hpp"

namespace paraxis::kernels {

namespace detail {
template <class ExecSpace, class TV>
void check_targets(const ExecSpace& space, const char* kernel, const TV& targets, int vocab_valid) {
  const double bad = fixed_order_sum(
      space, "paraxis::cross_entropy_check_targets", targets.extent(0),
      KOKKOS_LAMBDA(const long long k) {
        const int t = targets(k);
        return (t < 0 || t >= vocab_valid) ? 1.0 : 0.0;
      });
  if (bad > 0) {
    std::ostringstream os;
    os << kernel << ": " << static_cast<long long>(bad)
       << " target(s) outside [0, vocab_valid) = [0, " << vocab_valid << ")";
    throw std::invalid_argument(os.str());
  }
}

// The row of the host path's backward pass: d[j] = sc (exp(x[j] - lse) - [j == target]) for j < n
// (target outside [0, n): no one-hot term), d[j] = 0 for n <= j < width.
template <class A, class T, class D>
inline void ce_row_backward(const T* x, D* d, int n, int width, A lse, A sc, int target) {
  store_row(d, n, [&](int j) { return sc * math::vexp_bounded(static_cast<A>(x[j]) - lse); });
  if (target >= 0 && target < n)
    d[target] = static_cast<D>(sc * (math::vexp_bounded(static_cast<A>(x[target]) - lse) - A(1)));
  for (int j = n; j < width; ++j) d[j] = static_cast<D>(A(0));
}

template <class LV>
void check_vocab_valid(const char* kernel, const LV& logits, int vocab_valid) {
  if (vocab_valid < 1 || static_cast<std::size_t>(vocab_valid) > logits.extent(1)) {
    std::ostringstream os;
    os << kernel << ": vocab_valid = " << vocab_valid << ", expected 1.." << logits.extent(1)
       << " for logits of shape " << shape_string(logits);
    throw std::invalid_argument(os.str());
  }
}
}  // namespace detail

// lse(i) = log sum_{j < vocab_valid} exp(logits(i, j)) (written); returns
// sum_i (lse(i) - logits(i, targets(i))). Throws std::invalid_argument if a target lies
// outside [0, vocab_valid) (checked on the device before any logit is read).
template <class ExecSpace, class LV, class TV, class SV>
acc_t<value_t<LV>> cross_entropy_forward(const ExecSpace& space, const LV& logits,
                                         const TV& targets, int vocab_valid, const SV& lse) {
  static_assert(LV::rank == 2 && TV::rank == 1 && SV::rank == 1,
                "cross_entropy_forward: logits[N,V], targets[N], lse[N]");
  static_assert(std::is_same_v<value_t<TV>, int>, "cross_entropy_forward: int targets");
  assert_accessible<ExecSpace, LV, TV, SV>();
  const char* k = "paraxis::cross_entropy_forward";
  const std::size_t N = logits.extent(0);
  require_shape(k, "targets", targets, {N});
  require_shape(k, "lse", lse, {N});
  detail::check_vocab_valid(k, logits, vocab_valid);
  detail::check_targets(space, k, targets, vocab_valid);
  using A = acc_t<value_t<LV>>;
  using LT = value_t<SV>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const int vv = vocab_valid;
  bool done = false;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(logits)) {
      Kokkos::parallel_for("paraxis::cross_entropy_fwd",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, int(N)), [=](const int i) {
                             const auto x = detail::row_as<A>(detail::row_ptr(logits, i));
                             const A mx = detail::row_max<A>(vv, x);
                             lse(i) =
                                 static_cast<LT>(mx + math::log(detail::row_sum_exp<A>(vv, mx, x)));
                           });
      done = true;
    }
  }
  if (!done)
    Kokkos::parallel_for(
        "paraxis::cross_entropy_fwd", Policy(space, static_cast<int>(N), Kokkos::AUTO),
        KOKKOS_LAMBDA(const Member& team) {
          const int i = team.league_rank();
          const auto range = Kokkos::TeamThreadRange(team, vv);
          auto x = [&](const int j) { return static_cast<A>(logits(i, j)); };
          const A mx = detail::range_max<A>(range, x);
          const A sum = detail::range_sum_exp<A>(range, mx, x);
          Kokkos::single(Kokkos::PerTeam(team),
                         [&]() { lse(i) = static_cast<LT>(mx + math::log(sum)); });
        });
  const double total = detail::fixed_order_sum(
      space, "paraxis::cross_entropy_sum", N, KOKKOS_LAMBDA(const long long i) {
        return static_cast<double>(static_cast<A>(lse(i)) - static_cast<A>(logits(i, targets(i))));
      });
  return static_cast<A>(total);
}

// dlogits(i, j) = scale * (softmax(i, j) - [j == targets(i)]) for j < vocab_valid, 0 for
// padding columns (written). lse comes from cross_entropy_forward.
template <class ExecSpace, class LV, class TV, class SV, class DV>
void cross_entropy_backward(const ExecSpace& space, const LV& logits, const TV& targets,
                            const SV& lse, int vocab_valid, double scale, const DV& dlogits) {
  static_assert(LV::rank == 2 && TV::rank == 1 && SV::rank == 1 && DV::rank == 2,
                "cross_entropy_backward: logits[N,V], targets[N], lse[N], dlogits[N,V]");
  static_assert(std::is_same_v<value_t<TV>, int>, "cross_entropy_backward: int targets");
  assert_accessible<ExecSpace, LV, TV, SV, DV>();
  const char* k = "paraxis::cross_entropy_backward";
  const std::size_t N = logits.extent(0), V = logits.extent(1);
  require_shape(k, "targets", targets, {N});
  require_shape(k, "lse", lse, {N});
  require_shape(k, "dlogits", dlogits, {N, V});
  detail::check_vocab_valid(k, logits, vocab_valid);
  using A = acc_t<value_t<LV>>;
  using DT = value_t<DV>;
  const A sc = static_cast<A>(scale);
  const int vv = vocab_valid;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(logits, dlogits)) {
      const int width = static_cast<int>(V);
      Kokkos::parallel_for("paraxis::cross_entropy_bwd",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, int(N)), [=](const int i) {
                             detail::ce_row_backward<A>(detail::row_ptr(logits, i),
                                                        detail::row_ptr(dlogits, i), vv, width,
                                                        static_cast<A>(lse(i)), sc, targets(i));
                           });
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::cross_entropy_bwd",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0},
                                                        {static_cast<int>(N), static_cast<int>(V)}),
      KOKKOS_LAMBDA(const int i, const int j) {
        if (j >= vv) {
          dlogits(i, j) = static_cast<DT>(A(0));
          return;
        }
        const A p = math::vexp_bounded(static_cast<A>(logits(i, j)) - static_cast<A>(lse(i)));
        const A onehot = j == targets(i) ? A(1) : A(0);
        dlogits(i, j) = static_cast<DT>(sc * (p - onehot));
      });
}

}  // namespace paraxis::kernels
