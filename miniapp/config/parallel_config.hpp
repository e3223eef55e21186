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

const char* to_string(RankOrder o);
const char* to_string(CommBackend b);
// The choices in deck order, for the deck's key table and the summary reader.
const std::vector<std::string>& rank_order_names();
const std::vector<std::string>& comm_backend_names();
const std::vector<std::string>& schedule_names();
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

struct CommConfig {
  CommBackend backend = CommBackend::mpi;
  double bucket_mb = 25;  // ZeRO-0 gradient all-reduce buckets
  bool overlap = false;   // start each bucket's reduction as soon as its gradients are complete
  // Deadline of every blocking wait, in seconds (PyTorch's NCCL watchdog default): a rank that
  // waits longer names the operation and ends the job instead of hanging.
  double timeout_s = 600;
};

// Micro-batches per data-parallel replica and step: global_batch / (dp * micro_batch) (the
// rules make it exact).
int micro_batches(const model::TrainConfig& t, const ParallelConfig& p);
// The pipeline a configuration runs: pp stages, its micro-batches, virtual stages.
schedule::PipelineShape pipeline_shape(const model::TrainConfig& t, const ParallelConfig& p);

}  // namespace paraxis::config
