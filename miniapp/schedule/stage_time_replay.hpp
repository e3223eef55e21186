// A pipeline step's timeline when each stage's forward and backward actions take the times a run
// measured: the schedule of the run's kind and shape, replayed (pipeline_schedule.hpp). This is
// the "bubble_fraction_model" of a result (docs/results.md): Narayanan et al.'s formula for
// uniform stages (bubble_fraction_formula's for zb-h1 where it is exact), uneven stages as they
// ran. Pure: the driver only gathers the measured times.
#pragma once

#include <vector>

#include "schedule/pipeline_schedule.hpp"

namespace paraxis::schedule {

// make_schedule(kind, shape) replayed with every forward action of stage s taking forward_s[s]
// and every backward action backward_s[s] (every chunk of a stage alike). Throws
// std::invalid_argument naming the sizes when forward_s or backward_s does not hold one time per
// stage, and make_schedule's errors for a bad shape.
// Split schedules (zb-h1) need the W times: this overload refuses them
// (std::invalid_argument naming the schedule).
ReplayResult replay_with_stage_times(ScheduleKind kind, const PipelineShape& shape,
                                     const std::vector<double>& forward_s,
                                     const std::vector<double>& backward_s);
// The same with the backward of stage s in two parts: backward_input_s[s] (B) and
// backward_weight_s[s] (W). A split schedule (splits_backward(kind)) runs them as its backward
// and backward_weight actions; any other schedule runs its whole backwards in their sum.
ReplayResult replay_with_stage_times(ScheduleKind kind, const PipelineShape& shape,
                                     const std::vector<double>& forward_s,
                                     const std::vector<double>& backward_input_s,
                                     const std::vector<double>& backward_weight_s);

}  // namespace paraxis::schedule
