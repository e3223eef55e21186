// In-run calibration: before a point runs, the costs its prediction (`paraxis report`) will be
// built from, measured on this machine and never taken from the point's own steps:
//   - alpha and beta of every communicator the grid built (tp, pp, dp, ep groups), fitted
//     (perfmodel/collectives.hpp) to a short size sweep of the operations paraxis calls on it;
//   - the compute time of one micro-batch's forward and backward of every model chunk (the
//     mean over the micro-batches of five steps; for a pipelined point also every action's
//     time and the engine's time per action), and of the optimizer step, from the
//     point's own trainer: on a grid the training step's engine on this rank's shard with
//     every collective a local copy (parallel::make_compute_only_trainer), else the
//     single-rank trainer.
// Cached per communicator shape (axis, group size, rank order, backend) and per shard shape,
// so a sweep calibrates each once.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analysis/calibration_data.hpp"  // the calibration as results record it
#include "deck/run_config.hpp"
#include "parallel/process_grid.hpp"

namespace paraxis::driver {

class Calibrator {
 public:
  // Collective over the world (grid == nullptr: one rank, nothing to fit but compute).
  Calibration calibrate(const RunConfig& cfg, const parallel::ProcessGrid* grid);

 private:
  // The data-parallel calls as the step issues them (calibration_detail::time_sequence): timed
  // after the compute calibration, whose memory and backward time the stand-in takes; cached
  // per dp communicator, call sequence and stand-in.
  bool calibrate_sequence(const RunConfig& cfg, const parallel::ProcessGrid& grid,
                          Calibration& out);
  // The same for the tensor-parallel calls of one micro-batch (Calibration::tp_sequence), cached
  // per tp communicator, call sequence and stand-in.
  bool calibrate_tp_sequence(const RunConfig& cfg, const parallel::ProcessGrid& grid,
                             Calibration& out);
  // `q` (its calls and stand-in) from the cache, keyed by the `axis` ("dp" | "tp") communicator's
  // shape and the sequence, else timed by `time` and cached: into `out`; whether it was timed.
  bool cached_sequence(const RunConfig& cfg, const char* axis, SequenceCalibration q,
                       SequenceCalibration& out,
                       const std::function<void(SequenceCalibration&)>& time);

  std::map<std::string, std::vector<CommCalibration>> comm_cache_;
  std::map<std::string, SequenceCalibration> sequence_cache_;
  std::map<std::string, ComputeCalibration> compute_cache_;
};

}  // namespace paraxis::driver
