// The report's sensitivity section (report_sensitivity.hpp; method: docs/sensitivity.md).
#include "analysis/report_sensitivity.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "analysis/statistics.hpp"
#include "analysis/summary_reader.hpp"
#include "deck/deck.hpp"
#include "perfmodel/collectives.hpp"
#include "perfmodel/step_time.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver::report {

using nlohmann::json;
namespace pm = paraxis::perfmodel;

namespace {

constexpr const char* kAxes[] = {"tp", "pp", "dp", "ep"};

// Per chunk, seconds of one micro-batch's forward, backward and W, from the baseline's measured
// figures: per stage with pipeline parallelism (chunk k runs on stage k % pp), else the step's
// medians divided by the micro-batches.
void compute_inputs(const json& base, const pm::Scenario& pc, pm::StepTimeInputs& in) {
  const int chunks = pc.pp * pc.virtual_stages, m = pc.micro_batches();
  const json& t = base.at("time");
  std::vector<double> f, b, w;
  for (int k = 0; k < chunks; ++k) {
    if (base.contains("pipeline")) {
      const json& p = base.at("pipeline");
      const auto at = [&](const char* key) {
        const json& v = p.value(key, json::array());
        const std::size_t s = static_cast<std::size_t>(k % pc.pp);
        return s < v.size() ? v[s].get<double>() : 0.0;
      };
      f.push_back(at("forward_action_s_per_stage"));
      b.push_back(at("backward_action_s_per_stage"));
      w.push_back(at("backward_weight_action_s_per_stage"));
    } else {
      f.push_back(t.value("forward_s", 0.0) / m);
      b.push_back(t.value("backward_s", 0.0) / m);
      w.push_back(t.value("backward_weight_s", 0.0) / m);
    }
  }
  in.forward_s = f;
  in.backward_s = b;
  if (schedule::splits_backward(pc.schedule)) in.backward_weight_s = w;
  in.optimizer_s = t.value("optimizer_s", 0.0);
}

// The pipeline's added time: the emulation holds a receive from when its consumer looks for it
// (docs/diagnosis.md, "When the time is added"), so a transfer that arrived during compute
// still costs its whole added time d before the compute that consumes it (a forward whose
// input comes from another stage, a backward whose output gradient does). The schedule is
// replayed with d at the start of every such action, less the replay without it, plus the
// gradient norm's all-reduce over the pipeline group (2 (p - 1) rounds of 8 bytes).
double pipeline_increment(const RunConfig& c, const pm::Scenario& pc, const pm::StepTimeInputs& in,
                          const pm::LinkCost& slowed) {
  const schedule::PipelineShape shape = config::pipeline_shape(c.train, c.parallel);
  const schedule::Schedule sched = schedule::make_schedule(c.parallel.schedule, shape);
  double message = 0;
  for (const auto& op : pm::pipeline_step_traffic(c.model, pc, 0).ops)
    if (op.op == pm::Collective::point_to_point) message = op.bytes;
  const double d = pm::point_to_point_time(message, slowed);
  const int last = shape.chunks() - 1;
  const auto replay = [&](double added) {
    return schedule::replay_schedule(
               sched, shape,
               [&](int stage, const schedule::Action& a) {
                 const std::size_t k = static_cast<std::size_t>(a.chunk);
                 const bool split = !in.backward_weight_s.empty();
                 switch (a.kind) {
                   case schedule::ActionKind::forward:
                     return in.forward_s[k] +
                            (a.chunk > 0 && schedule::chunk_stage(shape, a.chunk - 1) != stage
                                 ? added
                                 : 0);
                   case schedule::ActionKind::backward:
                     return in.backward_s[k] +
                            (a.chunk < last && schedule::chunk_stage(shape, a.chunk + 1) != stage
                                 ? added
                                 : 0);
                   case schedule::ActionKind::backward_weight:
                     return split ? in.backward_weight_s[k] : 0.0;
                   default:
                     return 0.0;
                 }
               })
        .makespan;
  };
  return replay(d) - replay(0) + pm::ring_all_reduce_time(pc.pp, 8, slowed);
}

// model(f) - model(1): the performance model's step time with the slowed axis's links costing
// what the injection adds per round or message, (f - 1) (alpha_m + bytes / v_m + the emulated
// link's alpha + bytes / B where the axis's groups span nodes), less the same model without it.
// null: no measured link for the axis, or a configuration the model cannot take.
json modelled_increment(const json& sp, const json& base, const std::string& axis, double f) {
  if (f == 1) return 0.0;
  const json& links = sp.at("slow_axis").value("links", json::object());
  if (!links.contains(axis)) return nullptr;
  const double alpha_m = links.at(axis).value("alpha_s", 0.0);
  const double v_m = links.at(axis).value("bytes_per_s", 0.0);
  try {
    const RunConfig c = config_from_json(sp.at("config"));
    const pm::Scenario pc = pm::scenario_of(c.parallel, c.comm, c.train);
    bool spans = false;
    if (sp.contains("topology")) {
      const json& a = sp.at("topology").at("axes");
      spans = a.contains(axis) && a.at(axis).value("groups_spanning_nodes", 0) > 0;
    }
    const auto& L = c.comm.links;
    const double alpha_e = spans ? L.latency_us * 1e-6 : 0;
    const double beta_e = spans && L.bandwidth_gbs > 0 ? 1 / (L.bandwidth_gbs * 1e9) : 0;
    const pm::LinkCost slowed{(f - 1) * (alpha_m + alpha_e),
                              (f - 1) * ((v_m > 0 ? 1 / v_m : 0) + beta_e), 0.0};
    pm::StepTimeInputs in;
    compute_inputs(base, pc, in);
    if (axis == "pp") return pipeline_increment(c, pc, in, slowed);
    const double without = pm::predict_step_time(c.model, pc, in).step_time;
    pm::LinkCost* l = axis == "tp"   ? &in.links.tp
                      : axis == "pp" ? &in.links.pp
                      : axis == "dp" ? &in.links.dp
                                     : &in.links.ep;
    *l = slowed;
    return pm::predict_step_time(c.model, pc, in).step_time - without;
  } catch (const std::exception&) {
    return nullptr;  // the model does not take this configuration: no prediction
  }
}

// Least-squares slope of y against x (0 with fewer than 2 distinct x).
double slope(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  if (x.size() < 2) return 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double d = n * sxx - sx * sx;
  return d > 0 ? (n * sxy - sx * sy) / d : 0;
}

// A point's `slow_axis` record checked before it is read (a damaged or hostile summary gives one
// error naming the file and the field, as summary_reader.hpp does for the rest).
void check_slow_axis(const json& sa, const std::string& where) {
  const auto bad = [&](const std::string& field, const std::string& expected) {
    throw std::runtime_error(where + ".slow_axis" + field + ": expected " + expected);
  };
  if (!sa.is_object()) bad("", "an object {axis, factor, links}");
  const json* axis = sa.contains("axis") ? &sa.at("axis") : nullptr;
  if (!axis || !axis->is_string() ||
      (*axis != "none" && *axis != "tp" && *axis != "pp" && *axis != "dp" && *axis != "ep"))
    bad(".axis", "one of none, tp, pp, dp, ep");
  if (!sa.contains("factor") || !sa.at("factor").is_number() ||
      !(sa.at("factor").get<double>() >= 1 && sa.at("factor").get<double>() <= 1e6))
    bad(".factor", "a number in [1, 1e6]");
  if (!sa.contains("links") || !sa.at("links").is_object()) bad(".links", "an object");
  for (const auto& [name, l] : sa.at("links").items())
    for (const char* f : {"alpha_s", "bytes_per_s"})
      if (!l.is_object() || !l.contains(f) || !l.at(f).is_number() ||
          !(l.at(f).get<double>() >= 0 && std::isfinite(l.at(f).get<double>())))
        bad(".links." + name + "." + f, "a finite number >= 0");
}

struct Member {
  json entry;    // report.json's point
  json summary;  // summary.json's point
  std::string axis;
  double factor = 1;
};

// A point's settings but fault.slow_axis.*: what the points of one sensitivity curve share.
json base_settings_of(const json& point) {
  json base = json::object();
  const json settings = point.value("settings", json::object());  // items() needs a live object
  for (const auto& [k, v] : settings.items())
    if (k.rfind("fault.slow_axis.", 0) != 0) base[k] = v;
  return base;
}

// The points that ran fault.slow_axis, grouped by folder and base configuration; `order`: the
// groups' keys in the order of their first point.
std::map<std::string, std::vector<Member>> sensitivity_groups(const json& points,
                                                              std::vector<std::string>& order) {
  std::map<std::string, json> summaries;  // per folder
  std::map<std::string, std::vector<Member>> groups;
  for (const auto& p : points) {
    const std::string dir = p.at("dir");
    if (!summaries.count(dir)) summaries[dir] = read_summary(dir + "/summary.json");
    const json* sp = nullptr;
    for (const auto& q : summaries[dir].at("points"))
      if (q.at("index") == p.at("index")) sp = &q;
    if (!sp || !sp->contains("slow_axis")) continue;
    check_slow_axis(sp->at("slow_axis"),
                    dir + "/summary.json: points[index " + p.at("index").dump() + "]");
    const std::string key = dir + "\n" + base_settings_of(p).dump();
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(
        {p, *sp, sp->at("slow_axis").at("axis"), sp->at("slow_axis").at("factor").get<double>()});
  }
  return groups;
}

// One axis's curve of a group: each factor's measured and predicted step time, and both slopes.
// Null when the group did not slow that axis.
json axis_curve(const std::vector<Member>& members, const Member& base, double baseline,
                const char* axis) {
  std::vector<const Member*> curve;
  for (const auto& m : members)
    if (m.axis == axis) curve.push_back(&m);
  bool slowed = false;
  for (const auto* m : curve) slowed = slowed || m->factor > 1;
  if (!slowed) return nullptr;
  std::stable_sort(curve.begin(), curve.end(),
                   [](const Member* a, const Member* b) { return a->factor < b->factor; });
  json pts = json::array();
  std::vector<double> xs, ys, ps;
  for (const auto* m : curve) {
    const double measured = m->entry.at("measured_step_s");
    const json inc = modelled_increment(m->summary, base.summary, axis, m->factor);
    json e{{"factor", m->factor}, {"measured_step_s", measured}};
    if (inc.is_null()) {
      e["predicted_step_s"] = nullptr;
      e["error_pct"] = nullptr;
    } else {
      const double predicted = baseline + inc.get<double>();
      e["increment_model_s"] = inc;
      e["predicted_step_s"] = predicted;
      e["error_pct"] = 100.0 * (predicted - measured) / measured;
      ps.push_back(predicted);
    }
    xs.push_back(m->factor);
    ys.push_back(measured);
    pts.push_back(e);
  }
  return {
      {"points", pts},
      {"slope_s_per_factor", slope(xs, ys)},
      {"model_slope_s_per_factor", ps.size() == xs.size() ? json(slope(xs, ps)) : json(nullptr)}};
}

// One group's entry: its baseline (the median of its factor-1 points: every axis's factor-1
// point is the same configuration; its measured figures feed the model's compute) and each
// slowed axis's curve. Null without a baseline or a slowed axis.
json sensitivity_group(const std::vector<Member>& members) {
  std::vector<double> base_steps;
  const Member* base = nullptr;
  for (const auto& m : members)
    if (m.factor == 1) {
      base_steps.push_back(m.entry.at("measured_step_s").get<double>());
      if (!base) base = &m;
    }
  if (!base) return nullptr;  // no baseline: nothing to anchor the model at
  const double baseline = median(base_steps);
  json g{{"dir", members.front().entry.at("dir")},
         {"label", members.front().entry.value("label", "")},
         {"baseline_step_s", baseline},
         {"target_pct", kSensitivityPct}};
  g["settings"] = base_settings_of(members.front().entry);
  json axes = json::object();
  std::string least;
  double steepest = -1;
  for (const char* axis : kAxes) {
    json curve = axis_curve(members, *base, baseline, axis);
    if (curve.is_null()) continue;
    const double s = curve.at("slope_s_per_factor").get<double>();
    axes[axis] = std::move(curve);
    if (s > steepest) {
      steepest = s;
      least = axis;
    }
  }
  if (axes.empty()) return nullptr;
  g["axes"] = axes;
  g["least_tolerant_axis"] = least;
  return g;
}

}  // namespace

json sensitivity_json(const json& points) {
  std::vector<std::string> order;
  const auto groups = sensitivity_groups(points, order);
  json out = json::array();
  for (const auto& key : order)
    if (json g = sensitivity_group(groups.at(key)); !g.is_null()) out.push_back(std::move(g));
  return out;
}

std::string sensitivity_markdown(const json& sensitivity, const std::string& out) {
  if (sensitivity.empty()) return "";
  const auto fmt = [](double v, int digits = 4) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    return std::string(b);
  };
  std::ostringstream md;
  md << "\n## Sensitivity\n\nStep time against a slowdown injected on one axis "
        "(fault.slow_axis: every operation of the axis's communicators costs factor times its "
        "link's cost). Predicted = measured baseline (factor 1) + the performance model's "
        "increment for the slowed links (docs/sensitivity.md); target: every point within "
     << fmt(kSensitivityPct, 3) << " %.\n\n";
  for (const auto& g : sensitivity) {
    md << "### " << g.value("label", "") << " (" << g.at("dir").get<std::string>();
    for (const auto& [k, v] : g.at("settings").items()) md << ", " << k << "=" << v.dump();
    md << ")\n\n| axis | factor | measured s | predicted s | error % |\n|---|---|---|---|---|\n";
    for (const auto& [axis, a] : g.at("axes").items())
      for (const auto& p : a.at("points")) {
        md << "| " << axis << " | " << fmt(p.at("factor").get<double>()) << " | "
           << fmt(p.at("measured_step_s").get<double>()) << " | ";
        if (p.at("predicted_step_s").is_null())
          md << "- | - |\n";
        else
          md << fmt(p.at("predicted_step_s").get<double>()) << " | "
             << fmt(p.at("error_pct").get<double>(), 3) << " |\n";
      }
    md << "\nSlope of the measured step time (s per unit of factor):";
    for (const auto& [axis, a] : g.at("axes").items())
      md << ' ' << axis << ' ' << fmt(a.at("slope_s_per_factor").get<double>(), 3) << ';';
    if (g.at("axes").size() > 1)
      md << " this layout tolerates a slow **" << g.at("least_tolerant_axis").get<std::string>()
         << "** least (the steepest).";
    md << "\n\n";
  }
  // One slowed axis per configuration (e.g. one 2-rank layout per axis): the steepest of all.
  if (sensitivity.size() > 1) {
    std::string axis, label;
    double steepest = -1;
    for (const auto& g : sensitivity)
      for (const auto& [a, v] : g.at("axes").items())
        if (v.at("slope_s_per_factor").get<double>() > steepest) {
          steepest = v.at("slope_s_per_factor").get<double>();
          axis = a;
          label = g.value("label", "");
        }
    md << "Across the configurations above the steepest curve is **" << axis << "** (" << label
       << ", " << fmt(steepest, 3) << " s per unit of factor).\n\n";
  }
  std::error_code ec;
  if (std::filesystem::exists(out + "/plots/sensitivity.png", ec))
    md << "![sensitivity](plots/sensitivity.png)\n\n";
  return md.str();
}

}  // namespace paraxis::driver::report
