// The planner behind `paraxis plan`: for a model and a machine paraxis has not run on, every
// configuration (tp, pp, dp, ep, micro-batch, ZeRO stage, schedule, virtual stages, sequence
// parallelism, activation recomputation) that uses all its devices, each either ranked by predicted
// step time (step_time.hpp) when it fits in memory (memory.hpp), or rejected with the reason.
//
// Rules: the configuration rules the deck applies (config/config_rules.hpp; the first broken
//   rule's message is the reason given), with each recomputation mode (zb-h1 refuses full), then
//   the largest rank's peak memory <= the device's.
// Network tiers: the search orders ranks tp-pp-dp (paraxis's default), so a tensor-parallel group
// is `tp` consecutive ranks, a pipeline group spans tp*pp, a data-parallel group tp*pp*dp and an
// expert group tp*pp*ep; an evaluated layout (evaluate) keeps its scenario's order, and under
// tp-dp-pp a data-parallel group spans tp*dp, an expert group tp*ep, a pipeline group
// tp*dp*pp. A group is inside a node when that span fits a node and node boundaries fall
// between spans (the span divides devices_per_node), else it pays the inter-node tier.
// Bounds: micro_batch takes at most max_micro_batch_values of the divisors of global_batch/dp
// (all when there are few, else spread evenly over the sorted list, both ends included);
// interleaved takes v = 2 .. max_virtual_stages and only with pp > 1; sequence parallelism is
// tried only with tp > 1.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "config/config_rules.hpp"
#include "model/model_config.hpp"
#include "perfmodel/collectives.hpp"
#include "perfmodel/compute_efficiency.hpp"
#include "perfmodel/memory.hpp"
#include "perfmodel/parallel_config.hpp"
#include "perfmodel/step_time.hpp"

namespace paraxis::perfmodel {

struct Machine {
  int devices_per_node = 8;
  int nodes = 1;
  double peak_flops = 0;             // per device, dense, for the training precision
  double memory_bytes = 0;           // per device
  double achievable_fraction = 0.5;  // of peak, for compute time (flat model)
  // The work-dependent compute model (compute_efficiency.hpp) when compute.memory_bytes_per_s
  // > 0 (then achievable_fraction is unused; compute.peak_flops is ignored: peak_flops applies).
  ComputeEfficiency compute;
  LinkCost intra_node, inter_node;  // alpha (s), beta (s/B), gamma (s/B)
  // The software stack's pipeline engine waits on each point-to-point transfer (DeepSpeed's)
  // rather than overlapping them with compute (Megatron-LM's, paraxis's own): step_time.hpp.
  bool blocking_pipeline_transfers = false;
  int devices() const { return devices_per_node * nodes; }
};

struct PlanRequest {
  model::ModelConfig model;
  int global_batch = 8;
  model::Precision precision = model::Precision::bf16;
  std::vector<int> zero_stages = {0, 1, 2, 3};
  std::vector<schedule::ScheduleKind> schedules = {
      schedule::ScheduleKind::gpipe, schedule::ScheduleKind::one_f_one_b,
      schedule::ScheduleKind::interleaved, schedule::ScheduleKind::zb_h1};
  // Activation recomputation modes tried (full: every block, recompute_layers 0).
  std::vector<model::Recompute> recomputes = {model::Recompute::none, model::Recompute::selective,
                                              model::Recompute::full};
  int max_virtual_stages = 4;
  int max_micro_batch_values = 16;
  bool try_sequence_parallel = true;
  double bucket_mb = 25;
  bool overlap = false;
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::ring;
};

// Per axis: whether its groups stay inside one node.
struct AxisTiers {
  bool tp = true, pp = true, dp = true, ep = true;
};

struct PlanEntry {
  Scenario config;
  StepTimeBreakdown time;
  MemoryEstimate memory;  // of the rank that needs the most
  int memory_stage = 0;   // its pipeline stage
  AxisTiers intra_node;
  double tokens_per_s = 0, model_flops_per_s = 0, mfu = 0;
  // Hardware FLOPs (model FLOPs plus the recomputed forward: flops.hpp's hardware_step_flops)
  // per second, and their share of the peak (HFU).
  double hardware_flops_per_s = 0, hfu = 0;
};

struct Rejection {
  Scenario config;  // micro_batch 0: every micro-batch size of this shape
  std::string reason;
};

struct Plan {
  std::vector<PlanEntry> ranked;  // ascending step time (then peak memory)
  std::vector<Rejection> rejected;
};

// Called as the search goes: `done` of `total` shapes (tp, pp, ep) searched; done == total
// once, at the end.
using PlanProgress = std::function<void(std::size_t done, std::size_t total)>;

// Throws std::invalid_argument on a machine or model that cannot be planned for (no devices,
// no peak, no memory, hidden not divisible by heads, top_k > experts, global_batch < 1).
Plan plan(const PlanRequest& request, const Machine& machine, const PlanProgress& progress = {});

// One configuration judged as plan() judges each (`paraxis plan --layout`): the rules it breaks
// (then nothing else is evaluated), else its memory and its step time, and `reason`, empty when
// plan() would rank it, else why it rejects it (the first broken rule, or the memory over the
// device; the time is predicted then too). The request's model, all_reduce and the machine
// apply; the batch, precision and bucketing are the configuration's own.
struct Evaluation {
  PlanEntry entry;
  std::vector<config::RuleViolation> violations;
  std::string reason;
};
Evaluation evaluate(const PlanRequest& request, const Machine& machine, const Scenario& c);

// A group of `size` ranks `stride` apart, in blocks of stride*size consecutive ranks.
bool group_is_intra_node(int stride, int size, int devices_per_node);
AxisTiers axis_tiers(const Scenario& c, int devices_per_node);
// The links each axis uses on this machine.
AxisLinks axis_links(const Scenario& c, const Machine& machine);
// The micro-batch sizes tried for `sequences_per_replica` (see the bounds above).
std::vector<int> micro_batch_candidates(int sequences_per_replica, int max_values);
// "93.1 GB", "80 GB": decimal gigabytes, one decimal unless whole.
std::string format_gb(double bytes);

}  // namespace paraxis::perfmodel
