// Megatron-LM tensor-parallel building blocks over one tensor-parallel group (a CommGroup:
// parallel::Communicator on the tp axis, or anything with the same calls): column- and row-parallel
// linear layers (plain, and with sequence parallelism), the vocabulary-parallel embedding and the
// vocabulary-parallel cross-entropy, forward and backward, for Views in any memory space the
// communicator can read (host; device with a GPU-aware MPI or NCCL).
//
// Layout (Shoeybi et al. 2019): a column-parallel linear holds W[:, cols of this rank] and
// its bias slice; its input is replicated, its output is this rank's columns, and only the
// input gradient needs an all-reduce. A row-parallel linear holds W[rows of this rank, :]; its
// input is this rank's columns, its output is all-reduced and the (replicated) bias is added
// once, after the reduction. A column/row pair (attention QKV -> output projection, MLP w1 ->
// w2) therefore costs one all-reduce of tokens x hidden elements forward and one backward.
//
// Split rules: Megatron splits evenly; so does paraxis (even_shard rejects heads or ffn that tp
// does not divide, naming the values); the vocabulary is padded to a multiple of tp instead
// (vocab_shard), the padding excluded from the loss and zero in the parameters.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

#include "model/collectives.hpp"
#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/elementwise.hpp"
#include "paraxis/kernels/embedding.hpp"
#include "paraxis/kernels/gemm.hpp"
#include "paraxis/kernels/vocab_parallel_cross_entropy.hpp"

namespace paraxis::model {

// This rank's block [offset, offset + size) of an extent cut across a tensor-parallel group.
struct ShardRange {
  int offset = 0, size = 0;
};

// Megatron's even split of n over tp ranks. Throws std::invalid_argument naming `what` (the
// deck key, e.g. "model.heads"), n and tp when tp does not divide n.
ShardRange even_shard(const std::string& what, int n, int tp, int rank);
// The vocabulary rounded up to a multiple of tp, and this rank's rows of it (the last shard
// may hold padding; with a tiny vocabulary on many ranks, nothing but padding).
int padded_vocab(int vocab, int tp);
ShardRange vocab_shard(int vocab, int tp, int rank);

// Megatron's traffic, as the CommLog records it (nccl-tests S, bytes per call):
//   a column/row pair: one all-reduce of tokens x hidden elements forward, one backward;
//   with sequence parallelism an all-gather and a reduce-scatter each way instead, each of
//   the same S (all-gather: the gathered output; reduce-scatter: the full input);
//   the vocabulary-parallel embedding: one all-reduce of tokens x hidden elements forward;
//   the vocabulary-parallel cross-entropy: a max all-reduce of tokens accumulators and one
//   sum all-reduce of 2 x tokens (the sum of exponentials and the target logit, fused).
std::size_t tp_pair_all_reduce_bytes(std::size_t tokens, int hidden, std::size_t elem_bytes);
std::size_t vocab_parallel_ce_max_bytes(std::size_t tokens, std::size_t acc_bytes);
std::size_t vocab_parallel_ce_sum_bytes(std::size_t tokens, std::size_t acc_bytes);

namespace detail {
void require_contiguous(const char* what, bool contiguous);
// full == tp * block elements (sequence-parallel blocks of tokens).
void require_blocks(const char* what, std::size_t block, std::size_t full, int tp);
}  // namespace detail

// In-place sum over the tp group of a contiguous View, after the work queued on `space`.
template <class ExecSpace, class Group, class V>
void tp_all_reduce(const ExecSpace& space, Group& tp, const V& v, ReduceOp op = ReduceOp::sum) {
  detail::require_contiguous("paraxis::tp_all_reduce", v.span_is_contiguous());
  using T = kernels::value_t<V>;
  space.fence();  // the communicator reads the buffer directly
  tp.all_reduce(v.data(), v.data(), v.span(), dtype_of<T>(), op);
}

// full = all-gather_tp(block): rank r's block lands at rows [r * n, (r + 1) * n) of the
// contiguous [tp * n, ...] full View.
template <class ExecSpace, class Group, class BV, class FV>
void tp_all_gather(const ExecSpace& space, Group& tp, const BV& block, const FV& full) {
  using T = kernels::value_t<FV>;
  static_assert(std::is_same_v<kernels::value_t<BV>, T>, "tp_all_gather: one value type");
  detail::require_contiguous("paraxis::tp_all_gather",
                             block.span_is_contiguous() && full.span_is_contiguous());
  detail::require_blocks("paraxis::tp_all_gather", block.span(), full.span(), tp.size());
  space.fence();
  tp.all_gather(block.data(), full.data(), block.span(), dtype_of<T>());
}

// block = rank r's rows [r * n, (r + 1) * n) of the sum over tp of the contiguous full View.
template <class ExecSpace, class Group, class FV, class BV>
void tp_reduce_scatter(const ExecSpace& space, Group& tp, const FV& full, const BV& block) {
  using T = kernels::value_t<FV>;
  static_assert(std::is_same_v<kernels::value_t<BV>, T>, "tp_reduce_scatter: one value type");
  detail::require_contiguous("paraxis::tp_reduce_scatter",
                             block.span_is_contiguous() && full.span_is_contiguous());
  detail::require_blocks("paraxis::tp_reduce_scatter", block.span(), full.span(), tp.size());
  space.fence();
  tp.reduce_scatter(full.data(), block.data(), block.span(), dtype_of<T>());
}

// Whether a backward input gradient is all-reduced now, or left as this rank's partial sum so
// that several column-parallel linears sharing one input (Q, K, V) reduce it once, the caller
// calling tp_all_reduce after the last one.
enum class TpReduce { now, deferred };

// y_local = x w_local (+ b_local). No communication: x is replicated. b_local may be an empty
// View (no bias).
template <class ExecSpace, class X, class W, class B, class Y>
void column_parallel_forward(const ExecSpace& space, const X& x, const W& w_local, const B& b_local,
                             const Y& y_local) {
  Kokkos::Profiling::pushRegion("paraxis::tp_column_fwd");
  kernels::gemm(space, kernels::Trans::N, kernels::Trans::N, 1.0, x, w_local, 0.0, y_local);
  if (b_local.data()) kernels::bias_add(space, y_local, b_local);
  Kokkos::Profiling::popRegion();
}

// dx = dx_beta * dx + dy_local w_local^T, then (reduce == now) all-reduced over tp: the full
// input gradient on every rank. With dx_beta = 1, dx must hold this rank's unreduced partial.
// dw_local += x^T dy_local; db_local += colsum(dy_local) (db_local may be empty). No
// communication for the weights: each rank owns its columns' gradients.
template <class ExecSpace, class Group, class DY, class X, class W, class DX, class DW, class DB>
void column_parallel_backward(const ExecSpace& space, Group& tp, const DY& dy_local, const X& x,
                              const W& w_local, const DX& dx, double dx_beta, const DW& dw_local,
                              const DB& db_local, TpReduce reduce = TpReduce::now) {
  Kokkos::Profiling::pushRegion("paraxis::tp_column_bwd");
  using kernels::Trans;
  kernels::gemm(space, Trans::N, Trans::T, 1.0, dy_local, w_local, dx_beta, dx);
  kernels::gemm(space, Trans::T, Trans::N, 1.0, x, dy_local, 1.0, dw_local);
  if (db_local.data()) kernels::bias_grad_accumulate(space, dy_local, db_local);
  if (reduce == TpReduce::now) tp_all_reduce(space, tp, dx);
  Kokkos::Profiling::popRegion();
}

// y = all-reduce_tp(x_local w_local) (+ b, added once after the reduction: b is replicated).
template <class ExecSpace, class Group, class X, class W, class B, class Y>
void row_parallel_forward(const ExecSpace& space, Group& tp, const X& x_local, const W& w_local,
                          const B& b, const Y& y) {
  Kokkos::Profiling::pushRegion("paraxis::tp_row_fwd");
  kernels::gemm(space, kernels::Trans::N, kernels::Trans::N, 1.0, x_local, w_local, 0.0, y);
  tp_all_reduce(space, tp, y);
  if (b.data()) kernels::bias_add(space, y, b);
  Kokkos::Profiling::popRegion();
}

// dx_local = dx_beta * dx_local + dy w_local^T; dw_local += x_local^T dy; db += colsum(dy).
// No communication: dy is replicated, so every rank computes the same db (the replicated bias
// stays identical across the group).
template <class ExecSpace, class DY, class X, class W, class DX, class DW, class DB>
void row_parallel_backward(const ExecSpace& space, const DY& dy, const X& x_local, const W& w_local,
                           const DX& dx_local, double dx_beta, const DW& dw_local, const DB& db) {
  Kokkos::Profiling::pushRegion("paraxis::tp_row_bwd");
  using kernels::Trans;
  if (dx_local.data())
    kernels::gemm(space, Trans::N, Trans::T, 1.0, dy, w_local, dx_beta, dx_local);
  kernels::gemm(space, Trans::T, Trans::N, 1.0, x_local, dy, 1.0, dw_local);
  if (db.data()) kernels::bias_grad_accumulate(space, dy, db);
  Kokkos::Profiling::popRegion();
}

// Sequence parallelism (Korthikanti et al. 2022): outside the column/row pairs (LayerNorm,
// dropout, residual) each rank keeps only its block of tokens, rows [rank * N / tp,
// (rank + 1) * N / tp) of the [N, hidden] activations, so N must be divisible by tp. The
// pair's all-reduce becomes an all-gather in front of the column-parallel linear and a
// reduce-scatter behind the row-parallel one (forward), and the same two the other way round
// (backward): the same bytes as the all-reduces, a tp-th of the activations outside.

// x_full = all-gather_tp(x_seq) (kept for the weight gradient), then
// y_local = x_full w_local (+ b_local).
template <class ExecSpace, class Group, class XS, class XF, class W, class B, class Y>
void column_parallel_forward_sp(const ExecSpace& space, Group& tp, const XS& x_seq,
                                const XF& x_full, const W& w_local, const B& b_local,
                                const Y& y_local) {
  Kokkos::Profiling::pushRegion("paraxis::tp_sp_column_fwd");
  tp_all_gather(space, tp, x_seq, x_full);
  column_parallel_forward(space, x_full, w_local, b_local, y_local);
  Kokkos::Profiling::popRegion();
}

// dx_partial = dx_beta * dx_partial + dy_local w_local^T ([N, hidden], this rank's partial),
// then (reduce == now) dx_seq = reduce-scatter_tp(dx_partial): this rank's tokens of the
// full input gradient. dw_local += x_full^T dy_local; db_local += colsum(dy_local).
template <class ExecSpace, class Group, class DY, class XF, class W, class DXP, class DXS, class DW,
          class DB>
void column_parallel_backward_sp(const ExecSpace& space, Group& tp, const DY& dy_local,
                                 const XF& x_full, const W& w_local, const DXP& dx_partial,
                                 double dx_beta, const DXS& dx_seq, const DW& dw_local,
                                 const DB& db_local, TpReduce reduce = TpReduce::now) {
  Kokkos::Profiling::pushRegion("paraxis::tp_sp_column_bwd");
  using kernels::Trans;
  kernels::gemm(space, Trans::N, Trans::T, 1.0, dy_local, w_local, dx_beta, dx_partial);
  kernels::gemm(space, Trans::T, Trans::N, 1.0, x_full, dy_local, 1.0, dw_local);
  if (db_local.data()) kernels::bias_grad_accumulate(space, dy_local, db_local);
  if (reduce == TpReduce::now) tp_reduce_scatter(space, tp, dx_partial, dx_seq);
  Kokkos::Profiling::popRegion();
}

// y_seq = reduce-scatter_tp(x_local w_local) (+ b on this rank's tokens). y_partial: an
// [N, hidden] workspace for the unreduced product.
template <class ExecSpace, class Group, class X, class W, class B, class YP, class YS>
void row_parallel_forward_sp(const ExecSpace& space, Group& tp, const X& x_local, const W& w_local,
                             const B& b, const YP& y_partial, const YS& y_seq) {
  Kokkos::Profiling::pushRegion("paraxis::tp_sp_row_fwd");
  kernels::gemm(space, kernels::Trans::N, kernels::Trans::N, 1.0, x_local, w_local, 0.0, y_partial);
  tp_reduce_scatter(space, tp, y_partial, y_seq);
  if (b.data()) kernels::bias_add(space, y_seq, b);
  Kokkos::Profiling::popRegion();
}

// dy_full = all-gather_tp(dy_seq); dx_local = dx_beta * dx_local + dy_full w_local^T;
// dw_local += x_local^T dy_full; db += colsum(dy_full): the gathered gradient is the same on
// every rank, so the replicated bias gets the single-rank gradient with no extra reduction.
template <class ExecSpace, class Group, class DYS, class DYF, class X, class W, class DX, class DW,
          class DB>
void row_parallel_backward_sp(const ExecSpace& space, Group& tp, const DYS& dy_seq,
                              const DYF& dy_full, const X& x_local, const W& w_local,
                              const DX& dx_local, double dx_beta, const DW& dw_local,
                              const DB& db) {
  Kokkos::Profiling::pushRegion("paraxis::tp_sp_row_bwd");
  tp_all_gather(space, tp, dy_seq, dy_full);
  row_parallel_backward(space, dy_full, x_local, w_local, dx_local, dx_beta, dw_local, db);
  Kokkos::Profiling::popRegion();
}

// X = all-reduce_tp(local lookup in wte_local, rows [vocab_offset, vocab_offset + Vl)) +
// wpe(n % seq_len). Tokens outside the shard contribute 0; tp rank 0 adds the positions
// before the reduction and the others add zeros, so X equals the single-rank embedding
// exactly. wpe is read on tp rank 0 only.
template <class ExecSpace, class Group, class TV, class WV, class PV, class XV>
void vocab_parallel_embedding_forward(const ExecSpace& space, Group& tp, const TV& tokens,
                                      const WV& wte_local, const PV& wpe, int seq_len,
                                      int vocab_offset, const XV& X) {
  Kokkos::Profiling::pushRegion("paraxis::tp_embedding_fwd");
  kernels::embedding_forward(space, tokens, wte_local, wpe, seq_len, vocab_offset, X,
                             tp.rank() == 0);
  tp_all_reduce(space, tp, X);
  Kokkos::Profiling::popRegion();
}

// dwte_local += this shard's rows of the scatter-add of dX; dwpe += the position sums. No
// communication: dX is replicated, so every rank computes the same dwpe (wpe is replicated).
template <class ExecSpace, class TV, class DXV, class DWV, class DPV>
void vocab_parallel_embedding_backward(const ExecSpace& space, const TV& tokens, const DXV& dX,
                                       int seq_len, int vocab_offset, const DWV& dwte_local,
                                       const DPV& dwpe) {
  Kokkos::Profiling::pushRegion("paraxis::tp_embedding_bwd");
  kernels::embedding_backward(space, tokens, dX, seq_len, vocab_offset, dwte_local, dwpe, true);
  Kokkos::Profiling::popRegion();
}

// The vocabulary-parallel cross-entropy driver: the local passes of
// vocab_parallel_cross_entropy.hpp with the tp reductions between them. A (the accumulation
// type: double for fp64 logits, float otherwise) is the type of lse and of the row statistics.
template <class A, class Space = Kokkos::DefaultExecutionSpace>
class VocabParallelCrossEntropy {
 public:
  using V1 = kernels::View1<A, Space>;

  explicit VocabParallelCrossEntropy(int tokens)
      : max_(std::string("paraxis::tp_ce_max"), tokens),
        sums_(std::string("paraxis::tp_ce_sums"), 2 * static_cast<std::size_t>(tokens)) {}

  // lse(i) (written) and the summed loss sum_i (lse(i) - logit(i, target(i))), identical on
  // every tp rank. logits_local holds the vocabulary columns [vocab_offset, vocab_offset + Vl).
  template <class ExecSpace, class Group, class LV, class TV, class SV>
  A forward(const ExecSpace& space, Group& tp, const LV& logits_local, const TV& targets,
            int vocab_offset, int vocab, const SV& lse) const {
    static_assert(std::is_same_v<kernels::acc_t<kernels::value_t<LV>>, A>,
                  "VocabParallelCrossEntropy: A must be the accumulation type of the logits");
    Kokkos::Profiling::pushRegion("paraxis::tp_cross_entropy_fwd");
    const std::size_t n = max_.extent(0);
    kernels::require_shape("paraxis::VocabParallelCrossEntropy", "logits", logits_local,
                           {n, logits_local.extent(1)});
    const auto sumexp = Kokkos::subview(sums_, std::make_pair(std::size_t(0), n));
    const auto target = Kokkos::subview(sums_, std::make_pair(n, 2 * n));
    kernels::vocab_parallel_ce_local_max(space, logits_local, vocab_offset, vocab, max_);
    tp_all_reduce(space, tp, max_, ReduceOp::max);
    kernels::vocab_parallel_ce_local_sumexp(space, logits_local, targets, vocab_offset, vocab, max_,
                                            sumexp, target);
    tp_all_reduce(space, tp, sums_);
    const A loss = kernels::vocab_parallel_ce_finish(space, max_, sumexp, target, lse);
    Kokkos::Profiling::popRegion();
    return loss;
  }

  // dlogits_local = scale * (softmax - onehot) on this shard's valid columns, 0 on padding.
  // No communication: lse is global after forward.
  template <class ExecSpace, class LV, class TV, class SV, class DV>
  void backward(const ExecSpace& space, const LV& logits_local, const TV& targets, const SV& lse,
                int vocab_offset, int vocab, double scale, const DV& dlogits_local) const {
    kernels::vocab_parallel_ce_backward(space, logits_local, targets, lse, vocab_offset, vocab,
                                        scale, dlogits_local);
  }

 private:
  V1 max_, sums_;  // sums_: [sum of exponentials (N) | target logit (N)], reduced in one call
};

}  // namespace paraxis::model
