// Internal to the diagnosis (diagnosis*.cpp): one point's per-rank, per-step series as the
// findings read them, and the rule that decides from which step a ratio is persistently above
// its threshold. Shared by the comparison with peers (diagnosis.cpp) and with the calibrated
// model (diagnosis_model.cpp), so both read the same steps and apply the same persistence.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "config/parallel_config.hpp"

namespace paraxis::driver::diagnosis::detail {

// Per rank, per step: one metric of rank_series (empty when absent).
using Series = std::vector<std::vector<double>>;
Series series(const nlohmann::json& rank_series, const std::string& name);

double median_of(std::vector<double> v);
std::string fixed(double x, int digits);

struct Point {
  config::ParallelConfig par;
  int world = 0;
  std::vector<int> steps;     // step numbers of the series' columns
  std::vector<int> measured;  // columns of measured steps
  nlohmann::json rs;          // rank_series
  bool dp_overlap = false;    // comm.overlap: dp calls progress behind the backward
};
// Throws std::invalid_argument when the point has no rank_series.
Point read_point(const nlohmann::json& point);

// "pipeline stage 1 of replica 0, tensor-parallel rank 1".
std::string where(const config::ParallelConfig& p, int rank);

// The onset of a persistent slowdown in ratios (one per measured step, in step order): of the
// steps whose ratio reaches threshold, the one that best separates the steps before it (baseline
// 1 when there are none) from those after it (mean ratio after - mean before), among those from
// which on at least kMinSteps steps and kPersistence of the steps reach it (one slow step in a
// few is the machine's noise, and a noisy clean step before the fault is not its start).
// first: the onset's index (-1: no persistent slowdown); slowed: the indices from it on that
// reach the threshold.
struct Onset {
  int first = -1;
  std::vector<int> slowed;
};
Onset persistent_onset(const std::vector<double>& ratios, double threshold);

// The ranks of each peer set (ranks that do the same work: one pipeline stage and, with expert
// parallelism, the same experts; ranks holding other experts compute what the routing sends
// them, which differs), keyed by (stage, ep rank or 0).
std::map<std::pair<int, int>, std::vector<int>> peer_sets(const Point& pt);

// The world ranks of each group of `axis` (tp, pp, dp, ep) of the point's grid.
std::vector<std::vector<int>> groups_of(const config::ParallelConfig& p, const std::string& axis);

// A group's collective time net of waiting for late ranks, per measured step, the mean over its
// ranks (wait empty: nothing taken out, the pipeline's transfers).
std::vector<double> group_wire(const Point& pt, const Series& time, const Series& wait,
                               const std::vector<int>& group);

}  // namespace paraxis::driver::diagnosis::detail
