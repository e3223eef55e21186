// `paraxis report DIR [DIR ...]`: every measured point next to the performance models'
// prediction, term by term. Predictions use only what the run calibrated before the point
// (summary.json `calibration`: fitted collectives, the shard's compute per chunk, the
// optimizer) and the analytic models (perfmodel/), never the point's own measured steps.
// Several result folders (a job array, two machines) are merged: machines side by side, weak
// and strong scaling, like with like only (the same model). Every summary.json is validated
// first (summary_reader.hpp); points that are not "ok" are listed, never analysed. Writes
// report.json and report.md atomically (io/checked_file.hpp) and plots/ (report_plots.hpp)
// into the first DIR; a failed write exits 4 naming the file, the previous file left in place.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "driver/commands.hpp"
#include "driver/report_plots.hpp"
#include "driver/results.hpp"
#include "driver/summary_reader.hpp"
#include "io/checked_file.hpp"
#include "parallel/process_grid.hpp"
#include "perfmodel/collectives.hpp"
#include "perfmodel/flops.hpp"
#include "perfmodel/memory.hpp"
#include "perfmodel/step_time.hpp"
#include "perfmodel/step_traffic.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver {

using nlohmann::json;
namespace pm = paraxis::perfmodel;

namespace {

constexpr double kEveryPointPct = 15.0, kMeanPct = 10.0;  // issue 9's accuracy target

pm::Scenario perf_config(const RunConfig& c) {
  return pm::scenario_of(c.parallel, c.comm, c.train);
}

// Measured per-rank statistic (time.ranks.<name>.<field>), 0 when absent.
double rank_stat(const json& point, const std::string& name, const char* field) {
  const auto& ranks = point.at("time").value("ranks", json::object());
  if (!ranks.contains(name)) return 0;
  return ranks.at(name).value(field, 0.0);
}

json term(const std::string& name, double measured, double predicted, const std::string& unit) {
  json t{{"name", name}, {"measured", measured}, {"predicted", predicted}, {"unit", unit}};
  t["residual_pct"] = predicted != 0 ? json(100.0 * (measured - predicted) / predicted) : json();
  return t;
}

std::string label_of(const RunConfig& c, const json& point) {
  std::ostringstream os;
  os << "tp" << c.parallel.tp << " pp" << c.parallel.pp << " dp" << c.parallel.dp;
  if (c.parallel.ep > 1) os << " ep" << c.parallel.ep;
  os << " z" << c.parallel.zero;
  if (c.parallel.pp > 1)
    os << ' ' << schedule::to_string(c.parallel.schedule) << " m"
       << config::micro_batches(c.train, c.parallel);
  if (c.parallel.sequence_parallel && c.parallel.tp > 1) os << " sp";
  if (c.comm.overlap) os << " ov";
  (void)point;
  return os.str();
}

// The model in a few words: scaling tables may hold several.
std::string model_label_of(const RunConfig& c) {
  const auto& m = c.model;
  std::ostringstream os;
  os << "L" << m.layers << " h" << m.hidden << " a" << m.heads << " f" << m.ffn << " s" << m.seq_len
     << " V" << m.vocab;
  if (m.moe.experts > 0) os << " E" << m.moe.experts << "k" << m.moe.top_k;
  os << ' ' << model::to_string(c.train.precision);
  return os.str();
}

struct Analysed {
  json point;         // the report's entry
  std::string model;  // every model.* key and the precision: what scaling compares like with like
  std::string model_label;  // the same, short, for tables
  double measured_step = 0, predicted_step = 0;
  bool predicted = false;
};

Analysed analyse(const json& p, const std::string& dir, const std::string& machine) {
  Analysed a;
  const RunConfig c = config_from_json(p.at("config"));
  const auto& t = p.at("time");
  json out{{"dir", dir},
           {"machine", machine},
           {"index", p.at("index")},
           {"label", label_of(c, p)},
           {"settings", p.value("settings", json::object())},
           {"grid", p.at("grid")},
           {"precision", model::to_string(c.train.precision)},
           {"global_batch", c.train.global_batch},
           {"micro_batch", c.train.micro_batch}};
  a.model = p.at("config").at("model").dump() + " " + model::to_string(c.train.precision);
  a.model_label = model_label_of(c);
  a.measured_step = t.at("step_median_s");
  json terms = json::array();
  const pm::Scenario pc = perf_config(c);
  // Measured terms (docs/report.md), each the mean over ranks: compute (fenced phases less
  // the communication blocked in them, optimizer included); per axis the time in its calls
  // (data parallelism: exposed time); the bubble: the pipelined span less the fenced compute
  // actions (it includes waiting for transfers). Their sum is about the step.
  const double m_compute = rank_stat(p, "compute_s", "mean");
  const double m_tp = rank_stat(p, "comm.tp.time_s", "mean");
  const double m_ep = rank_stat(p, "comm.ep.time_s", "mean");
  const double m_dp = rank_stat(p, "comm.dp.exposed_s", "mean");
  const double m_bubble =
      rank_stat(p, "pipeline_span_s", "mean") - rank_stat(p, "pipeline_busy_s", "mean");
  // Model: traffic of rank 0 (stage 0) and memory of the largest rank, always; times when the
  // point was calibrated.
  const auto traffic = pm::step_traffic(c.model, pc, 0);
  const pm::MemoryEstimate mem = pm::largest_rank_memory(c.model, pc);
  pm::StepTimeBreakdown br;
  if (p.contains("calibration")) {
    const Calibration cal = calibration_from_json(p.at("calibration"));
    pm::StepTimeInputs in;
    in.forward_s = cal.compute.forward_s;
    in.backward_s = cal.compute.backward_s;
    in.optimizer_s = cal.compute.optimizer_s;
    for (const auto& f : cal.comm) {
      const pm::LinkCost l{f.alpha, f.beta, 0.0};
      pm::OpLinks* ops = f.axis == "tp"   ? &in.op_links.tp
                         : f.axis == "pp" ? &in.op_links.pp
                         : f.axis == "dp" ? &in.op_links.dp
                                          : &in.op_links.ep;
      pm::LinkCost* axis = f.axis == "tp"   ? &in.links.tp
                           : f.axis == "pp" ? &in.links.pp
                           : f.axis == "dp" ? &in.links.dp
                                            : &in.links.ep;
      (*ops)[collective_named(f.op)] = l;
      if (axis->alpha == 0 && axis->beta == 0) *axis = l;  // operations not calibrated
    }
    br = pm::predict_step_time(c.model, pc, in);
    a.predicted = true;
    a.predicted_step = br.step_time;
    // The model's terms describe the stage that finishes last; the measured ones are means
    // over ranks: compare compute and bubble as means over stages too. Experts loaded
    // unevenly: the step follows the slowest expert rank (in.forward_s), a rank computes the
    // mean and waits the difference in the all-to-all, so the expert-parallel term is the
    // wire time plus that wait.
    double chunk_compute = 0, chunk_wait = 0;
    for (std::size_t k = 0; k < in.forward_s.size(); ++k) {
      chunk_compute += cal.compute.forward_mean_s[k] + cal.compute.backward_mean_s[k];
      chunk_wait += in.forward_s[k] + in.backward_s[k] - cal.compute.forward_mean_s[k] -
                    cal.compute.backward_mean_s[k];
    }
    const double p_compute = pc.micro_batches() * chunk_compute / pc.pp + br.optimizer;
    const double p_ep = br.ep + pc.micro_batches() * chunk_wait / pc.pp;
    const double p_bubble = br.bubble_fraction * br.pipeline_span + br.pp;
    terms.push_back(term("step_time", a.measured_step, br.step_time, "s"));
    terms.push_back(term("compute", m_compute, p_compute, "s"));
    if (pc.tp > 1) terms.push_back(term("tp", m_tp, br.tp, "s"));
    if (pc.ep > 1) terms.push_back(term("ep", m_ep, p_ep, "s"));
    if (pc.dp > 1) terms.push_back(term("dp", m_dp, br.dp, "s"));
    if (pc.pp > 1) terms.push_back(term("bubble", m_bubble, p_bubble, "s"));
  } else {
    terms.push_back(term("step_time", a.measured_step, 0, "s"));
  }
  // Traffic: what rank 0 recorded against the model (exact for tp, pp, dp; ep follows the
  // routing that happened, the model assumes uniform routing).
  const std::pair<const char*, const pm::AxisTraffic*> axes[] = {
      {"tp", &traffic.tp}, {"pp", &traffic.pp}, {"dp", &traffic.dp}, {"ep", &traffic.ep}};
  for (const auto& [axis, tr] : axes) {
    const double measured = t.at("comm").at(axis).value("bytes", 0.0);
    if (measured > 0 || tr->bytes() > 0)
      terms.push_back(term(std::string("bytes.") + axis, measured, tr->bytes(), "B"));
  }
  const auto& mm = p.at("memory");
  terms.push_back(term("memory.params", mm.value("params_bytes", 0.0), mem.params, "B"));
  terms.push_back(term("memory.grads", mm.value("grads_bytes", 0.0), mem.grads, "B"));
  terms.push_back(term("memory.optimizer", mm.value("optimizer_bytes", 0.0), mem.optimizer, "B"));
  terms.push_back(
      term("memory.activations", mm.value("activations_peak_bytes", 0.0), mem.activations, "B"));
  terms.push_back(term("memory.peak", mm.value("peak_bytes", 0.0), mem.peak, "B"));
  out["terms"] = terms;
  // The axis that costs most (measured seconds).
  std::string costliest = "none";
  double worst = 0;
  for (const auto& [name, v] : std::vector<std::pair<std::string, double>>{
           {"tp", m_tp}, {"ep", m_ep}, {"dp", m_dp}, {"pp (bubble)", m_bubble}})
    if (v > worst) {
      worst = v;
      costliest = name;
    }
  out["costliest_axis"] = costliest;
  out["costliest_axis_s"] = worst;
  if (pc.pp > 1) {
    out["pipeline"] = {{"stages", pc.pp},
                       {"micro_batches", pc.micro_batches()},
                       {"virtual_stages", pc.virtual_stages},
                       {"schedule", c.parallel.schedule},
                       {"bubble_measured", t.value("bubble_fraction", 0.0)},
                       {"bubble_model", t.value("bubble_fraction_model", 0.0)},
                       {"bubble_ideal", t.value("bubble_fraction_ideal", 0.0)},
                       {"bubble_predicted", a.predicted ? json(br.bubble_fraction) : json()}};
  }
  // Where a prediction misses: the term whose seconds are furthest off.
  if (a.predicted) {
    std::string off;
    double gap = -1;
    for (const auto& x : terms) {
      const std::string n = x["name"];
      if (n == "step_time" || x["unit"] != "s") continue;
      const double g = std::fabs(x["measured"].get<double>() - x["predicted"].get<double>());
      if (g > gap) {
        gap = g;
        off = n;
      }
    }
    out["term_most_off"] = off;
    out["term_most_off_s"] = gap;
  }
  out["measured_step_s"] = a.measured_step;
  out["predicted_step_s"] = a.predicted ? json(a.predicted_step) : json();
  a.point = out;
  return a;
}

std::string fmt(double v, int digits = 4) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.*g", digits, v);
  return b;
}

}  // namespace

int report_command(const std::vector<std::string>& dirs) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return 0;
  json report{{"schema", "paraxis.report/1"},
              {"sources", dirs},
              {"target", {{"every_point_pct", kEveryPointPct}, {"mean_pct", kMeanPct}}}};
  json points = json::array(), machines = json::array(), calibration = json::array();
  json not_analysed = json::array();
  std::vector<std::string> warnings;
  std::vector<Analysed> all;
  // The same folder twice would pair every point with itself as "another machine".
  std::map<std::string, std::string> canonical;
  for (const auto& dir : dirs) {
    std::error_code ec;
    const std::string key = std::filesystem::weakly_canonical(dir, ec).string();
    const auto [it, fresh] = canonical.emplace(ec ? dir : key, dir);
    if (!fresh) {
      std::fprintf(stderr,
                   "paraxis: error: report: folder '%s' is given twice (as '%s' and '%s')\n",
                   it->first.c_str(), it->second.c_str(), dir.c_str());
      return 2;
    }
  }
  for (const auto& dir : dirs) {
    const std::string file = dir + "/summary.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
      std::fprintf(stderr, "paraxis: error: report: no summary.json in '%s'\n", dir.c_str());
      return 2;
    }
    json s;
    try {
      s = read_summary(file);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "paraxis: error: report: %s\n", e.what());
      return 2;
    }
    const auto& prov = s.value("provenance", json::object());
    std::string hosts;
    for (const auto& h : prov.value("hosts", json::array()))
      hosts += (hosts.empty() ? "" : ",") + h.get<std::string>();
    const std::string machine = hosts.empty() ? dir : hosts;
    const int ranks_per_host = prov.value("max_ranks_per_host", 0);
    const int cores = prov.value("cores_per_host", 0);
    if (cores > 0 && ranks_per_host > cores)
      warnings.push_back("`" + dir + "`: " + std::to_string(ranks_per_host) +
                         " ranks on a host with " + std::to_string(cores) +
                         " cores: ranks time-share cores (and MPI busy-polls), which no model "
                         "here describes; predictions assume a core per rank");
    machines.push_back({{"dir", dir},
                        {"machine", machine},
                        {"world", prov.value("world", 0)},
                        {"execution_space", prov.value("execution_space", "")},
                        {"mpi_library", prov.value("mpi_library", "")},
                        {"git_hash", prov.value("git_hash", "")},
                        {"date", prov.value("date", "")}});
    std::set<std::string> seen_fits;
    for (const auto& p : s.at("points")) {
      const std::string status = p.at("status");
      if (status != "ok") {  // diverged, failed, skipped: its figures mean nothing
        not_analysed.push_back({{"dir", dir},
                                {"index", p.at("index")},
                                {"settings", p.value("settings", json::object())},
                                {"status", status}});
        continue;
      }
      try {
        all.push_back(analyse(p, dir, machine));
        if (!p.contains("calibration")) continue;
        for (const auto& [axis, ops] : p["calibration"]["comm"].items())
          for (const auto& [op, f] : ops.items()) {
            const int ranks = f.at("ranks");
            if (!seen_fits.insert(axis + op + std::to_string(ranks)).second) continue;
            calibration.push_back({{"machine", machine},
                                   {"dir", dir},
                                   {"axis", axis},
                                   {"op", op},
                                   {"ranks", ranks},
                                   {"alpha_s", f["alpha_s"]},
                                   {"beta_s_per_byte", f["beta_s_per_byte"]},
                                   {"busbw_factor", pm::busbw_factor(collective_named(op), ranks)},
                                   {"samples", f["samples"]}});
          }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "paraxis: error: report: %s: point %d: %s\n", file.c_str(),
                     p.at("index").get<int>(), e.what());
        return 2;
      }
    }
  }
  // Ranks by measured and by predicted step time.
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
  // Accuracy of the predicted step time.
  double max_abs = 0, sum_abs = 0;
  int n_pred = 0;
  json misses = json::array();
  for (const auto& a : all) {
    points.push_back(a.point);
    if (!a.predicted) continue;
    const double r = 100.0 * (a.measured_step - a.predicted_step) / a.predicted_step;
    max_abs = std::max(max_abs, std::fabs(r));
    sum_abs += std::fabs(r);
    ++n_pred;
    if (std::fabs(r) > kEveryPointPct)
      misses.push_back({{"label", a.point["label"]},
                        {"residual_pct", r},
                        {"term_most_off", a.point.value("term_most_off", "")}});
  }
  json accuracy{{"points_predicted", n_pred}};
  if (n_pred > 0) {
    const double mean_abs = sum_abs / n_pred;
    accuracy["max_abs_residual_pct"] = max_abs;
    accuracy["mean_abs_residual_pct"] = mean_abs;
    accuracy["every_point_within_target"] = max_abs <= kEveryPointPct;
    accuracy["mean_within_target"] = mean_abs <= kMeanPct;
    accuracy["misses"] = misses;
  }
  // Scaling, like with like: points of one model (every model.* key), precision and
  // micro-batch; strong = the same global batch over several world sizes, weak = the same batch
  // per data-parallel replica (global_batch / dp).
  json strong = json::array(), weak = json::array();
  {
    std::map<std::string, std::vector<const Analysed*>> by_model;
    for (const auto& a : all)
      by_model[a.model + " mb" + std::to_string(a.point["micro_batch"].get<int>())].push_back(&a);
    for (const auto& [key, v] : by_model) {
      std::map<int, std::map<int, const Analysed*>> gb_world;  // global batch -> world -> fastest
      std::map<int, std::map<int, const Analysed*>> replica;   // batch per replica -> world -> ...
      for (const auto* a : v) {
        const int gb = a->point["global_batch"], w = a->point["grid"]["world"];
        const int dp = a->point["grid"]["dp"];
        auto& s = gb_world[gb][w];
        if (!s || a->measured_step < s->measured_step) s = a;
        auto& q = replica[gb / dp][w];
        if (!q || a->measured_step < q->measured_step) q = a;
      }
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
  }
  // Machines side by side: the same configuration of the same model measured in several folders.
  json side = json::array();
  {
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
  report["machines"] = machines;
  report["points"] = points;
  report["calibration"] = calibration;
  report["accuracy"] = accuracy;
  report["scaling"] = {{"strong", strong}, {"weak", weak}};
  report["machines_side_by_side"] = side;
  report["warnings"] = warnings;

  report["points_not_analysed"] = not_analysed;

  const std::string out = dirs.front();
  // Strings from the summaries are written as they came; invalid UTF-8 is replaced, not thrown.
  try {
    io::write_file_checked(out + "/report.json",
                           report.dump(2, ' ', false, json::error_handler_t::replace) + '\n');
  } catch (const io::WriteError& e) {
    std::fprintf(stderr, "paraxis: error: report: %s\n", e.what());
    return 4;
  }
  // Plots: a missing interpreter is a warning, a script that fails (it names the file) an error.
  const PlotOutcome plots = make_plots(out + "/report.json", out + "/plots");
  const std::string& plots_note = plots.note;
  if (plots.kind == PlotOutcome::skipped)
    std::fprintf(stderr, "paraxis: warning: %s\n", plots_note.c_str());
  else if (plots.kind == PlotOutcome::failed)
    std::fprintf(stderr, "paraxis: error: report: %s\n", plots_note.c_str());
  // Markdown.
  std::ostringstream md;
  md << "# paraxis report\n\nSources: ";
  for (const auto& d : dirs) md << '`' << d << "` ";
  md << "\n\nPredictions use only the calibration each point recorded before it ran (fitted "
        "collectives per communicator, the shard's compute per model chunk, the optimizer) and "
        "the analytic models of `docs/perfmodel.md`; residual = (measured - predicted) / "
        "predicted. Terms: see `docs/report.md`.\n\n";
  for (const auto& w : warnings) md << "**Warning:** " << w << ".\n\n";
  md << "## Machines\n\n| folder | hosts | ranks | execution space | MPI "
        "|\n|---|---|---|---|---|\n";
  for (const auto& m : machines)
    md << "| `" << m["dir"].get<std::string>() << "` | " << m["machine"].get<std::string>() << " | "
       << m["world"] << " | " << m["execution_space"].get<std::string>() << " | "
       << m["mpi_library"].get<std::string>() << " |\n";
  md << "\n## Step time, measured and predicted\n\n";
  if (n_pred > 0) {
    md << "Largest |residual| " << fmt(max_abs, 3) << " % (target " << kEveryPointPct
       << " %), mean " << fmt(accuracy["mean_abs_residual_pct"].get<double>(), 3) << " % (target "
       << kMeanPct << " %): "
       << (accuracy["every_point_within_target"].get<bool>() &&
                   accuracy["mean_within_target"].get<bool>()
               ? "**met**"
               : "**missed**")
       << ".\n\n";
    for (const auto& miss : misses)
      md << "- `" << miss["label"].get<std::string>() << "` is off by "
         << fmt(miss["residual_pct"].get<double>(), 3) << " %; the term furthest from its model: `"
         << miss["term_most_off"].get<std::string>() << "`\n";
    if (!misses.empty()) md << '\n';
  } else {
    md << "No point was calibrated (`hardware.calibrate: false`): nothing to predict.\n\n";
  }
  md << "| point | machine | measured s | predicted s | residual % | rank (meas / pred) | "
        "costliest axis |\n|---|---|---|---|---|---|---|\n";
  for (const auto& p : points) {
    const auto& st = p["terms"][0];
    md << "| " << p["label"].get<std::string>() << " | " << p["machine"].get<std::string>() << " | "
       << fmt(p["measured_step_s"].get<double>()) << " | "
       << (p["predicted_step_s"].is_null() ? "-" : fmt(p["predicted_step_s"].get<double>()))
       << " | " << (st["residual_pct"].is_null() ? "-" : fmt(st["residual_pct"].get<double>(), 3))
       << " | " << p["rank_measured"] << " / "
       << (p.contains("rank_predicted") ? p["rank_predicted"].dump() : "-") << " | "
       << p["costliest_axis"].get<std::string>() << " |\n";
  }
  if (!not_analysed.empty()) {
    md << "\n## Points not analysed\n\nTheir status is not `ok`, so their figures are not "
          "compared with any model.\n\n| folder | point | settings | status |\n|---|---|---|---|\n";
    for (const auto& q : not_analysed)
      md << "| `" << q["dir"].get<std::string>() << "` | " << q["index"] << " | `"
         << q["settings"].dump(-1, ' ', false, json::error_handler_t::replace) << "` | "
         << q["status"].get<std::string>() << " |\n";
  }
  md << "\n## Terms per point\n\n";
  for (const auto& p : points) {
    md << "### " << p["label"].get<std::string>() << " (" << p["dir"].get<std::string>()
       << ", point " << p["index"] << ")\n\n| term | measured | predicted | residual % |\n"
       << "|---|---|---|---|\n";
    for (const auto& t : p["terms"])
      md << "| " << t["name"].get<std::string>() << " | " << fmt(t["measured"].get<double>()) << ' '
         << t["unit"].get<std::string>() << " | " << fmt(t["predicted"].get<double>()) << ' '
         << t["unit"].get<std::string>() << " | "
         << (t["residual_pct"].is_null() ? "-" : fmt(t["residual_pct"].get<double>(), 3)) << " |\n";
    if (p.contains("pipeline")) {
      const auto& q = p["pipeline"];
      md << "\nBubble: measured " << fmt(q["bubble_measured"].get<double>(), 3)
         << ", formula with measured stage times " << fmt(q["bubble_model"].get<double>(), 3)
         << ", ideal " << fmt(q["bubble_ideal"].get<double>(), 3) << ".\n";
    }
    md << '\n';
  }
  if (!calibration.empty()) {
    md << "## Calibrated collectives\n\n| machine | axis | op | ranks | alpha (us) | "
          "1/beta (GB/s) |\n|---|---|---|---|---|---|\n";
    for (const auto& c : calibration) {
      const double beta = c["beta_s_per_byte"];
      md << "| " << c["machine"].get<std::string>() << " | " << c["axis"].get<std::string>()
         << " | " << c["op"].get<std::string>() << " | " << c["ranks"] << " | "
         << fmt(c["alpha_s"].get<double>() * 1e6, 3) << " | "
         << (beta > 0 ? fmt(1e-9 / beta, 3) : std::string("-")) << " |\n";
    }
    md << '\n';
  }
  if (!strong.empty() || !weak.empty()) {
    md << "## Scaling\n\n";
    if (!strong.empty()) {
      md << "Strong (one model, fixed global batch):\n\n| model | global batch | ranks | fastest "
            "configuration | step s | speedup | efficiency |\n|---|---|---|---|---|---|---|\n";
      for (const auto& s : strong)
        md << "| " << s["model"].get<std::string>() << " | " << s["global_batch"] << " | "
           << s["world"] << " | " << s["label"].get<std::string>() << " | "
           << fmt(s["step_s"].get<double>()) << " | " << fmt(s["speedup"].get<double>(), 3) << " | "
           << fmt(s["efficiency"].get<double>(), 3) << " |\n";
      md << '\n';
    }
    if (!weak.empty()) {
      md << "Weak (one model, fixed batch per data-parallel replica):\n\n| model | batch per "
            "replica | ranks | fastest configuration | step s | efficiency "
            "|\n|---|---|---|---|---|---|\n";
      for (const auto& s : weak)
        md << "| " << s["model"].get<std::string>() << " | " << s["batch_per_replica"] << " | "
           << s["world"] << " | " << s["label"].get<std::string>() << " | "
           << fmt(s["step_s"].get<double>()) << " | " << fmt(s["efficiency"].get<double>(), 3)
           << " |\n";
      md << '\n';
    }
  }
  if (!side.empty()) {
    md << "## Machines side by side\n\n| configuration | step s per machine |\n|---|---|\n";
    for (const auto& r : side) {
      md << "| " << r["configuration"].get<std::string>() << " | ";
      for (const auto& [m, v] : r["step_s"].items())
        md << m << ": " << fmt(v.get<double>()) << "; ";
      md << "|\n";
    }
    md << '\n';
  }
  md << "## Plots\n\n";
  if (plots_note.empty()) {
    for (const char* f :
         {"step_breakdown", "bubble_vs_microbatches", "measured_vs_predicted", "busbw"})
      if (std::filesystem::exists(out + "/plots/" + f + ".png"))
        md << "![" << f << "](plots/" << f << ".png)\n\n";
  } else {
    md << plots_note << "\n";
  }
  try {
    io::write_file_checked(out + "/report.md", md.str());
  } catch (const io::WriteError& e) {
    std::fprintf(stderr, "paraxis: error: report: %s\n", e.what());
    return 4;
  }
  if (plots.kind == PlotOutcome::failed) return 4;
  std::printf("report: %zu point(s) from %zu folder(s)", all.size(), dirs.size());
  if (!not_analysed.empty()) std::printf(" (%zu more not ok, listed)", not_analysed.size());
  if (n_pred > 0)
    std::printf(", step time predicted within %.1f %% (max) / %.1f %% (mean)", max_abs,
                accuracy["mean_abs_residual_pct"].get<double>());
  std::printf(" -> %s/report.md, report.json, plots/\n", out.c_str());
  for (const auto& w : warnings) std::printf("report: warning: %s\n", w.c_str());
  return 0;
}

}  // namespace paraxis::driver
