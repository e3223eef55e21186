// Megatron-LM tensor-parallel layers, the ones GptModel runs (gpt_model_block.cpp, gpt_model.cpp,
// gpt_model_moe.cpp) and ctest/parallel/test_tensor_parallel.cpp tests: column- and row-parallel
// linear layers (plain, and with sequence parallelism), the vocabulary-parallel embedding and
// the vocabulary-parallel cross-entropy, forward and backward, over one tensor-parallel group
// (TpGroup: a CommGroup, none on a single rank). Views in any memory space the group can read
// (host; device with a GPU-aware MPI or NCCL).
//
// Layout (Shoeybi et al. 2019): a column-parallel linear holds W[:, cols of this rank] and
// its bias slice; its input is replicated, its output is this rank's columns, and only the
// input gradient needs an all-reduce. A row-parallel linear holds W[rows of this rank, :]; its
// input is this rank's columns, its output is all-reduced and the (replicated) bias is added
// once, after the reduction. A column/row pair (attention QKV -> output projection, MLP w1 ->
// w2) therefore costs one all-reduce of tokens x hidden elements forward and one backward.
//
// Sequence parallelism (Korthikanti et al. 2022): outside the column/row pairs (LayerNorm,
// residual adds) each rank keeps only its block of tokens, rows [rank * N / tp, (rank + 1) * N /
// tp) of the [N, hidden] activations, so N must be divisible by tp. Each all-reduce becomes a
// reduce-scatter (tp_reduce_partial), and the input of a column-parallel linear and the output
// gradient of a row-parallel one are all-gathered (tp_gather_tokens): the same bytes, a tp-th
// of the activations outside the pairs.
//
// Who communicates: the reductions live inside the layers (row-parallel forward, column-parallel
// backward, the embedding's forward, the cross-entropy); the all-gathers are tp_gather_tokens,
// called once by the caller for every layer that shares the gathered tensor (Q, K and V read one
// gathered input; backward gathers a LayerNorm output again for the weight gradients). On a
// group of one rank nothing is called and every layer is the single-rank computation, operation
// for operation.
//
// Split rules (even_shard, vocab_shard): model/shard_layout.hpp, shared with the parameter
// layout.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

#include "model/collectives.hpp"
#include "model/shard_layout.hpp"
#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/cross_entropy.hpp"
#include "paraxis/kernels/elementwise.hpp"
#include "paraxis/kernels/embedding.hpp"
#include "paraxis/kernels/gemm.hpp"
#include "paraxis/kernels/vocab_parallel_cross_entropy.hpp"

namespace paraxis::model {

// The tensor-parallel group as the layers see it. group: null on a single rank (a group of one
// rank is treated the same: no call is made). sequence_parallel: the tokens outside the
// column/row pairs are sharded over the group (only with more than one rank).
struct TpGroup {
  CommGroup* group = nullptr;
  bool sequence_parallel = false;

  int size() const { return group ? group->size() : 1; }
  int rank() const { return group ? group->rank() : 0; }
  bool sp() const { return sequence_parallel && size() > 1; }
};

namespace detail {
void require_contiguous(const char* what, bool contiguous);
// full == tp * block elements (sequence-parallel blocks of tokens).
void require_blocks(const char* what, std::size_t block, std::size_t full, int tp);
// Without sequence parallelism a partial sum is reduced in place: partial must be out.
void require_in_place(const char* what, const void* partial, const void* out);
}  // namespace detail

// ---- the collectives, on the communicator itself

// In-place sum (or max) over the group of a contiguous View, after the work queued on `space`.
template <class ExecSpace, class V>
void tp_all_reduce(const ExecSpace& space, CommGroup& tp, const V& v, ReduceOp op = ReduceOp::sum) {
  detail::require_contiguous("paraxis::tp_all_reduce", v.span_is_contiguous());
  using T = kernels::value_t<V>;
  space.fence();  // the communicator reads the buffer directly
  tp.all_reduce(v.data(), v.data(), v.span(), dtype_of<T>(), op);
}

// full = all-gather(block): rank r's block lands at rows [r * n, (r + 1) * n) of the contiguous
// [tp * n, ...] full View.
template <class ExecSpace, class BV, class FV>
void tp_all_gather(const ExecSpace& space, CommGroup& tp, const BV& block, const FV& full) {
  using T = kernels::value_t<FV>;
  static_assert(std::is_same_v<kernels::value_t<BV>, T>, "tp_all_gather: one value type");
  detail::require_contiguous("paraxis::tp_all_gather",
                             block.span_is_contiguous() && full.span_is_contiguous());
  detail::require_blocks("paraxis::tp_all_gather", block.span(), full.span(), tp.size());
  space.fence();
  tp.all_gather(block.data(), full.data(), block.span(), dtype_of<T>());
}

// block = rank r's rows [r * n, (r + 1) * n) of the sum over the group of the contiguous full
// View.
template <class ExecSpace, class FV, class BV>
void tp_reduce_scatter(const ExecSpace& space, CommGroup& tp, const FV& full, const BV& block) {
  using T = kernels::value_t<FV>;
  static_assert(std::is_same_v<kernels::value_t<BV>, T>, "tp_reduce_scatter: one value type");
  detail::require_contiguous("paraxis::tp_reduce_scatter",
                             block.span_is_contiguous() && full.span_is_contiguous());
  detail::require_blocks("paraxis::tp_reduce_scatter", block.span(), full.span(), tp.size());
  space.fence();
  tp.reduce_scatter(full.data(), block.data(), block.span(), dtype_of<T>());
}

// ---- the exchanges around the column/row pairs

// The full-token View of an activation (or gradient) held as this rank's tokens: all-gathered
// into `full` ([N, ...]) with sequence parallelism, `local` itself otherwise. The input of a
// column-parallel linear (forward, and backward for its weight gradient) and the output
// gradient of a row-parallel one.
template <class ExecSpace, class V>
V tp_gather_tokens(const ExecSpace& space, const TpGroup& tp, const V& local, const V& full) {
  if (!tp.sp()) return local;
  tp_all_gather(space, *tp.group, local, full);
  return full;
}

// Where a partial sum over the group is written before tp_reduce_partial: the [N, ...]
// `workspace` with sequence parallelism (reduce-scattered into out), else out itself (reduced
// in place).
template <class V>
V tp_partial_target(const TpGroup& tp, const V& out, const V& workspace) {
  return tp.sp() ? workspace : out;
}

// out = the sum over the group of this rank's `partial` (from tp_partial_target): a
// reduce-scatter into this rank's tokens with sequence parallelism, an in-place all-reduce
// with more than one rank, nothing on one rank.
template <class ExecSpace, class PV, class OV>
void tp_reduce_partial(const ExecSpace& space, const TpGroup& tp, const PV& partial,
                       const OV& out) {
  if (tp.sp()) {
    tp_reduce_scatter(space, *tp.group, partial, out);
    return;
  }
  detail::require_in_place("paraxis::tp_reduce_partial", partial.data(), out.data());
  if (tp.size() > 1) tp_all_reduce(space, *tp.group, out);
}

// Whether a backward input gradient is reduced now, or left as this rank's partial sum so
// that several column-parallel linears sharing one input (Q, K, V) reduce it once, the last
// one reducing (or the caller, after more partial terms: the MoE layer's experts).
enum class TpReduce { now, deferred };

// ---- column-parallel linear

// y_local = x w_local (+ b_local). No communication: x is the full-token input
// (tp_gather_tokens). b_local may be an empty View (no bias).
template <class ExecSpace, class X, class W, class B, class Y>
void column_parallel_forward(const ExecSpace& space, const X& x, const W& w_local, const B& b_local,
                             const Y& y_local) {
  Kokkos::Profiling::pushRegion("paraxis::tp_column_fwd");
  kernels::gemm(space, kernels::Trans::N, kernels::Trans::N, 1.0, x, w_local, 0.0, y_local);
  if (b_local.data()) kernels::bias_add(space, y_local, b_local);
  Kokkos::Profiling::popRegion();
}

// dw_local += x^T dy_local; db_local += colsum(dy_local) (db_local may be empty): the weight
// gradients of a column-parallel linear, W of a split backward (zero-bubble schedules). No
// communication: each rank owns its columns' gradients.
template <class ExecSpace, class DY, class X, class DW, class DB>
void column_parallel_backward_weight(const ExecSpace& space, const DY& dy_local, const X& x,
                                     const DW& dw_local, const DB& db_local) {
  using kernels::Trans;
  kernels::gemm(space, Trans::T, Trans::N, 1.0, x, dy_local, 1.0, dw_local);
  if (db_local.data()) kernels::bias_grad_accumulate(space, dy_local, db_local);
}

// dx_partial = dx_beta * dx_partial + dy_local w_local^T (this rank's partial input gradient,
// [N, hidden]: tp_partial_target(dx)); then (reduce == now) dx = tp_reduce_partial(dx_partial):
// the input gradient of this rank's tokens. B of a split backward. With dx_beta = 1, dx_partial
// must hold the unreduced partial of the linears before (TpReduce::deferred).
template <class ExecSpace, class DY, class W, class DXP, class DX>
void column_parallel_backward_input(const ExecSpace& space, const TpGroup& tp, const DY& dy_local,
                                    const W& w_local, const DXP& dx_partial, double dx_beta,
                                    const DX& dx, TpReduce reduce = TpReduce::now) {
  Kokkos::Profiling::pushRegion("paraxis::tp_column_bwd");
  kernels::gemm(space, kernels::Trans::N, kernels::Trans::T, 1.0, dy_local, w_local, dx_beta,
                dx_partial);
  if (reduce == TpReduce::now) tp_reduce_partial(space, tp, dx_partial, dx);
  Kokkos::Profiling::popRegion();
}

// The whole backward of a column-parallel linear: the input gradient as
// column_parallel_backward_input and the weight gradients as column_parallel_backward_weight
// (both before the reduction, which then overlaps nothing: the order the single rank runs).
template <class ExecSpace, class DY, class X, class W, class DXP, class DX, class DW, class DB>
void column_parallel_backward(const ExecSpace& space, const TpGroup& tp, const DY& dy_local,
                              const X& x, const W& w_local, const DXP& dx_partial, double dx_beta,
                              const DX& dx, const DW& dw_local, const DB& db_local,
                              TpReduce reduce = TpReduce::now) {
  Kokkos::Profiling::pushRegion("paraxis::tp_column_bwd");
  using kernels::Trans;
  kernels::gemm(space, Trans::N, Trans::T, 1.0, dy_local, w_local, dx_beta, dx_partial);
  column_parallel_backward_weight(space, dy_local, x, dw_local, db_local);
  if (reduce == TpReduce::now) tp_reduce_partial(space, tp, dx_partial, dx);
  Kokkos::Profiling::popRegion();
}

// ---- row-parallel linear

// y_partial = x_local w_local, plus b on tp rank 0 only (b may be empty): this rank's partial
// output, for a caller that reduces it later (the MoE layer's experts, reduced after the
// gate-weighted combine: the bias goes in before the sum, once).
template <class ExecSpace, class X, class W, class B, class YP>
void row_parallel_partial_forward(const ExecSpace& space, const TpGroup& tp, const X& x_local,
                                  const W& w_local, const B& b, const YP& y_partial) {
  kernels::gemm(space, kernels::Trans::N, kernels::Trans::N, 1.0, x_local, w_local, 0.0, y_partial);
  if (b.data() && tp.rank() == 0) kernels::bias_add(space, y_partial, b);
}

// y = tp_reduce_partial(x_local w_local) (+ b, added once after the reduction: b is replicated).
// y_partial = tp_partial_target(y): y itself, or an [N, hidden] workspace under sequence
// parallelism (y then holds this rank's tokens).
template <class ExecSpace, class X, class W, class B, class YP, class Y>
void row_parallel_forward(const ExecSpace& space, const TpGroup& tp, const X& x_local,
                          const W& w_local, const B& b, const YP& y_partial, const Y& y) {
  Kokkos::Profiling::pushRegion("paraxis::tp_row_fwd");
  row_parallel_partial_forward(space, tp, x_local, w_local, B(), y_partial);
  tp_reduce_partial(space, tp, y_partial, y);
  if (b.data()) kernels::bias_add(space, y, b);
  Kokkos::Profiling::popRegion();
}

// dw_local += x_local^T dy; db += colsum(dy) (db may be empty): the weight gradients of a
// row-parallel linear, W of a split backward. dy: the full-token output gradient
// (tp_gather_tokens), the same on every rank, so every rank computes the same db, the
// single-rank gradient of the replicated bias. No communication.
template <class ExecSpace, class DY, class X, class DW, class DB>
void row_parallel_backward_weight(const ExecSpace& space, const DY& dy, const X& x_local,
                                  const DW& dw_local, const DB& db) {
  using kernels::Trans;
  kernels::gemm(space, Trans::T, Trans::N, 1.0, x_local, dy, 1.0, dw_local);
  if (db.data()) kernels::bias_grad_accumulate(space, dy, db);
}

// dx_local = dx_beta * dx_local + dy w_local^T: B of a split backward. No communication.
template <class ExecSpace, class DY, class W, class DX>
void row_parallel_backward_input(const ExecSpace& space, const DY& dy, const W& w_local,
                                 const DX& dx_local, double dx_beta) {
  Kokkos::Profiling::pushRegion("paraxis::tp_row_bwd");
  kernels::gemm(space, kernels::Trans::N, kernels::Trans::T, 1.0, dy, w_local, dx_beta, dx_local);
  Kokkos::Profiling::popRegion();
}

// dx_local = dx_beta * dx_local + dy w_local^T (when dx_local is not empty), then the weight
// gradients as row_parallel_backward_weight. No communication.
template <class ExecSpace, class DY, class X, class W, class DX, class DW, class DB>
void row_parallel_backward(const ExecSpace& space, const DY& dy, const X& x_local, const W& w_local,
                           const DX& dx_local, double dx_beta, const DW& dw_local, const DB& db) {
  Kokkos::Profiling::pushRegion("paraxis::tp_row_bwd");
  using kernels::Trans;
  if (dx_local.data())
    kernels::gemm(space, Trans::N, Trans::T, 1.0, dy, w_local, dx_beta, dx_local);
  row_parallel_backward_weight(space, dy, x_local, dw_local, db);
  Kokkos::Profiling::popRegion();
}

// ---- vocabulary-parallel embedding

// x = tp_reduce_partial(local lookup in wte_local, rows [vocab_offset, vocab_offset + Vl)) +
// wpe(n % seq_len). Tokens outside the shard contribute 0; tp rank 0 adds the positions before
// the reduction and the others add zeros, so x equals the single-rank embedding exactly. wpe is
// read on tp rank 0 only. x_partial = tp_partial_target(x).
template <class ExecSpace, class TV, class WV, class PV, class XP, class XV>
void vocab_parallel_embedding_forward(const ExecSpace& space, const TpGroup& tp, const TV& tokens,
                                      const WV& wte_local, const PV& wpe, int seq_len,
                                      int vocab_offset, const XP& x_partial, const XV& x) {
  Kokkos::Profiling::pushRegion("paraxis::tp_embedding_fwd");
  kernels::embedding_forward(space, tokens, wte_local, wpe, seq_len, vocab_offset, x_partial,
                             tp.rank() == 0);
  tp_reduce_partial(space, tp, x_partial, x);
  Kokkos::Profiling::popRegion();
}

// dwte_local += this shard's rows of the scatter-add of dX; dwpe += the position sums. dX: the
// full-token gradient (tp_gather_tokens), the same on every rank, so every rank computes the
// same dwpe (wpe is replicated). No communication.
template <class ExecSpace, class TV, class DXV, class DWV, class DPV>
void vocab_parallel_embedding_backward(const ExecSpace& space, const TV& tokens, const DXV& dX,
                                       int seq_len, int vocab_offset, const DWV& dwte_local,
                                       const DPV& dwpe) {
  Kokkos::Profiling::pushRegion("paraxis::tp_embedding_bwd");
  kernels::embedding_backward(space, tokens, dX, seq_len, vocab_offset, dwte_local, dwpe, true);
  Kokkos::Profiling::popRegion();
}

// ---- vocabulary-parallel cross-entropy

// The loss of the vocabulary-parallel LM head (its logits from column_parallel_forward): the
// local passes of vocab_parallel_cross_entropy.hpp with the tp reductions between them, or on
// one rank the single-rank kernels of cross_entropy.hpp. A (the accumulation type: double for
// fp64 logits, float otherwise) is the type of lse and of the row statistics.
template <class A, class Space = Kokkos::DefaultExecutionSpace>
class VocabParallelCrossEntropy {
 public:
  using V1 = kernels::View1<A, Space>;

  // One rank: no workspace (forward and backward refuse a group of more).
  VocabParallelCrossEntropy() = default;
  // The reductions' workspace for `tokens` rows.
  explicit VocabParallelCrossEntropy(int tokens)
      : max_(std::string("paraxis::tp_ce_max"), tokens),
        sums_(std::string("paraxis::tp_ce_sums"), 2 * static_cast<std::size_t>(tokens)) {}

  // lse(i) (written) and the summed loss sum_i (lse(i) - logit(i, target(i))), identical on
  // every tp rank. logits_local holds the vocabulary columns [vocab_offset, vocab_offset + Vl).
  template <class ExecSpace, class LV, class TV, class SV>
  A forward(const ExecSpace& space, const TpGroup& tp, const LV& logits_local, const TV& targets,
            int vocab_offset, int vocab, const SV& lse) const {
    static_assert(std::is_same_v<kernels::acc_t<kernels::value_t<LV>>, A>,
                  "VocabParallelCrossEntropy: A must be the accumulation type of the logits");
    if (tp.size() == 1)
      return kernels::cross_entropy_forward(space, logits_local, targets, vocab, lse);
    require_workspace(tp);
    Kokkos::Profiling::pushRegion("paraxis::tp_cross_entropy_fwd");
    const std::size_t n = max_.extent(0);
    kernels::require_shape("paraxis::VocabParallelCrossEntropy", "logits", logits_local,
                           {n, logits_local.extent(1)});
    const auto sumexp = Kokkos::subview(sums_, std::make_pair(std::size_t(0), n));
    const auto target = Kokkos::subview(sums_, std::make_pair(n, 2 * n));
    kernels::vocab_parallel_ce_local_max(space, logits_local, vocab_offset, vocab, max_);
    tp_all_reduce(space, *tp.group, max_, ReduceOp::max);
    kernels::vocab_parallel_ce_local_sumexp(space, logits_local, targets, vocab_offset, vocab, max_,
                                            sumexp, target);
    tp_all_reduce(space, *tp.group, sums_);
    const A loss = kernels::vocab_parallel_ce_finish(space, max_, sumexp, target, lse);
    Kokkos::Profiling::popRegion();
    return loss;
  }

  // dlogits_local = scale * (softmax - onehot) on this shard's valid columns, 0 on padding.
  // No communication: lse is global after forward.
  template <class ExecSpace, class LV, class TV, class SV, class DV>
  void backward(const ExecSpace& space, const TpGroup& tp, const LV& logits_local,
                const TV& targets, const SV& lse, int vocab_offset, int vocab, double scale,
                const DV& dlogits_local) const {
    if (tp.size() == 1) {
      kernels::cross_entropy_backward(space, logits_local, targets, lse, vocab, scale,
                                      dlogits_local);
      return;
    }
    kernels::vocab_parallel_ce_backward(space, logits_local, targets, lse, vocab_offset, vocab,
                                        scale, dlogits_local);
  }

 private:
  void require_workspace(const TpGroup& tp) const {
    if (!max_.data())
      throw std::invalid_argument(
          "VocabParallelCrossEntropy: built for one rank (no workspace) but the tensor-parallel "
          "group has " +
          std::to_string(tp.size()) + " ranks; expected the constructor with the token count");
  }

  V1 max_, sums_;  // sums_: [sum of exponentials (N) | target logit (N)], reduced in one call
};

}  // namespace paraxis::model
