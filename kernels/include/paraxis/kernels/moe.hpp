// Mixture-of-Experts kernels: top-k routing, capacity-limited dispatch into an expert-major
// permuted buffer, gather/combine (forward and backward) and the auxiliary load-balancing
// loss. The caller owns the router (linear layer + row softmax giving probs[N,E]) and the
// expert FFNs; these kernels move rows between token order and expert order.
//
// Vocabulary. N tokens (rows of one micro-batch), E experts, k = top_k, H hidden.
//   - Gate weights are the selected softmax probabilities themselves, not renormalised over
//     the k selected experts.
//   - An assignment is a (token n, slot j) pair, j < k. Assignment order is token-major:
//     (0,0), (0,1), ..., (1,0), ...; assignment a = n*k + j.
//   - Capacity (per expert, per call = per micro-batch) is applied at the source in that
//     order: the first `capacity` assignments to expert e are kept, later ones are dropped
//     and counted. capacity == 0 means dropless.
//   - Kept assignments are laid out expert-major in a permuted buffer of P = sum of kept
//     rows: expert e owns rows [offsets(e), offsets(e+1)), and within an expert the rows
//     follow assignment order. Buffers passed as "[>=P,H]" may be longer than P (sized for
//     the worst case); rows at and beyond P are neither read nor written.
//   - A token whose every slot was dropped gets Y = 0 from the combine: the residual
//     connection around the MoE layer carries it.
//
// Determinism. No floating-point atomics anywhere: every output element has one owner
// thread that sums in a fixed order (slots j ascending, hidden index ascending, tokens
// ascending; on host spaces dgate's sum over the hidden index runs in fixed lanes,
// row_lanes.hpp), so repeated calls are bitwise identical on any backend. On host spaces the
// gather/combine run one output row per iteration (moe_host_rows.hpp). The routing is a
// blocked counting sort with integer counters only, each owned by one thread.
//
// Auxiliary loss (Switch Transformer, Fedus et al. 2021, eq. 4, generalised to top-k):
//   L_aux = E * sum_e f_e * Pbar_e,  f_e = requested_e / (N*k),  Pbar_e = (1/N) sum_n probs(n,e)
// requested_e counts assignments before capacity. The statistics (requested, prob_sum) are
// produced per rank by moe_router_stats so they can be summed across the ranks that hold
// parts of one micro-batch before moe_aux_loss_value combines them. For uniform probs 1/E
// and perfectly balanced routing L_aux = E * E * (1/E) * (1/E) = 1, its minimum under
// balanced routing. f is a count and has no gradient; the backward treats it as constant.
//
// Errors (host side, std::invalid_argument): shape mismatches, k outside [1, E], N above the
// routing's max_tokens, negative capacity, and expert indices outside [0, E) (the latter
// checked on device with an integer reduction before the routing is touched).
#pragma once

#include <algorithm>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/moe_host_rows.hpp"

namespace paraxis::kernels {

namespace detail {

// Accumulate in fp64 when any operand is fp64, else in fp32 (fp32 and bf16 storage).
template <class... Vs>
using moe_acc_t = std::conditional_t<(std::is_same_v<value_t<Vs>, double> || ...), double, float>;

// Assignments per routing block: one thread counts, then places, one block of consecutive
// assignments, which keeps the order-dependent part parallel without atomics.
constexpr int moe_routing_block = 64;

inline int moe_routing_blocks(long assignments) {
  return static_cast<int>((assignments + moe_routing_block - 1) / moe_routing_block);
}

[[noreturn]] inline void moe_fail(const char* kernel, const std::string& what) {
  throw std::invalid_argument(std::string(kernel) + ": " + what);
}

// Buffers in expert order may be longer than P: check rows >= P and the hidden extent.
template <class V>
void require_rows_at_least(const char* kernel, const char* arg, const V& v, int rows,
                           std::size_t hidden) {
  static_assert(V::rank == 2, "paraxis moe: expected a rank-2 View");
  if (v.extent(0) < static_cast<std::size_t>(rows) || v.extent(1) != hidden) {
    std::ostringstream os;
    os << arg << " has shape " << shape_string(v) << ", expected [>=" << rows << ',' << hidden
       << ']';
    moe_fail(kernel, os.str());
  }
}

template <class R>
void require_tokens(const char* kernel, const char* arg, std::size_t n, const R& r) {
  if (n != static_cast<std::size_t>(r.tokens)) {
    std::ostringstream os;
    os << arg << " has " << n << " tokens, but the routing was built for " << r.tokens;
    moe_fail(kernel, os.str());
  }
}

}  // namespace detail

// Routing of one micro-batch, built by moe_build_routing. Device arrays are sized for
// max_tokens at construction so one object serves every micro-batch without reallocating.
template <class Space>
struct MoeRouting {
  using host_int1 = typename View1<int, Space>::HostMirror;

  int max_tokens = 0, experts = 0, k = 0;
  View1<int, Space> counts;        // [E]   kept rows per expert
  View1<int, Space> requested;     // [E]   assignments before capacity
  View1<int, Space> dropped;       // [E]   requested - counts
  View1<int, Space> offsets;       // [E+1] first permuted row of each expert; offsets(E) = P
  View1<int, Space> slot_token;    // [max_tokens*k] token of permuted row p (p < P)
  View1<int, Space> slot_k;        // [max_tokens*k] slot j of permuted row p (p < P)
  View2<int, Space> token_slot;    // [max_tokens,k] permuted row of (n,j), -1 if dropped
  View1<int, Space> block_counts;  // scratch: per (routing block, expert) counters
  host_int1 offsets_host, counts_host, dropped_host;  // filled by moe_build_routing
  int rows = 0;                                       // P of the last build
  int tokens = 0;                                     // N of the last build

  MoeRouting() = default;
  MoeRouting(int max_tokens_, int experts_, int k_)
      : max_tokens(max_tokens_), experts(experts_), k(k_) {
    if (max_tokens_ < 0 || experts_ < 1 || k_ < 1 || k_ > experts_) {
      std::ostringstream os;
      os << "MoeRouting: need max_tokens >= 0, experts >= 1 and 1 <= k <= experts, got "
         << "max_tokens=" << max_tokens_ << " experts=" << experts_ << " k=" << k_;
      throw std::invalid_argument(os.str());
    }
    const long slots = static_cast<long>(max_tokens_) * k_;
    counts = View1<int, Space>("paraxis::moe_routing::counts", experts_);
    requested = View1<int, Space>("paraxis::moe_routing::requested", experts_);
    dropped = View1<int, Space>("paraxis::moe_routing::dropped", experts_);
    offsets = View1<int, Space>("paraxis::moe_routing::offsets", experts_ + 1);
    slot_token = View1<int, Space>("paraxis::moe_routing::slot_token", slots);
    slot_k = View1<int, Space>("paraxis::moe_routing::slot_k", slots);
    token_slot = View2<int, Space>("paraxis::moe_routing::token_slot", max_tokens_, k_);
    block_counts =
        View1<int, Space>("paraxis::moe_routing::block_counts",
                          static_cast<long>(detail::moe_routing_blocks(slots)) * experts_);
    offsets_host = Kokkos::create_mirror_view(offsets);
    counts_host = Kokkos::create_mirror_view(counts);
    dropped_host = Kokkos::create_mirror_view(dropped);
  }
};

// expert_idx(n, j), gate(n, j): the k largest probs of row n in descending order; equal probs
// go to the lower expert index (strict comparison while scanning e upwards). O(k*E) per row,
// one thread per row: k and E are small. NaN probs have no defined rank.
template <class ExecSpace, class PV, class IV, class GV>
void topk_forward(const ExecSpace& space, const PV& probs, int k, const IV& expert_idx,
                  const GV& gate) {
  static_assert(PV::rank == 2 && IV::rank == 2 && GV::rank == 2, "topk_forward: rank-2 Views");
  static_assert(std::is_same_v<typename IV::value_type, int>, "topk_forward: int expert_idx");
  assert_accessible<ExecSpace, PV, IV, GV>();
  const int N = static_cast<int>(probs.extent(0));
  const int E = static_cast<int>(probs.extent(1));
  if (k < 1 || k > E) {
    std::ostringstream os;
    os << "k = " << k << " outside [1, " << E << "] (experts)";
    detail::moe_fail("topk_forward", os.str());
  }
  require_shape("topk_forward", "expert_idx", expert_idx, {std::size_t(N), std::size_t(k)});
  require_shape("topk_forward", "gate", gate, {std::size_t(N), std::size_t(k)});
  using A = acc_t<value_t<PV>>;
  using G = value_t<GV>;
  Kokkos::parallel_for(
      "paraxis::moe_topk_fwd", Kokkos::RangePolicy<ExecSpace>(space, 0, N),
      KOKKOS_LAMBDA(const int n) {
        for (int j = 0; j < k; ++j) {
          int best = -1;
          A best_p = A(0);
          for (int e = 0; e < E; ++e) {
            bool taken = false;
            for (int i = 0; i < j; ++i) taken = taken || expert_idx(n, i) == e;
            if (taken) continue;
            const A p = static_cast<A>(probs(n, e));
            if (best < 0 || p > best_p) {
              best = e;
              best_p = p;
            }
          }
          expert_idx(n, j) = best;
          gate(n, j) = static_cast<G>(best_p);
        }
      });
}

// Routing replay (Megatron-LM's "routing replay"): follow choices made elsewhere (another run's
// recorded routing) instead of the router's own. On entry expert_idx holds the router's own
// top-k (topk_forward); forced[N,k] the choices to follow. Returns the number of tokens whose
// own top-k, in order, differs from the forced one (the flips), then overwrites expert_idx
// with forced and gate(n, j) with the router's own probability of forced(n, j), converted as
// topk_forward converts it (so replaying a run's own choices is bitwise a no-op). Forced
// indices must lie in [0, E) and be distinct within a row: checked on device (an integer
// reduction) before anything is written; std::invalid_argument naming the first bad row.
template <class ExecSpace, class PV, class FV, class IV, class GV>
long topk_replay(const ExecSpace& space, const PV& probs, const FV& forced, const IV& expert_idx,
                 const GV& gate) {
  static_assert(PV::rank == 2 && FV::rank == 2 && IV::rank == 2 && GV::rank == 2,
                "topk_replay: rank-2 Views");
  static_assert(std::is_same_v<typename IV::value_type, int>, "topk_replay: int expert_idx");
  assert_accessible<ExecSpace, PV, FV, IV, GV>();
  constexpr const char* kernel = "topk_replay";
  const int N = static_cast<int>(probs.extent(0));
  const int E = static_cast<int>(probs.extent(1));
  const int k = static_cast<int>(expert_idx.extent(1));
  require_shape(kernel, "expert_idx", expert_idx, {std::size_t(N), std::size_t(k)});
  require_shape(kernel, "forced", forced, {std::size_t(N), std::size_t(k)});
  require_shape(kernel, "gate", gate, {std::size_t(N), std::size_t(k)});
  int bad = 0;
  Kokkos::parallel_reduce(
      "paraxis::moe_topk_replay_check", Kokkos::RangePolicy<ExecSpace>(space, 0, N),
      KOKKOS_LAMBDA(const int n, int& count) {
        bool ok = true;
        for (int j = 0; j < k; ++j) {
          const int e = forced(n, j);
          ok = ok && e >= 0 && e < E;
          for (int i = 0; i < j; ++i) ok = ok && forced(n, i) != e;
        }
        if (!ok) ++count;
      },
      bad);
  if (bad > 0) {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), forced);
    std::ostringstream os;
    for (int n = 0; n < N; ++n) {
      bool ok = true;
      for (int j = 0; j < k; ++j) {
        ok = ok && h(n, j) >= 0 && h(n, j) < E;
        for (int i = 0; i < j; ++i) ok = ok && h(n, i) != h(n, j);
      }
      if (ok) continue;
      os << bad << " token(s) with forced experts outside [0, " << E
         << ") or repeated; the first is token " << n << ": (";
      for (int j = 0; j < k; ++j) os << (j ? "," : "") << h(n, j);
      os << ')';
      break;
    }
    detail::moe_fail(kernel, os.str());
  }
  using A = acc_t<value_t<PV>>;
  using G = value_t<GV>;
  long flips = 0;
  Kokkos::parallel_reduce(
      "paraxis::moe_topk_replay", Kokkos::RangePolicy<ExecSpace>(space, 0, N),
      KOKKOS_LAMBDA(const int n, long& count) {
        bool same = true;
        for (int j = 0; j < k; ++j) {
          const int e = forced(n, j);
          same = same && expert_idx(n, j) == e;
          expert_idx(n, j) = e;
          gate(n, j) = static_cast<G>(static_cast<A>(probs(n, e)));
        }
        if (!same) ++count;
      },
      flips);
  return flips;
}

// dprobs(n, e) = sum of dgate(n, j) over the slots j that chose e (one, for a valid top-k),
// 0 elsewhere. Overwrites dprobs. One thread per row, slots summed in order.
template <class ExecSpace, class GV, class IV, class PV>
void topk_backward(const ExecSpace& space, const GV& dgate, const IV& expert_idx,
                   const PV& dprobs) {
  static_assert(PV::rank == 2 && IV::rank == 2 && GV::rank == 2, "topk_backward: rank-2 Views");
  assert_accessible<ExecSpace, GV, IV, PV>();
  const int N = static_cast<int>(dprobs.extent(0));
  const int E = static_cast<int>(dprobs.extent(1));
  const int k = static_cast<int>(expert_idx.extent(1));
  require_shape("topk_backward", "expert_idx", expert_idx, {std::size_t(N), std::size_t(k)});
  require_shape("topk_backward", "dgate", dgate, {std::size_t(N), std::size_t(k)});
  using A = detail::moe_acc_t<GV, PV>;
  using T = value_t<PV>;
  Kokkos::parallel_for(
      "paraxis::moe_topk_bwd", Kokkos::RangePolicy<ExecSpace>(space, 0, N),
      KOKKOS_LAMBDA(const int n) {
        for (int e = 0; e < E; ++e) {
          A s = A(0);
          for (int j = 0; j < k; ++j)
            if (expert_idx(n, j) == e) s += static_cast<A>(dgate(n, j));
          dprobs(n, e) = static_cast<T>(s);
        }
      });
}

// Builds the routing of expert_idx[N,k] under `capacity` (0 = dropless). A blocked, stable
// counting sort: (1) each block of consecutive assignments counts its experts; (2) one thread
// per expert turns the block counts into running prefixes (giving requested, counts,
// dropped); (3) offsets from counts; (4) each block re-walks its assignments and gives each
// its rank within its expert, which decides kept-or-dropped and its permuted row. Ranks are
// exactly the position in assignment order, so the result does not depend on scheduling.
// Ends with offsets/counts/dropped copied to the host mirrors (and a fence).
template <class ExecSpace, class IV, class Space>
void moe_build_routing(const ExecSpace& space, const IV& expert_idx, int capacity,
                       MoeRouting<Space>& r) {
  static_assert(IV::rank == 2, "moe_build_routing: rank-2 expert_idx");
  assert_accessible<ExecSpace, IV, View1<int, Space>>();
  constexpr const char* kernel = "moe_build_routing";
  const int N = static_cast<int>(expert_idx.extent(0));
  const int k = r.k;
  const int E = r.experts;
  if (N > r.max_tokens) {
    std::ostringstream os;
    os << "N = " << N << " tokens exceeds the routing's max_tokens = " << r.max_tokens;
    detail::moe_fail(kernel, os.str());
  }
  require_shape(kernel, "expert_idx", expert_idx, {std::size_t(N), std::size_t(k)});
  if (capacity < 0) {
    std::ostringstream os;
    os << "capacity = " << capacity << ", expected >= 0 (0 = dropless)";
    detail::moe_fail(kernel, os.str());
  }
  Kokkos::Profiling::pushRegion("paraxis::moe_build_routing");
  const int assignments = N * k;

  int bad = 0;
  Kokkos::parallel_reduce(
      "paraxis::moe_routing_check", Kokkos::RangePolicy<ExecSpace>(space, 0, assignments),
      KOKKOS_LAMBDA(const int a, int& count) {
        const int e = expert_idx(a / k, a % k);
        if (e < 0 || e >= E) ++count;
      },
      bad);
  if (bad > 0) {
    Kokkos::Profiling::popRegion();
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), expert_idx);
    int first = 0;
    while (first < assignments && h(first / k, first % k) >= 0 && h(first / k, first % k) < E)
      ++first;
    std::ostringstream os;
    os << bad << " expert indices outside [0, " << E << "); first at (" << first / k << ','
       << first % k << ") = " << h(first / k, first % k);
    detail::moe_fail(kernel, os.str());
  }

  const int blocks = detail::moe_routing_blocks(assignments);
  constexpr int B = detail::moe_routing_block;
  auto block_counts = r.block_counts;
  auto requested = r.requested;
  auto counts = r.counts;
  auto dropped = r.dropped;
  auto offsets = r.offsets;
  auto slot_token = r.slot_token;
  auto slot_k = r.slot_k;
  auto token_slot = r.token_slot;

  Kokkos::parallel_for(
      "paraxis::moe_routing_block_count", Kokkos::RangePolicy<ExecSpace>(space, 0, blocks),
      KOKKOS_LAMBDA(const int b) {
        for (int e = 0; e < E; ++e) block_counts(b * E + e) = 0;
        const int end = (b + 1) * B < assignments ? (b + 1) * B : assignments;
        for (int a = b * B; a < end; ++a) ++block_counts(b * E + expert_idx(a / k, a % k));
      });
  Kokkos::parallel_for(
      "paraxis::moe_routing_expert_scan", Kokkos::RangePolicy<ExecSpace>(space, 0, E),
      KOKKOS_LAMBDA(const int e) {
        int running = 0;
        for (int b = 0; b < blocks; ++b) {
          const int c = block_counts(b * E + e);
          block_counts(b * E + e) = running;  // assignments to e before block b
          running += c;
        }
        const int kept = capacity > 0 && running > capacity ? capacity : running;
        requested(e) = running;
        counts(e) = kept;
        dropped(e) = running - kept;
      });
  // E is small (tens): a single thread is cheaper than a scan launch and trivially ordered.
  Kokkos::parallel_for(
      "paraxis::moe_routing_offsets", Kokkos::RangePolicy<ExecSpace>(space, 0, 1),
      KOKKOS_LAMBDA(const int) {
        offsets(0) = 0;
        for (int e = 0; e < E; ++e) offsets(e + 1) = offsets(e) + counts(e);
      });
  Kokkos::parallel_for(
      "paraxis::moe_routing_place", Kokkos::RangePolicy<ExecSpace>(space, 0, blocks),
      KOKKOS_LAMBDA(const int b) {
        const int end = (b + 1) * B < assignments ? (b + 1) * B : assignments;
        for (int a = b * B; a < end; ++a) {
          const int n = a / k, j = a % k;
          const int e = expert_idx(n, j);
          const int rank = block_counts(b * E + e)++;
          if (rank < counts(e)) {
            const int p = offsets(e) + rank;
            token_slot(n, j) = p;
            slot_token(p) = n;
            slot_k(p) = j;
          } else {
            token_slot(n, j) = -1;
          }
        }
      });
  Kokkos::deep_copy(space, r.offsets_host, offsets);
  Kokkos::deep_copy(space, r.counts_host, counts);
  Kokkos::deep_copy(space, r.dropped_host, dropped);
  space.fence();
  r.rows = r.offsets_host(E);
  r.tokens = N;
  Kokkos::Profiling::popRegion();
}

// Xe(p, :) = X(slot_token(p), :) for p < P: the dispatch copy into expert order.
template <class ExecSpace, class XV, class Space, class XeV>
void moe_gather(const ExecSpace& space, const XV& X, const MoeRouting<Space>& r, const XeV& Xe) {
  static_assert(XV::rank == 2 && XeV::rank == 2, "moe_gather: rank-2 Views");
  assert_accessible<ExecSpace, XV, XeV, View1<int, Space>>();
  const int H = static_cast<int>(X.extent(1));
  detail::require_tokens("moe_gather", "X", X.extent(0), r);
  detail::require_rows_at_least("moe_gather", "Xe", Xe, r.rows, std::size_t(H));
  using A = detail::moe_acc_t<XV, XeV>;
  using T = value_t<XeV>;
  auto slot_token = r.slot_token;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(X, Xe)) {
      Kokkos::parallel_for("paraxis::moe_gather_host",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, r.rows), [=](const int p) {
                             detail::moe_copy_row<A>(H, detail::row_ptr(X, slot_token(p)),
                                                     detail::row_ptr(Xe, p));
                           });
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::moe_gather",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {r.rows, H}),
      KOKKOS_LAMBDA(const int p, const int h) {
        Xe(p, h) = static_cast<T>(static_cast<A>(X(slot_token(p), h)));
      });
}

// dX(n, :) += sum over kept slots j (ascending) of dXe(token_slot(n, j), :). Accumulates, so
// the MoE branch's input gradient adds onto whatever the caller already holds (the residual).
template <class ExecSpace, class DXeV, class Space, class DXV>
void moe_gather_backward(const ExecSpace& space, const DXeV& dXe, const MoeRouting<Space>& r,
                         const DXV& dX) {
  static_assert(DXeV::rank == 2 && DXV::rank == 2, "moe_gather_backward: rank-2 Views");
  assert_accessible<ExecSpace, DXeV, DXV, View1<int, Space>>();
  const int N = static_cast<int>(dX.extent(0));
  const int H = static_cast<int>(dX.extent(1));
  const int k = r.k;
  detail::require_tokens("moe_gather_backward", "dX", dX.extent(0), r);
  detail::require_rows_at_least("moe_gather_backward", "dXe", dXe, r.rows, std::size_t(H));
  using A = detail::moe_acc_t<DXeV, DXV>;
  using T = value_t<DXV>;
  auto token_slot = r.token_slot;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(dXe, dX)) {
      Kokkos::parallel_for("paraxis::moe_gather_bwd_host",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, N), [=](const int n) {
                             detail::moe_add_rows<A>(
                                 H, k,
                                 [&](int j) {
                                   const int p = token_slot(n, j);
                                   return p >= 0 ? detail::row_ptr(dXe, p) : nullptr;
                                 },
                                 detail::row_ptr(dX, n));
                           });
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::moe_gather_bwd",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {N, H}),
      KOKKOS_LAMBDA(const int n, const int h) {
        A s = static_cast<A>(dX(n, h));
        for (int j = 0; j < k; ++j) {
          const int p = token_slot(n, j);
          if (p >= 0) s += static_cast<A>(dXe(p, h));
        }
        dX(n, h) = static_cast<T>(s);
      });
}

// Y(n, :) = sum over kept slots j (ascending) of gate(n, j) * Ye(token_slot(n, j), :).
// Overwrites Y; a token with every slot dropped gets 0.
template <class ExecSpace, class YeV, class GV, class Space, class YV>
void moe_combine_forward(const ExecSpace& space, const YeV& Ye, const GV& gate,
                         const MoeRouting<Space>& r, const YV& Y) {
  static_assert(YeV::rank == 2 && GV::rank == 2 && YV::rank == 2,
                "moe_combine_forward: rank-2 Views");
  assert_accessible<ExecSpace, YeV, GV, YV, View1<int, Space>>();
  const int N = static_cast<int>(Y.extent(0));
  const int H = static_cast<int>(Y.extent(1));
  const int k = r.k;
  detail::require_tokens("moe_combine_forward", "Y", Y.extent(0), r);
  require_shape("moe_combine_forward", "gate", gate, {std::size_t(N), std::size_t(k)});
  detail::require_rows_at_least("moe_combine_forward", "Ye", Ye, r.rows, std::size_t(H));
  using A = detail::moe_acc_t<YeV, GV, YV>;
  using T = value_t<YV>;
  auto token_slot = r.token_slot;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(Ye, Y)) {
      Kokkos::parallel_for("paraxis::moe_combine_fwd_host",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, N), [=](const int n) {
                             detail::moe_weighted_rows<A>(
                                 H, k,
                                 [&](int j) {
                                   const int p = token_slot(n, j);
                                   return p >= 0 ? detail::row_ptr(Ye, p) : nullptr;
                                 },
                                 [&](int j) { return static_cast<A>(gate(n, j)); },
                                 detail::row_ptr(Y, n));
                           });
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::moe_combine_fwd",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {N, H}),
      KOKKOS_LAMBDA(const int n, const int h) {
        A s = A(0);
        for (int j = 0; j < k; ++j) {
          const int p = token_slot(n, j);
          if (p >= 0) s += static_cast<A>(gate(n, j)) * static_cast<A>(Ye(p, h));
        }
        Y(n, h) = static_cast<T>(s);
      });
}

// dYe(p, :) = gate(n, j) * dY(n, :) for the kept rows p < P (n = slot_token(p), j =
// slot_k(p)); dgate(n, j) = dot(dY(n, :), Ye(token_slot(n, j), :)) summed over h ascending
// (host spaces: in fixed lanes), 0 for a dropped slot. Both overwrite; rows of dYe at and beyond P
// are left alone.
template <class ExecSpace, class DYV, class YeV, class GV, class Space, class DYeV, class DGV>
void moe_combine_backward(const ExecSpace& space, const DYV& dY, const YeV& Ye, const GV& gate,
                          const MoeRouting<Space>& r, const DYeV& dYe, const DGV& dgate) {
  static_assert(
      DYV::rank == 2 && YeV::rank == 2 && GV::rank == 2 && DYeV::rank == 2 && DGV::rank == 2,
      "moe_combine_backward: rank-2 Views");
  assert_accessible<ExecSpace, DYV, YeV, GV, DYeV, DGV, View1<int, Space>>();
  constexpr const char* kernel = "moe_combine_backward";
  const int N = static_cast<int>(dY.extent(0));
  const int H = static_cast<int>(dY.extent(1));
  const int k = r.k;
  detail::require_tokens(kernel, "dY", dY.extent(0), r);
  require_shape(kernel, "gate", gate, {std::size_t(N), std::size_t(k)});
  require_shape(kernel, "dgate", dgate, {std::size_t(N), std::size_t(k)});
  detail::require_rows_at_least(kernel, "Ye", Ye, r.rows, std::size_t(H));
  detail::require_rows_at_least(kernel, "dYe", dYe, r.rows, std::size_t(H));
  using A = detail::moe_acc_t<DYV, YeV, GV, DYeV, DGV>;
  using TE = value_t<DYeV>;
  using TG = value_t<DGV>;
  auto slot_token = r.slot_token;
  auto slot_k = r.slot_k;
  auto token_slot = r.token_slot;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(dY, Ye, dYe)) {
      // One pass per token: dY's row is read once for its dYe rows and its dgate dots.
      Kokkos::parallel_for(
          "paraxis::moe_combine_bwd_host", Kokkos::RangePolicy<ExecSpace>(space, 0, N),
          [=](const int n) {
            if (n + detail::kMoePrefetch < N)
              for (int j = 0; j < k; ++j) {
                const int p = token_slot(n + detail::kMoePrefetch, j);
                if (p >= 0) detail::prefetch_row(detail::row_ptr(Ye, p), H * sizeof(value_t<YeV>));
              }
            for (int j = 0; j < k; ++j) {
              const int p = token_slot(n, j);
              dgate(n, j) =
                  static_cast<TG>(p < 0 ? A(0)
                                        : detail::moe_combine_backward_row(
                                              H, static_cast<A>(gate(n, j)), detail::row_ptr(dY, n),
                                              detail::row_ptr(Ye, p), detail::row_ptr(dYe, p)));
            }
          });
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::moe_combine_bwd_expert",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {r.rows, H}),
      KOKKOS_LAMBDA(const int p, const int h) {
        const int n = slot_token(p);
        dYe(p, h) = static_cast<TE>(static_cast<A>(gate(n, slot_k(p))) * static_cast<A>(dY(n, h)));
      });
  Kokkos::parallel_for(
      "paraxis::moe_combine_bwd_gate",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {N, k}),
      KOKKOS_LAMBDA(const int n, const int j) {
        const int p = token_slot(n, j);
        A s = A(0);
        if (p >= 0)
          for (int h = 0; h < H; ++h) s += static_cast<A>(dY(n, h)) * static_cast<A>(Ye(p, h));
        dgate(n, j) = static_cast<TG>(s);
      });
}

// Per-rank statistics of the auxiliary loss: requested(e) = assignments to e (before
// capacity), prob_sum(e) = sum_n probs(n, e), summed over n ascending in prob_sum's value
// type. Both overwrite. Sum them across the ranks holding one micro-batch, then call
// moe_aux_loss_value. One thread per expert walks all rows: E*N*k integer work, no atomics.
// Indices outside [0, E) are not counted (moe_build_routing rejects them).
template <class ExecSpace, class PV, class IV, class RV, class SV>
void moe_router_stats(const ExecSpace& space, const PV& probs, const IV& expert_idx,
                      const RV& requested, const SV& prob_sum) {
  static_assert(PV::rank == 2 && IV::rank == 2 && RV::rank == 1 && SV::rank == 1,
                "moe_router_stats: probs/expert_idx rank 2, requested/prob_sum rank 1");
  static_assert(std::is_same_v<typename RV::value_type, int>, "moe_router_stats: int requested");
  assert_accessible<ExecSpace, PV, IV, RV, SV>();
  const int N = static_cast<int>(probs.extent(0));
  const int E = static_cast<int>(probs.extent(1));
  const int k = static_cast<int>(expert_idx.extent(1));
  require_shape("moe_router_stats", "expert_idx", expert_idx, {std::size_t(N), std::size_t(k)});
  require_shape("moe_router_stats", "requested", requested, {std::size_t(E)});
  require_shape("moe_router_stats", "prob_sum", prob_sum, {std::size_t(E)});
  using S = value_t<SV>;
  Kokkos::parallel_for(
      "paraxis::moe_router_stats", Kokkos::RangePolicy<ExecSpace>(space, 0, E),
      KOKKOS_LAMBDA(const int e) {
        int c = 0;
        S s = S(0);
        for (int n = 0; n < N; ++n) {
          s += static_cast<S>(probs(n, e));
          for (int j = 0; j < k; ++j) c += expert_idx(n, j) == e ? 1 : 0;
        }
        requested(e) = c;
        prob_sum(e) = s;
      });
}

// L_aux = E * sum_e (requested_e / (tokens*k)) * (prob_sum_e / tokens), from statistics
// already reduced over the ranks holding the micro-batch (tokens = global N).
inline double moe_aux_loss_value(const int* requested, const double* prob_sum, long tokens, int k,
                                 int experts) {
  if (tokens < 1 || k < 1 || experts < 1) {
    std::ostringstream os;
    os << "moe_aux_loss_value: need tokens, k, experts >= 1, got tokens=" << tokens << " k=" << k
       << " experts=" << experts;
    throw std::invalid_argument(os.str());
  }
  const double assignments = static_cast<double>(tokens) * k;
  double s = 0;
  for (int e = 0; e < experts; ++e)
    s += (requested[e] / assignments) * (prob_sum[e] / static_cast<double>(tokens));
  return experts * s;
}

// dprobs(n, e) += coef * E * f_e / tokens with f_e = requested(e) / (tokens*k) held constant.
// `tokens` is the global N the statistics were reduced over, not dprobs' local extent.
template <class ExecSpace, class RV, class PV>
void moe_aux_loss_backward(const ExecSpace& space, const RV& requested, long tokens, int k,
                           double coef, const PV& dprobs) {
  static_assert(RV::rank == 1 && PV::rank == 2,
                "moe_aux_loss_backward: rank-1 requested, "
                "rank-2 dprobs");
  assert_accessible<ExecSpace, RV, PV>();
  const int N = static_cast<int>(dprobs.extent(0));
  const int E = static_cast<int>(dprobs.extent(1));
  require_shape("moe_aux_loss_backward", "requested", requested, {std::size_t(E)});
  if (tokens < 1 || k < 1) {
    std::ostringstream os;
    os << "moe_aux_loss_backward: need tokens, k >= 1, got tokens=" << tokens << " k=" << k;
    throw std::invalid_argument(os.str());
  }
  using A = acc_t<value_t<PV>>;
  using T = value_t<PV>;
  // scale * requested(e) = coef * E * (requested(e) / (tokens*k)) / tokens, formed in fp64.
  const double scale = coef * E / (static_cast<double>(tokens) * k) / static_cast<double>(tokens);
  Kokkos::parallel_for(
      "paraxis::moe_aux_loss_bwd",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {N, E}),
      KOKKOS_LAMBDA(const int n, const int e) {
        const A g = static_cast<A>(scale * static_cast<double>(requested(e)));
        dprobs(n, e) = static_cast<T>(static_cast<A>(dprobs(n, e)) + g);
      });
}

// Tokens-per-expert load of the last build (kept rows, i.e. what the experts compute):
// imbalance = max / mean (1 is perfect; 0 when no rows were routed); dropped = all experts.
struct MoeLoadStats {
  int min = 0, max = 0;
  double mean = 0, imbalance = 0;
  long dropped = 0;
};

template <class Space>
MoeLoadStats moe_load_stats(const MoeRouting<Space>& r) {
  MoeLoadStats s;
  if (r.experts < 1) return s;
  s.min = r.counts_host(0);
  s.max = r.counts_host(0);
  long total = 0;
  for (int e = 0; e < r.experts; ++e) {
    s.min = std::min(s.min, r.counts_host(e));
    s.max = std::max(s.max, r.counts_host(e));
    total += r.counts_host(e);
    s.dropped += r.dropped_host(e);
  }
  s.mean = static_cast<double>(total) / r.experts;
  s.imbalance = s.mean > 0 ? s.max / s.mean : 0.0;
  return s;
}

}  // namespace paraxis::kernels
