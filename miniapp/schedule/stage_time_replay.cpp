// The schedule replayed with per-stage action times (stage_time_replay.hpp).
#include "schedule/stage_time_replay.hpp"

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

namespace paraxis::schedule {

namespace {

void require_one_per_stage(const PipelineShape& shape,
                           std::initializer_list<std::pair<const char*, std::size_t>> sizes) {
  bool ok = true;
  std::string listed;
  for (const auto& [what, n] : sizes) {
    ok = ok && n == static_cast<std::size_t>(shape.stages);
    listed += (listed.empty() ? "" : " and ") + std::to_string(n) + " " + what;
  }
  if (!ok)
    throw std::invalid_argument("replay_with_stage_times: " + listed + " times for " +
                                std::to_string(shape.stages) +
                                " stages; expected one of each per stage");
}

}  // namespace

ReplayResult replay_with_stage_times(ScheduleKind kind, const PipelineShape& shape,
                                     const std::vector<double>& forward_s,
                                     const std::vector<double>& backward_s) {
  if (splits_backward(kind))
    throw std::invalid_argument(std::string("replay_with_stage_times: the ") + to_string(kind) +
                                " schedule splits each backward into B and W and needs the W "
                                "times (the overload with backward_input_s and "
                                "backward_weight_s)");
  require_one_per_stage(shape, {{"forward", forward_s.size()}, {"backward", backward_s.size()}});
  const Schedule sched = make_schedule(kind, shape);
  return replay_schedule(sched, shape, [&](int stage, const Action& a) {
    return a.kind == ActionKind::forward ? forward_s[stage] : backward_s[stage];
  });
}

ReplayResult replay_with_stage_times(ScheduleKind kind, const PipelineShape& shape,
                                     const std::vector<double>& forward_s,
                                     const std::vector<double>& backward_input_s,
                                     const std::vector<double>& backward_weight_s) {
  require_one_per_stage(shape, {{"forward", forward_s.size()},
                                {"backward-input", backward_input_s.size()},
                                {"backward-weight", backward_weight_s.size()}});
  const Schedule sched = make_schedule(kind, shape);
  const bool split = splits_backward(kind);
  return replay_schedule(sched, shape, [&](int stage, const Action& a) {
    switch (a.kind) {
      case ActionKind::forward:
        return forward_s[stage];
      case ActionKind::backward:
        // An unsplit schedule runs B and W as one backward.
        return split ? backward_input_s[stage] : backward_input_s[stage] + backward_weight_s[stage];
      case ActionKind::backward_weight:
        return backward_weight_s[stage];
      default:
        throw std::logic_error("replay_with_stage_times: duration asked for " +
                               std::string(to_string(a.kind)) + ", not a compute action");
    }
  });
}

}  // namespace paraxis::schedule
