// The median the driver reports everywhere (per-step medians in summary.json, the calibration's
// timings, the report's tables, the communication benchmark): one definition, so every figure
// called "median" is the same statistic; the mean of a repeated action (the calibration's chunk
// times); and the warm-up rule, which steps those figures count.
#pragma once

#include <algorithm>
#include <vector>

namespace paraxis::driver {

// The middle value of v; for an even count, the mean of the two middle values; 0 for an empty
// v (a point with no measured step reports 0, not a failure).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The time of an action the step repeats and adds up (a chunk's forward over the micro-batches):
// the mean of its samples at most twice their median; 0 for no samples. The step is a sum of
// actions, so its time is the count times the mean action, and compute times are skewed to the
// right (bounded below by the work; interruptions only add): in the 1F1B points of three quiet
// demo runs a stage's mean forward or backward was 1.9 % above its median (the median over 96
// stage-kinds; -3 % to +9 %), which a median misses on every action of the step
// (docs/perf-log/2026-12-05-bubble-round5.md). A sample above twice the median lost a time
// slice to another process (4 of 3840 samples there): the machine's, not the action's, left
// out so that one of them does not move the mean by a whole slice over the sample count.
// repeated_action_samples: the samples that time counts (the pipeline replay's draws, too).
inline std::vector<double> repeated_action_samples(const std::vector<double>& v) {
  const double cut = 2 * median(v);
  std::vector<double> kept;
  for (double x : v)
    if (x <= cut) kept.push_back(x);
  return kept;
}
inline double repeated_action_time(const std::vector<double>& v) {
  const std::vector<double> kept = repeated_action_samples(v);
  double sum = 0;
  for (double x : kept) sum += x;
  return kept.empty() ? 0.0 : sum / static_cast<double>(kept.size());
}

// The warm-up rule, stated once: step `step` (numbered from 0) is measured — counted in every
// median, statistic and per-call row — when it is not one of the first `warmup_steps`
// (train.warmup_steps) steps.
inline bool is_measured_step(long long step, long long warmup_steps) {
  return step >= warmup_steps;
}

}  // namespace paraxis::driver
