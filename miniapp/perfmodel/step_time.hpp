// A predicted training-step time for one configuration, term by term.
//
// Assumptions (docs/perfmodel.md, "Step time"):
//   - compute: a chunk's forward of one micro-batch costs its modelled FLOPs
//     (chunk_forward_flops_per_token * N) / tp at the given achieved rate; backward costs
//     backward_ratio (2) times that; measured per-chunk times may replace both;
//   - recomputation (train.recompute) adds to each backward the forward work it runs again,
//     chunk_recompute_flops_per_token * N / tp at the forward's rate (full: the recomputed
//     blocks' forward; selective: q k^T, 2 S H per block and token), plus for selective the
//     softmax's memory traffic, 2 * B * (heads/tp) * S^2 * e per block, at memory_bytes_per_s
//     when given; the recomputed forward's tp and ep collectives are in the backward's traffic
//     (step_traffic.hpp);
//   - a schedule that splits the backward (zb-h1, docs/perfmodel.md "Zero-bubble pipeline"):
//     W, the weight-gradient GEMMs, costs chunk_weight_gradient_flops_per_token * N / tp at the
//     forward's rate (from the measured forward's time per FLOP when given), or the measured
//     backward_weight_s; B is the rest of the backward (input gradients, attention backward,
//     recomputation, elementwise passes). B keeps the backward's collectives but those W makes
//     (step_traffic.hpp); other schedules run B + W as one backward, as before;
//   - tensor- and expert-parallel collectives are blocking calls inside forward and backward:
//     their alpha-beta time is added to the action that makes them (fully exposed); where the
//     calibration timed the tp calls of one micro-batch as the step issues them (tp_sequence),
//     a chunk of stage 0 takes each pass's sum of those times instead;
//   - the pipeline: paraxis's own schedule replayed (schedule::replay_schedule) with those
//     action times; with pipeline_transfer_occupancy f > 0, each transfer also occupies both
//     its ends for f point-to-point times (pipeline_message_bytes; paraxis's MPI transfers: the
//     sender's post and the receiver's completion run between the stage's compute actions, and
//     an MPI without asynchronous progress moves the message inside them), added to the action
//     that sends or receives it (transfer_time) and counted as bubble, not as busy; the
//     message's flight overlaps compute except on the pipeline's
//     fill and drain, so 2 (pp*v - 1) point-to-point times are added (the first activation's
//     way down and the last gradient's way up), plus the norm's all-reduce. With
//     blocking_pipeline_transfers (a pipeline engine that waits on each transfer, as
//     DeepSpeed's: docs/perfmodel.md "Validation") each action waits for its own instead: a
//     forward for its activation's receive and send, a backward for its gradient's, one
//     point-to-point time each (none past the pipeline's ends), in the pp term, and the fill
//     and drain add nothing more; with tp > 1 each transfer is partitioned over the tensor-
//     parallel ranks (1/tp of the message each) and all-gathered over tp on receipt, and a
//     backward also all-gathers its own forward output again first (DeepSpeed's
//     is_pipe_partitioned and is_grad_partitioned);
//   - the engine's own time around each compute action (action_overhead_s: per chunk, what the
//     calibration's compute-only step spent in its pipelined span outside its actions and
//     transfer copies, per action), added to every replayed action of the chunk as the
//     transfers are and counted as bubble, not as busy; none by default (the planner);
//   - the actions' variation (ActionVariation, the calibration's own samples): each cross-stage
//     dependency turns the other stage's late action into waiting, so the replay of mean times
//     is a lower bound of the expected makespan (a max of sums). With samples and draws > 0 the
//     pipeline is replayed `draws` times, each action's compute drawn independently from its
//     chunk and kind's samples scaled to the action's time, from a seeded std::mt19937_64, and
//     the span and busy times are the draws' means (the same inputs, the same prediction);
//   - data parallelism: exposed in full without comm.overlap; with it the gradient
//     reductions hide behind backward compute (the last micro-batch's at ZeRO 0-1, every
//     micro-batch's at 2-3; under a split backward only W's, which makes the gradients) and
//     only reduction time - dp_overlap x min(reduction time, that backward time) shows
//     (dp_overlap = 1: max(0, reduction time - backward time));
//     parameter all-gathers (ZeRO 1-3) and the norm are always exposed. Where the calibration
//     timed the stage's data-parallel calls as the step issues them (dp_sequence), each call
//     costs its position's time in that sequence; ZeRO-3's gathers,
//     which paraxis runs inside forward and backward, are charged after the pipeline;
//   - per-step tensor-parallel calls (norm, sequence-parallel LayerNorm sum) after the pipeline;
//   - the optimizer's compute: StepTimeInputs::optimizer_s when measured (calibration), else
//     not modelled (0).
// The reported terms are those of the stage that finishes last; they sum to step_time:
// compute + tp + ep are that stage's busy time in the pipeline, bubble the rest of the
// replayed span, then pp, dp and the per-step tp calls.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "model/model_config.hpp"
#include "perfmodel/call_prediction.hpp"
#include "perfmodel/collectives.hpp"
#include "perfmodel/parallel_config.hpp"
#include "perfmodel/step_traffic.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::perfmodel {

struct AxisLinks {
  LinkCost tp, pp, dp, ep;
};

// Per-operation fits of each axis (OpLinks, link_for: call_prediction.hpp).
struct AxisOpLinks {
  OpLinks tp, pp, dp, ep;
};

// What predict_step_time takes from a replay of the pipeline, remembered per (schedule, action
// durations): a planner evaluates many configurations whose replays are the same (every ZeRO
// stage of a layout has the same actions), and the replay is most of its time.
class ReplayMemo {
 public:
  struct Summary {
    double makespan = 0, mean_bubble_fraction = 0;
    std::vector<double> busy;  // per stage
  };
  // The summary for `durations` (per chunk: forward, backward, backward_weight, as replayed)
  // on `sched`, made by `replay` the first time.
  template <class Replay>
  const Summary& get(const schedule::Schedule* sched, std::vector<double> durations,
                     const Replay& replay) {
    Key key{sched, std::move(durations)};
    auto it = memo_.find(key);
    if (it == memo_.end()) it = memo_.emplace(std::move(key), replay()).first;
    return it->second;
  }
  void clear() { memo_.clear(); }
  std::size_t size() const { return memo_.size(); }

 private:
  using Key = std::pair<const schedule::Schedule*, std::vector<double>>;
  std::map<Key, Summary> memo_;
};

// The calibration's samples of each action, for a replay that holds their variation (see above).
struct ActionVariation {
  // Per model chunk (pp * v entries; empty: none): seconds of each timed forward, backward (B of
  // a split backward) and W. Their scale is free: a draw is the action's compute time
  // (forward_s, ...) times the sample over its set's mean, so the draws' mean is that time. A
  // chunk or kind without samples keeps its time.
  std::vector<std::vector<double>> forward, backward, backward_weight;
  int draws = 0;           // replays averaged; 0: one replay of the action times
  std::uint64_t seed = 1;  // the std::mt19937_64's seed
  bool empty() const { return forward.empty() && backward.empty() && backward_weight.empty(); }
};

struct StepTimeInputs {
  double flops_per_s = 0;  // achieved per device (measured); unused when forward_s is given
  AxisLinks links;
  double backward_ratio = 2.0;
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::ring;
  // Per model chunk (pp * v entries): compute seconds of one micro-batch's forward and
  // backward. Empty: from FLOPs (forward) and backward_ratio (backward). The backward is the
  // whole backward, but for a schedule that splits it (schedule::splits_backward) with
  // backward_weight_s given: then backward_s is B's alone (what a zb-h1 run measures).
  std::vector<double> forward_s, backward_s;
  // Per model chunk: W's seconds, the weight gradients (measured, or set_compute_times's), read
  // by schedules that split the backward only. Empty: W from the chunk's weight-gradient FLOPs
  // (see above), at most the whole backward, and B the rest of it.
  std::vector<double> backward_weight_s;
  ExpertRouting routing;
  AxisOpLinks op_links;    // per-operation fits; empty: the axis links
  double optimizer_s = 0;  // the optimizer step's compute, when measured (0: not modelled)
  // With comm.overlap, the fraction of a gradient reduction's time that progresses behind the
  // backward (calibrated: an MPI without asynchronous progress advances a request only inside
  // MPI calls, 0); 1: all of it, as far as the backward is long.
  double dp_overlap = 1.0;
  // The data-parallel calls timed as the step issues them (data_parallel_call_sequence, each
  // call's calibrated seconds): where a stage's data-parallel traffic is these calls, its
  // reductions and the rest are their sums instead of each call's curve time. Empty: curves.
  CallSequence dp_sequence;
  // The tensor-parallel calls of one micro-batch timed as the step issues them
  // (tensor_parallel_call_sequence of stage 0, each call's calibrated seconds): a chunk of stage 0
  // whose passes are these calls takes their sums per pass instead of each call's curve time.
  // Empty: curves (the planner).
  CallSequence tp_sequence;
  // The point-to-point times each end of a pipeline transfer spends in its own calls, between
  // its compute actions (see above): 1 for paraxis's MPI transfers (the report's calibrated
  // costs), 0 where transfers run on their own engines (NCCL's kernels and copy engines: a
  // planner's machine), the model before it had this term.
  double pipeline_transfer_occupancy = 0.0;
  // The pipeline engine blocks compute on each point-to-point transfer (see above).
  bool blocking_pipeline_transfers = false;
  // Per model chunk: the engine's seconds per action outside compute and transfers, added to
  // each of the chunk's replayed actions and counted as bubble (see above). Empty: none.
  std::vector<double> action_overhead_s;
  // The actions' samples (see above); a replay with them is not remembered in replay_memo.
  ActionVariation variation;
  // Device memory bandwidth (B/s) for memory-bound passes; 0: not modelled (today only the
  // softmax selective recomputation runs again uses it).
  double memory_bytes_per_s = 0;
  // make_schedule(c.schedule, c.pipeline_shape()), built and validated by the caller (a planner
  // reuses one per pipeline shape); null: built and validated here.
  const schedule::Schedule* schedule = nullptr;
  // split_layers(m, c.chunks(), c.stage_layers), when the caller has it; null: cut here.
  const std::vector<ChunkLayers>* chunks = nullptr;
  // shard_units(m, c, s) for every stage s, when the caller has them; null: made here.
  const std::vector<std::vector<ParamUnit>>* stage_units = nullptr;
  // Replays remembered across calls with the same `schedule` (which must outlive the memo's
  // entries); null: every call replays. Only used together with `schedule`.
  ReplayMemo* replay_memo = nullptr;
};

struct StepTimeBreakdown {
  double compute = 0, bubble = 0, tp = 0, pp = 0, dp = 0, ep = 0, optimizer = 0;
  double step_time = 0;
  double pipeline_span = 0;    // the replayed schedule's makespan
  double bubble_fraction = 0;  // mean over stages of 1 - busy / span (the replay's)
  int stage = 0;               // the stage the terms describe
};

// Throws std::invalid_argument when the configuration does not fit the model (divisibility,
// chunks, schedule shape), when forward_s/backward_s/backward_weight_s have the wrong length,
// when a backward_weight_s entry is negative or (without backward_s) exceeds the modelled
// backward, when no rate is given and forward_s is empty, when action_overhead_s or a variation's
// samples have the wrong length or a negative entry, or a chunk's samples have no positive mean.
StepTimeBreakdown predict_step_time(const model::ModelConfig& m, const Scenario& c,
                                    const StepTimeInputs& in);

// Bytes of one pipeline transfer: a micro-batch's activation (or its gradient) at a chunk
// boundary, split over tp under sequence parallelism.
double pipeline_message_bytes(const model::ModelConfig& m, const Scenario& c);
// The transfers chunk k of `chunks` makes in one forward (or one backward) at `p2p` seconds
// each: one per neighbouring chunk (k - 1 and k + 1), each on another stage when pp > 1.
double transfer_time(int chunks, int k, double p2p);

// Seconds of every call of `traffic` on `group` ranks (a call's own group when it names one);
// when `traffic` holds `as_issued`'s calls (a call's group 0 read as `group`), the sum of their
// calibrated times (dp_sequence, the tp sequence's passes), a position with seconds < 0 its
// curve's.
double traffic_time(const AxisTraffic& traffic, int group, const LinkCost& link,
                    AllReduceAlgorithm all_reduce = AllReduceAlgorithm::ring,
                    const OpLinks* per_op = nullptr, const CallSequence* as_issued = nullptr);

}  // namespace paraxis::perfmodel
