// Plain configuration of the model and of the training run. Filled and validated by the
// driver (miniapp/deck/deck.cpp); the model trusts it and knows nothing of ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace paraxis::model {

enum class Precision { fp64, fp32, bf16 };

const char* to_string(Precision p);
// Every precision's name, in the enum's order (the deck's choices).
const std::vector<std::string>& precision_names();

// Activation recomputation (Megatron-LM's --recompute-granularity): what the forward pass keeps
// for the backward pass and what the backward pass computes again (docs/model.md,
// "Activation recomputation").
//   none: every activation the backward pass reads is kept.
//   selective: the attention core's softmax probabilities (the s^2 term) are not kept; the
//     backward pass recomputes scores and softmax from the kept q and k.
//   full: only a recomputed block's input is kept; the backward pass runs the block's forward
//     again (its tensor-parallel collectives included) just before the block's backward.
enum class Recompute { none, selective, full };

const char* to_string(Recompute r);
// Every recomputation mode's name, in the enum's order (the deck's choices).
const std::vector<std::string>& recompute_names();

// The attention core (docs/model.md, "Fused attention"): unfused (kernels/attention.hpp: scores
// and softmax probabilities as seq x seq matrices, the probabilities kept for the backward pass)
// or fused (kernels/fused_attention.hpp: tiled with an online softmax, keeping q, k, v and one
// log-sum-exp per row and head, O(seq) memory; the backward pass recomputes the probabilities).
enum class Attention { unfused, fused };

const char* to_string(Attention a);
// Every attention's name, in the enum's order (the deck's choices).
const std::vector<std::string>& attention_names();

struct MoeConfig {
  int experts = 0;  // 0: every block has a dense MLP
  int top_k = 1;
  int every = 1;               // block l is MoE when (l + 1) % every == 0
  double capacity_factor = 0;  // 0: dropless
  double aux_loss_coef = 0.01;
  double router_skew = 0;  // Zipf-like bias on the router's initial weights (benchmarking)
};

struct ModelConfig {
  int vocab = 256;
  int seq_len = 32;
  int hidden = 64;
  int heads = 4;
  int layers = 4;
  int ffn = 256;
  MoeConfig moe;
  Attention attention = Attention::unfused;
  // The attention-probability dropout of a published run (model.attention_dropout, for
  // `paraxis plan` alone: paraxis's model has no dropout and a run refuses a value above 0). The
  // planner charges its memory-bound pass over the unfused scores (perfmodel/compute_efficiency).
  double attention_dropout = 0;

  int head_dim() const { return hidden / heads; }
  bool is_moe_layer(int layer) const { return moe.experts > 0 && (layer + 1) % moe.every == 0; }
  int moe_layer_count() const;
};

struct TrainConfig {
  int global_batch = 8;
  int micro_batch = 1;
  int steps = 5;
  int warmup_steps = 1;  // steps run before measurement starts (they train, untimed)
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double adam_eps = 1e-8;
  double weight_decay = 0.0;
  double grad_clip = 1.0;  // 0: no clipping
  std::uint64_t seed = 1234;
  Precision precision = Precision::fp32;
  int corpus_branching = 8;  // successors per token in the synthetic Markov corpus
  Recompute recompute = Recompute::none;
  // With recompute full: the first recompute_layers blocks of each model chunk are recomputed
  // (Megatron-LM's "block" method; a chunk with fewer blocks recomputes all of them); 0: every
  // block. Any other mode needs 0 (config_rules.cpp).
  int recompute_layers = 0;

  // Micro-batches of one step, every data-parallel replica together (the per-replica count is
  // config::micro_batches; the configuration rules make both exact).
  int micro_batches_per_step() const { return global_batch / micro_batch; }
};

// Whether block `index` (0-based, within its model chunk) is recomputed in full.
bool recomputes_block(Recompute mode, int recompute_layers, int index);

struct ModelChunk;  // model_pieces.hpp

// The forward FLOPs per token that recomputation adds to a training step (counted like
// forward_flops_per_token, model_pieces.hpp: matmuls, 2 FLOPs per multiply-add): none, 0;
// selective, the attention scores q k^T of every block (2 S H each; the softmax is not a
// matmul); full, the whole forward of every recomputed block (the first recompute_layers blocks
// of each chunk of `chunks`, the model's pipeline chunks in order, e.g. split_layers(model,
// pp * virtual_stages, stage_layers)). Hardware FLOPs per step = (3 x forward + this) x tokens.
double recompute_forward_flops_per_token(const ModelConfig& m, const TrainConfig& t,
                                         const std::vector<ModelChunk>& chunks);

// Tokens per expert that one micro-batch may keep: ceil(cf * tokens * k / E); 0 = dropless.
int expert_capacity(const ModelConfig& m, int tokens);

}  // namespace paraxis::model
