// The report's plotting step: tools/plot_report.py run on report.json by an interpreter that has
// matplotlib. No shell is involved: the probe and the script are started with an argument
// vector (posix_spawnp), so a results folder named `it's "a" $(x) dir` is just a path.
#pragma once

#include <string>

namespace paraxis::driver {

struct PlotOutcome {
  enum Kind { made, skipped, failed } kind = made;
  std::string note;  // why plots were skipped or what failed ("" when made)
};

// Runs the plot script on `report_json`, writing PNGs into `plots_dir`. Skipped (a warning):
// no python with matplotlib (PARAXIS_PYTHON picks the interpreter) or no script
// (PARAXIS_PLOT_SCRIPT). Failed (an error): the script ran and exited non-zero (its own message,
// naming the file it could not write, went to stderr).
PlotOutcome make_plots(const std::string& report_json, const std::string& plots_dir);

}  // namespace paraxis::driver
