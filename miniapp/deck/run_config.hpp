// The fully resolved configuration of one run (one sweep point): what the deck and the
// --set overrides say, validated. Plain values; the driver fills them, everything else reads.
#pragma once

#include <string>
#include <vector>

#include "config/parallel_config.hpp"
#include "deck/json_names.hpp"  // the enums as JSON names
#include "model/model_config.hpp"

namespace paraxis::driver {

// The parallel and communication sections: the types every layer shares (config/).
using config::CommConfig;
using config::ParallelConfig;

// hardware.gemm: auto (the vendor GEMM where it applies) | portable (paraxis's own everywhere).
enum class GemmChoice { automatic, portable };
const std::vector<std::string>& gemm_choice_names();  // deck order: "auto", "portable"
const char* to_string(GemmChoice g);

// fault.dead_rank.at: step (throw before the step) | save (die while results are written).
enum class DeadAt { step, save, checkpoint };
const std::vector<std::string>& dead_at_names();
const char* to_string(DeadAt a);

struct HardwareConfig {
  double peak_flops = 0;  // per device, for MFU; 0 = unknown
  GemmChoice gemm = GemmChoice::automatic;
  // Fit the collectives of the grid and time the shard's compute before the point runs
  // (calibration.hpp), for `paraxis report`'s predictions.
  bool calibrate = true;
  // Reuse a calibration over the sweep's points of the same communicator and shard shape
  // (calibration.hpp's caches) instead of calibrating each point right before it runs.
  bool calibration_reuse = false;
  // Run a calibrated point's steps again when a time term missed its target with nothing in the
  // point showing the miss to be the machine's (docs/report.md, "Rerun"): whether it recurs.
  bool rerun_misses = true;
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
    DeadAt at = DeadAt::step;
  } dead_rank;
  struct Hang {
    int rank = -1;
    int step = 0;  // the rank stops responding before this step
  } hang;
  config::SlowRank slow_rank;  // fault.slow_rank (fault.slow_link: CommConfig::links)
};

// checkpoint.every: auto (docs/checkpoint.md, "Cadence": Daly's interval from the first save).
inline constexpr int kCheckpointAuto = -1;

// Checkpoints of the training state (docs/checkpoint.md).
struct CheckpointConfig {
  int every = 0;       // save after every `every` completed steps (0: never; kCheckpointAuto)
  std::string dir;     // the checkpoint root ("" = <out>/checkpoints; a sweep: one root per point)
  int keep = 2;        // complete checkpoints kept under the root
  bool async = false;  // stage into host memory, write from a thread behind the next step
  double device_mtbf_h = 0;  // per device (rank), for the report's cadence (0: Llama 3's rate)
};

struct RunConfig {
  model::ModelConfig model;
  model::TrainConfig train;
  ParallelConfig parallel;
  CommConfig comm;
  HardwareConfig hardware;
  OutputConfig output;
  FaultConfig fault;
  CheckpointConfig checkpoint;
};

}  // namespace paraxis::driver
