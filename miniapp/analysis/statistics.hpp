// The median the driver reports everywhere (per-step medians in summary.json, the calibration's
// timings, the report's tables, the communication benchmark): one definition, so every figure
// called "median" is the same statistic; and the warm-up rule, which steps those figures count.
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

// The warm-up rule, stated once: step `step` (numbered from 0) is measured — counted in every
// median, statistic and per-call row — when it is not one of the first `warmup_steps`
// (train.warmup_steps) steps.
inline bool is_measured_step(long long step, long long warmup_steps) {
  return step >= warmup_steps;
}

}  // namespace paraxis::driver
