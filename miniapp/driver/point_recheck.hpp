// The recheck of a point's calibration (docs/report.md, "Recheck"): right after the point's
// steps, on the same ranks and communicators, what its prediction was built from is measured
// again by the calibration's own code (calibration_detail): the calibrated curve samples its
// calls were predicted from (per axis and operation, the calibrated sizes around each call's S,
// calibrate_axis's probe), the data-parallel sequence (time_sequence, fewer repetitions) and the
// compute of the point's chunks (calibrate_compute, fewer steps). The point's prediction rebuilt
// from them by the report's own formula (report::predicted_time_terms) is recorded beside the
// calibration's, so that a miss is named the machine's (the machine changed since calibration:
// the recheck agrees with the measured) or the model's (both predictions miss the same way).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "deck/run_config.hpp"
#include "driver/calibration.hpp"
#include "model/trainer.hpp"
#include "parallel/process_grid.hpp"

namespace paraxis::driver {

struct Recheck {
  Calibration calibration;  // the point's, every part timed again replaced by the recheck's
  // What was timed again beside the calibration's value: {samples: [{axis, op, bytes,
  // calibration_s, recheck_s}], dp_sequence: [{op, bytes, calibration_s, recheck_s}], compute:
  // {calibration_s, recheck_s, optimizer_calibration_s, optimizer_recheck_s}}.
  nlohmann::json retimed = nlohmann::json::object();
  double seconds = 0;  // time the recheck took
};

// Collective over MPI_COMM_WORLD (grid == nullptr: one rank, the compute alone): every rank
// passes the point's calibration `cal` (the same on every rank) and its own steps (their
// comm_spans: the calls it made); the positions to time again are agreed over the world first, so
// every rank makes the same calls in the same order, also where its own steps made none.
Recheck recheck_point(const RunConfig& cfg, const parallel::ProcessGrid* grid,
                      const Calibration& cal, const std::vector<model::StepResult>& steps);

// summary.json's `recheck` of a point: {seconds, retimed, predicted: {<time term>: seconds}}.
nlohmann::json recheck_json(const Recheck& r, const RunConfig& cfg);

}  // namespace paraxis::driver
