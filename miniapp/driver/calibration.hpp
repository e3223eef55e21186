// In-run calibration: before a point runs, the costs its prediction (`paraxis report`) will be
// built from, measured on this machine and never taken from the point's own steps:
//   - alpha and beta of every communicator the grid built (tp, pp, dp, ep groups), fitted
//     (perfmodel/collectives.hpp) to a short size sweep of the operations paraxis calls on it;
//   - the compute time of one micro-batch's forward and backward of every model chunk (the
//     median over the micro-batches of five steps), and of the optimizer step, from the
//     point's own trainer: on a grid the training step's engine on this rank's shard with
//     every collective a local copy (parallel::make_compute_only_trainer), else the
//     single-rank trainer.
// Cached per communicator shape (axis, group size, rank order, backend) and per shard shape,
// so a sweep calibrates each once.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "driver/run_config.hpp"
#include "parallel/process_grid.hpp"

namespace paraxis::driver {

struct CommCalibration {
  std::string axis, op;  // "tp" | "pp" | "dp" | "ep"; perfmodel::to_string(Collective)
  int ranks = 0;
  double alpha = 0, beta = 0;        // per message, per byte on the wire (gamma folded in)
  double latency = 0, beta_eff = 0;  // the fitted line t = latency + S * beta_eff
  double rms_residual = 0;
  std::vector<std::pair<double, double>> samples;  // (S bytes, median seconds)
  // The data-parallel all-reduce only (-1 elsewhere): the fraction of a non-blocking 1 MiB
  // all-reduce that completed while the caller computed without calling MPI (comm.overlap's
  // premise; 0 for an MPI without asynchronous progress).
  double async_progress = -1;
};

struct ComputeCalibration {
  // Per model chunk (pp * virtual_stages): seconds of one micro-batch's forward / backward on
  // every rank that holds it (its tensor-parallel ranks, data-parallel replicas and
  // expert-parallel ranks): the slowest of them (the step's critical path) and their mean
  // (they differ when experts are loaded unevenly, or a rank's core is busier).
  std::vector<double> forward_s, backward_s;
  std::vector<double> forward_mean_s, backward_mean_s;
  // A split backward (zero-bubble schedules): backward_s is B's and these W's, the same way;
  // all zero otherwise.
  std::vector<double> backward_weight_s, backward_weight_mean_s;
  double optimizer_s = 0;      // gradient norm + AdamW over the owned parameters (max over ranks)
  double flops_per_s = 0;      // model FLOPs of forward + backward per rank / their time
  std::size_t peak_bytes = 0;  // the most device memory the compute calibration held
};

struct Calibration {
  std::vector<CommCalibration> comm;
  ComputeCalibration compute;
  double seconds = 0;  // time the calibration took (0 when every part was cached)
};

class Calibrator {
 public:
  // Collective over the world (grid == nullptr: one rank, nothing to fit but compute).
  Calibration calibrate(const RunConfig& cfg, const parallel::ProcessGrid* grid);

 private:
  std::map<std::string, std::vector<CommCalibration>> comm_cache_;
  std::map<std::string, ComputeCalibration> compute_cache_;
};

nlohmann::json calibration_to_json(const Calibration& c);
Calibration calibration_from_json(const nlohmann::json& j);

}  // namespace paraxis::driver
