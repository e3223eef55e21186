// GPT decoder on one rank: token + learned position embeddings, `layers` pre-LayerNorm blocks
// (causal multi-head attention + residual, then a GELU MLP or an MoE layer + residual), final
// LayerNorm, untied LM head, cross-entropy. Forward and backward of one micro-batch at a
// time; gradients accumulate in the ParamStore until the optimizer step.
#pragma once

#include <Kokkos_Core.hpp>
#include <memory>
#include <vector>

#include "memory_ledger.hpp"
#include "model_config.hpp"
#include "param_store.hpp"

namespace paraxis::model {

// Routing statistics of one MoE layer for one micro-batch.
struct MoeLayerStats {
  std::vector<int> tokens_per_expert;  // kept assignments
  std::vector<int> dropped_per_expert;
  double aux_loss = 0;       // L_aux of this micro-batch (before the coefficient)
  std::vector<int> routing;  // [tokens * top_k] chosen experts, when routing is recorded
};

// A fenced compute interval, in seconds on the steady clock (for the trace).
struct Span {
  const char* name;
  double begin, end;
};

struct MicroBatchResult {
  double ce_sum = 0;               // sum of token cross-entropies of the micro-batch
  double aux_sum = 0;              // sum over MoE layers of L_aux (before the coefficient)
  std::vector<MoeLayerStats> moe;  // one entry per MoE layer
};

// Called around each unit's compute (unit 0: embedding, 1..layers: the blocks, layers+1:
// final LayerNorm and head). The model knows nothing of ranks; a data-parallel trainer uses
// these to gather ZeRO-3 parameters and to reduce gradients as soon as they are final.
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int /*unit*/) {}
  virtual void after_forward(int /*unit*/) {}
  virtual void before_backward(int /*unit*/) {}
  virtual void after_backward(int /*unit*/) {}
};

template <class T>
class GptModel {
 public:
  using Space = Kokkos::DefaultExecutionSpace;
  using G = kernels::acc_t<T>;
  using Tokens = Kokkos::View<int*, Kokkos::LayoutRight, Space::memory_space>;

  // unit_multiple: pad every unit of the flat layout to a multiple of it (ZeRO shards).
  // allocate_store: false leaves parameters, gradients and optimizer state to the caller.
  GptModel(const ModelConfig& cfg, int micro_batch, int unit_multiple = 1,
           bool allocate_store = true);
  ~GptModel();
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  void initialize(std::uint64_t seed);

  // Forward and backward of one micro-batch of `micro_batch` sequences (tokens and targets
  // of micro_batch * seq_len entries). ce_scale scales d(loss)/d(CE sum), aux_scale the
  // gradient of each layer's L_aux. Gradients accumulate.
  MicroBatchResult forward_backward(const Tokens& tokens, const Tokens& targets, double ce_scale,
                                    double aux_scale);
  // Forward only (no activations kept for backward are needed afterwards).
  MicroBatchResult forward(const Tokens& tokens, const Tokens& targets);

  void set_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  // Keep every MoE layer's top-k choices in MicroBatchResult (for --verify's routing flips).
  void set_record_routing(bool on) { record_routing_ = on; }
  MemoryLedger& ledger() { return ledger_; }
  ParamStore<T>& params() { return params_; }
  const ParamStore<T>& params() const { return params_; }
  const MemoryLedger& ledger() const { return ledger_; }
  const ModelConfig& config() const { return cfg_; }

  // Fenced compute time spent in forward and backward since construction.
  double forward_seconds() const { return fwd_s_; }
  double backward_seconds() const { return bwd_s_; }
  // Fenced forward/backward intervals recorded since the last take_spans().
  std::vector<Span> take_spans() { return std::move(spans_); }

 private:
  struct Impl;
  ModelConfig cfg_;
  int micro_batch_;
  MemoryLedger ledger_;
  ParamStore<T> params_;
  std::unique_ptr<Impl> impl_;
  UnitHooks* hooks_ = nullptr;
  bool record_routing_ = false;
  double fwd_s_ = 0, bwd_s_ = 0;
  std::vector<Span> spans_;
};

// Model FLOPs of one forward pass per token, derived from the kernels paraxis runs (matmuls
// only: 2 FLOPs per multiply-add; full S x S attention products as computed). A training step
// costs 3x the forward (backward = 2x forward).
double forward_flops_per_token(const ModelConfig& cfg);

// Seconds on the steady clock (the time base of Span).
double steady_seconds();

}  // namespace paraxis::model
