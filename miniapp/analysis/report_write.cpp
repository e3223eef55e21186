// `paraxis report`, the writing (report_parts.hpp): report.json and report.md atomically
// (io/checked_file.hpp) and plots/ (report_plots.hpp) into the first folder; a failed write
// exits 4 naming the file, the previous file left in place.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "analysis/report_checkpoint.hpp"
#include "analysis/report_noise.hpp"
#include "analysis/report_parts.hpp"
#include "analysis/report_plots.hpp"
#include "analysis/report_sensitivity.hpp"
#include "analysis/results_schema.hpp"
#include "config/exit_codes.hpp"
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

// Every point's findings in one list, most costly first, each naming its point; dead ranks and
// hangs (from the failure records, cost null) first: they ended the job.
json all_findings(const json& points, const json& failures) {
  json diagnosis = json::array();
  for (const auto& p : points)
    for (json f : p.value("diagnosis", json::array())) {
      f["point"] = p["label"];
      f["dir"] = p["dir"];
      f["index"] = p["index"];
      diagnosis.push_back(f);
    }
  for (const auto& f : failures) diagnosis.push_back(f);
  std::stable_sort(diagnosis.begin(), diagnosis.end(), [](const json& a, const json& b) {
    const bool fa = a.at("cost_s").is_null(), fb = b.at("cost_s").is_null();
    if (fa != fb) return fa;
    return !fa && a.at("cost_s").get<double>() > b.at("cost_s").get<double>();
  });
  return diagnosis;
}

void md_header(std::ostream& md, const std::vector<std::string>& dirs, const json& report) {
  md << "# paraxis report\n\nSources: ";
  for (const auto& d : dirs) md << '`' << d << "` ";
  md << "\n\nPredictions use only the calibration each point recorded before it ran (fitted "
        "collectives per communicator, the shard's compute per model chunk, the optimizer) and "
        "the analytic models of `docs/perfmodel.md`; residual = (measured - predicted) / "
        "predicted. Terms: see `docs/report.md`.\n\n";
  for (const auto& w : report["warnings"]) md << "**Warning:** " << w.get<std::string>() << ".\n\n";
  md << "## Machines\n\n| folder | hosts | ranks | execution space | MPI "
        "|\n|---|---|---|---|---|\n";
  for (const auto& m : report["machines"])
    md << "| `" << m["dir"].get<std::string>() << "` | " << m["machine"].get<std::string>() << " | "
       << m["world"] << " | " << m["execution_space"].get<std::string>() << " | "
       << m["mpi_library"].get<std::string>() << " |\n";
}

void md_accuracy(std::ostream& md, const Comparison& cmp) {
  const json& accuracy = cmp.accuracy;
  md << "Largest |residual| " << fmt(cmp.max_abs, 3) << " % (target " << kEveryPointPct
     << " %), mean " << fmt(accuracy["mean_abs_residual_pct"].get<double>(), 3) << " % (target "
     << kMeanPct << " %): "
     << (accuracy["every_point_within_target"].get<bool>() &&
                 accuracy["mean_within_target"].get<bool>()
             ? "**met**"
             : "**missed**")
     << ".\n\n";
  for (const auto& miss : cmp.misses) {
    md << "- `" << miss["label"].get<std::string>() << "` is off by "
       << fmt(miss["residual_pct"].get<double>(), 3) << " %; the term furthest from its model: `"
       << miss["term_most_off"].get<std::string>() << "`";
    if (miss.contains("uneven_ranks_excess_s"))
      md << "; its ranks computed the same work unevenly, "
         << fmt(miss["uneven_ranks_excess_s"].get<double>() * 1e3, 3)
         << " ms a step more than calibrated";
    if (miss.contains("within_steps_range"))
      md << "; its own steps took " << fmt(miss["steps_range_s"][0].get<double>() * 1e3, 3) << "-"
         << fmt(miss["steps_range_s"][1].get<double>() * 1e3, 3) << " ms, "
         << (miss["within_steps_range"].get<bool>()
                 ? "the prediction among them: the machine's noise"
             : miss.contains("recheck_reason") ? "the prediction outside them"
                                               : "the prediction outside them: the model");
    if (miss.contains("recheck_reason")) md << "; " << miss["recheck_reason"].get<std::string>();
    if (miss.contains("rerun_reason")) md << "; " << miss["rerun_reason"].get<std::string>();
    md << '\n';
  }
  if (!cmp.misses.empty()) md << '\n';
  const auto& uneven = accuracy["uneven_ranks"];
  if (uneven["points"].get<int>() > 0)
    md << uneven["points"].get<int>()
       << " point(s) ran with their ranks more uneven than the calibration saw (rank_spread in "
          "report.json: the machine, not the model; docs/report.md, \"Uneven ranks\"). With "
          "that excess added to their prediction: largest |residual| "
       << fmt(uneven["max_abs_residual_pct"].get<double>(), 3) << " %, mean "
       << fmt(uneven["mean_abs_residual_pct"].get<double>(), 3) << " %.\n\n";
}

void md_step_times(std::ostream& md, const Comparison& cmp) {
  md << "\n## Step time, measured and predicted\n\n";
  if (cmp.n_pred > 0)
    md_accuracy(md, cmp);
  else
    md << "No point was calibrated (`hardware.calibrate: false`): nothing to predict.\n\n";
  md << "| point | machine | measured s | predicted s | residual % | rank (meas / pred) | "
        "costliest axis | MFU | HFU |\n|---|---|---|---|---|---|---|---|---|\n";
  auto utilisation = [](const json& v) { return v.is_number() ? fmt(v.get<double>(), 3) : "-"; };
  for (const auto& p : cmp.points) {
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
}

void md_not_analysed(std::ostream& md, const json& not_analysed) {
  if (not_analysed.empty()) return;
  md << "\n## Points not analysed\n\nTheir status is not `ok`, so their figures are not "
        "compared with any model.\n\n| folder | point | settings | status |\n|---|---|---|---|\n";
  for (const auto& q : not_analysed)
    md << "| `" << q["dir"].get<std::string>() << "` | " << q["index"] << " | `"
       << q["settings"].dump(-1, ' ', false, json::error_handler_t::replace) << "` | "
       << q["status"].get<std::string>() << " |\n";
}

// Nodes and the axes whose groups cross them, per point (the seed's rule: tp inside a node).
void md_nodes(std::ostream& md, const json& points) {
  bool any_topology = false;
  for (const auto& p : points) any_topology = any_topology || p.contains("topology");
  if (!any_topology) return;
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
       << (t.value("emulated", false) ? " (emulated)" : "") << " | " << (axes.empty() ? "-" : axes)
       << " |\n";
  }
}

void md_diagnosis(std::ostream& md, const json& diagnosis) {
  md << "\n## Diagnosis\n\nWhere the time went, rank by rank, most costly first (docs/"
        "diagnosis.md: dead and hung ranks, slow ranks against the ranks of their stage, slow "
        "links against the axis's other groups, and where there are no peers against the "
        "calibrated model, slow axes, bubbles, placement, expert imbalance).\n\n";
  if (diagnosis.empty()) {
    md << "No finding above the thresholds.\n";
    return;
  }
  md << "| point | kind | axis | ranks | from step | cost s/step | against | finding | what to "
        "change |\n"
        "|---|---|---|---|---:|---:|---|---|---|\n";
  for (const auto& f : diagnosis) {
    std::string ranks;
    for (const auto& r : f["ranks"]) ranks += (ranks.empty() ? "" : " ") + r.dump();
    md << "| " << f["point"].get<std::string>() << " | " << f["kind"].get<std::string>() << " | "
       << f["axis"].get<std::string>() << " | " << ranks << " | " << f["from_step"] << " | "
       << (f["cost_s"].is_null() ? std::string("job ended") : fmt(f["cost_s"].get<double>(), 3))
       << " | " << f.value("evidence", json::object()).value("reference", std::string("-")) << " | "
       << f["text"].get<std::string>() << " | " << f["advice"].get<std::string>() << " |\n";
  }
}

// One row of a point's terms table, with the range its own steps took (docs/report.md, "Noise").
void md_term_row(std::ostream& md, const json& t) {
  md << "| " << t["name"].get<std::string>() << " | " << fmt(t["measured"].get<double>()) << ' '
     << t["unit"].get<std::string>() << " | " << fmt(t["predicted"].get<double>()) << ' '
     << t["unit"].get<std::string>() << " | "
     << (t["residual_pct"].is_null() ? "-" : fmt(t["residual_pct"].get<double>(), 3));
  if (t.contains("steps_range_s"))
    md << " | " << fmt(t["steps_range_s"][0].get<double>()) << "-"
       << fmt(t["steps_range_s"][1].get<double>()) << " s | "
       << (t["within_steps_range"].get<bool>() ? "yes" : "no");
  else
    md << " | - | -";
  if (t.contains("repeats_ratio_range"))  // the same term in other points of the run
    md << "; repeats " << fmt(t["repeats_ratio_range"][0].get<double>(), 3) << "-"
       << fmt(t["repeats_ratio_range"][1].get<double>(), 3) << "x of " << t["repeats"].get<int>()
       << ": " << (t["within_repeats_range"].get<bool>() ? "yes" : "no");
  // The prediction rebuilt from the recheck after the point (docs/report.md, "Recheck").
  if (t.contains("recheck_predicted"))
    md << " | " << fmt(t["recheck_predicted"].get<double>()) << " s ("
       << fmt(t["recheck_residual_pct"].get<double>(), 3) << " %)"
       << (t.contains("recheck_verdict") ? ": " + recheck_reason(t) : std::string());
  else
    md << " | -";
  // What the point measured when the run ran it again (docs/report.md, "Rerun").
  if (t.contains("rerun_measured"))
    md << " | " << fmt(t["rerun_measured"].get<double>()) << " s ("
       << fmt(t["rerun_residual_pct"].get<double>(), 3) << " %)"
       << (t.contains("rerun_verdict") ? ": " + rerun_reason(t) : std::string());
  else
    md << " | -";
  md << " |\n";
}

void md_terms(std::ostream& md, const json& points) {
  md << "\n## Terms per point\n\n";
  for (const auto& p : points) {
    md << "### " << p["label"].get<std::string>() << " (" << p["dir"].get<std::string>()
       << ", point " << p["index"] << ")\n\n| term | measured | predicted | residual % | "
       << "steps' range | prediction in it | recheck (residual %) | rerun (residual %) |\n"
       << "|---|---|---|---|---|---|---|---|\n";
    for (const auto& t : p["terms"]) md_term_row(md, t);
    if (p.contains("calls")) write_calls(md, p["calls"]);
    if (p.contains("pipeline")) {
      const auto& q = p["pipeline"];
      md << "\nBubble: measured " << fmt(q["bubble_measured"].get<double>(), 3)
         << ", formula with measured stage times " << fmt(q["bubble_model"].get<double>(), 3)
         << ", ideal " << fmt(q["bubble_ideal"].get<double>(), 3) << ".\n";
    }
    md << '\n';
  }
}

void md_calibration(std::ostream& md, const json& calibration) {
  if (calibration.empty()) return;
  md << "## Calibrated collectives\n\n| machine | axis | op | ranks | alpha (us) | "
        "1/beta (GB/s) |\n|---|---|---|---|---|---|\n";
  for (const auto& c : calibration) {
    const double beta = c["beta_s_per_byte"];
    md << "| " << c["machine"].get<std::string>() << " | " << c["axis"].get<std::string>() << " | "
       << c["op"].get<std::string>() << " | " << c["ranks"] << " | "
       << fmt(c["alpha_s"].get<double>() * 1e6, 3) << " | "
       << (beta > 0 ? fmt(1e-9 / beta, 3) : std::string("-")) << " |\n";
  }
  md << '\n';
}

void md_scaling(std::ostream& md, const json& strong, const json& weak) {
  if (strong.empty() && weak.empty()) return;
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

void md_side_by_side(std::ostream& md, const json& side) {
  if (side.empty()) return;
  md << "## Machines side by side\n\n| configuration | step s per machine |\n|---|---|\n";
  for (const auto& r : side) {
    md << "| " << r["configuration"].get<std::string>() << " | ";
    for (const auto& [m, v] : r["step_s"].items()) md << m << ": " << fmt(v.get<double>()) << "; ";
    md << "|\n";
  }
  md << '\n';
}

void md_plots(std::ostream& md, const std::string& out, const std::string& plots_note) {
  md << "## Plots\n\n";
  if (plots_note.empty()) {
    for (const char* f : {"step_breakdown", "bubble_vs_microbatches", "measured_vs_predicted",
                          "measured_vs_predicted_bytes", "busbw"})
      if (std::filesystem::exists(out + "/plots/" + f + ".png"))
        md << "![" << f << "](plots/" << f << ".png)\n\n";
  } else {
    md << plots_note << "\n";
  }
}

// Writes `text` to `file` atomically; false after printing the error.
bool write_or_say(const std::string& file, const std::string& text) {
  try {
    io::write_file_checked(file, text);
  } catch (const io::WriteError& e) {
    std::fprintf(stderr, "paraxis: error: report: %s\n", e.what());
    return false;
  }
  return true;
}

void print_summary_line(const std::vector<std::string>& dirs, const Loaded& in,
                        const Comparison& cmp) {
  std::printf("report: %zu point(s) from %zu folder(s)", in.all.size(), dirs.size());
  if (!in.not_analysed.empty()) std::printf(" (%zu more not ok, listed)", in.not_analysed.size());
  if (cmp.n_pred > 0)
    std::printf(", step time predicted within %.1f %% (max) / %.1f %% (mean)", cmp.max_abs,
                cmp.accuracy["mean_abs_residual_pct"].get<double>());
  std::printf(" -> %s/report.md, report.json, plots/\n", dirs.front().c_str());
  for (const auto& w : in.warnings) std::printf("report: warning: %s\n", w.c_str());
}

}  // namespace

json report_json(const std::vector<std::string>& dirs, const Loaded& in, const Comparison& cmp) {
  json report{{"schema", results_schema::kReportVersion},
              {"sources", dirs},
              {"target", {{"every_point_pct", kEveryPointPct}, {"mean_pct", kMeanPct}}}};
  report["machines"] = in.machines;
  report["points"] = cmp.points;
  report["calibration"] = in.calibration;
  report["accuracy"] = cmp.accuracy;
  report["scaling"] = {{"strong", cmp.strong}, {"weak", cmp.weak}};
  report["machines_side_by_side"] = cmp.side;
  report["warnings"] = in.warnings;
  report["points_not_analysed"] = in.not_analysed;
  report["diagnosis"] = all_findings(cmp.points, in.failures);
  report["sensitivity"] = sensitivity_json(cmp.points);  // report_sensitivity.hpp
  return report;
}

std::string report_markdown(const std::vector<std::string>& dirs, const json& report,
                            const Comparison& cmp, const std::string& plots_note) {
  const std::string& out = dirs.front();
  std::ostringstream md;
  md_header(md, dirs, report);
  md_step_times(md, cmp);
  md_not_analysed(md, report["points_not_analysed"]);
  md_nodes(md, cmp.points);
  md_diagnosis(md, report["diagnosis"]);
  md_terms(md, cmp.points);
  md_calibration(md, report["calibration"]);
  md_scaling(md, cmp.strong, cmp.weak);
  md_side_by_side(md, cmp.side);
  md << sensitivity_markdown(report["sensitivity"], out);  // report_sensitivity.hpp
  md << checkpoint_markdown(cmp.points);                   // report_checkpoint.hpp
  md_plots(md, out, plots_note);
  return md.str();
}

int write_report(const std::vector<std::string>& dirs, const Loaded& in, const Comparison& cmp) {
  const json report = report_json(dirs, in, cmp);
  const std::string out = dirs.front();
  // Strings from the summaries are written as they came; invalid UTF-8 is replaced, not thrown.
  if (!write_or_say(out + "/report.json",
                    report.dump(2, ' ', false, json::error_handler_t::replace) + '\n'))
    return exit_code::write_failed;
  // Plots: a missing interpreter is a warning, a script that fails (it names the file) an error.
  const PlotOutcome plots = make_plots(out + "/report.json", out + "/plots");
  if (plots.kind == PlotOutcome::skipped)
    std::fprintf(stderr, "paraxis: warning: %s\n", plots.note.c_str());
  else if (plots.kind == PlotOutcome::failed)
    std::fprintf(stderr, "paraxis: error: report: %s\n", plots.note.c_str());
  if (!write_or_say(out + "/report.md", report_markdown(dirs, report, cmp, plots.note)))
    return exit_code::write_failed;
  if (plots.kind == PlotOutcome::failed) return exit_code::write_failed;
  print_summary_line(dirs, in, cmp);
  return 0;
}

}  // namespace paraxis::driver::report
