// `paraxis report`'s checkpoint figures (docs/checkpoint.md, "Cost" and "Cadence"): per point
// that wrote checkpoints, what a save costs (bytes and write time per rank, aggregate
// throughput, the ratio to plain file I/O of the same bytes), what a restart cost when the point
// resumed, and the checkpoint interval its measured cost implies: Young's and Daly's, in seconds
// and steps, with the expected fraction of machine time lost (Daly's model) at that interval and
// at the run's own cadence.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace paraxis::driver::report {

// The figures of summary.json point `p` (null when it wrote no checkpoint). The failure rate:
// failures_per_device_s for each of the point's ranks (system MTBF = 1 / (rate x ranks)).
nlohmann::json checkpoint_figures(const nlohmann::json& p, double failures_per_device_s);

// report.md's "Checkpoints" section for the report's points ("" when none wrote one).
std::string checkpoint_markdown(const nlohmann::json& points);

}  // namespace paraxis::driver::report
