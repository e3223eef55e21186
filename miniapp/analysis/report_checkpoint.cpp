// Checkpoint cost and cadence in the report (report_checkpoint.hpp).
#include "analysis/report_checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "analysis/statistics.hpp"
#include "perfmodel/checkpoint.hpp"

namespace paraxis::driver::report {

using nlohmann::json;
namespace pm = paraxis::perfmodel;

namespace {

std::string g(double x, int digits = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", digits, x);
  return buf;
}

// The Monte Carlo's waste at the job's interval (perfmodel::waste_estimate): {waste, ci95 [lo,
// hi], trials}, beside Daly's.
json simulated_waste(const pm::CadenceJob& job) {
  const pm::WasteEstimate w = pm::waste_estimate(job);
  return {{"waste", w.simulated}, {"ci95", {w.ci_low, w.ci_high}}, {"trials", w.trials}};
}

// "0.52 % (MC 0.51 % [0.49, 0.53], 2000 trials)": Daly's waste and the simulation's.
std::string waste_cell(const json& c, const char* daly, const char* simulated) {
  if (!c.contains(daly)) return "-";
  std::string s = g(100 * c.at(daly).get<double>(), 2) + " %";
  if (!c.contains(simulated)) return s;
  const json& m = c.at(simulated);
  return s + " (MC " + g(100 * m.at("waste").get<double>(), 2) + " % [" +
         g(100 * m.at("ci95")[0].get<double>(), 2) + ", " +
         g(100 * m.at("ci95")[1].get<double>(), 2) + "], " + m.at("trials").dump() + " trials)";
}

// The expected waste, Daly's and the Monte Carlo's, at Daly's interval and at the run's own
// cadence (its checkpoint.every, or the one `auto` chose).
void cadence_waste(const json& p, double c, double restart, double mtbf, double daly, double step,
                   json& out) {
  pm::CadenceJob job;
  job.work_s = 1;  // the waste fraction does not depend on the amount of work
  job.checkpoint_s = c;
  job.restart_s = restart;
  job.mtbf_s = mtbf;
  job.interval_s = daly;
  out["waste_at_daly"] = pm::daly_expected_waste(job);
  out["simulated_waste_at_daly"] = simulated_waste(job);
  const json& ev = p.at("config").at("checkpoint").value("every", json(0));
  const int every = ev.is_number_integer()          ? ev.get<int>()
                    : p.contains("checkpoint_auto") ? p.at("checkpoint_auto").value("every", 0)
                                                    : 0;
  if (every > 0 && step > 0) {
    job.interval_s = every * step;
    out["waste_at_run_cadence"] = pm::daly_expected_waste(job);
    out["simulated_waste_at_run_cadence"] = simulated_waste(job);
  }
}

// Asynchronous saves: what training stalled for, by part (docs/checkpoint.md, "Asynchronous
// saves"): the staging copy, and the wait for a write not done when the next save or the point's
// end came (the join wait: the write's excess over the steps it ran behind). A save whose join
// wait exceeds its staging stalled mostly for the storage, which no thread hides.
// The step right after each save over the step right before it, the median over saves: what the
// writing thread cost training (steps[] are numbered from 0, so the save after N steps is
// followed by steps[N]). 0 when no such pair is recorded.
double step_after_save_ratio(const json& p) {
  std::map<int, double> time;
  for (const auto& s : p.value("steps", json::array()))
    time[s.at("step").get<int>()] = s.at("time_s").get<double>();
  std::vector<double> ratio;
  for (const auto& c : p.at("checkpoints")) {
    const int n = c.at("step").get<int>();
    if (time.count(n) && time.count(n - 1) && time.at(n - 1) > 0)
      ratio.push_back(time.at(n) / time.at(n - 1));
  }
  return ratio.empty() ? 0.0 : median(ratio);
}

json async_figures(const json& p) {
  const json& saves = p.at("checkpoints");
  std::vector<double> staging, join;
  int waiting = 0;
  double longest = 0;
  bool can_hide = true;
  for (const auto& s : saves) {
    if (!s.value("async", false) || !s.contains("staging_s")) return json();
    staging.push_back(s.at("staging_s").at("max").get<double>());
    join.push_back(s.at("join_wait_s").at("max").get<double>());
    if (join.back() > staging.back()) ++waiting;
    longest = std::max(longest, s.at("write_s").at("max").get<double>());
    can_hide = can_hide && s.value("async_can_hide", true);
  }
  json out = {{"staging_s", median(staging)},
              {"join_wait_s", median(join)},
              {"saves_waiting_for_storage", waiting},
              {"longest_write_s", longest},
              {"can_hide", can_hide}};
  if (const double r = step_after_save_ratio(p); r > 0) out["step_after_save_ratio"] = r;
  return out;
}

// One sentence per asynchronous point under the table.
void async_markdown(const json& p, std::ostringstream& md) {
  const json& a = p.at("checkpoint").at("async");
  char parts[96];
  std::snprintf(parts, sizeof parts, "staging %.3f s, waiting for the write %.3f s",
                a.at("staging_s").get<double>(), a.at("join_wait_s").get<double>());
  md << "\n"
     << p.value("label", "") << ": asynchronous saves, the stall by part (medians over "
     << "saves): " << parts << "; " << a.at("saves_waiting_for_storage") << " of "
     << p.at("checkpoint").at("saves")
     << " saves waited longer for their write than their staging took";
  if (a.at("saves_waiting_for_storage").get<int>() > 0)
    md << " (longest write " << g(a.at("longest_write_s").get<double>())
       << " s): the storage wrote slower than training ran between saves, which no thread hides";
  if (a.contains("step_after_save_ratio"))
    md << "; the step right after a save took " << g(a.at("step_after_save_ratio").get<double>())
       << " of the step before it (median over saves)";
  if (!a.at("can_hide").get<bool>())
    md << "; the ranks used every core of their host, so the writing thread took its time from "
          "them";
  md << ".\n";
}

}  // namespace

json checkpoint_figures(const json& p, double failures_per_device_s) {
  const json saves = p.value("checkpoints", json::array());
  if (!saves.is_array() || saves.empty()) return json();
  std::vector<double> cost, write, bytes;
  for (const auto& s : saves) {
    // The cost C: what training stalled for (the whole save when synchronous).
    cost.push_back(s.contains("exposed_s") ? s.at("exposed_s").at("max").get<double>()
                                           : s.at("total_s").get<double>());
    write.push_back(s.at("write_s").at("max").get<double>());
    bytes.push_back(s.at("bytes").at("max").get<double>());
  }
  const int world = p.at("grid").at("world").get<int>();
  const double step = p.at("time").value("step_median_s", 0.0);
  const double c = median(cost);
  json out = {{"saves", saves.size()},
              {"bytes_per_rank_max", median(bytes)},
              {"write_s_max", median(write)},
              {"checkpoint_s", c},
              {"aggregate_bytes_per_s", saves.front().value("aggregate_bytes_per_s", 0.0)},
              {"step_s", step}};
  // Plain file I/O of the same bytes (the median of a few trials at the end of the point, kept
  // with the first save) against the median save's slowest write: one save alone is at the
  // mercy of a shared disk.
  if (saves.front().contains("baseline")) {
    const double base = saves.front().at("baseline").at("write_s").at("max").get<double>();
    const double mid = median(write);
    if (mid > 0) out["checkpoint_to_baseline_write"] = base / mid;
  }
  double restart = 0;
  if (p.contains("resumed") && p.at("resumed").contains("restart_to_first_step_s")) {
    restart = p.at("resumed").at("restart_to_first_step_s").get<double>();
    out["restart_s"] = restart;
  }
  const double mtbf = pm::system_mtbf(failures_per_device_s, world);
  out["failures_per_device_s"] = failures_per_device_s;
  out["system_mtbf_s"] = mtbf;
  const double young = pm::young_interval(c, mtbf), daly = pm::daly_interval(c, mtbf);
  out["young_interval_s"] = young;
  out["daly_interval_s"] = daly;
  if (step > 0) {
    out["young_interval_steps"] = young / step;
    out["daly_interval_steps"] = daly / step;
  }
  cadence_waste(p, c, restart, mtbf, daly, step, out);
  if (const json a = async_figures(p); !a.is_null()) out["async"] = a;
  return out;
}

std::string checkpoint_markdown(const json& points) {
  std::ostringstream md;
  bool any = false;
  for (const auto& p : points)
    if (p.contains("checkpoint") && !p.at("checkpoint").is_null()) any = true;
  if (!any) return "";
  md << "\n## Checkpoints\n\nPer point that wrote checkpoints (docs/checkpoint.md): the median "
        "save (bytes and write time of the slowest rank, the whole save C), its ratio to plain "
        "file I/O of the same bytes (write and fsync; above 1: the checkpoint was faster), the "
        "restart to the first step when the point resumed (R), and the intervals between "
        "checkpoints that minimise the time lost at the system MTBF of the point's ranks "
        "(Young: sqrt(2 C M); Daly's higher order), with the expected waste (Daly's model, and "
        "beside it the Monte Carlo simulation's with its 95 % confidence interval and trial "
        "count) at Daly's interval and at the run's own checkpoint.every.\n\n"
        "| point | saves | bytes/rank | write s | C s | vs plain I/O | R s | MTBF h | Young s "
        "(steps) | Daly s (steps) | waste at Daly | waste at the run's cadence |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& p : points) {
    if (!p.contains("checkpoint") || p.at("checkpoint").is_null()) continue;
    const json& c = p.at("checkpoint");
    auto steps = [&](const char* k) {
      return c.contains(k) ? " (" + g(c.at(k).get<double>()) + ")" : std::string();
    };
    md << "| " << p.value("label", "") << " | " << c.at("saves") << " | "
       << g(c.at("bytes_per_rank_max").get<double>()) << " | "
       << g(c.at("write_s_max").get<double>()) << " | " << g(c.at("checkpoint_s").get<double>())
       << " | "
       << (c.contains("checkpoint_to_baseline_write")
               ? g(c.at("checkpoint_to_baseline_write").get<double>(), 2)
               : "-")
       << " | " << (c.contains("restart_s") ? g(c.at("restart_s").get<double>()) : "-") << " | "
       << g(c.at("system_mtbf_s").get<double>() / 3600) << " | "
       << g(c.at("young_interval_s").get<double>()) << steps("young_interval_steps") << " | "
       << g(c.at("daly_interval_s").get<double>()) << steps("daly_interval_steps") << " | "
       << waste_cell(c, "waste_at_daly", "simulated_waste_at_daly") << " | "
       << waste_cell(c, "waste_at_run_cadence", "simulated_waste_at_run_cadence") << " |\n";
  }
  for (const auto& p : points)
    if (p.contains("checkpoint") && !p.at("checkpoint").is_null() &&
        p.at("checkpoint").contains("async"))
      async_markdown(p, md);
  md << "\nThe failure rate per rank is the deck's `checkpoint.device_mtbf_h`, else Llama 3's "
        "(419 interruptions in 54 days on 16,384 GPUs, the planner's default); `paraxis plan` "
        "takes a machine file's own.\n";
  return md.str();
}

}  // namespace paraxis::driver::report
