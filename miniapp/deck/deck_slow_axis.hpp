// The deck's check of fault.slow_axis (docs/deck.md, docs/sensitivity.md): an axis slowed by a
// factor must be an axis the point has, and a factor needs an axis. A factor of 1 is a sweep's
// baseline and is valid with any axis, so that `sweep.fault.slow_axis.factor=[1, 2, 4]` over
// `sweep.fault.slow_axis.axis=[tp, dp]` needs no special case.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "deck/run_config.hpp"

namespace paraxis::driver {

// The problems of c's fault.slow_axis, each as (the key to name, what is wrong); empty: none.
std::vector<std::pair<std::string, std::string>> slow_axis_errors(const RunConfig& c);

// The size of the point's axis `a` (tp, pp, dp or ep; 0 for none).
int slow_axis_size(const config::ParallelConfig& p, config::SlowAxis a);

}  // namespace paraxis::driver
