// The series a diagnosis reads and the persistence rule (diagnosis_series.hpp).
#include "analysis/diagnosis_series.hpp"

#include <sstream>
#include <stdexcept>

#include "analysis/diagnosis.hpp"
#include "analysis/statistics.hpp"
#include "config/grid_coords.hpp"
#include "deck/deck.hpp"

namespace paraxis::driver::diagnosis::detail {

using nlohmann::json;

Series series(const json& rs, const std::string& name) {
  Series s;
  if (!rs.contains(name)) return s;
  for (const auto& rank : rs.at(name)) s.push_back(rank.get<std::vector<double>>());
  return s;
}

double median_of(std::vector<double> v) {
  return v.empty() ? 0.0 : median(std::move(v));
}

std::string fixed(double x, int digits) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(digits);
  os << x;
  return os.str();
}

Point read_point(const json& p) {
  if (!p.contains("rank_series"))
    throw std::invalid_argument(
        "diagnosis: the point has no rank_series (summary.json written before per-rank series "
        "were kept)");
  Point pt;
  const RunConfig c = config_from_json(p.at("config"));
  pt.par = c.parallel;
  pt.dp_overlap = c.comm.overlap;
  pt.rs = p.at("rank_series");
  pt.steps = pt.rs.at("steps").get<std::vector<int>>();
  pt.world = static_cast<int>(pt.rs.at("compute_s").size());
  const int warmup = p.at("config").at("train").value("warmup_steps", 0);
  for (std::size_t k = 0; k < pt.steps.size(); ++k)
    if (is_measured_step(pt.steps[k], warmup)) pt.measured.push_back(static_cast<int>(k));
  return pt;
}

std::string where(const config::ParallelConfig& p, int rank) {
  const auto c = config::grid_coords_of(p, rank);
  std::ostringstream os;
  os << "pipeline stage " << c.pp << " of replica " << c.dp;
  if (p.tp > 1) os << ", tensor-parallel rank " << c.tp;
  return os.str();
}

Onset persistent_onset(const std::vector<double>& ratios, double threshold) {
  const int n = static_cast<int>(ratios.size());
  Onset o;
  double best = -1e300;
  for (int i = 0; i < n; ++i) {
    if (ratios[i] < threshold) continue;
    int count = 0;
    double after = 0, before = 0;
    for (int j = i; j < n; ++j) {
      count += ratios[j] >= threshold ? 1 : 0;
      after += ratios[j];
    }
    for (int j = 0; j < i; ++j) before += ratios[j];
    if (count < kMinSteps || count < kPersistence * (n - i)) continue;
    const double score = after / (n - i) - (i > 0 ? before / i : 1.0);
    if (score > best) {
      best = score;
      o.first = i;
    }
  }
  if (o.first >= 0)
    for (int j = o.first; j < n; ++j)
      if (ratios[j] >= threshold) o.slowed.push_back(j);
  return o;
}

std::map<std::pair<int, int>, std::vector<int>> peer_sets(const Point& pt) {
  std::map<std::pair<int, int>, std::vector<int>> sets;
  for (int r = 0; r < pt.world; ++r) {
    const auto c = config::grid_coords_of(pt.par, r);
    sets[{c.pp, pt.par.ep > 1 ? c.ep : 0}].push_back(r);
  }
  return sets;
}

std::vector<std::vector<int>> groups_of(const config::ParallelConfig& p, const std::string& axis) {
  const json par = {{"tp", p.tp},
                    {"pp", p.pp},
                    {"dp", p.dp},
                    {"ep", p.ep},
                    {"order", config::to_string(p.order)}};
  return axis_groups(par, axis);
}

std::vector<double> group_wire(const Point& pt, const Series& time, const Series& wait,
                               const std::vector<int>& group) {
  std::vector<double> wire;
  for (int k : pt.measured) {
    double sum = 0;
    for (int r : group) sum += time[r][k] - (wait.empty() ? 0.0 : wait[r][k]);
    wire.push_back(sum / static_cast<double>(group.size()));
  }
  return wire;
}

}  // namespace paraxis::driver::diagnosis::detail
