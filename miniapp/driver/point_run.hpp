// One sweep point on every rank: the grid, the calibration, the trainer, the steps (checked
// for divergence every step, faults injected where the deck asks), then the gathers of every
// rank's per-step metrics, trace events and memory to rank 0, and --verify.
#pragma once

#include <cstddef>
#include <string>

#include "deck/run_config.hpp"
#include "driver/calibration.hpp"
#include "driver/checkpoint_claim.hpp"
#include "driver/results.hpp"

namespace paraxis::driver {

struct PointContext {
  int world = 1, rank = 0;
  bool verify = false;
  std::size_t index = 0, total = 1;
  Calibrator* calibrator = nullptr;
  std::string out_dir;   // the run's output folder (the default checkpoint root is under it)
  std::string resume;    // --resume: a checkpoint folder, a root, or "latest" ("": none)
  PointLineage lineage;  // what its checkpoints record and may prune (checkpoint_claim.hpp)
};

// Fills r (status "ok", "diverged: ...", or "failed: --verify ..."). Throws on a failure of
// this rank (the caller ends the job).
void run_point(const RunConfig& cfg, const PointContext& ctx, PointResult& r);

// "" when the step's loss and gradient norm are finite; otherwise why not, naming the step
// (1-based, as printed) and the first quantity that went non-finite (the loss is computed
// before the gradient norm).
std::string divergence_of(const model::StepResult& s);

// The settings of a sweep point as printed ("key=value ..." or "(deck as given)").
std::string settings_text(const SweepPoint& p);

}  // namespace paraxis::driver
