// The median the driver reports everywhere (per-step medians in summary.json, the calibration's
// timings): one definition, so every figure called "median" is the same statistic.
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

}  // namespace paraxis::driver
