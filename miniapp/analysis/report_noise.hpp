// The machine's own spread beside the model's residual (docs/report.md, "Noise"): per time term
// of a point, the range its measured steps took, so that a reader sees whether a miss is the
// model's or the machine's without a second run. A term whose prediction lies inside the range
// of its own steps missed by no more than the point varied from one step to the next.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

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

}  // namespace paraxis::driver::report
