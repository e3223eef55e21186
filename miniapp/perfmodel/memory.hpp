// Bytes per rank, as paraxis allocates them (every View goes through its MemoryLedger), so the
// figures can be held against summary.json's memory section.
//
// Model state per parameter element (P: the rank's padded elements; C: the elements it owns,
// P/dp under ZeRO >= 1 — per unit, over dp/ep ranks for expert units):
//   parameters   t*P                (stage 3: t*C)
//   gradients    g*P  stage 0;  g*P + g*C stage 1 (the full accumulation buffer and the
//                reduce-scatter's shard both stay);  g*C stages 2, 3
//   optimizer    2*g*C (Adam m, v) + g*C fp32 master copy when the parameters are bf16
// bf16 at stage 0 is therefore 2 + 4 + 12 = 18 bytes per parameter, as Megatron-LM's
// distributed optimizer with fp32 gradients; the ZeRO paper's 16 (2 + 2 + 12) assumes fp16
// gradients, which paraxis does not keep.
// Per step, ZeRO also allocates and frees: stage 2 the full gradient buffer g*P and a receive
// shard; stage 3 a gathered-unit workspace (t * largest unit) and its gradient workspace
// (g * largest unit, two with comm.overlap) per kind (dense, expert), and a receive shard.
//
// Activations: paraxis's adaptation of Korthikanti et al. 2022 (arXiv 2205.05198), Table 2.
// Kept per (micro-batch, chunk) in flight, per block, with Hl = H/tp, Fl = ffn/tp,
// Nl = N/tp with sequence parallelism (else N), B = micro_batch, S = seq_len, al = heads/tp:
//   e * (Nl*H block input + Nl*H LN1 out + N*Hl attention output + Nl*H x_mid + Nl*H LN2 out
//        + 3*N*Hl q, k, v + B*al*S*S softmax probabilities + 2*N*Fl MLP u, gelu(u))
//   + a * 4*Nl LayerNorm mean and 1/std
// an MoE block replaces 2*N*Fl by e*(N*E router probs + N*K gates) + 4*N*K expert indices
// + 4*(3*N*K + 4*E + 1 + E*ceil(N*K/64)) routing index arrays + e*(2*R*H + 2*R*Fl) expert rows
// (R = N*K dropless; with ep > 1 the rows sent and the rows computed are kept apart, plus
// R*H*e of expert outputs before they travel back and 8*R bytes of permutations). The chunk
// also keeps its output (Nl*H*e); with the embedding the tokens (4*N); with the head the
// targets (4*N), the final LayerNorm output Nl*H*e, the logits N*ceil(V/tp)*e and
// a*(2*Nl + N) statistics. No dropout, so none of the paper's masks; LayerNorm outputs are
// kept sharded under sequence parallelism and gathered again in backward, so every term is
// divided by tp. Scratch shared by every micro-batch (workspaces of one layer's forward and
// backward) comes on top, once per rank.
// Split backward (zb-h1): a set lives until its W ends, and each set adds the LayerNorm
// parameter-gradient buffer B fills for W: g * (4*H per block + 2*H on the head's chunk); the
// scratch has no q, k, v gradients (3*N*Hl*e less: B writes them into the set's q, k, v).
// Recomputation (docs/model.md): selective keeps a block's bytes less e*B*al*S*S (one shared
// probabilities buffer per rank); a block recomputed in full keeps its input e*Nl*H, and the
// rank holds one working block (a stored block less its input) per kind recomputed.
// Fused attention (model.attention: fused, docs/model.md): no S*S term anywhere; a block keeps
// a*B*al*S of log-sum-exp instead of the probabilities, and the shared scratch holds the fused
// kernel's 2*N*Hl*e (dk, dv) + a*B*al*S (delta) instead of the unfused kernel's
// 5*N*Hl*e + e*B*al*S*S.
#pragma once

#include <vector>

#include "model/model_config.hpp"
#include "perfmodel/model_chunks.hpp"
#include "perfmodel/parallel_config.hpp"
#include "perfmodel/shard_params.hpp"
#include "perfmodel/step_traffic.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::perfmodel {

struct ModelStateBytes {
  double params = 0, grads = 0, optimizer = 0;
  double total() const { return params + grads + optimizer; }
};

// The model state for P elements sharded over one group of dp ranks (C = P/dp under
// ZeRO >= 1), per the table above: the closed form, for P from any source.
ModelStateBytes model_state_bytes(int zero, double P, int dp, model::Precision precision);
// Exactly, from the rank's units (each with its own group and padding).
ModelStateBytes model_state_bytes(const std::vector<ParamUnit>& units, const Scenario& c);
// ZeRO's buffers that live only during a step.
double zero_step_buffer_bytes(const std::vector<ParamUnit>& units, const Scenario& c);

// Activations one block keeps per micro-batch under c.recompute (layer: its index in the
// model; index: its index within its model chunk, which decides whether full recomputation
// takes it, model::recomputes_block): selective drops the probabilities (e*B*al*S*S); a block
// recomputed in full keeps its input alone (e*Nl*H).
double block_activation_bytes(const model::ModelConfig& m, const Scenario& c, int layer, int index,
                              const ExpertRouting& routing = {});
// The LayerNorm parameter-gradient buffer of one set under a schedule that splits the backward
// (schedule::splits_backward(c.schedule)): B computes the LayerNorm gradients, W adds them, so
// they wait in the set: g * (4*H per block (two LayerNorms, weight and bias) + 2*H for the
// final LayerNorm on the chunk with the head). 0 for other schedules.
double layernorm_gradient_set_bytes(const model::ModelConfig& m, const Scenario& c,
                                    const ChunkLayers& chunk);
// One (micro-batch, chunk) activation set: the blocks, the chunk's output, the embedding's
// tokens, the head's activations, and under a split backward layernorm_gradient_set_bytes.
double chunk_activation_bytes(const model::ModelConfig& m, const Scenario& c,
                              const ChunkLayers& chunk, const ExpertRouting& routing = {});
// Workspaces shared by all of a rank's micro-batches and layers; with recomputation, once per
// shard, selective's probabilities buffer (e*B*al*S*S) and full's working set for each kind of
// block (dense, MoE) the stage recomputes (a stored block's bytes less its input).
double activation_scratch_bytes(const model::ModelConfig& m, const Scenario& c, int stage,
                                const ExpertRouting& routing = {});

// Most activation sets alive at once on a stage: gpipe m*v (= m), 1f1b min(p - s, m);
// interleaved and zb-h1 from replay_schedule's peak_live (Megatron-LM's warm-up is not a closed
// form; zb-h1's sets live until their W).
int peak_live_sets(const Scenario& c, int stage);
// paraxis keeps a pool of activation sets per chunk that never shrinks: the most sets of each
// of the stage's chunks alive at once, walking the stage's schedule (a set is taken when its
// input receive is posted or its forward starts, freed after its backward, or after its
// backward_weight when the stage's schedule has them). Equal to
// peak_live_sets for one chunk per stage; can exceed it with interleaving.
std::vector<int> peak_live_sets_per_chunk(const Scenario& c, int stage);
// Point-to-point gradient buffers of the pipeline engine (pp > 1): an estimate assuming each
// send completes at the next progress point (a lower bound when the network is slow).
int pipeline_gradient_buffers(const Scenario& c, int stage);
// The same two from a schedule already made for c (make_schedule(c.schedule,
// c.pipeline_shape())), to avoid rebuilding it per stage.
std::vector<int> peak_live_sets_per_chunk(const Scenario& c, int stage,
                                          const schedule::Schedule& sched);
int pipeline_gradient_buffers(const Scenario& c, int stage, const schedule::Schedule& sched);

struct MemoryEstimate {
  double params = 0, grads = 0, optimizer = 0;  // resident between steps
  double step_buffers = 0;                      // ZeRO buffers of the step
  double activations = 0;                       // peak: sets in flight + scratch + pipeline buffers
  double peak = 0;                              // the sum: the high-water mark of a step
};
MemoryEstimate memory_per_rank(const model::ModelConfig& m, const Scenario& c, int stage,
                               const ExpertRouting& routing = {});
// The stage whose rank needs the most (peak); `stage` receives it when given.
MemoryEstimate largest_rank_memory(const model::ModelConfig& m, const Scenario& c,
                                   const ExpertRouting& routing = {}, int* stage = nullptr);

// What the memory model takes from a pipeline schedule, for every stage: peak_live_sets_per_chunk
// and pipeline_gradient_buffers. One walk serves every configuration with the same schedule.
struct ScheduleWalk {
  std::vector<std::vector<int>> live;  // per stage, per chunk of the stage (stage_chunk_ids)
  std::vector<int> gradient_buffers;   // per stage
};
// `sched` is make_schedule(c.schedule, c.pipeline_shape()); only c's pp and v are read.
ScheduleWalk walk_schedule(const Scenario& c, const schedule::Schedule& sched);
// Parts of a configuration made once by a caller that evaluates many (the planner): the walk of
// its schedule, its cut (split_layers(m, c.chunks(), c.stage_layers)) and every stage's
// shard_units(m, c, s).
struct PrebuiltStages {
  const ScheduleWalk* walk = nullptr;
  const std::vector<ChunkLayers>* chunks = nullptr;
  const std::vector<std::vector<ParamUnit>>* units = nullptr;
};
// largest_rank_memory from those parts (every pointer set): the same figures.
MemoryEstimate largest_rank_memory(const model::ModelConfig& m, const Scenario& c,
                                   const PrebuiltStages& parts, const ExpertRouting& routing = {},
                                   int* stage = nullptr);

// Korthikanti et al. 2022, Table 2, activation bytes of one transformer layer (fp16, with
// dropout; s sequence, b micro-batch, h hidden, a heads, t tensor-parallel degree):
//   no parallelism                 s b h (34 + 5 a s / h)
//   tensor parallel                s b h (10 + 24/t + 5 a s / (h t))
//   tensor + sequence parallel     s b h (34/t + 5 a s / (h t))
// with selective recomputation (their section 5) the 5 a s / h term goes; with full
// recomputation a layer keeps its input, 2 s b h (2 s b h / t under sequence parallelism).
enum class KorthikantiCase { no_parallelism, tensor_parallel, tensor_sequence_parallel };
double korthikanti_layer_activation_bytes(KorthikantiCase k, double s, double b, double h, double a,
                                          double t = 1,
                                          model::Recompute r = model::Recompute::none);

}  // namespace paraxis::perfmodel
