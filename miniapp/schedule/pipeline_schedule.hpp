// Pipeline schedules as data. A generator emits, for every pipeline stage, the ordered list of
// actions that stage performs in one training step: the forward and backward of a
// (micro-batch, model chunk) pair, and the point-to-point transfers between consecutive model
// chunks. A validator proves a schedule complete and deadlock-free before anything runs, and a
// replay computes the timeline a schedule gives for given action durations (the bubble model,
// and the check that the generators reproduce the textbook bubble formulas).
//
// Model chunks: the model's layers are cut into p * v contiguous chunks (p stages, v virtual
// stages per rank, v = 1 except for the interleaved schedule); chunk c lives on stage c % p
// (Narayanan et al. 2021's interleaved assignment; for v = 1, chunk c is stage c). Chunk 0
// holds the embedding, chunk p*v - 1 the final LayerNorm, the head and the loss.
//
// Transfers (what the engine does, and what the validator and replay assume):
//   send_activation(mb, c): stage of c sends chunk c's output to chunk c + 1 (non-blocking:
//       the sender goes on at once);
//   recv_activation(mb, c): stage of c posts the receive of chunk c's input (non-blocking);
//       forward(mb, c) then waits until that message has been sent;
//   send_gradient(mb, c): stage of c sends the gradient of chunk c's input to chunk c - 1;
//   recv_gradient(mb, c): stage of c posts the receive of the gradient of chunk c's output;
//       backward(mb, c) waits for it.
// Messages are matched by (kind, micro-batch, chunk), so their order on the wire is free.
//
// Split backward (zero-bubble schedules, Qi et al. 2023; docs/perfmodel.md): a schedule that
// holds backward_weight actions splits every backward in two. backward(mb, c) is then B, the
// gradient with respect to the chunk's input (what chunk c - 1 waits for), and
// backward_weight(mb, c) is W, the gradient with respect to the chunk's weights, which nobody
// waits for: it runs on the same stage after its B, and the pair's activations live until it
// ends. A schedule without backward_weight actions runs each backward whole. All the W of a step
// are part of the step: the optimizer runs after the last one.
// Transfers exist only between chunks on different stages: with p = 1 every chunk is on
// stage 0, which hands chunk c's output to chunk c + 1 in memory (so the schedule has no
// transfer actions, and forward(mb, c + 1) must follow forward(mb, c) on the stage).
// A stage blocks only in a compute action whose input has not been sent yet, so a schedule is
// deadlock-free exactly when this dependency graph is acyclic; the validator checks it by
// simulation.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace paraxis::schedule {

enum class ActionKind {
  forward,
  backward,
  send_activation,
  recv_activation,
  send_gradient,
  recv_gradient,
  backward_weight  // W of a split backward (see above)
};
const char* to_string(ActionKind k);

struct Action {
  ActionKind kind = ActionKind::forward;
  int micro_batch = 0;
  int chunk = 0;  // model chunk, 0 .. p*v - 1
  bool operator==(const Action& o) const {
    return kind == o.kind && micro_batch == o.micro_batch && chunk == o.chunk;
  }
};

enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1 };
const char* to_string(ScheduleKind k);
// "gpipe" | "1f1b" | "interleaved" | "zb-h1"; throws std::invalid_argument naming the value
// otherwise.
ScheduleKind parse_schedule(const std::string& name);

struct PipelineShape {
  int stages = 1;          // p
  int micro_batches = 1;   // m, per data-parallel replica and step
  int virtual_stages = 1;  // v: model chunks per stage
  int chunks() const { return stages * virtual_stages; }
};

// Stage holding model chunk c, and c's index among that stage's chunks (0 .. v-1).
int chunk_stage(const PipelineShape& s, int chunk);
int chunk_local_index(const PipelineShape& s, int chunk);

// One list of actions per stage.
using Schedule = std::vector<std::vector<Action>>;

// Whether the schedule splits its backwards into B and W (holds a backward_weight action).
bool splits_backward(const Schedule& sched);
// Whether make_schedule(kind, ...) splits its backwards (zb_h1).
bool splits_backward(ScheduleKind kind);

// Throws std::invalid_argument naming the problem when the shape does not suit the kind
// (p, m, v < 1; v != 1 for gpipe/1f1b/zb-h1; interleaved with m not divisible by p).
//   gpipe:       every forward (micro-batches in order), then every backward (reverse order);
//   1f1b:        stage s runs min(p - s - 1, m) warm-up forwards, then alternates one forward
//                and one backward, then the remaining backwards (at most p micro-batches'
//                activations alive on any stage);
//   interleaved: Megatron-LM's interleaved 1F1B with v chunks per stage;
//   zb-h1:       Qi et al. 2023's ZB-H1: 1F1B's forwards and B's in 1F1B's order (B carrying
//                1F1B's backward transfers), each stage's W deferred to fill the cool-down's
//                idle slots: stage s runs W(j - s) right after B(j) whenever j - s >= 0, then
//                its remaining W's in micro-batch order. min(p, m) micro-batches are in flight
//                at the peak of every stage (1F1B's peak, which 1F1B reaches on stage 0 only:
//                with m >= p stage s > 0 holds p sets against 1F1B's p - s). With
//                T_F = T_B = T_W = 1 the step takes 3m + (p-1) for m >= p (the paper's bubble
//                (p-1)(T_F + T_B - T_W)) and 2m + 2p - 1 for m < p, where no schedule does
//                better (the last stage, idle until p - 1, has 2m of F and B; the gradient of
//                its last B then crosses p - 1 stages, and stage 0 still runs that W);
//                bubble_fraction_formula gives the general times.
// Receives are posted right before the compute that needs them, sends right after the compute
// that produced the data.
Schedule make_schedule(ScheduleKind kind, const PipelineShape& shape);

// "" when `sched` is a complete, deadlock-free schedule for `shape`, else a description of
// the first problem found: a compute action missing, repeated or on the wrong stage; a
// backward before its forward; a chunk input/gradient consumed without its receive posted
// before it, or a send before the compute that produces its data; a send without its receive
// (or the reverse); a backward_weight before its backward, on another stage, repeated, or
// missing for some pair of a schedule that has one; a deadlock (then: the action each stage is
// blocked in).
std::string validate_schedule(const Schedule& sched, const PipelineShape& shape);

// The timeline of a schedule for given compute durations (transfers take no time; `duration`
// is called for forward, backward and backward_weight actions only): each stage runs its
// actions in order; a compute action starts when the stage is free and its input has been sent
// (a backward_weight needs nothing from another stage). Throws
// std::invalid_argument with validate_schedule's message if the schedule is not valid
// (a deadlock included).
struct ReplayResult {
  double makespan = 0;                  // first action start (0) to last action end
  std::vector<double> busy;             // per stage: sum of compute durations
  std::vector<double> bubble_fraction;  // per stage: 1 - busy / makespan
  double mean_bubble_fraction = 0;      // mean over stages
  // per stage: most (micro-batch, chunk) activation sets alive at once; a set lives from its
  // forward to the end of its backward, or of its backward_weight in a split schedule.
  std::vector<int> peak_live;
  std::vector<std::vector<double>> start, end;  // per stage, per action
};
using ActionDuration = std::function<double(int stage, const Action& a)>;
ReplayResult replay_schedule(const Schedule& sched, const PipelineShape& shape,
                             const ActionDuration& duration);
// replay_schedule without the validation, for a schedule validate_schedule already accepted for
// `shape` (a planner replays one schedule with many durations; validating it each time was
// most of the replay). A schedule that deadlocks is still refused (std::invalid_argument with
// the deadlock); any other problem validate_schedule would find goes unnoticed (an action
// outside the shape is undefined behaviour).
ReplayResult replay_validated_schedule(const Schedule& sched, const PipelineShape& shape,
                                       const ActionDuration& duration);

// The textbook bubble fraction of a step: (p-1)/(m+p-1) for gpipe and 1f1b, (p-1)/(v*m+p-1)
// for interleaved (Huang et al. 2019; Narayanan et al. 2021, section 2.2), (p-1)/(3m+p-1) for
// zb-h1 (Qi et al. 2023, with T_F = T_B = T_W). The zb-h1 value is the unit-time replay's for
// m >= p only; for m < p the schedule's is (2p-1-m)/(2m+2p-1) (bubble_fraction_formula).
double ideal_bubble_fraction(ScheduleKind kind, const PipelineShape& shape);

// The bubble fraction of a step whose forward, B and W take tf, tb and tw on every stage
// (T_W = 0 for a schedule that runs backwards whole: tb is then the whole backward).
// gpipe, 1f1b: (p-1)/(m+p-1), whatever the (not all zero) times; interleaved: (p-1)/(v*m+p-1)
// (every chunk alike); zb-h1: I / (m(tf+tb+tw) + I) with the idle time per stage
//   I = (p-1)(tf+tb) - (min(m, p) - 1) tw,
// which for m >= p is Qi et al. 2023's (p-1)(tf+tb-tw), for tw <= tf + tb.
// Exact for zb-h1, i.e. equal on every stage to the replay of make_schedule(zb_h1, shape), for
// every m and p when tw <= min(tf, tb) (tested for p <= 8, m <= 32). For min(tf, tb) < tw <=
// tf + tb it is below the replay's: for tw > tb, m >= p > 1 no schedule reaches it (the last
// stage, idle until (p-1) tf, has m(tf+tb+tw) of work), and for tw > tf a stage's B + W takes
// longer than the tf + tb between the gradients reaching it, so the next B starts late (p = 2, m =
// 2, tf = 0.25, tb = 1, tw = 0.5: replay 4.5, formula 4.25); replay_with_stage_times is exact.
// With tf = tb = tw = 0 (a step of no length) it is 0 for every kind, as the replay's. Throws
// std::invalid_argument for a negative or non-finite time, zb-h1 with tw > tf + tb (I could
// turn negative: replay the schedule), or a shape make_schedule refuses (named as
// make_schedule names it).
double bubble_fraction_formula(ScheduleKind kind, const PipelineShape& shape, double tf, double tb,
                               double tw);

}  // namespace paraxis::schedule
