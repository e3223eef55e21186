// The machine's own spread beside the model's residual (docs/report.md, "Noise"): per time term
// of a point, the range its measured steps took, so that a reader sees whether a miss is the
// model's or the machine's without a second run. A term whose prediction lies inside the range
// of its own steps missed by no more than the point varied from one step to the next.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace paraxis::driver::report {

// The per-step series (summary.json `rank_series`) a time term is measured from, or nullptr
// when none is recorded per step in seconds (bubble: only its fraction per step, from which
// add_steps_ranges scales the measured bubble). dp: its exposed time, `comm.dp.exposed_s`
// (summaries written before it was recorded: `comm.dp.time_s` without comm.overlap).
const char* term_series(const std::string& term);

// [lo, hi] over the measured steps (step >= warmup) of the per-step mean over ranks of
// rank_series[name]; nullopt without that series or without a measured step.
std::optional<std::pair<double, double>> steps_range(const nlohmann::json& point,
                                                     const std::string& name, int warmup);

// Adds to every time term of `terms` that has a series: steps_range_s [lo, hi], steps_spread_pct
// (100 (hi - lo) / measured) and within_steps_range (lo <= predicted <= hi). The bubble's range
// is the measured bubble x each measured step's bubble_fraction / their mean.
void add_steps_ranges(const nlohmann::json& point, bool overlap, int warmup, nlohmann::json& terms);

// Issue 30's targets as the recheck's verdict reads them: a time term within 25 % of its
// prediction, the step time within 15 % (report_parts.hpp, kEveryPointPct).
double term_target_pct(const std::string& term);

// The recheck (docs/report.md, "Recheck"; summary.json `recheck.predicted`: the prediction rebuilt
// from the calibration timed again right after the point). Adds to every time term of `terms` the
// recheck has: recheck_predicted, recheck_residual_pct and, where the calibration's prediction
// misses the term's target, recheck_verdict: "cal" when the measured lies within the target of the
// recheck's prediction, or between the two predictions (the machine changed since calibration),
// "model" when both predictions miss it on the same side. Nothing without a recheck.
void add_recheck(const nlohmann::json& point, nlohmann::json& terms);

// The sentence report.md and tools/check_report_targets.py give a recheck verdict ("" for none).
std::string recheck_reason(const nlohmann::json& term);

// The rerun (docs/report.md, "Rerun"; summary.json `rerun.measured`: the time terms the point
// measured when the run ran its steps again, because a term missed with nothing in the point
// showing it the machine's). Adds to every time term `again` has: rerun_measured,
// rerun_residual_pct and, where the term misses its target, rerun_verdict: "recurs" when the
// rerun misses it on the same side, both the calibration's prediction and, where add_recheck
// set one, the recheck's (timed right before the rerun: the model's prediction for it); else
// "noise" (the miss did not recur: the machine's).
void add_rerun(const nlohmann::json& again, nlohmann::json& terms);

// The sentence report.md and tools/check_report_targets.py give a rerun verdict ("" for none).
std::string rerun_reason(const nlohmann::json& term);

// Repeats of a point: the points of one folder whose tp, dp or ep term is the same to the model
// (same grid, the same calls on the axis per operation and size bucket with the same per-call
// predictions, for dp the same comm.overlap; in the demo, e.g., the tp terms of every tp point,
// which ZeRO and overlap do not change at dp = 1). Each such term gets `repeats` (how many),
// `repeats_ratio_range` [lo, hi] of measured / predicted over them and `within_repeats_range`
// (lo <= 1 <= hi): where the same prediction was measured both above and below, the points
// differ by the machine, not by anything the model knows.
void add_repeats_ranges(const std::vector<nlohmann::json*>& points);

}  // namespace paraxis::driver::report
