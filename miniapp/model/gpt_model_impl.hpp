// Internal to the gpt_model*.cpp files: GptModel<T>::Impl, the state one shard keeps (its
// parameter indices, scratch, activation pool, groups) with the small helpers every part uses,
// and the shared pieces (parameter indices of a block and a chunk). Every linear layer, embedding
// and loss with its tensor/sequence-parallel exchanges is a layer of tensor_parallel.hpp. The
// parts: gpt_model_params.cpp (parameter declaration), gpt_model_activations.cpp (scratch and the
// activation pool), gpt_model_block.cpp (one block: attention + MLP with their tensor/sequence-
// parallel exchanges), gpt_model_moe.cpp (the MoE layer and its all-to-all), gpt_model.cpp
// (chunks: embedding, blocks, head and loss; the public members).
//
// Tensor parallelism (Shoeybi et al. 2019): Q, K, V and the MLP's first linear are
// column-parallel (this rank's heads / ffn columns), the attention output projection and the
// MLP's second linear row-parallel, so each block does one reduction after attention and one
// after the MLP, forward and backward. Embedding and head are vocabulary-parallel (padded to a
// multiple of tp); the loss never needs the full logits.
// Sequence parallelism (Korthikanti et al. 2022): the residual stream, LayerNorms and dropout-
// free residual adds hold 1/tp of the tokens; each reduction becomes a reduce-scatter and the
// input of each column-parallel linear is all-gathered. Only the sequence shard of a LayerNorm
// output is kept: backward gathers it again (the extra all-gather of Korthikanti et al.), so
// every activation of a block is divided by tp. Biases after a reduction get their gradient
// from the gathered output gradient (the same on every rank); the LayerNorms' gradients are
// partial sums (TensorSpec::sp_partial) the trainer sums over the group once per step.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/gpt_model.hpp"
#include "model/tensor_parallel.hpp"
#include "paraxis/kernels/attention.hpp"
#include "paraxis/kernels/elementwise.hpp"
#include "paraxis/kernels/fused_attention.hpp"
#include "paraxis/kernels/gemm.hpp"
#include "paraxis/kernels/moe.hpp"

namespace paraxis::model {

namespace k = paraxis::kernels;
using k::Trans;

// Shared by the gpt_model*.cpp files only.
namespace detail {
constexpr double kLayerNormEps = 1e-5;
constexpr double kInitStd = 0.02;

// Parameter indices of one block in the ParamStore (-1: not held / not present).
struct BlockParams {
  int layer = 0;
  bool moe = false;
  int unit = -1, expert_unit = -1;
  int ln1_g, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_g, ln2_b;
  int w1 = -1, b1 = -1, w2 = -1, b2 = -1;  // dense MLP
  int wr = -1, br = -1;                    // MoE router (bias only with router_skew)
  std::vector<int> ew1, eb1, ew2, eb2;     // this rank's experts
};

struct ChunkParams {
  ModelChunk spec;
  int emb_unit = -1, head_unit = -1;
  int wte = -1, wpe = -1, lnf_g = -1, lnf_b = -1, head = -1;
  std::vector<BlockParams> blocks;
};

// Declares the shard's parameters into `ps` (gpt_model_params.cpp).
template <class T>
std::vector<ChunkParams> declare_parameters(ParamStore<T>& ps, const ModelConfig& c,
                                            const ShardLayout& lay);
// Throws std::invalid_argument when the layout or the groups do not fit together.
void check_layout(const ShardLayout& lay, const ShardComms& comms);

}  // namespace detail

template <class T>
struct GptModel<T>::Impl {
  using BlockParams = detail::BlockParams;
  using ChunkParams = detail::ChunkParams;
  using V1 = k::View1<T, Space>;
  using V2 = k::View2<T, Space>;
  using A1 = k::View1<G, Space>;
  using I1 = k::View1<int, Space>;
  using I2 = k::View2<int, Space>;

  // Saved by one MoE layer's forward for its backward.
  struct MoeActs {
    V2 probs, gate;
    I2 expert_idx;
    std::unique_ptr<k::MoeRouting<Space>> routing;
    V2 xe, ue, ge;  // expert side: the rows this rank's experts computed, expert-major
    V2 ye;          // source side: expert outputs of this rank's kept rows, expert-major
    V2 ye_local;    // ep > 1: the expert side's outputs, before they travel back
    // ep > 1: rows to / from each rank, rows per (source rank, local expert), and the
    // permutations between the received (source-major) and expert-major orders.
    std::vector<int> send_rows, recv_rows, recv_counts, expert_offsets;
    I1 to_expert_order, to_source_order;
    int local_rows = 0;
  };
  struct LayerActs {
    V2 h1, a, x_mid, h2, u, g;
    A1 ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;
    // What the attention core keeps: attn (model.attention unfused) or fattn (fused).
    std::unique_ptr<k::AttentionWorkspace<T, Space>> attn;
    std::unique_ptr<k::FusedAttentionWorkspace<T, Space>> fattn;
    MoeActs moe;
  };
  // Everything one (chunk, micro-batch) pair keeps from its forward to its backward.
  struct ActSet {
    int chunk = -1;
    bool in_use = false;
    std::vector<V2> xs;  // residual stream: input of each block, then the last block's output
    // Per block: its activations (left empty for a block recomputed in full, which works in
    // the shard's `working` set) and, for a recomputed MoE block, where its forward read the
    // replayed routing (the recomputed forward must replay the same choices).
    std::vector<LayerActs> layers;
    std::vector<const int*> replay_at;
    Tokens tokens, targets;
    V2 xf, logits;
    A1 lnf_mean, lnf_rstd, lse;
    // Split backward: the LayerNorm parameter gradients B computed for W to add (4 * hidden per
    // block: ln1 gamma, beta, ln2 gamma, beta; then the final LayerNorm's gamma, beta on the
    // chunk with the head), allocated on the set's first B; whether B has run.
    A1 ln_grads;
    bool input_grad_done = false;
  };

  GptModel& m;
  const ModelConfig& cfg;
  const ShardLayout& lay;
  ShardComms comms;
  int N, Nl, Hl, Fl, Vl, voff;  // tokens, local tokens, local hidden/ffn/vocab, vocab offset
  bool sp;
  std::vector<ChunkParams> chunk_params;
  // Scratch (not kept across micro-batches).
  V2 q, kk, vv, dq, dk, dv, da, dx_a, dx_b, dtmp, full, dfull, part, dff, dlogits;
  V2 dgate, dprobs, drouter;
  V2 s_stage, s_recv, s_dy, s_dx, e_dy, e_dh, e_du, e_dx;  // MoE, grown on demand
  I1 router_requested, count_send, count_recv;
  I2 replay;  // routing replay: the forced choices of one layer
  A1 router_prob_sum;
  // The shard's attention scratch, shared by every block: unfused, the kernels' workspace
  // (scores, gradients; with recompute selective its probs hold the recomputed probabilities,
  // the buffer GptModel::set_recompute counts as `probs`); fused, the fused kernel's (O(seq)),
  // and no probabilities at all (probs empty).
  struct AttentionScratch {
    std::unique_ptr<k::AttentionWorkspace<T, Space>> unfused;
    std::unique_ptr<k::FusedAttentionWorkspace<T, Space>> fused;
    k::View3<T, Space> probs;
  };
  std::unique_ptr<AttentionScratch> attn_scratch;
  std::unique_ptr<VocabParallelCrossEntropy<G, Space>> vpce;  // tp > 1
  VocabParallelCrossEntropy<G, Space> single_rank_ce;
  // forward_backward across several chunks of one rank. A vector, not an array of Views
  // (docs/portability.md: arrays of default-constructed Views crash on a Kokkos 4 snapshot).
  std::vector<V2> chain_grad;
  // Activation sets: a pool per chunk (reused, never shrunk: what is allocated is the peak
  // in flight) and the pairs in flight.
  std::vector<std::vector<std::unique_ptr<ActSet>>> pool;
  std::map<std::pair<int, int>, ActSet*> live;
  // Recompute full: the activations of the block being computed, shared by every block
  // recomputed in full (one for dense blocks, one for MoE blocks; allocated on first use). A
  // block's forward writes them, the next block's forward overwrites them, and the backward
  // pass runs the block's forward again into them just before the block's backward.
  std::unique_ptr<LayerActs> working_dense, working_moe;

  // Scratch, sized once for the shard (gpt_model_activations.cpp).
  Impl(GptModel& model, ShardComms shard_comms, bool allocate_store);
  // The constructor's allocations, in this order (the memory ledger records them).
  void allocate_work_buffers();
  void allocate_attention_scratch();
  void allocate_router_buffers();

  V2 mat(const char* label, int r, int cols) {
    return m.ledger_.track(
        MemCategory::activations,
        V2(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), r, cols));
  }
  A1 vec(const char* label, int n) {
    return m.ledger_.track(MemCategory::activations, A1(std::string(label), n));
  }
  // Grow-only buffers (MoE rows depend on the routing): at least `rows` rows.
  void grow(V2& v, const char* label, int rows, int cols) {
    if (v.data() && v.extent(0) >= static_cast<std::size_t>(rows)) return;
    if (v.data()) m.ledger_.release(MemCategory::activations, v.span() * sizeof(T));
    v = mat(label, std::max(rows, 1), cols);
  }
  void grow(I1& v, const char* label, int n) {
    if (v.data() && v.extent(0) >= static_cast<std::size_t>(n)) return;
    if (v.data()) m.ledger_.release(MemCategory::activations, v.span() * sizeof(int));
    v = m.ledger_.track(MemCategory::activations, I1(std::string(label), std::max(n, 1)));
  }

  int tp_size() const { return lay.tp; }
  CommGroup& tp() { return *comms.tp; }
  // The tensor-parallel group as the layers of tensor_parallel.hpp take it.
  TpGroup tpg() const { return {comms.tp, sp}; }
  // The LM head's loss: vpce with more than one tensor-parallel rank, the single-rank kernels
  // (no workspace) otherwise.
  const VocabParallelCrossEntropy<G, Space>& cross_entropy() const {
    return vpce ? *vpce : single_rank_ce;
  }

  // ---- the activation pool (gpt_model_activations.cpp)
  ActSet& acquire(int chunk, int mb);
  ActSet& find(int chunk, int mb);
  void release(int chunk, int mb);
  std::unique_ptr<ActSet> allocate_set(int chunk);
  // One block's activations (dense or MoE), tracked by the ledger; with recompute selective
  // its attention probabilities are the shard's scratch (attn_scratch->probs), not its own;
  // with fused attention it keeps no probabilities (recompute selective refused).
  void allocate_layer(LayerActs& a, bool moe);
  // Where block i of a set keeps its activations: its own, or the working set (full).
  LayerActs& acts_of(ActSet& S, int i);
  // Recompute selective: the attention probabilities of a block, from its kept q and k, into
  // the shared buffer, by the same kernels attention_forward ran (hence the same bits).
  void recompute_attention_probs(k::AttentionWorkspace<T, Space>& ws);

  UnitHooks no_hooks;
  UnitHooks& h() { return m.hooks_ ? *m.hooks_ : no_hooks; }
  void open_units(const BlockParams& b, bool forward) {
    for (int u : {b.unit, b.expert_unit})
      if (u >= 0) forward ? h().before_forward(u) : h().before_backward(u);
  }
  void close_units(const BlockParams& b, bool forward) {
    for (int u : {b.expert_unit, b.unit})
      if (u >= 0) forward ? h().after_forward(u) : h().after_backward(u);
  }

  // ---- MoE (gpt_model_moe.cpp)
  void experts_forward(const BlockParams& b, MoeActs& mo, const std::vector<int>& offsets,
                       const V2& ye);
  void experts_backward(const BlockParams& b, MoeActs& mo, const std::vector<int>& offsets,
                        const V2& dye, const V2& dxe);
  void exchange_rows(const V2& send, const std::vector<int>& rows_to, const V2& recv,
                     const std::vector<int>& rows_from);
  MoeLayerStats moe_forward(const BlockParams& b, MoeActs& mo, const V2& h2, const V2& out);
  // The steps of moe_forward: route, (ep > 1) exchange counts, order rows expert-major and run
  // the experts across the group, then the layer's statistics.
  long route_tokens(const BlockParams& b, MoeActs& mo, const V2& h2);
  int exchange_expert_counts(MoeActs& mo);
  void expert_major_order(MoeActs& mo, int R);
  void experts_forward_ep(const BlockParams& b, MoeActs& mo, const V2& h2);
  MoeLayerStats moe_stats(const BlockParams& b, MoeActs& mo, long flips);
  void moe_backward(const BlockParams& b, MoeActs& mo, const V2& h2, const V2& dout, const V2& dh2,
                    double aux_scale);
  // Split backward: B keeps the experts' output gradients where their outputs were (mo.ye with
  // ep == 1, mo.ye_local otherwise), their GELU input gradients in mo.ue and the router's
  // gradient in mo.probs; W reads them.
  void experts_backward_input(const BlockParams& b, MoeActs& mo, const std::vector<int>& offsets,
                              const V2& dye, const V2& dxe);
  void experts_backward_weight(const BlockParams& b, MoeActs& mo, const std::vector<int>& offsets,
                               const V2& dye);
  void moe_backward_input(const BlockParams& b, MoeActs& mo, const V2& dout, const V2& dh2,
                          double aux_scale);
  void moe_backward_weight(const BlockParams& b, MoeActs& mo, const V2& h2);

  // ---- one block (gpt_model_block.cpp)
  void block_forward(const BlockParams& b, LayerActs& A, const V2& x, const V2& out,
                     MicroBatchResult& res);
  void block_backward(const BlockParams& b, LayerActs& A, const V2& x, double aux_scale);
  // Split backward of one block (gpt_model_block.cpp): B from dx_a (the output gradient) to
  // dx_a (the input gradient), the LayerNorm parameter gradients into ln (4 * hidden, zeroed by
  // the caller), W's inputs kept in A and in out (the block's output, dead once the next block's
  // B has read it); W from them.
  void block_backward_input(const BlockParams& b, LayerActs& A, const V2& x, const V2& out,
                            const A1& ln, double aux_scale);
  void block_backward_weight(const BlockParams& b, LayerActs& A, const V2& out, const A1& ln);
  // The gradients of q, k and v (which = 0, 1, 2) as B leaves them for W: in the block's own
  // q, k and v (dead after the attention's backward), viewed as [N, Hl].
  V2 attention_grad(const LayerActs& A, int which) const {
    if (A.fattn) return which == 0 ? A.fattn->q : which == 1 ? A.fattn->k : A.fattn->v;
    const auto& qkv = which == 0 ? A.attn->q : which == 1 ? A.attn->k : A.attn->v;
    return V2(qkv.data(), N, Hl);
  }

  // ---- chunks (gpt_model.cpp)
  MicroBatchResult forward_chunk(int chunk, ActSet& S, const Tokens& tokens, const Tokens& targets);
  void backward_chunk(int chunk, ActSet& S, const Act& grad_output, const Act& grad_input,
                      double ce_scale, double aux_scale);
  void backward_input_chunk(int chunk, ActSet& S, const Act& grad_output, const Act& grad_input,
                            double ce_scale, double aux_scale);
  void backward_weight_chunk(int chunk, ActSet& S);
  // Recompute full: block i's forward again, into the working set, before its backward.
  void recompute_block(const BlockParams& b, ActSet& S, int i);

  void require_rows(const char* what, const Act& v) const {
    if (v.extent(0) != static_cast<std::size_t>(Nl) ||
        v.extent(1) != static_cast<std::size_t>(cfg.hidden))
      throw std::invalid_argument(std::string("GptModel::backward_chunk: ") + what + " is " +
                                  k::shape_string(v) + ", expected [" + std::to_string(Nl) + "," +
                                  std::to_string(cfg.hidden) + "]");
  }
};

}  // namespace paraxis::model
