// The fully resolved configuration of one run (one sweep point): what the deck and the
// --set overrides say, validated. Plain values; the driver fills them, everything else reads.
#pragma once

#include <string>
#include <vector>

#include "config/parallel_config.hpp"
#include "driver/json_names.hpp"  // the enums as JSON names
#include "model/model_config.hpp"

namespace paraxis::driver {

// The parallel and communication sections: the types every layer shares (config/).
using config::CommConfig;
using config::ParallelConfig;

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

}  // namespace paraxis::driver
