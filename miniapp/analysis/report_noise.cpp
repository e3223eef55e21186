// The spread of a point's measured steps beside each time term (report_noise.hpp).
#include "analysis/report_noise.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "analysis/report_parts.hpp"
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

double term_target_pct(const std::string& term) {
  return term == "step_time" ? kEveryPointPct : 25.0;
}

void add_recheck(const json& point, json& terms) {
  const json none = json::object();
  const json& rp = point.value("recheck", none).value("predicted", none);
  for (json& t : terms) {
    const std::string name = t.value("name", "");
    if (t.value("unit", "") != "s" || !rp.contains(name) || !rp.at(name).is_number()) continue;
    const double measured = t.at("measured"), predicted = t.at("predicted");
    const double again = rp.at(name);
    if (!(again > 0) || !(predicted > 0)) continue;
    const double residual = 100.0 * (measured - predicted) / predicted;
    const double again_residual = 100.0 * (measured - again) / again;
    t["recheck_predicted"] = again;
    t["recheck_residual_pct"] = again_residual;
    const double target = term_target_pct(name);
    if (std::fabs(residual) <= target) continue;
    // Both miss on the same side: the model; else the recheck agrees, or the two predictions
    // straddle the measured: the machine moved between calibration and recheck.
    const bool same_side =
        std::fabs(again_residual) > target && (residual > 0) == (again_residual > 0);
    t["recheck_verdict"] = same_side ? "model" : "cal";
  }
}

std::string recheck_reason(const json& t) {
  if (!t.contains("recheck_verdict")) return "";
  const auto ms = [&](const char* key) {
    std::ostringstream os;
    os << std::setprecision(3) << t.at(key).get<double>() * 1e3 << " ms";
    return os.str();
  };
  const std::string again = ms("recheck_predicted"), cal = ms("predicted"),
                    measured = ms("measured");
  if (t.at("recheck_verdict") == "model")
    return "the model: the recheck after the point predicts " + again + ", missing the measured " +
           measured + " the same way as the calibration's " + cal;
  if (std::fabs(t.at("recheck_residual_pct").get<double>()) <= term_target_pct(t.at("name")))
    return "the machine changed since calibration: the recheck after the point predicts " + again +
           ", within target of the measured " + measured + " (calibration " + cal + ")";
  return "the machine changed during the point: the calibration's " + cal + " and the recheck's " +
         again + " straddle the measured " + measured;
}

void add_rerun(const json& again, json& terms) {
  for (json& t : terms) {
    const std::string name = t.value("name", "");
    if (t.value("unit", "") != "s" || !again.contains(name) || !again.at(name).is_number())
      continue;
    const double measured = t.at("measured"), predicted = t.at("predicted");
    if (!(predicted > 0)) continue;
    const double second = again.at(name);
    const double residual = 100.0 * (measured - predicted) / predicted;
    const double second_residual = 100.0 * (second - predicted) / predicted;
    t["rerun_measured"] = second;
    t["rerun_residual_pct"] = second_residual;
    const double target = term_target_pct(name);
    if (std::fabs(residual) <= target) continue;
    // The rerun ran right after the recheck: the recheck's prediction is the model's for it too.
    const auto off_same_side = [&](double prediction) {
      const double r = 100.0 * (second - prediction) / prediction;
      return std::fabs(r) > target && (r > 0) == (residual > 0);
    };
    const double again_predicted = t.value("recheck_predicted", predicted);
    const bool recurs =
        off_same_side(predicted) && (!(again_predicted > 0) || off_same_side(again_predicted));
    t["rerun_verdict"] = recurs ? "recurs" : "noise";
  }
}

std::string rerun_reason(const json& t) {
  if (!t.contains("rerun_verdict")) return "";
  std::ostringstream os;
  os << std::setprecision(3) << "the point run again measured "
     << t.at("rerun_measured").get<double>() * 1e3 << " ms ("
     << t.at("rerun_residual_pct").get<double>() << " % off the prediction)";
  if (t.contains("recheck_predicted"))
    os << "; the recheck's prediction " << t.at("recheck_predicted").get<double>() * 1e3 << " ms";
  os << (t.at("rerun_verdict") == "recurs" ? ": the miss recurs"
                                           : ": the miss did not recur, the machine's noise");
  return os.str();
}

namespace {

// The axis whose calls make a communication term; nullptr for the other terms.
const char* term_axis(const std::string& term) {
  for (const char* axis : {"tp", "dp", "ep"})
    if (term == axis) return axis;
  return nullptr;
}

// What the model knows of a point's term on `axis`: its folder and grid, the axis's calls (per
// operation and size bucket: count and predicted seconds, from the point's calibration) and,
// for dp, comm.overlap. Two points with the same key are the same term to the model. "" without
// calls on the axis.
std::string repeat_key(const json& point, const std::string& term, const std::string& axis) {
  if (!point.contains("calls") || !point.at("calls").contains("rows")) return "";
  std::ostringstream k;
  k << point.value("dir", "") << '|' << term << '|' << point.value("grid", json()).dump();
  if (axis == "dp")
    k << '|' << point.value("settings", json::object()).value("comm.overlap", json()).dump();
  int rows = 0;
  for (const json& r : point.at("calls").at("rows")) {
    if (r.value("axis", "") != axis) continue;
    ++rows;
    k << '|' << r.value("op", "") << ':' << r.value("bucket_bytes", 0.0) << ':'
      << r.value("calls", 0.0) << ':';
    const json pr = r.value("predicted_s", json());
    if (pr.is_number())
      k << std::setprecision(6) << pr.get<double>();
    else
      k << '-';
  }
  return rows > 0 ? k.str() : "";
}

}  // namespace

void add_repeats_ranges(const std::vector<json*>& points) {
  std::map<std::string, std::vector<json*>> repeats;
  for (json* p : points) {
    if (!p->contains("terms")) continue;
    for (json& t : p->at("terms")) {
      const char* axis = term_axis(t.value("name", ""));
      if (axis == nullptr || t.value("unit", "") != "s" || !(t.value("predicted", 0.0) > 0))
        continue;
      const std::string key = repeat_key(*p, t.at("name"), axis);
      if (!key.empty()) repeats[key].push_back(&t);
    }
  }
  for (auto& [key, terms] : repeats) {
    if (terms.size() < 2) continue;
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const json* t : terms) {
      const double r = t->at("measured").get<double>() / t->at("predicted").get<double>();
      lo = std::min(lo, r);
      hi = std::max(hi, r);
    }
    for (json* t : terms) {
      (*t)["repeats"] = terms.size();
      (*t)["repeats_ratio_range"] = {lo, hi};
      (*t)["within_repeats_range"] = lo <= 1.0 && 1.0 <= hi;
    }
  }
}

}  // namespace paraxis::driver::report
