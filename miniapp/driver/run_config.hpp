// The fully resolved configuration of one run (one sweep point): what the deck and the
// --set overrides say, validated. Plain values; the driver fills them, everything else reads.
#pragma once

#include <string>
#include <vector>

#include "model/model_config.hpp"

namespace paraxis::parallel {
struct ParallelOptions;
}

namespace paraxis::driver {

struct ParallelConfig {
  int tp = 1, pp = 1, dp = 1, ep = 1;
  int zero = 0;
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved
  int virtual_stages = 1;
  std::vector<int> stage_layers;  // empty: balanced by modelled cost
  bool sequence_parallel = false;
  std::string order = "tp-pp-dp";  // tp-pp-dp | tp-dp-pp
  // The deck guarantees tp * pp * dp fits an int (deck.cpp refuses a grid that does not).
  int world() const { return tp * pp * dp; }
};

struct CommConfig {
  std::string backend = "mpi";  // mpi | nccl
  double bucket_mb = 25;
  bool overlap = false;
  // Deadline of every blocking wait, in seconds (PyTorch's NCCL watchdog default): a rank that
  // waits longer names the operation and ends the job instead of hanging.
  double timeout_s = 600;
};

struct HardwareConfig {
  double peak_flops = 0;      // per device, for MFU; 0 = unknown
  std::string gemm = "auto";  // auto (vendor GEMM where it applies) | portable
  // Fit the collectives of the grid and time the shard's compute before the point runs
  // (calibration.hpp), for `paraxis report`'s predictions.
  bool calibrate = true;
};

struct OutputConfig {
  std::string dir;  // "" = a new timestamped folder
  bool trace = true;
};

// Fault injection, to test how a job fails. A map keyed by kind, so that every field can be
// `--set` and swept; rank -1 turns a kind off. Steps are 0-based: the fault strikes before that
// step. The deck refuses injections outside the run (rank >= world, step >= train.steps).
struct FaultConfig {
  struct DeadRank {
    int rank = -1;
    int step = 0;
    std::string at = "step";  // step: throw before `step` | save: die while results are written
  } dead_rank;
  struct Hang {
    int rank = -1;
    int step = 0;  // the rank stops responding before this step
  } hang;
};

struct RunConfig {
  model::ModelConfig model;
  model::TrainConfig train;
  ParallelConfig parallel;
  CommConfig comm;
  HardwareConfig hardware;
  OutputConfig output;
  FaultConfig fault;
};

// What the parallel trainer takes from a configuration (parallel_trainer.hpp; defined in
// run_command.cpp).
parallel::ParallelOptions parallel_options(const RunConfig& c);

}  // namespace paraxis::driver
