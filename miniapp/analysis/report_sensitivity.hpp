// The report's sensitivity to a slowed axis (docs/sensitivity.md): the points of a sweep over
// fault.slow_axis, grouped by the configuration they share, the measured step time against the
// slowdown factor per axis, and the model's curve anchored at the measured baseline:
// predicted(f) = measured(f = 1) + [model(f) - model(1)], the model being the performance
// model (perfmodel::predict_step_time) with the slowed axis's links costing what the injection
// adds. Rank 0 of `paraxis report` only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace paraxis::driver::report {

// Target of the model's curves: every point within this many percent of the measured step.
constexpr double kSensitivityPct = 15.0;

// report.json's `sensitivity`: one entry per base configuration (points of one folder whose
// settings differ only by fault.slow_axis.*) with a baseline (factor 1), each with per axis
// the points {factor, measured_step_s, predicted_step_s, error_pct, increment_model_s}, the
// measured and modelled slopes, and the axis the layout tolerates least. `points` is
// report.json's `points` (dir, index, settings, measured_step_s); each folder's summary.json
// is read again for the points' configuration and their fault.slow_axis records. Empty array:
// no such sweep. Throws std::runtime_error naming the file on a summary it cannot read.
nlohmann::json sensitivity_json(const nlohmann::json& points);

// report.md's "Sensitivity" section ("" when `sensitivity` is empty); the plot is linked when
// plots/sensitivity.png exists in `out`.
std::string sensitivity_markdown(const nlohmann::json& sensitivity, const std::string& out);

}  // namespace paraxis::driver::report
