// Communication per training step and axis, as paraxis implements it: every call a rank makes,
// with nccl-tests' S per call (the bytes paraxis's CommLog records), so that the counts and
// bytes here can be compared with a run's time.comm.<axis> {bytes, calls} exactly.
//
// Notation: N = micro_batch * seq_len tokens per micro-batch; H hidden; K top_k; E experts;
// e/a/g/t the activation/accumulator/gradient/parameter element bytes (parallel_config.hpp);
// m = global_batch / (dp * micro_batch) micro-batches per replica and step.
//
// Tensor parallelism (tp > 1), per micro-batch (Shoeybi et al. 2019; Korthikanti et al. 2022
// for sequence parallelism), what gpt_model*.cpp call:
//   without sequence parallelism
//     embedding   forward 1 all-reduce N*H*e
//     each block  forward 2 all-reduces N*H*e; backward 2 all-reduces N*H*e;
//                 MoE block: backward 1 more all-reduce N*K*e (the gate gradient, partial)
//     head        forward 2 all-reduces N*a (max) and 2*N*a (sum-exp and target logit);
//                 backward 1 all-reduce N*H*e
//   with sequence parallelism (every S = N*H*e)
//     embedding   forward 1 reduce-scatter; backward 1 all-gather
//     each block  forward 2 all-gathers + 2 reduce-scatters; backward 4 all-gathers (2 of the
//                 incoming gradient, 2 re-gathering the LayerNorm outputs kept sharded) +
//                 2 reduce-scatters; MoE + 1 all-reduce N*K*e
//     head        forward 1 all-gather + the 2 loss all-reduces; backward 1 all-gather +
//                 1 reduce-scatter
//   per step: 1 all-reduce of 8 bytes (the gradient norm); with sequence parallelism also one
//   all-reduce of the LayerNorm gradients this rank owns (g bytes each), if it owns any.
// Split backward (zb-h1, docs/perfmodel.md "Zero-bubble pipeline"): B makes the backward's
// calls but those that serve only weight gradients, which W makes: without sequence
// parallelism W makes none; with it W all-gathers, per block, the two LayerNorm outputs (moved
// from B) and again the incoming gradients of the output projection and, in a dense block, of
// the MLP's second linear (2 more than the unsplit backward per dense block, 1 per MoE block,
// whose experts' rows B kept), on the head chunk the final LayerNorm output (moved from B), and
// on the embedding chunk the gradient its scatter-add reads (moved from B). Expert
// parallelism's all-to-alls and the MoE gate's all-reduce stay in B. ZeRO-3 gathers a unit for
// B only (W reads no parameter), and not the embedding's (its B reads none): m gathers of the
// embedding unit per step instead of 2m.
// Activation recomputation (docs/model.md): the backward of a block recomputed in full first
// runs its forward again, with that forward's calls (2 all-reduces, or with sequence
// parallelism 2 all-gathers + 2 reduce-scatters; an MoE block's 3 all-to-alls); selective
// recomputation issues none.
// Pipeline parallelism (pp > 1), per step: each forward of a chunk with a successor sends its
// output (N_l*H*e, N_l = N/tp with sequence parallelism, else N), each backward of a chunk
// with a predecessor sends its input gradient (the same size); receives are calls, not bytes;
// plus 1 all-reduce of 8 bytes (the gradient norm).
// Data parallelism, per ZeRO stage (P: the rank's padded parameter elements,
// shard_params.hpp): 0 all-reduce P*g in buckets of comm.bucket_mb; 1 reduce-scatter P*g +
// all-gather P*t; 2 m*P*g + P*t; 3 m*(2*P*t + P*g); plus 8 bytes (the norm) at stages >= 1, and
// at stage 0 with expert parallelism. Expert units are reduced over dp/ep ranks instead of dp.
// The ZeRO paper's 2 Psi (stages 0-2) vs 3 Psi (stage 3), the 1.5x, holds for m = 1 only:
// paraxis reduces gradients after every micro-batch at stages 2 and 3 (they are sharded, so
// they cannot accumulate locally) and re-gathers parameters per micro-batch at stage 3, so
// their traffic grows with m; stages 0 and 1 accumulate locally and reduce once.
// Expert parallelism (ep > 1), per MoE layer and micro-batch: 1 all-to-all of the per-expert
// row counts (E*4 bytes sent); forward 2 all-to-alls of rows (dispatch: the rank's kept rows
// R_kept*H*e; return: the rows its experts computed R_local*H*e), backward the same 2.
#pragma once

#include <vector>

#include "model/model_config.hpp"
#include "perfmodel/collectives.hpp"
#include "perfmodel/model_chunks.hpp"
#include "perfmodel/parallel_config.hpp"
#include "perfmodel/shard_params.hpp"

namespace paraxis::perfmodel {

// `count` calls of `op`, each of nccl-tests size `bytes`, over `group` ranks (0: the axis's
// whole group; data-parallel traffic of expert units runs over dp/ep ranks).
struct CollectiveCount {
  Collective op = Collective::all_reduce;
  double bytes = 0;
  long count = 0;
  int group = 0;
};

struct AxisTraffic {
  std::vector<CollectiveCount> ops;  // one entry per distinct (op, bytes, group)
  long receives = 0;  // point-to-point receives: calls in paraxis's log, their bytes not added
  void add(Collective op, double bytes, long count = 1, int group = 0);
  void add(const AxisTraffic& other, long times = 1);
  double bytes() const;  // what this rank sends: sum of bytes * count
  long calls() const;    // as the log counts them: every call, receives included
  double bytes_of(Collective op) const;
  long calls_of(Collective op) const;
};

// Bytes on the bus: each call's S times its nccl-tests busbw factor on `group` ranks (a call's
// own group when it names one) — the volume the ZeRO paper counts (an all-reduce of P
// elements moves 2 P, a reduce-scatter or all-gather P, for large groups).
double bus_bytes(const AxisTraffic& traffic, int group);

struct StepTraffic {
  AxisTraffic tp, pp, dp, ep;
};

// Rows of one MoE layer and micro-batch: kept by this rank's routing (sent out by the
// dispatch), and computed by this rank's experts (sent back by the return). Negative: the
// expectation under uniform routing (expected_kept_rows).
struct ExpertRouting {
  double kept_rows = -1, local_rows = -1;
};

// Kept rows under uniform routing: N*K dropless, else min(N*K, E * capacity).
double expected_kept_rows(const model::ModelConfig& m, int tokens);

// One (micro-batch, chunk) pass, split by direction. Under a schedule that splits the backward
// (schedule::splits_backward(c.schedule)) `backward` holds B's calls and `backward_weight` W's;
// else `backward_weight` is empty.
struct PassTraffic {
  AxisTraffic forward, backward, backward_weight;
};
PassTraffic tensor_parallel_chunk_traffic(const model::ModelConfig& m, const Scenario& c,
                                          const ChunkLayers& chunk);
PassTraffic expert_chunk_traffic(const model::ModelConfig& m, const Scenario& c,
                                 const ChunkLayers& chunk, const ExpertRouting& routing = {});

// Per step, for the rank at pipeline stage `stage` and data-parallel index `dp_rank` (which
// matters only for the sequence-parallel LayerNorm sum under ZeRO >= 1: the ranks own
// different slices).
AxisTraffic tensor_parallel_step_traffic(const model::ModelConfig& m, const Scenario& c, int stage,
                                         int dp_rank = 0);
// Its once-per-step part alone (the norm, the sequence-parallel LayerNorm sum).
AxisTraffic tensor_parallel_step_extras(const model::ModelConfig& m, const Scenario& c, int stage,
                                        int dp_rank = 0);
AxisTraffic pipeline_step_traffic(const model::ModelConfig& m, const Scenario& c, int stage);
AxisTraffic data_parallel_step_traffic(const model::ModelConfig& m, const Scenario& c, int stage);
// The same two from the stage's units already made (shard_units(m, c, stage)).
AxisTraffic tensor_parallel_step_extras(const Scenario& c, const std::vector<ParamUnit>& units,
                                        int dp_rank = 0);
AxisTraffic data_parallel_step_traffic(const Scenario& c, const std::vector<ParamUnit>& units);
AxisTraffic expert_step_traffic(const model::ModelConfig& m, const Scenario& c, int stage,
                                const ExpertRouting& routing = {});
StepTraffic step_traffic(const model::ModelConfig& m, const Scenario& c, int stage, int dp_rank = 0,
                         const ExpertRouting& routing = {});

// One data-parallel call of a step, in the order the step issues it (data_parallel_call_sequence),
// with its calibrated seconds once the calibration has timed the sequence as the step issues it
// (docs/perfmodel.md, "Data parallelism: the calls as issued").
struct SequenceCall {
  Collective op = Collective::all_reduce;
  double bytes = 0;            // nccl-tests S
  int group = 0;               // ranks (0: the axis's whole group)
  bool after_compute = false;  // a compute phase comes just before it
  double seconds = 0;          // calibrated; 0 until measured
  // With after_compute, how much compute: 0 a whole phase (before a gradient reduction the
  // backward, before an all-gather the optimizer); else that share of one micro-batch's forward
  // and backward of the stage (ZeRO 3: the units' compute since the previous call, by FLOPs).
  double compute_share = 0;
};
using CallSequence = std::vector<SequenceCall>;
// The data-parallel calls of a step of the stage `stage`, in issue order: ZeRO 0 the gradient
// buckets' all-reduces (model::gradient_buckets; then the norm's 8 B all-reduce with expert
// parallelism); ZeRO 1 the units' reduce-scatters (the last unit first with comm.overlap), the
// norm's all-reduce, and after the optimizer the units' all-gathers; ZeRO 2 the units'
// reduce-scatters (the last unit first) after each micro-batch's backward, a group per micro-batch
// whose first call is after_compute, then the norm's all-reduce and the all-gathers; ZeRO 3 the
// stage's schedule action by action (zero_optimizer.cpp's hooks in gpt_model.cpp's order): a
// forward gathers each unit before its piece (the embedding, a block: its dense unit then its
// experts', the head) computes; a backward gathers a piece's units, computes, then
// reduce-scatters them (experts first); under a split backward B gathers (not the embedding's)
// and W reduce-scatters; then the norm's all-reduce. A call's compute_share is the FLOPs
// (model::piece_costs; a backward 2x its forward, a recomputed block's forward again) since the
// previous call; the step's first call follows the optimizer.
CallSequence data_parallel_call_sequence(const model::ModelConfig& m, const Scenario& c, int stage);
// The same from the stage's units alone, for ZeRO 0-2 (ZeRO 3 needs the model's pieces: throws
// std::invalid_argument).
CallSequence data_parallel_call_sequence(const Scenario& c, const std::vector<ParamUnit>& units);
// The calls of `seq` as traffic (counted per op, bytes and group).
AxisTraffic traffic_of(const CallSequence& seq);
// Whether two traffics hold the same calls: the same count per (op, bytes, group).
bool same_calls(const AxisTraffic& a, const AxisTraffic& b);

// The tensor-parallel calls as the step issues them (docs/perfmodel.md, "Tensor parallelism:
// the calls as issued"). One pass of a chunk, forward, backward (B of a split one) and W, each
// its calls in the order gpt_model*.cpp make them (tensor_parallel.hpp's layers): without
// sequence parallelism the embedding's all-reduce, per block the attention's and the MLP's, the
// head's two loss all-reduces; backward the head's, then per block (last first; a recomputed
// block's forward calls first) the MoE gate's, the MLP's and the attention's; with it every
// activation reduction a reduce-scatter and the gathers before the layers that read them. Each
// call's group is c.tp and its compute_share the FLOPs since the previous call (model::
// piece_costs: a block's half per GEMM pair, a backward 2x, B and W 1x each) over one
// micro-batch's forward and backward of the stage; a call right after a LayerNorm or another call
// has none (after_compute false).
struct PassCalls {
  CallSequence forward, backward, backward_weight;
};
// One micro-batch of the stage, what the calibration times: every chunk's forward (in chunk
// order), then every backward and W (last chunk first); the first call after_compute with share
// 0 (it follows the previous micro-batch's backward: a whole micro-batch's compute). Its
// traffic_of is mb-th of tensor_parallel_step_traffic less the extras. Empty when tp = 1.
CallSequence tensor_parallel_call_sequence(const model::ModelConfig& m, const Scenario& c,
                                           int stage);
// Chunk `chunk_id`'s passes with the seconds of `timed` (tensor_parallel_call_sequence(m, c, 0)
// with seconds): empty passes when the chunk is not stage 0's or `timed` is not that sequence
// (op, bytes and group per position).
PassCalls tensor_parallel_timed_chunk(const model::ModelConfig& m, const Scenario& c, int chunk_id,
                                      const CallSequence& timed);
// The step's tensor-parallel calls of stage 0 in issue order: the stage's schedule action by
// action, each action its chunk's timed pass (tensor_parallel_timed_chunk), then the
// once-per-step calls (tensor_parallel_step_extras) with seconds -1 (not timed: their curve's).
// Empty when `timed` does not fit.
CallSequence tensor_parallel_step_sequence(const model::ModelConfig& m, const Scenario& c,
                                           const CallSequence& timed);

// The ZeRO volumes alone, for P elements over one group (no norm, no buckets): what the
// ZeRO paper's 2 Psi / 3 Psi comparison is about. P is whatever the caller passes: paraxis's
// padded count (padded_elements) for an exact figure, or an unpadded estimate.
struct ZeroVolume {
  double reduce_bytes = 0;  // gradients: all-reduce (stage 0) or reduce-scatter
  double gather_bytes = 0;  // parameters: all-gather
  double total() const { return reduce_bytes + gather_bytes; }
};
ZeroVolume zero_volume(int zero, double P, int m, int grad_bytes, int param_bytes);

}  // namespace paraxis::perfmodel
