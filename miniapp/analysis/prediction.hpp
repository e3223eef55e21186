// A point's predicted time terms from a calibration: the one formula `paraxis report` compares the
// measured terms with (report_point.cpp, `analyse`, defines it), shared with the run, whose
// recheck after each point rebuilds the prediction from its own measurements
// (driver/point_recheck.hpp; docs/report.md, "Recheck").
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/calibration_data.hpp"
#include "deck/run_config.hpp"

namespace paraxis::driver::report {

// The predicted seconds of each time term of a point of configuration `c` from calibration `cal`:
// {"step_time", "compute", and "tp", "ep", "dp", "bubble" where the grid has them}.
nlohmann::json predicted_time_terms(const Calibration& cal, const RunConfig& c);

}  // namespace paraxis::driver::report
