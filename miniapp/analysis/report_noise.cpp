// The spread of a point's measured steps beside each time term (report_noise.hpp).
#include "analysis/report_noise.hpp"

#include <algorithm>
#include <vector>

#include "analysis/statistics.hpp"

namespace paraxis::driver::report {

using nlohmann::json;

const char* term_series(const std::string& term, bool overlap) {
  if (term == "step_time") return "step_s";
  if (term == "compute") return "compute_s";
  if (term == "tp") return "comm.tp.time_s";
  if (term == "ep") return "comm.ep.time_s";
  // Without overlap every dp call blocks: its time is its exposed time, the dp term.
  if (term == "dp" && !overlap) return "comm.dp.time_s";
  return nullptr;
}

std::optional<std::pair<double, double>> steps_range(const json& point, const std::string& name,
                                                     int warmup) {
  if (!point.contains("rank_series")) return std::nullopt;
  const json& rs = point.at("rank_series");
  if (!rs.contains(name) || !rs.contains("steps")) return std::nullopt;
  const auto steps = rs.at("steps").get<std::vector<int>>();
  const auto per_rank = rs.at(name).get<std::vector<std::vector<double>>>();
  if (per_rank.empty()) return std::nullopt;
  std::optional<std::pair<double, double>> r;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    if (!is_measured_step(steps[k], warmup)) continue;
    double mean = 0;
    for (const auto& rank : per_rank) mean += rank.at(k) / static_cast<double>(per_rank.size());
    r = r ? std::pair{std::min(r->first, mean), std::max(r->second, mean)} : std::pair{mean, mean};
  }
  return r;
}

void add_steps_ranges(const json& point, bool overlap, int warmup, json& terms) {
  for (json& t : terms) {
    if (t.at("unit") != "s") continue;
    const char* series = term_series(t.at("name").get<std::string>(), overlap);
    const auto range = series ? steps_range(point, series, warmup) : std::nullopt;
    if (!range) continue;
    const double measured = t.at("measured"), predicted = t.at("predicted");
    t["steps_range_s"] = {range->first, range->second};
    t["steps_spread_pct"] =
        measured > 0 ? json(100.0 * (range->second - range->first) / measured) : json();
    t["within_steps_range"] = range->first <= predicted && predicted <= range->second;
  }
}

}  // namespace paraxis::driver::report
