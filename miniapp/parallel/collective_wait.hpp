// Wait time of a collective (docs/diagnosis.md, "Wait time"): a collective completes only once
// every rank of its group has started it, so a rank that starts early waits for the last one.
// From every rank's start times of the same collectives and each rank's clock offset, the wait
// of each rank in each collective. Pure arithmetic (the gathering is attribute_waits in
// parallel_trainer_metrics.hpp), header-only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace paraxis::parallel {

// begins[r][i]: rank r's start of the group's i-th collective, on rank r's clock; offsets[r]:
// what to add to rank r's clock to read the reference clock (world rank 0's). Returns
// waits[r][i] = max over ranks q of (begins[q][i] + offsets[q]) - (begins[r][i] + offsets[r]),
// >= 0: how long rank r waited for the group's last arrival. Throws std::invalid_argument when
// the ranks give different numbers of collectives or offsets.size() != begins.size().
inline std::vector<std::vector<double>> arrival_waits(
    const std::vector<std::vector<double>>& begins, const std::vector<double>& offsets) {
  if (offsets.size() != begins.size())
    throw std::invalid_argument("arrival_waits: " + std::to_string(begins.size()) +
                                " ranks' start times but " + std::to_string(offsets.size()) +
                                " clock offsets (expected one per rank)");
  const std::size_t n = begins.empty() ? 0 : begins[0].size();
  for (std::size_t r = 0; r < begins.size(); ++r)
    if (begins[r].size() != n)
      throw std::invalid_argument("arrival_waits: rank " + std::to_string(r) + " started " +
                                  std::to_string(begins[r].size()) + " collectives, rank 0 " +
                                  std::to_string(n) + " (expected the same collectives)");
  std::vector<std::vector<double>> waits(begins.size(), std::vector<double>(n, 0.0));
  for (std::size_t i = 0; i < n; ++i) {
    double last = begins.empty() ? 0 : begins[0][i] + offsets[0];
    for (std::size_t r = 1; r < begins.size(); ++r)
      last = std::max(last, begins[r][i] + offsets[r]);
    for (std::size_t r = 0; r < begins.size(); ++r)
      waits[r][i] = std::max(0.0, last - (begins[r][i] + offsets[r]));
  }
  return waits;
}

// The wait a rank is charged for one collective: its arrival wait, but never more than it was
// blocked in the call (`exposed`). A non-blocking collective that a rank started early and
// completed later, while computing, costs it only the part of the wait it spent in test/wait;
// and a clock offset misestimated by up to its accuracy cannot charge more than the call took.
inline double charged_wait(double arrival_wait, double exposed) {
  return std::clamp(arrival_wait, 0.0, std::max(0.0, exposed));
}

}  // namespace paraxis::parallel
