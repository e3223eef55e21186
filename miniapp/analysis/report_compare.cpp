// `paraxis report`, the points compared with each other (report_parts.hpp): ranks by measured
// and predicted step time, the accuracy of the predicted step time against issue 9's target,
// strong and weak scaling (like with like only: one model, precision and micro-batch), and the
// same configuration measured on several machines.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "analysis/report_noise.hpp"
#include "analysis/report_parts.hpp"

namespace paraxis::driver::report {

using nlohmann::json;

namespace {

// Sets each point's rank_measured and, for points with a prediction, rank_predicted.
void rank_points(std::vector<Analysed>& all) {
  std::vector<std::size_t> by_m(all.size()), by_p;
  for (std::size_t i = 0; i < all.size(); ++i) by_m[i] = i;
  std::sort(by_m.begin(), by_m.end(),
            [&](auto a, auto b) { return all[a].measured_step < all[b].measured_step; });
  for (std::size_t r = 0; r < by_m.size(); ++r) all[by_m[r]].point["rank_measured"] = r + 1;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].predicted) by_p.push_back(i);
  std::sort(by_p.begin(), by_p.end(),
            [&](auto a, auto b) { return all[a].predicted_step < all[b].predicted_step; });
  for (std::size_t r = 0; r < by_p.size(); ++r) all[by_p[r]].point["rank_predicted"] = r + 1;
}

// How many step-time misses the point itself shows to be the machine's, by which evidence.
struct MissCounts {
  int in_steps_range = 0, machine_changed = 0, not_recurring = 0;
};

// A point whose step time misses its target (residual r %), with what the report has beside it:
// its uneven ranks' excess, its own steps' range (docs/report.md, "Noise"), the recheck after it
// ("Recheck") and its rerun ("Rerun").
json miss_of(const Analysed& a, double r, double excess, MissCounts& n) {
  json miss{{"label", a.point["label"]},
            {"residual_pct", r},
            {"term_most_off", a.point.value("term_most_off", "")}};
  if (a.uneven()) miss["uneven_ranks_excess_s"] = excess;
  for (const json& st : a.point.value("terms", json::array())) {
    if (st.value("name", "") != "step_time") continue;
    if (st.contains("within_steps_range")) {
      miss["steps_range_s"] = st["steps_range_s"];
      miss["within_steps_range"] = st["within_steps_range"];
      n.in_steps_range += st["within_steps_range"].get<bool>() ? 1 : 0;
    }
    if (st.contains("recheck_verdict")) {
      miss["recheck_verdict"] = st["recheck_verdict"];
      miss["recheck_reason"] = recheck_reason(st);
      n.machine_changed += st["recheck_verdict"] == "cal" ? 1 : 0;
    }
    if (st.contains("rerun_verdict")) {
      miss["rerun_verdict"] = st["rerun_verdict"];
      miss["rerun_reason"] = rerun_reason(st);
      n.not_recurring += st["rerun_verdict"] == "noise" ? 1 : 0;
    }
  }
  return miss;
}

// Accuracy of the predicted step time: cmp.accuracy, misses, n_pred, max_abs, and cmp.points.
// Beside it, the same with each uneven point's excess spread added to its prediction: what the
// model misses against what the machine did unevenly during a point (docs/report.md).
void accuracy_of(const std::vector<Analysed>& all, Comparison& cmp) {
  json& misses = cmp.misses;
  double max_abs = 0, sum_abs = 0, max_even = 0, sum_even = 0;
  int n_pred = 0, n_uneven = 0;
  MissCounts shown;
  for (const auto& a : all) {
    cmp.points.push_back(a.point);
    if (!a.predicted) continue;
    const double r = 100.0 * (a.measured_step - a.predicted_step) / a.predicted_step;
    const double excess = a.uneven() ? a.uneven_excess_s : 0.0;
    const double r_even =
        100.0 * (a.measured_step - a.predicted_step - excess) / (a.predicted_step + excess);
    max_abs = std::max(max_abs, std::fabs(r));
    sum_abs += std::fabs(r);
    max_even = std::max(max_even, std::fabs(r_even));
    sum_even += std::fabs(r_even);
    ++n_pred;
    n_uneven += a.uneven() ? 1 : 0;
    if (std::fabs(r) > kEveryPointPct) misses.push_back(miss_of(a, r, excess, shown));
  }
  json accuracy{{"points_predicted", n_pred}};
  if (n_pred > 0) {
    const double mean_abs = sum_abs / n_pred;
    accuracy["max_abs_residual_pct"] = max_abs;
    accuracy["mean_abs_residual_pct"] = mean_abs;
    accuracy["every_point_within_target"] = max_abs <= kEveryPointPct;
    accuracy["mean_within_target"] = mean_abs <= kMeanPct;
    accuracy["misses"] = misses;
    accuracy["misses_within_steps_range"] = shown.in_steps_range;
    accuracy["misses_machine_changed"] = shown.machine_changed;
    accuracy["misses_not_recurring"] = shown.not_recurring;
    accuracy["uneven_ranks"] = {{"points", n_uneven},
                                {"max_abs_residual_pct", max_even},
                                {"mean_abs_residual_pct", sum_even / n_pred}};
  }
  cmp.n_pred = n_pred;
  cmp.max_abs = max_abs;
  cmp.accuracy = accuracy;
}

// The fastest point per (batch, world) of one model: batch -> world -> point.
using Fastest = std::map<int, std::map<int, const Analysed*>>;

void strong_rows(const Fastest& gb_world, json& strong) {
  for (const auto& [gb, worlds] : gb_world) {
    if (worlds.size() < 2) continue;
    const auto& [w0, base] = *worlds.begin();
    for (const auto& [w, a] : worlds) {
      const double speedup = base->measured_step / a->measured_step;
      strong.push_back({{"model", a->model_label},
                        {"global_batch", gb},
                        {"world", w},
                        {"label", a->point["label"]},
                        {"step_s", a->measured_step},
                        {"speedup", speedup},
                        {"efficiency", speedup * w0 / w}});
    }
  }
}

void weak_rows(const Fastest& replica, json& weak) {
  for (const auto& [b, worlds] : replica) {
    if (worlds.size() < 2) continue;
    const auto& [w0, base] = *worlds.begin();
    for (const auto& [w, a] : worlds)
      weak.push_back({{"model", a->model_label},
                      {"batch_per_replica", b},
                      {"world", w},
                      {"label", a->point["label"]},
                      {"step_s", a->measured_step},
                      {"efficiency", base->measured_step / a->measured_step}});
  }
}

// Scaling, like with like: points of one model (every model.* key), precision and micro-batch;
// strong = the same global batch over several world sizes, weak = the same batch per
// data-parallel replica (global_batch / dp).
void scaling_of(const std::vector<Analysed>& all, Comparison& cmp) {
  std::map<std::string, std::vector<const Analysed*>> by_model;
  for (const auto& a : all)
    by_model[a.model + " mb" + std::to_string(a.point["micro_batch"].get<int>())].push_back(&a);
  for (const auto& [key, v] : by_model) {
    Fastest gb_world, replica;  // global batch / batch per replica -> world -> fastest
    for (const auto* a : v) {
      const int gb = a->point["global_batch"], w = a->point["grid"]["world"];
      const int dp = a->point["grid"]["dp"];
      auto& s = gb_world[gb][w];
      if (!s || a->measured_step < s->measured_step) s = a;
      auto& q = replica[gb / dp][w];
      if (!q || a->measured_step < q->measured_step) q = a;
    }
    strong_rows(gb_world, cmp.strong);
    weak_rows(replica, cmp.weak);
  }
}

// Machines side by side: the same configuration of the same model measured in several folders.
void side_by_side(const std::vector<Analysed>& all, json& side) {
  std::map<std::string, std::vector<const Analysed*>> by_label;
  for (const auto& a : all)
    by_label[a.model + " " + a.point["label"].get<std::string>() + " gb" +
             std::to_string(a.point["global_batch"].get<int>())]
        .push_back(&a);
  for (const auto& [label, v] : by_label) {
    std::set<std::string> ms;
    for (const auto* a : v) ms.insert(a->point["machine"]);
    if (ms.size() < 2) continue;
    const auto& first = v.front()->point;
    json row{{"configuration", first["label"].get<std::string>() + " " + v.front()->model_label +
                                   " gb" + std::to_string(first["global_batch"].get<int>())}};
    for (const auto* a : v)
      row["step_s"][a->point["machine"].get<std::string>()] = a->measured_step;
    side.push_back(row);
  }
}

}  // namespace

Comparison compare_points(std::vector<Analysed>& all) {
  Comparison cmp;
  std::vector<json*> entries;
  for (auto& a : all) entries.push_back(&a.point);
  add_repeats_ranges(entries);  // before the accuracy copies the points (docs/report.md, "Noise")
  rank_points(all);
  accuracy_of(all, cmp);
  scaling_of(all, cmp);
  side_by_side(all, cmp.side);
  return cmp;
}

}  // namespace paraxis::driver::report
