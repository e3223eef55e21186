// A pipeline step's timeline when each stage's forward and backward actions take the times a run
// measured: the schedule of the run's kind and shape, replayed (pipeline_schedule.hpp). This is
// the "bubble_fraction_model" of a result (docs/results.md): Narayanan et al.'s formula for
// uniform stages, uneven stages as they ran. Pure: the driver only gathers the measured times.
#pragma once

#include <vector>

#include "schedule/pipeline_schedule.hpp"

namespace paraxis::schedule {

// make_schedule(kind, shape) replayed with every forward action of stage s taking forward_s[s]
// and every backward action backward_s[s] (every chunk of a stage alike). Throws
// std::invalid_argument naming the sizes when forward_s or backward_s does not hold one time per
// stage, and make_schedule's errors for a bad shape.
ReplayResult replay_with_stage_times(ScheduleKind kind, const PipelineShape& shape,
                                     const std::vector<double>& forward_s,
                                     const std::vector<double>& backward_s);

}  // namespace paraxis::schedule
