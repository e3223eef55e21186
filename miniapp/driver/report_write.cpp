// `paraxis report`, the writing (report_parts.hpp): report.json and report.md atomically
// (io/checked_file.hpp) and plots/ (report_plots.hpp) into the first folder; a failed write
// exits 4 naming the file, the previous file left in place.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "config/exit_codes.hpp"
#include "driver/report_checkpoint.hpp"
#include "driver/report_parts.hpp"
#include "driver/report_plots.hpp"
#include "driver/report_sensitivity.hpp"
#include "io/checked_file.hpp"

namespace paraxis::driver::report {

using nlohmann::json;

namespace {

std::string fmt(double v, int digits = 4) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.*g", digits, v);
  return b;
}

// A point's "Calls" table (docs/report.md, "Calls"): rank 0's calls of the measured steps per
// (axis, op, size bucket), measured against predicted from the calibration.
void write_calls(std::ostream& md, const nlohmann::json& calls) {
  if (calls["rows"].empty()) return;
  md << "\nCalls (rank " << calls["rank"] << ", " << calls["steps"]
     << " measured steps):\n\n| axis | op | size bucket (B) | calls | bytes | measured s | median "
        "us | predicted s | residual % | wait s |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : calls["rows"]) {
    const auto& pred = r["predicted_s"];
    const auto& res = r["residual_pct"];
    md << "| " << r["axis"].get<std::string>() << " | " << r["op"].get<std::string>() << " | "
       << r["bucket_bytes"] << " | " << r["calls"] << " | " << fmt(r["bytes"].get<double>())
       << " | " << fmt(r["measured_s"].get<double>()) << " | "
       << fmt(r["measured_median_s"].get<double>() * 1e6, 3) << " | "
       << (pred.is_null() ? std::string("-") : fmt(pred.get<double>())) << " | "
       << (res.is_null() ? std::string("-") : fmt(res.get<double>(), 3)) << " | "
       << fmt(r["wait_s"].get<double>()) << " |\n";
  }
}

}  // namespace

int write_report(const std::vector<std::string>& dirs, const Loaded& in, const Comparison& cmp) {
  json report{{"schema", "paraxis.report/1"},
              {"sources", dirs},
              {"target", {{"every_point_pct", kEveryPointPct}, {"mean_pct", kMeanPct}}}};
  const json& machines = in.machines;
  const json& calibration = in.calibration;
  const json& not_analysed = in.not_analysed;
  std::vector<std::string> warnings = in.warnings;
  const std::vector<Analysed>& all = in.all;
  const json& points = cmp.points;
  const json& accuracy = cmp.accuracy;
  const json& misses = cmp.misses;
  const json& strong = cmp.strong;
  const json& weak = cmp.weak;
  const json& side = cmp.side;
  const int n_pred = cmp.n_pred;
  const double max_abs = cmp.max_abs;
  report["machines"] = machines;
  report["points"] = points;
  report["calibration"] = calibration;
  report["accuracy"] = accuracy;
  report["scaling"] = {{"strong", strong}, {"weak", weak}};
  report["machines_side_by_side"] = side;
  report["warnings"] = warnings;

  report["points_not_analysed"] = not_analysed;
  // Every point's findings in one list, most costly first, each naming its point.
  json diagnosis = json::array();
  for (const auto& p : points)
    for (json f : p.value("diagnosis", json::array())) {
      f["point"] = p["label"];
      f["dir"] = p["dir"];
      f["index"] = p["index"];
      diagnosis.push_back(f);
    }
  // Dead ranks and hangs (from the failure records) first: they ended the job.
  for (const auto& f : in.failures) diagnosis.push_back(f);
  std::stable_sort(diagnosis.begin(), diagnosis.end(), [](const json& a, const json& b) {
    const bool fa = a.at("cost_s").is_null(), fb = b.at("cost_s").is_null();
    if (fa != fb) return fa;
    return !fa && a.at("cost_s").get<double>() > b.at("cost_s").get<double>();
  });
  report["diagnosis"] = diagnosis;
  report["sensitivity"] = sensitivity_json(points);  // report_sensitivity.hpp

  const std::string out = dirs.front();
  // Strings from the summaries are written as they came; invalid UTF-8 is replaced, not thrown.
  try {
    io::write_file_checked(out + "/report.json",
                           report.dump(2, ' ', false, json::error_handler_t::replace) + '\n');
  } catch (const io::WriteError& e) {
    std::fprintf(stderr, "paraxis: error: report: %s\n", e.what());
    return exit_code::write_failed;
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
    for (const auto& miss : misses) {
      md << "- `" << miss["label"].get<std::string>() << "` is off by "
         << fmt(miss["residual_pct"].get<double>(), 3) << " %; the term furthest from its model: `"
         << miss["term_most_off"].get<std::string>() << "`";
      if (miss.contains("uneven_ranks_excess_s"))
        md << "; its ranks computed the same work unevenly, "
           << fmt(miss["uneven_ranks_excess_s"].get<double>() * 1e3, 3)
           << " ms a step more than calibrated";
      if (miss.contains("within_steps_range"))
        md << "; its own steps took " << fmt(miss["steps_range_s"][0].get<double>() * 1e3, 3)
           << "-" << fmt(miss["steps_range_s"][1].get<double>() * 1e3, 3) << " ms, "
           << (miss["within_steps_range"].get<bool>()
                   ? "the prediction among them: the machine's noise"
                   : "the prediction outside them: the model");
      md << '\n';
    }
    if (!misses.empty()) md << '\n';
    const auto& uneven = accuracy["uneven_ranks"];
    if (uneven["points"].get<int>() > 0)
      md << uneven["points"].get<int>()
         << " point(s) ran with their ranks more uneven than the calibration saw (rank_spread in "
            "report.json: the machine, not the model; docs/report.md, \"Uneven ranks\"). With "
            "that excess added to their prediction: largest |residual| "
         << fmt(uneven["max_abs_residual_pct"].get<double>(), 3) << " %, mean "
         << fmt(uneven["mean_abs_residual_pct"].get<double>(), 3) << " %.\n\n";
  } else {
    md << "No point was calibrated (`hardware.calibrate: false`): nothing to predict.\n\n";
  }
  md << "| point | machine | measured s | predicted s | residual % | rank (meas / pred) | "
        "costliest axis | MFU | HFU |\n|---|---|---|---|---|---|---|---|---|\n";
  auto utilisation = [](const json& v) { return v.is_number() ? fmt(v.get<double>(), 3) : "-"; };
  for (const auto& p : points) {
    const auto& st = p["terms"][0];
    md << "| " << p["label"].get<std::string>() << " | " << p["machine"].get<std::string>() << " | "
       << fmt(p["measured_step_s"].get<double>()) << " | "
       << (p["predicted_step_s"].is_null() ? "-" : fmt(p["predicted_step_s"].get<double>()))
       << " | " << (st["residual_pct"].is_null() ? "-" : fmt(st["residual_pct"].get<double>(), 3))
       << " | " << p["rank_measured"] << " / "
       << (p.contains("rank_predicted") ? p["rank_predicted"].dump() : "-") << " | "
       << p["costliest_axis"].get<std::string>() << " | " << utilisation(p["mfu"]) << " | "
       << utilisation(p["hfu"]) << " |\n";
  }
  if (!not_analysed.empty()) {
    md << "\n## Points not analysed\n\nTheir status is not `ok`, so their figures are not "
          "compared with any model.\n\n| folder | point | settings | status |\n|---|---|---|---|\n";
    for (const auto& q : not_analysed)
      md << "| `" << q["dir"].get<std::string>() << "` | " << q["index"] << " | `"
         << q["settings"].dump(-1, ' ', false, json::error_handler_t::replace) << "` | "
         << q["status"].get<std::string>() << " |\n";
  }
  // Nodes and the axes whose groups cross them, per point (the seed's rule: tp inside a node).
  bool any_topology = false;
  for (const auto& p : points) any_topology = any_topology || p.contains("topology");
  if (any_topology) {
    md << "\n## Nodes\n\nPer point: its nodes (emulated: `hardware.ranks_per_node`) and, per "
          "axis, how many of its groups span nodes.\n\n| point | nodes | groups spanning nodes "
          "|\n|---|---|---|\n";
    for (const auto& p : points) {
      if (!p.contains("topology")) continue;
      const json& t = p["topology"];
      std::string axes;
      for (const char* a : {"tp", "pp", "dp", "ep"}) {
        const json& par = p["grid"];
        if (!t.value("axes", json::object()).contains(a) || par.value(a, 1) < 2) continue;
        const json& g = t["axes"][a];
        axes += (axes.empty() ? "" : ", ") + std::string(a) + " " +
                std::to_string(g.value("groups_spanning_nodes", 0)) + "/" +
                std::to_string(g.value("groups", 0));
      }
      md << "| " << p["label"].get<std::string>() << " | " << t.value("nodes", 0)
         << (t.value("emulated", false) ? " (emulated)" : "") << " | "
         << (axes.empty() ? "-" : axes) << " |\n";
    }
  }
  md << "\n## Diagnosis\n\nWhere the time went, rank by rank, most costly first (docs/"
        "diagnosis.md: dead and hung ranks, slow ranks against the ranks of their stage, slow "
        "links against the axis's other groups, and where there are no peers against the "
        "calibrated model, slow axes, bubbles, placement, expert imbalance).\n\n";
  if (diagnosis.empty()) {
    md << "No finding above the thresholds.\n";
  } else {
    md << "| point | kind | axis | ranks | from step | cost s/step | against | finding | what to "
          "change |\n"
          "|---|---|---|---|---:|---:|---|---|---|\n";
    for (const auto& f : diagnosis) {
      std::string ranks;
      for (const auto& r : f["ranks"]) ranks += (ranks.empty() ? "" : " ") + r.dump();
      md << "| " << f["point"].get<std::string>() << " | " << f["kind"].get<std::string>() << " | "
         << f["axis"].get<std::string>() << " | " << ranks << " | " << f["from_step"] << " | "
         << (f["cost_s"].is_null() ? std::string("job ended") : fmt(f["cost_s"].get<double>(), 3))
         << " | " << f.value("evidence", json::object()).value("reference", std::string("-"))
         << " | " << f["text"].get<std::string>() << " | " << f["advice"].get<std::string>()
         << " |\n";
    }
  }
  md << "\n## Terms per point\n\n";
  for (const auto& p : points) {
    md << "### " << p["label"].get<std::string>() << " (" << p["dir"].get<std::string>()
       << ", point " << p["index"] << ")\n\n| term | measured | predicted | residual % | "
       << "steps' range | prediction in it |\n|---|---|---|---|---|---|\n";
    for (const auto& t : p["terms"]) {
      md << "| " << t["name"].get<std::string>() << " | " << fmt(t["measured"].get<double>()) << ' '
         << t["unit"].get<std::string>() << " | " << fmt(t["predicted"].get<double>()) << ' '
         << t["unit"].get<std::string>() << " | "
         << (t["residual_pct"].is_null() ? "-" : fmt(t["residual_pct"].get<double>(), 3));
      if (t.contains("steps_range_s"))  // the point's own steps (docs/report.md, "Noise")
        md << " | " << fmt(t["steps_range_s"][0].get<double>()) << "-"
           << fmt(t["steps_range_s"][1].get<double>()) << " s | "
           << (t["within_steps_range"].get<bool>() ? "yes" : "no") << " |\n";
      else
        md << " | - | - |\n";
    }
    if (p.contains("calls")) write_calls(md, p["calls"]);
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
  md << sensitivity_markdown(report["sensitivity"], out);  // report_sensitivity.hpp
  md << checkpoint_markdown(points);                       // report_checkpoint.hpp
  md << "## Plots\n\n";
  if (plots_note.empty()) {
    for (const char* f : {"step_breakdown", "bubble_vs_microbatches", "measured_vs_predicted",
                          "measured_vs_predicted_bytes", "busbw"})
      if (std::filesystem::exists(out + "/plots/" + f + ".png"))
        md << "![" << f << "](plots/" << f << ".png)\n\n";
  } else {
    md << plots_note << "\n";
  }
  try {
    io::write_file_checked(out + "/report.md", md.str());
  } catch (const io::WriteError& e) {
    std::fprintf(stderr, "paraxis: error: report: %s\n", e.what());
    return exit_code::write_failed;
  }
  if (plots.kind == PlotOutcome::failed) return exit_code::write_failed;
  std::printf("report: %zu point(s) from %zu folder(s)", all.size(), dirs.size());
  if (!not_analysed.empty()) std::printf(" (%zu more not ok, listed)", not_analysed.size());
  if (n_pred > 0)
    std::printf(", step time predicted within %.1f %% (max) / %.1f %% (mean)", max_abs,
                accuracy["mean_abs_residual_pct"].get<double>());
  std::printf(" -> %s/report.md, report.json, plots/\n", out.c_str());
  for (const auto& w : warnings) std::printf("report: warning: %s\n", w.c_str());
  return 0;
}

}  // namespace paraxis::driver::report
