// The single-rank training loop, the reference every parallel configuration must reproduce:
// each step takes `global_batch` sequences of the synthetic corpus, runs them as micro-batches
// of `micro_batch` (gradients accumulated), clips the global gradient norm and applies AdamW.
// Storage precision is a run-time choice; `make_trainer` picks the instantiation.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpt_model.hpp"
#include "memory_ledger.hpp"
#include "model_config.hpp"
#include "state_pieces.hpp"
#include "synthetic_corpus.hpp"

namespace paraxis::model {

struct MoeStepStats {
  int min_tokens = 0, max_tokens = 0;  // per expert, summed over micro-batches and MoE layers
  double mean_tokens = 0;
  double imbalance = 0;  // max / mean
  long dropped = 0;
  // Summed over micro-batches and MoE layers (every rank's tokens), per expert.
  std::vector<long long> tokens_per_expert, dropped_per_expert;
};

// Communication of one step on one axis (filled by parallel trainers).
struct CommTotals {
  double time_s = 0, exposed_s = 0;
  std::size_t bytes = 0;
  long calls = 0;
  // Of exposed_s, the time spent waiting for the group's last rank to start each collective
  // (point-to-point: their exposed time); docs/diagnosis.md, "Wait time".
  double wait_s = 0;
};

struct StepResult {
  int step = 0;          // 0-based
  double loss = 0;       // objective: mean cross-entropy + aux_loss_coef * aux_loss
  double lm_loss = 0;    // mean cross-entropy over every token of the global batch
  double aux_loss = 0;   // sum over MoE layers of the mean (over micro-batches) L_aux
  double grad_norm = 0;  // global gradient norm before clipping
  double time_s = 0;     // wall time of the step (fenced)
  double forward_s = 0, backward_s = 0, optimizer_s = 0;  // fenced phases (may contain comm)
  // W of a split backward (zero-bubble schedules; backward_s is then B's): 0 otherwise.
  double backward_weight_s = 0;
  double compute_s = 0;  // the phases less the communication the step was blocked in inside them
  // Of the phases, the seconds an injected slow rank (fault.slow_rank) added: 0 unless this rank
  // is slowed in this step (the ground truth a diagnosis is checked against).
  double injected_s = 0;
  // Pipeline parallelism (pp > 1): the pipelined part of the step on this rank, from a
  // barrier of the pipeline group to the barrier after its last action: its length, the
  // fenced durations of its compute actions, and bubble = 1 - busy / span (measured, never
  // derived from the schedule). 0 without pipeline parallelism.
  double pipeline_span_s = 0, pipeline_busy_s = 0, bubble_fraction = 0;
  int forward_actions = 0, backward_actions = 0;  // compute actions this rank ran
  int backward_weight_actions = 0;                // W actions (split backward only)
  int peak_live_activations = 0;  // most (micro-batch, chunk) activation sets alive at once
  MoeStepStats moe;
  std::vector<Span> spans;  // forward/backward/optimizer intervals of this step
  struct CommSpan {
    const char* axis;
    const char* op;
    double begin, end, exposed;
    std::size_t bytes;
    double wait = 0;  // of exposed, waiting for the group's last rank (CommTotals::wait_s)
    int ranks = 0;    // the communicator's size (parallel::CommEvent::ranks)
  };
  std::vector<CommSpan> comm_spans;        // every communication call of this step
  std::map<std::string, CommTotals> comm;  // per axis ("tp", "pp", "dp", "ep")
  // What the step's measurement could not do (e.g. a wait time left unattributed), once each.
  std::vector<std::string> notes;
  // With record_routing: the top-k experts of every token of the global batch, micro-batch
  // by micro-batch in single-rank order, MoE layers in order within each ([tokens * top_k]).
  std::vector<int> routing;
  // With replay_routing: tokens (of every micro-batch and MoE layer) whose own top-k, in
  // order, differs from the replayed one.
  long routing_flips = 0;
};

// Bytes resident between steps (params/grads/optimizer), and high-water marks during steps.
struct MemoryReport {
  std::size_t params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0;
  std::size_t activations_peak_bytes = 0, peak_bytes = 0;
  std::size_t params_peak_bytes = 0, grads_peak_bytes = 0, optimizer_peak_bytes = 0;
};

MemoryReport memory_report(const MemoryLedger& ledger);

class Trainer {
 public:
  virtual ~Trainer() = default;
  virtual StepResult step() = 0;
  virtual void record_routing(bool on) = 0;
  // Routing replay: the following steps route every token to the experts `routing` names
  // (what StepResult::routing recorded for one step, in that order; the caller keeps it alive
  // and calls this again before each step it replays) instead of the router's own top-k; the
  // router's own probabilities of those experts still give the gate weights, and capacity
  // applies as usual. nullptr: the router decides. The single-rank trainer implements it (the
  // reference of --verify); others throw std::logic_error for a non-null routing.
  virtual void replay_routing(const std::vector<int>* routing);
  // All parameters (master copy) in ParamStore order, converted to double on the host.
  virtual std::vector<double> parameters() const = 0;
  virtual std::size_t parameter_count() const = 0;  // logical elements, padding excluded
  // The gradients of the last step (summed over its micro-batches, before clipping) in
  // ParamStore order, as parameters() lists the parameters: what the PyTorch reference
  // compares (tools/reference/). The single-rank trainer implements it; the default throws
  // std::logic_error.
  virtual std::vector<double> gradients() const;
  // The largest difference between copies of one parameter held by several ranks (the
  // tensor-parallel replicas of LayerNorms, replicated biases, positions, the router): 0 when
  // every copy is bitwise the same, as it must be. Collective; 0 on one rank.
  virtual double replica_divergence() const { return 0; }
  virtual MemoryReport memory() const = 0;
  virtual const SyntheticCorpus& corpus() const = 0;

  // Checkpoints (docs/checkpoint.md). save_state hands this rank's share of the training state
  // to `sink`: the master parameters and both AdamW moments of every tensor piece it owns, as
  // pieces of the logical tensors (state_pieces.hpp), each piece held by exactly one rank of
  // the run. load_state reads the pieces this rank owns in its own layout (any layout the
  // checkpoint was written under) and leaves the trainer as after `steps` completed steps: the
  // data position, the optimizer's step count and the learning rate follow the step number,
  // and the parameters are the master copies in the training precision. Collective over the
  // trainer's ranks. The defaults throw std::logic_error (a trainer without checkpoints).
  virtual void save_state(StateSink& sink) const;
  virtual void load_state(const StateSource& source, int steps);
  // Steps completed so far (loaded ones included).
  virtual int steps_done() const = 0;
};

// Tokens and targets of `sequences` consecutive samples starting at `first_sample`
// (row b*seq_len + s), the layout GptModel reads.
void sample_micro_batch(const SyntheticCorpus& corpus, int seq_len, std::uint64_t first_sample,
                        int sequences, int* tokens, int* targets);

// What a step keeps of its micro-batches: loss sums, routing and tokens per expert.
struct MicroBatchTally {
  explicit MicroBatchTally(int experts)
      : expert_tokens(static_cast<std::size_t>(experts), 0),
        expert_dropped(static_cast<std::size_t>(experts), 0) {}
  void add(const MicroBatchResult& mr);
  double ce_sum = 0, aux_sum = 0;
  long routing_flips = 0;
  std::vector<long long> expert_tokens;
  std::vector<long long> expert_dropped;
  std::vector<int> routing;
};

// The step's arithmetic, stated once for the single-rank reference (make_trainer) and the
// parallel engine (parallel/parallel_trainer.hpp), which also the compute calibration runs.
// The loss scale: every token's cross-entropy gradient is scaled by 1 / (global_batch x
// seq_len) on every rank, a sum (never a mean) over every axis, so that the summed gradients
// are the single-rank run's.
double loss_scale(const ModelConfig& m, const TrainConfig& t);
// The MoE auxiliary loss's gradient scale: aux_loss_coef / micro-batches of the step.
double aux_loss_scale(const ModelConfig& m, const TrainConfig& t);
// Gradient clipping: the factor the gradients are scaled by in the optimizer step, given the
// global gradient norm (1 unless train.grad_clip > 0 and the norm exceeds it).
double clip_scale(const TrainConfig& t, double grad_norm);
// lm_loss, aux_loss and loss of `r` from the step's sums over every micro-batch (and rank):
// of the token cross-entropies and of the MoE layers' L_aux.
void set_losses(const ModelConfig& m, const TrainConfig& t, double ce_sum, double aux_sum,
                StepResult& r);

// Min/mean/max/imbalance of tokens per expert from per-expert totals.
MoeStepStats moe_step_stats(const std::vector<long long>& tokens_per_expert,
                            const std::vector<long long>& dropped_per_expert);

std::unique_ptr<Trainer> make_trainer(const ModelConfig& model, const TrainConfig& train);

}  // namespace paraxis::model
