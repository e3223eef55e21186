// The spread of a point's measured steps beside each time term (report_noise.hpp).
#include "analysis/report_noise.hpp"

#include <algorithm>
#include <vector>

#include "analysis/statistics.hpp"

namespace paraxis::driver::report {

using nlohmann::json;

const char* term_series(const std::string& term) {
  if (term == "step_time") return "step_s";
  if (term == "compute") return "compute_s";
  if (term == "tp") return "comm.tp.time_s";
  if (term == "ep") return "comm.ep.time_s";
  // The dp term is the exposed time (with comm.overlap, what was not hidden behind compute).
  if (term == "dp") return "comm.dp.exposed_s";
  return nullptr;
}

namespace {

// Per measured step (step >= warmup), the mean over ranks of rank_series[name]; empty without
// that series.
std::vector<double> step_means(const json& point, const std::string& name, int warmup) {
  std::vector<double> out;
  if (!point.contains("rank_series")) return out;
  const json& rs = point.at("rank_series");
  if (!rs.contains(name) || !rs.contains("steps")) return out;
  const auto steps = rs.at("steps").get<std::vector<int>>();
  const auto per_rank = rs.at(name).get<std::vector<std::vector<double>>>();
  if (per_rank.empty()) return out;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    if (!is_measured_step(steps[k], warmup)) continue;
    double mean = 0;
    for (const auto& rank : per_rank) mean += rank.at(k) / static_cast<double>(per_rank.size());
    out.push_back(mean);
  }
  return out;
}

// The bubble's steps' range: the engine records each step's bubble fraction, not its seconds,
// so the measured bubble scaled by each step's fraction over their mean (the pipelined span
// taken as the same from step to step).
std::optional<std::pair<double, double>> bubble_range(const json& point, int warmup,
                                                      double measured) {
  const auto f = step_means(point, "bubble_fraction", warmup);
  if (f.empty()) return std::nullopt;
  double mean = 0;
  for (double x : f) mean += x / static_cast<double>(f.size());
  if (!(mean > 0)) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(f.begin(), f.end());
  return std::pair{measured * *lo / mean, measured * *hi / mean};
}

}  // namespace

std::optional<std::pair<double, double>> steps_range(const json& point, const std::string& name,
                                                     int warmup) {
  const auto m = step_means(point, name, warmup);
  if (m.empty()) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(m.begin(), m.end());
  return std::pair{*lo, *hi};
}

void add_steps_ranges(const json& point, bool overlap, int warmup, json& terms) {
  for (json& t : terms) {
    if (t.at("unit") != "s") continue;
    const std::string name = t.at("name");
    const double measured = t.at("measured"), predicted = t.at("predicted");
    const char* series = term_series(name);
    auto range = series             ? steps_range(point, series, warmup)
                 : name == "bubble" ? bubble_range(point, warmup, measured)
                                    : std::nullopt;
    // A summary written before the exposed series was recorded: without overlap every dp call
    // blocks, so its time is its exposed time.
    if (!range && name == "dp" && !overlap) range = steps_range(point, "comm.dp.time_s", warmup);
    if (!range) continue;
    t["steps_range_s"] = {range->first, range->second};
    t["steps_spread_pct"] =
        measured > 0 ? json(100.0 * (range->second - range->first) / measured) : json();
    t["within_steps_range"] = range->first <= predicted && predicted <= range->second;
  }
}

}  // namespace paraxis::driver::report
