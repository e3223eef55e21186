// The output-folder policy (docs/results.md): results land in `--out DIR`; a folder that already
// holds paraxis results is refused unless --force, and with --force the old results are
// removed before anything new is written, never mixed; the folder is probed for writability
// before the first point trains, not after it.
#pragma once

#include <string>
#include <vector>

namespace paraxis::driver {

// The paraxis result files `dir` holds (summary.json, points.csv, trace-*.json, report.*,
// plots/, bench-*.json, leftover temporary files), as paths; empty when none or no folder.
std::vector<std::string> results_in(const std::string& dir);

// Makes `dir` ready for a run's results: creates it, refuses or (force) clears earlier
// results, probes writability. Returns "" or one message naming the folder and the reason.
std::string prepare_output_folder(const std::string& dir, bool force);

}  // namespace paraxis::driver
