// A point's predicted time terms from a calibration: the one formula `paraxis report` compares the
// measured terms with (report_point.cpp, `analyse`, defines it), shared with the run, whose
// recheck after each point rebuilds the prediction from its own measurements
// (driver/point_recheck.hpp; docs/report.md, "Recheck").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/calibration_data.hpp"
#include "deck/run_config.hpp"

namespace paraxis::driver::report {

// The predicted seconds of each time term of a point of configuration `c` from calibration `cal`:
// {"step_time", "compute", and "tp", "ep", "dp", "bubble" where the grid has them}.
nlohmann::json predicted_time_terms(const Calibration& cal, const RunConfig& c);

// The measured seconds of the same time terms of a point (a summary.json point, as the run
// writes it: `config` and `time`), as the report compares them with their predictions.
nlohmann::json measured_time_terms(const nlohmann::json& p);

// The time terms of a calibrated point that miss their target (term_target_pct) with nothing in
// the point itself showing the miss to be the machine's: neither the range its own steps took
// nor its recheck (docs/report.md, "Noise" and "Recheck"). What the run runs the point again
// for (docs/report.md, "Rerun"); empty without a calibration.
std::vector<std::string> unexplained_misses(const nlohmann::json& p);

}  // namespace paraxis::driver::report
