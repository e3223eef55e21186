// The deck's checks of the checkpoint keys (docs/checkpoint.md): a cadence that no step reaches,
// and a rank to kill during a checkpoint when none is written.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "deck/run_config.hpp"

namespace paraxis::driver {

// (key, message) of every problem of the point's checkpoint settings.
std::vector<std::pair<std::string, std::string>> checkpoint_errors(const RunConfig& c);

}  // namespace paraxis::driver
