// fault.slow_axis checked against the point's grid (deck_slow_axis.hpp).
#include "deck/deck_slow_axis.hpp"

#include <cstdio>

namespace paraxis::driver {

int slow_axis_size(const config::ParallelConfig& p, config::SlowAxis a) {
  switch (a) {
    case config::SlowAxis::tp:
      return p.tp;
    case config::SlowAxis::pp:
      return p.pp;
    case config::SlowAxis::dp:
      return p.dp;
    case config::SlowAxis::ep:
      return p.ep;
    case config::SlowAxis::none:
      break;
  }
  return 0;
}

std::vector<std::pair<std::string, std::string>> slow_axis_errors(const RunConfig& c) {
  std::vector<std::pair<std::string, std::string>> e;
  const auto& L = c.comm.links;
  if (L.slow_axis_factor == 1) return e;  // off, or a sweep's baseline point
  if (L.slow_axis == config::SlowAxis::none) {
    char f[32];
    std::snprintf(f, sizeof f, "%g", L.slow_axis_factor);
    e.push_back({"fault.slow_axis.factor",
                 "factor " + std::string(f) +
                     " slows no axis: set fault.slow_axis.axis to tp, pp, dp or ep (or the "
                     "factor to 1)"});
    return e;
  }
  const int n = slow_axis_size(c.parallel, L.slow_axis);
  if (n < 2) {
    const std::string a = config::to_string(L.slow_axis);
    e.push_back({"fault.slow_axis.axis", "axis " + a + " has one rank in this point (parallel." +
                                             a + " = " + std::to_string(n) +
                                             "): it has no link to slow (expected an axis of "
                                             "size >= 2, or factor 1)"});
  }
  return e;
}

}  // namespace paraxis::driver
