// The schedule replayed with per-stage action times (stage_time_replay.hpp).
#include "schedule/stage_time_replay.hpp"

#include <stdexcept>
#include <string>

namespace paraxis::schedule {

ReplayResult replay_with_stage_times(ScheduleKind kind, const PipelineShape& shape,
                                     const std::vector<double>& forward_s,
                                     const std::vector<double>& backward_s) {
  const auto stages = static_cast<std::size_t>(shape.stages);
  if (forward_s.size() != stages || backward_s.size() != stages)
    throw std::invalid_argument("replay_with_stage_times: " + std::to_string(forward_s.size()) +
                                " forward and " + std::to_string(backward_s.size()) +
                                " backward times for " + std::to_string(shape.stages) +
                                " stages; expected one of each per stage");
  const Schedule sched = make_schedule(kind, shape);
  return replay_schedule(sched, shape, [&](int stage, const Action& a) {
    return a.kind == ActionKind::forward ? forward_s[stage] : backward_s[stage];
  });
}

}  // namespace paraxis::schedule
