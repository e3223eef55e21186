// The parallel configuration of one run: the one type that the deck fills, the parallel engine
// builds its grid and trainer from, and the performance models evaluate (docs/architecture.md,
// "Where each concept lives"). Names (schedule, rank order, communication backend) are resolved
// to enums once, when the deck loads; everything after works on the enums. The effective
// settings (what a configuration actually runs as) are stated here and nowhere else. Plain
// C++17: no Kokkos, no MPI.
#pragma once

#include <string>
#include <vector>

#include "model/model_config.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::config {

// Rank order of the process grid (parallel/process_grid.hpp): tp-pp-dp puts tensor-parallel
// ranks adjacent and replicas outermost; tp-dp-pp is Megatron-LM's.
enum class RankOrder { tp_pp_dp, tp_dp_pp };
// The library the data-, tensor- and expert-parallel collectives go through.
enum class CommBackend { mpi, nccl };
// The axis an injected slowdown (fault.slow_axis) applies to; none: off.
enum class SlowAxis { none, tp, pp, dp, ep };
// comm.mpi_gpu_aware: whether the MPI library reads device memory (parallel/mpi_staging.hpp).
// automatic: what the library says; no: device buffers are staged through host memory.
enum class MpiGpuAware { automatic, yes, no };

const char* to_string(RankOrder o);
const char* to_string(CommBackend b);
const char* to_string(SlowAxis a);
const char* to_string(MpiGpuAware a);
// The choices in deck order, for the deck's key table and the summary reader.
const std::vector<std::string>& rank_order_names();
const std::vector<std::string>& comm_backend_names();
const std::vector<std::string>& schedule_names();
const std::vector<std::string>& slow_axis_names();
const std::vector<std::string>& mpi_gpu_aware_names();
// Throw std::invalid_argument naming the value and the choices.
RankOrder parse_rank_order(const std::string& name);
CommBackend parse_comm_backend(const std::string& name);

struct ParallelConfig {
  int tp = 1, pp = 1, dp = 1, ep = 1;
  int zero = 0;  // ZeRO stage as configured; effective_zero() is what runs
  schedule::ScheduleKind schedule = schedule::ScheduleKind::one_f_one_b;
  int virtual_stages = 1;         // model chunks per pipeline stage (interleaved only)
  std::vector<int> stage_layers;  // layers per model chunk; empty: balanced by modelled cost
  bool sequence_parallel = false;
  RankOrder order = RankOrder::tp_pp_dp;

  // The deck guarantees tp * pp * dp fits an int (config_rules.hpp refuses a grid that does not).
  int world() const { return tp * pp * dp; }
  int chunks() const { return pp * virtual_stages; }
  // Sequence parallelism only changes anything with more than one tensor-parallel rank.
  bool sp() const { return sequence_parallel && tp > 1; }
  // ZeRO shards over the data-parallel group: with one data-parallel rank there is nothing to
  // shard, and stages 1-3 run as stage 0.
  int effective_zero() const { return dp > 1 ? zero : 0; }
};

// Nodes and the links between them as the communication layer sees them (docs/diagnosis.md).
// Deck keys: hardware.ranks_per_node, hardware.emulate.*, fault.slow_link.*, fault.slow_axis.*.
struct LinkEmulation {
  // Ranks per node: > 0 emulates nodes of that many consecutive world ranks on any host; 0
  // takes the nodes from the host names.
  int ranks_per_node = 0;
  // Emulated inter-node link: every operation's data that crosses nodes costs latency_us more
  // per message and is capped at bandwidth_gbs (GB/s); 0 turns either off.
  double latency_us = 0;
  double bandwidth_gbs = 0;
  // An injected slow link (fault.slow_link): traffic between two ranks, or between two nodes,
  // costs slow_latency_us more per message and moves at slow_bandwidth_factor of its speed.
  // Both lists empty: off.
  std::vector<int> slow_ranks, slow_nodes;
  double slow_latency_us = 0;
  double slow_bandwidth_factor = 1;
  // An injected slow axis (fault.slow_axis, docs/sensitivity.md): every operation of that
  // axis's communicators (edp under dp) costs slow_axis_factor times its links' cost, the
  // measured one plus the emulated one. none, or factor 1 (a sweep's baseline): off.
  SlowAxis slow_axis = SlowAxis::none;
  double slow_axis_factor = 1;
  bool emulates_links() const { return latency_us > 0 || bandwidth_gbs > 0; }
  bool slows_a_link() const { return !slow_ranks.empty() || !slow_nodes.empty(); }
  bool slows_an_axis() const { return slow_axis != SlowAxis::none && slow_axis_factor > 1; }
};

// The shortest deadline comm.timeout_s may set: a blocking wait shorter than this is not a hang
// but an ordinary collective on a busy node (ranks time-sharing cores take tens of milliseconds),
// and a deadline of 1e-300 s would end every run at its first wait.
inline constexpr double kMinTimeoutS = 0.1;
inline constexpr double kMaxTimeoutS = 1e6;

struct CommConfig {
  CommBackend backend = CommBackend::mpi;
  double bucket_mb = 25;  // ZeRO-0 gradient all-reduce buckets
  bool overlap = false;   // start each bucket's reduction as soon as its gradients are complete
  // Deadline of every blocking wait, in seconds (PyTorch's NCCL watchdog default): a rank that
  // waits longer names the operation and ends the job instead of hanging.
  double timeout_s = 600;
  // Whether MPI is handed device buffers (yes) or host copies of them (no, "staging"); automatic:
  // what the library says in a device build, never staged in a host-only one.
  MpiGpuAware mpi_gpu_aware = MpiGpuAware::automatic;
  LinkEmulation links;
};

// An injected slow rank (fault.slow_rank, docs/diagnosis.md): from step from_step to step
// to_step (-1: the last) rank `rank` (-1: off) waits, after each of its compute actions,
// (factor - 1) times that action's measured duration, so it computes `factor` times slower
// whatever else shares the machine.
struct SlowRank {
  int rank = -1;
  double factor = 1;
  int from_step = 0;
  int to_step = -1;
  bool active_at(int step) const {
    return rank >= 0 && step >= from_step && (to_step < 0 || step <= to_step);
  }
};

// The ZeRO stages, 0 (replicated) to kMaxZeroStage (parameters sharded too), and their one range
// check: zero_stage_error is "zero = N, expected 0, 1, 2 or 3" outside the range and empty
// inside; require_zero_stage throws std::invalid_argument with it. The deck's key, the rules,
// the performance models and the sharded optimizer all ask here.
inline constexpr int kMaxZeroStage = 3;
std::string zero_stage_error(int zero);
void require_zero_stage(int zero);

// Micro-batches per data-parallel replica and step: global_batch / (dp * micro_batch) (the
// rules make it exact).
int micro_batches(const model::TrainConfig& t, const ParallelConfig& p);
// The pipeline a configuration runs: pp stages, its micro-batches, virtual stages.
schedule::PipelineShape pipeline_shape(const model::TrainConfig& t, const ParallelConfig& p);

}  // namespace paraxis::config
