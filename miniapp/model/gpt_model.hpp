// GPT decoder: token + learned position embeddings, `layers` pre-LayerNorm blocks (causal
// multi-head attention + residual, then a GELU MLP or an MoE layer + residual), final
// LayerNorm, untied LM head, cross-entropy.
//
// A GptModel is one rank's shard of it (shard_layout.hpp): its tensor-parallel slice
// (Megatron-LM's column/row splits, vocabulary-parallel embedding, head and loss, optionally
// sequence parallelism), its experts (expert parallelism: tokens travel to their experts by
// all-to-all), and its pipeline chunks. The collectives go through CommGroup (collectives.hpp):
// the model never sees MPI, and with no group given (one rank) it makes no call at all.
//
// Forward and backward run per (model chunk, micro-batch): each pair's activations live from
// its forward to its backward, so a pipeline schedule may keep several micro-batches in flight.
// Gradients accumulate in the ParamStore until the optimizer step.
//
// Activation recomputation (set_recompute, docs/model.md): selective keeps everything but the
// attention probabilities, which the backward pass computes again from the kept q and k; full
// keeps only a block's input and runs the block's forward again in the backward pass. With
// deterministic kernels the recomputed activations are the stored ones, bit for bit, so the
// gradients are those of recompute none.
#pragma once

#include <Kokkos_Core.hpp>
#include <memory>
#include <vector>

#include "model/collectives.hpp"
#include "model/memory_ledger.hpp"
#include "model/model_config.hpp"
#include "model/param_store.hpp"
#include "model/shard_layout.hpp"

namespace paraxis::model {

// Routing statistics of one MoE layer for one micro-batch, at the source (this rank's tokens).
struct MoeLayerStats {
  int layer = 0;                       // block index in the model
  std::vector<int> tokens_per_expert;  // kept assignments, every expert of the layer
  std::vector<int> dropped_per_expert;
  double aux_loss = 0;       // L_aux of this micro-batch (before the coefficient)
  std::vector<int> routing;  // [tokens * top_k] chosen experts, when routing is recorded
  long routing_flips = 0;    // replaying: tokens whose own top-k differed from the replayed
};

// A fenced compute interval, in seconds on the steady clock (for the trace).
struct Span {
  const char* name;
  double begin, end;
  int micro_batch = -1, chunk = -1;  // -1: not a per-micro-batch action
  // Of it, the seconds the step was blocked in communication (set by the parallel engine;
  // its compute is the rest).
  double blocked_s = 0;
};

struct MicroBatchResult {
  double ce_sum = 0;               // sum of token cross-entropies (chunks with the head)
  double aux_sum = 0;              // sum over this chunk's MoE layers of L_aux
  std::vector<MoeLayerStats> moe;  // one entry per MoE layer of the chunk
};

// Called around each unit's compute (units of the ParamStore: the embedding, each block's
// dense part and, for MoE blocks, its experts, and the final LayerNorm + head). A
// data-parallel trainer uses these to gather ZeRO-3 parameters and to reduce gradients as
// soon as they are final. Both units of an MoE block are open at the same time.
// A split backward (set_split_backward) brackets a unit twice: B (backward_input_chunk) reads
// its parameters between before_backward_input and after_backward_input and writes none of its
// gradients; W (backward_weight_chunk) writes its gradients between before_backward and
// after_backward and reads none of its parameters.
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int /*unit*/) {}
  virtual void after_forward(int /*unit*/) {}
  virtual void before_backward(int /*unit*/) {}
  virtual void after_backward(int /*unit*/) {}
  virtual void before_backward_input(int /*unit*/) {}
  virtual void after_backward_input(int /*unit*/) {}
};

// The groups a shard exchanges with; null (or a group of one) means none.
struct ShardComms {
  CommGroup* tp = nullptr;
  CommGroup* ep = nullptr;
};

template <class T>
class GptModel {
 public:
  using Space = Kokkos::DefaultExecutionSpace;
  using G = kernels::acc_t<T>;
  using Tokens = Kokkos::View<int*, Kokkos::LayoutRight, Space::memory_space>;
  using Act = Kokkos::View<T**, Kokkos::LayoutRight, Space::memory_space>;

  // unit_multiple: pad every unit of the flat layout to a multiple of it (ZeRO shards).
  // allocate_store: false leaves parameters, gradients and optimizer state to the caller.
  // Throws std::invalid_argument naming the deck key when the layout does not fit the model.
  GptModel(const ModelConfig& cfg, int micro_batch, const ShardLayout& layout,
           ShardComms comms = {}, int unit_multiple = 1, bool allocate_store = true);
  // The whole model on one rank.
  GptModel(const ModelConfig& cfg, int micro_batch, int unit_multiple = 1,
           bool allocate_store = true)
      : GptModel(cfg, micro_batch, ShardLayout::whole(cfg), {}, unit_multiple, allocate_store) {}
  ~GptModel();
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  void initialize(std::uint64_t seed);

  // ---- per (chunk, micro-batch): `chunk` indexes this shard's chunks, `mb` is any key.
  // Rows of the residual stream on this rank: micro_batch * seq_len, divided by tp with
  // sequence parallelism. Chunk inputs, outputs and their gradients have this many rows.
  int local_tokens() const;
  int chunks() const { return static_cast<int>(layout_.chunks.size()); }
  // Where forward_chunk reads a chunk's input (chunks without the embedding): receive into it.
  Act chunk_input(int chunk, int mb);
  // Forward of one chunk: tokens are read by the embedding, targets by the loss (either may be
  // empty where the chunk has neither). ce_sum is set on the chunk with the head.
  MicroBatchResult forward_chunk(int chunk, int mb, const Tokens& tokens, const Tokens& targets);
  // The chunk's output after forward_chunk (chunks without the head): send it on.
  Act chunk_output(int chunk, int mb);
  // The logits [micro_batch * seq_len, local vocabulary] of the chunk with the head, after
  // forward_chunk and before its backward (a split backward writes the logit gradient over
  // them): what the PyTorch reference compares (tools/reference/). Throws std::logic_error on
  // a chunk without the head.
  Act chunk_logits(int chunk, int mb);
  // Backward of one chunk: grad_output is the gradient of the chunk's output (empty on the
  // chunk with the head, whose backward starts at the loss); grad_input receives the
  // gradient of its input (empty on the chunk with the embedding). ce_scale scales
  // d(loss)/d(CE sum), aux_scale each layer's L_aux. Frees the pair's activations.
  void backward_chunk(int chunk, int mb, const Act& grad_output, const Act& grad_input,
                      double ce_scale, double aux_scale);
  // Split backward (zero-bubble schedules, docs/model.md), after set_split_backward(true):
  // B, backward_input_chunk, takes and gives what backward_chunk does and computes the input
  // gradient (and the LayerNorm parameter gradients, into the pair's own buffer), keeping what
  // W needs in activation buffers it no longer reads; W, backward_weight_chunk, computes every
  // gradient of the chunk's parameters from them and frees the pair's activations. B then W gives
  // each gradient the bits backward_chunk gives it, as long as the W of a chunk run in the
  // micro-batch order its whole backwards would have. Each throws std::logic_error when the pair
  // is not in the state it needs (no forward; W before B; B twice).
  void backward_input_chunk(int chunk, int mb, const Act& grad_output, const Act& grad_input,
                            double ce_scale, double aux_scale);
  void backward_weight_chunk(int chunk, int mb);
  // Call before the first forward (throws std::logic_error once a set exists): on, the
  // backward runs split only (backward_chunk throws) and the scratch only the whole backward
  // uses is freed; std::invalid_argument with recompute full (whose recomputed activations
  // live in one working set, overwritten before W could read them).
  void set_split_backward(bool on);
  bool split_backward() const { return split_; }
  // Drops a pair's activations without a backward (forward-only evaluation).
  void discard(int chunk, int mb);
  int live_activation_sets() const;
  int peak_activation_sets() const { return peak_sets_; }

  // ---- the whole shard, one micro-batch: every chunk forward in order, then backward
  // (chunk outputs copied to the next chunk's input: one rank holding several chunks).
  MicroBatchResult forward_backward(const Tokens& tokens, const Tokens& targets, double ce_scale,
                                    double aux_scale);
  MicroBatchResult forward(const Tokens& tokens, const Tokens& targets);

  // What the forward pass keeps for the backward pass (model_config.hpp, Recompute): with full,
  // the first `layers` blocks of each chunk (0: all) are recomputed. Call before the first
  // forward (the activation sets are shaped by it): throws std::logic_error once a set exists,
  // std::invalid_argument for layers < 0 or for layers != 0 without full.
  void set_recompute(Recompute mode, int layers = 0);
  Recompute recompute() const { return recompute_; }
  int recompute_layers() const { return recompute_layers_; }
  // Whether block `index` of a chunk keeps only its input (recomputed in full).
  bool recomputed_in_full(int index) const {
    return recomputes_block(recompute_, recompute_layers_, index);
  }

  void set_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  // Keep every MoE layer's top-k choices in MicroBatchResult (for --verify's routing flips).
  void set_record_routing(bool on) { record_routing_ = on; }
  // Routing replay: the MoE layers of the following forwards take their top-k experts from
  // `choices` instead of their router (which still gives the gate weights and the auxiliary
  // loss's probabilities), each layer consuming the next [tokens * top_k] entries in the order
  // MoeLayerStats::routing records them; flips are counted in MoeLayerStats::routing_flips.
  // The caller keeps `choices` alive and long enough; nullptr: the router decides.
  void set_replay_routing(const int* choices) { replay_routing_ = choices; }
  MemoryLedger& ledger() { return ledger_; }
  ParamStore<T>& params() { return params_; }
  const ParamStore<T>& params() const { return params_; }
  const MemoryLedger& ledger() const { return ledger_; }
  const ModelConfig& config() const { return cfg_; }
  const ShardLayout& layout() const { return layout_; }

  // Fenced compute time spent in forward and backward since construction (backward: whole
  // backwards and B; weight: W).
  double forward_seconds() const { return fwd_s_; }
  double backward_seconds() const { return bwd_s_; }
  double backward_weight_seconds() const { return wgt_s_; }
  // Fenced forward/backward intervals recorded since the last take_spans().
  std::vector<Span> take_spans() { return std::move(spans_); }
  // An injected slow rank (fault.slow_rank, docs/diagnosis.md): with factor f > 1 every fenced
  // interval (forward, backward, W) waits (f - 1) times its measured length before it ends, so
  // its span and the times above show f times the compute, as a slower device would. 1: off.
  // Throws std::invalid_argument for f < 1 or not finite.
  void set_compute_slowdown(double factor);
  // Seconds the slowdown added inside those intervals since construction (ground truth for a
  // diagnosis; included in the times above).
  double injected_seconds() const { return injected_s_; }

 private:
  // Every chunk's forward in order, each output copied into the next chunk's input.
  MicroBatchResult forward_all(int key, const Tokens& tokens, const Tokens& targets);
  struct Impl;
  ModelConfig cfg_;
  int micro_batch_;
  ShardLayout layout_;
  MemoryLedger ledger_;
  ParamStore<T> params_;
  std::unique_ptr<Impl> impl_;
  UnitHooks* hooks_ = nullptr;
  bool record_routing_ = false;
  const int* replay_routing_ = nullptr;
  Recompute recompute_ = Recompute::none;
  int recompute_layers_ = 0;
  bool split_ = false;
  double fwd_s_ = 0, bwd_s_ = 0, wgt_s_ = 0;
  double slowdown_ = 1, injected_s_ = 0;
  std::vector<Span> spans_;
  int peak_sets_ = 0;
};

// Seconds on the steady clock (the time base of Span).
double steady_seconds();

// The injected slowdown of an interval that ended at `end` (steady seconds) after `measured`
// seconds: waits until end + (factor - 1) * measured (asleep, then spinning on the steady clock
// for the last stretch) and returns that instant, the new end, exactly: what a late wake-up adds
// is the host's noise and lands after the interval, never in the injected time. factor <= 1 or
// measured <= 0: returns `end` at once.
double stretch_interval(double end, double measured, double factor);

}  // namespace paraxis::model
