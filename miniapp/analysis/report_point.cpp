// One point of `paraxis report` measured against the performance models (report_parts.hpp):
// predictions use only what the run calibrated before the point (summary.json `calibration`:
// fitted collectives, the shard's compute per chunk, the optimizer) and the analytic models
// (perfmodel/), never the point's own measured steps. Terms: docs/report.md.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <tuple>

#include "analysis/calibration_data.hpp"
#include "analysis/diagnosis.hpp"
#include "analysis/prediction.hpp"
#include "analysis/report_checkpoint.hpp"
#include "analysis/report_noise.hpp"
#include "analysis/report_parts.hpp"
#include "analysis/statistics.hpp"
#include "analysis/summary_reader.hpp"
#include "config/grid_coords.hpp"
#include "deck/deck.hpp"
#include "perfmodel/checkpoint.hpp"
#include "perfmodel/collectives.hpp"
#include "perfmodel/memory.hpp"
#include "perfmodel/step_time.hpp"
#include "perfmodel/step_traffic.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver::report {

using nlohmann::json;
namespace pm = paraxis::perfmodel;

namespace {

pm::Scenario perf_config(const RunConfig& c) {
  return pm::scenario_of(c.parallel, c.comm, c.train);
}

// Measured per-rank statistic (time.ranks.<name>.<field>), 0 when absent.
double rank_stat(const json& point, const std::string& name, const char* field) {
  const auto& ranks = point.at("time").value("ranks", json::object());
  if (!ranks.contains(name)) return 0;
  return ranks.at(name).value(field, 0.0);
}

// How unevenly the ranks that compute the same chunks (one pipeline stage's ranks) computed, as
// measured: per measured step the slowest minus the mean of the stage's compute_s, the median
// over steps, the mean over stages (as the model's wait, m x (slowest - mean) / pp). -1: no
// per-rank series (a summary from before them).
double measured_compute_spread(const json& point, const config::ParallelConfig& par) {
  if (!point.contains("rank_series")) return -1;
  const auto& rs = point.at("rank_series");
  const auto compute = rs.at("compute_s").get<std::vector<std::vector<double>>>();
  const auto steps = rs.at("steps").get<std::vector<int>>();
  const int warmup = point.at("config").at("train").value("warmup_steps", 0);
  std::vector<std::vector<int>> stage_ranks(static_cast<std::size_t>(par.pp));
  for (int r = 0; r < static_cast<int>(compute.size()); ++r)
    stage_ranks.at(static_cast<std::size_t>(config::grid_coords_of(par, r).pp)).push_back(r);
  double sum = 0;
  for (const auto& ranks : stage_ranks) {
    std::vector<double> per_step;
    for (std::size_t k = 0; k < steps.size(); ++k) {
      if (!is_measured_step(steps[k], warmup) || ranks.size() < 2) continue;
      double mx = 0, mean = 0;
      for (int r : ranks) {
        const double c = compute.at(static_cast<std::size_t>(r)).at(k);
        mx = std::max(mx, c);
        mean += c / static_cast<double>(ranks.size());
      }
      per_step.push_back(mx - mean);
    }
    if (!per_step.empty()) sum += median(per_step);
  }
  return sum / par.pp;
}

// One rank's calibrated compute per step on each pipeline stage, for the diagnosis against the
// model: m micro-batches of the stage's chunks (forward, backward and W, the slowest of the ranks
// that hold each) and the optimizer.
std::vector<double> stage_compute(const ComputeCalibration& cal, const RunConfig& c) {
  const schedule::PipelineShape shape = config::pipeline_shape(c.train, c.parallel);
  std::vector<double> per_stage(static_cast<std::size_t>(c.parallel.pp), cal.optimizer_s);
  for (int k = 0; k < static_cast<int>(cal.forward_s.size()) && k < shape.chunks(); ++k)
    per_stage.at(static_cast<std::size_t>(schedule::chunk_stage(shape, k))) +=
        shape.micro_batches *
        (cal.forward_s[k] + cal.backward_s.at(k) +
         (k < static_cast<int>(cal.backward_weight_s.size()) ? cal.backward_weight_s[k] : 0.0));
  return per_stage;
}

json term(const std::string& name, double measured, double predicted, const std::string& unit) {
  json t{{"name", name}, {"measured", measured}, {"predicted", predicted}, {"unit", unit}};
  t["residual_pct"] = predicted != 0 ? json(100.0 * (measured - predicted) / predicted) : json();
  return t;
}

// The point's calls (summary.json `calls`, rank 0's measured steps) with each row's residual of
// the measured against the predicted total (docs/report.md, "Calls").
// With a calibration, `per_step` compares per axis the recorded calls' predictions (sends and
// collectives, receives left out, per measured step) with the step model's wire time of rank
// 0's calls (traffic_time over step_traffic's calls, stage 0, with the same costs): equal when
// the engine made the calls the model counts (exact for tp, pp, dp; ep follows the routing).
json calls_table(const json& calls, const pm::StepTraffic& traffic, const pm::Scenario& pc,
                 const CommCosts* costs) {
  json per_step = json::object();
  const int steps = calls.at("steps");
  if (costs && steps > 0) {
    const std::tuple<const char*, const pm::AxisTraffic*, int, const pm::LinkCost*,
                     const pm::OpLinks*>
        axes[] = {{"tp", &traffic.tp, pc.tp, &costs->links.tp, &costs->op_links.tp},
                  {"pp", &traffic.pp, pc.pp, &costs->links.pp, &costs->op_links.pp},
                  {"dp", &traffic.dp, pc.dp, &costs->links.dp, &costs->op_links.dp},
                  {"ep", &traffic.ep, pc.ep, &costs->links.ep, &costs->op_links.ep}};
    for (const auto& [axis, tr, group, link, ops] : axes) {
      double recorded = 0;
      for (const auto& r : calls.at("rows"))
        if (r.at("axis") == axis && r.at("op") != "receive" && r.at("predicted_s").is_number())
          recorded += r.at("predicted_s").get<double>();
      const double model = pm::traffic_time(*tr, group, *link, pm::AllReduceAlgorithm::ring, ops,
                                            std::string(axis) == "dp"   ? &costs->dp_sequence
                                            : std::string(axis) == "tp" ? &costs->tp_step
                                                                        : nullptr);
      if (recorded > 0 || model > 0)
        per_step[axis] = {{"calls_predicted_s", recorded / steps}, {"model_s", model}};
    }
  }
  json rows = json::array();
  for (json r : calls.at("rows")) {
    const json& pred = r.at("predicted_s");
    const double measured = r.at("measured_s");
    r["residual_pct"] = pred.is_number() && pred.get<double>() > 0
                            ? json(100.0 * (measured - pred.get<double>()) / pred.get<double>())
                            : json();
    rows.push_back(std::move(r));
  }
  return {{"rank", calls.at("rank")}, {"steps", steps}, {"rows", rows}, {"per_step", per_step}};
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

// Measured terms (docs/report.md), each the mean over ranks: compute (fenced phases less the
// communication blocked in them, optimizer included); per axis the time in its calls (data
// parallelism: exposed time); the bubble: the pipelined span less the fenced compute actions (it
// includes waiting for transfers). Their sum is about the step.
struct MeasuredTerms {
  double compute = 0, tp = 0, ep = 0, dp = 0, bubble = 0;
};
MeasuredTerms measured_terms(const json& p) {
  MeasuredTerms m;
  m.compute = rank_stat(p, "compute_s", "mean");
  m.tp = rank_stat(p, "comm.tp.time_s", "mean");
  m.ep = rank_stat(p, "comm.ep.time_s", "mean");
  m.dp = rank_stat(p, "comm.dp.exposed_s", "mean");
  m.bubble = rank_stat(p, "pipeline_span_s", "mean") - rank_stat(p, "pipeline_busy_s", "mean");
  return m;
}

// The pipeline's engine time per action and its actions' variation, where the calibration has
// them (a pipelined point): the replay of the calibration's own samples (those
// repeated_action_time counts) in kReplayDraws draws from a fixed seed, so that the report's
// prediction is the same every time it is made from the same summary.json. 2000 draws: another
// seed moved the demo's pipelined points' predicted bubble by 0.1 % (at most 0.3 %, 3 seeds x 32
// points; docs/perf-log/2026-12-05-bubble-round6.md), about 15 ms of the report's time a point.
constexpr int kReplayDraws = 2000;
constexpr std::uint64_t kReplaySeed = 20261205;
void pipeline_inputs(const ComputeCalibration& k, pm::StepTimeInputs& in) {
  in.action_overhead_s = k.action_overhead_s;
  const auto kept = [](const std::vector<std::vector<double>>& per_chunk) {
    std::vector<std::vector<double>> out;
    for (const auto& v : per_chunk) out.push_back(repeated_action_samples(v));
    return out;
  };
  in.variation.forward = kept(k.forward_samples_s);
  in.variation.backward = kept(k.backward_samples_s);
  in.variation.backward_weight = kept(k.backward_weight_samples_s);
  in.variation.draws = kReplayDraws;
  in.variation.seed = kReplaySeed;
}

// The step model's inputs from a calibration: compute per chunk, the optimizer, and the same
// costs as each recorded call's prediction (summary.json `calls`): the step model's
// communication terms are sums of those per-call predictions.
pm::StepTimeInputs step_inputs(const Calibration& cal, const RunConfig& c) {
  pm::StepTimeInputs in;
  in.forward_s = cal.compute.forward_s;
  in.backward_s = cal.compute.backward_s;
  if (schedule::splits_backward(c.parallel.schedule))
    in.backward_weight_s = cal.compute.backward_weight_s;
  in.optimizer_s = cal.compute.optimizer_s;
  const CommCosts costs = comm_costs_of_calibration(cal);
  in.links = costs.links;
  in.op_links = costs.op_links;
  in.dp_overlap = costs.dp_overlap(c.parallel.effective_zero() >= 1 ? pm::Collective::reduce_scatter
                                                                    : pm::Collective::all_reduce);
  in.pipeline_transfer_occupancy = costs.pipeline_transfer_occupancy;
  in.dp_sequence = costs.dp_sequence;
  in.tp_sequence = costs.tp_sequence;
  pipeline_inputs(cal.compute, in);
  return in;
}

// What the calibrated model predicts for a point: the breakdown, its terms beside the measured
// ones, the model's seconds per step for the diagnosis, and the calibrated spread of the ranks.
struct Prediction {
  pm::StepTimeBreakdown br;
  json terms = json::array();
  json model_terms = json::object();
  double wait = 0;  // the calibrated spread: seconds a rank waits for the slowest of its chunk
};

// The model's terms describe the stage that finishes last; the measured ones are means over
// ranks: compare compute and bubble as means over stages too. Ranks that compute the same chunk
// at different speeds (experts loaded unevenly, a replica on a busier core): the step follows the
// slowest (in.forward_s), a rank computes the mean and waits the difference where the ranks meet
// first — the all-to-all with experts split, else the tensor-parallel collectives, else the
// data-parallel reduction — so that axis's term is its wire time plus that wait.
Prediction predict(const Calibration& cal, const RunConfig& c, const pm::Scenario& pc,
                   const MeasuredTerms& m, double measured_step) {
  Prediction out;
  const pm::StepTimeInputs in = step_inputs(cal, c);
  out.br = pm::predict_step_time(c.model, pc, in);
  const pm::StepTimeBreakdown& br = out.br;
  double chunk_compute = 0, chunk_wait = 0;
  for (std::size_t k = 0; k < in.forward_s.size(); ++k) {
    const double w = cal.compute.backward_weight_s[k],
                 w_mean = cal.compute.backward_weight_mean_s[k];
    chunk_compute += cal.compute.forward_mean_s[k] + cal.compute.backward_mean_s[k] + w_mean;
    chunk_wait += in.forward_s[k] + in.backward_s[k] + w - cal.compute.forward_mean_s[k] -
                  cal.compute.backward_mean_s[k] - w_mean;
  }
  const double p_compute = pc.micro_batches() * chunk_compute / pc.pp + br.optimizer;
  const double wait = out.wait = pc.micro_batches() * chunk_wait / pc.pp;
  const double p_ep = br.ep + (pc.ep > 1 ? wait : 0.0);
  const double p_tp = br.tp + (pc.ep == 1 && pc.tp > 1 ? wait : 0.0);
  const double p_dp = br.dp + (pc.ep == 1 && pc.tp == 1 ? wait : 0.0);
  const double p_bubble = br.bubble_fraction * br.pipeline_span + br.pp;
  out.model_terms = {{"compute", p_compute}, {"compute_per_stage", stage_compute(cal.compute, c)},
                     {"tp", br.tp},          {"pp", br.pp},
                     {"dp", br.dp},          {"ep", br.ep}};
  json& terms = out.terms;
  terms.push_back(term("step_time", measured_step, br.step_time, "s"));
  terms.push_back(term("compute", m.compute, p_compute, "s"));
  if (pc.tp > 1) terms.push_back(term("tp", m.tp, p_tp, "s"));
  if (pc.ep > 1) terms.push_back(term("ep", m.ep, p_ep, "s"));
  if (pc.dp > 1) terms.push_back(term("dp", m.dp, p_dp, "s"));
  if (pc.pp > 1) terms.push_back(term("bubble", m.bubble, p_bubble, "s"));
  return out;
}

// Traffic: what rank 0 recorded against the model (exact for tp, pp, dp; ep follows the routing
// that happened, the model assumes uniform routing); memory: the largest rank's.
void traffic_and_memory_terms(const json& p, const pm::StepTraffic& traffic,
                              const pm::MemoryEstimate& mem, json& terms) {
  const auto& t = p.at("time");
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
}

// The axis that costs most (measured seconds): costliest_axis and costliest_axis_s.
void costliest_axis(const MeasuredTerms& m, json& out) {
  std::string costliest = "none";
  double worst = 0;
  for (const auto& [name, v] : std::vector<std::pair<std::string, double>>{
           {"tp", m.tp}, {"ep", m.ep}, {"dp", m.dp}, {"pp (bubble)", m.bubble}})
    if (v > worst) {
      worst = v;
      costliest = name;
    }
  out["costliest_axis"] = costliest;
  out["costliest_axis_s"] = worst;
}

// Where a prediction misses: the term whose seconds are furthest off.
void term_most_off(const json& terms, json& out) {
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

// The ranks' spread as calibrated against as measured: a spread beyond the calibrated one is the
// machine running the same work unevenly during the point (a core shared with other work, a
// throttled device; docs/report.md, "Uneven ranks"), which no model made before the point
// foresees. The step follows its slowest rank, so that excess is a lower bound of what it adds to
// the step: `excess_s`, and the accuracy without it (report_compare.cpp).
void rank_spread(const json& p, const RunConfig& c, double wait, Analysed& a, json& out) {
  const double spread = measured_compute_spread(p, c.parallel);
  if (spread < 0) return;
  a.uneven_excess_s = std::max(0.0, spread - wait);
  out["rank_spread"] = {{"measured_s", spread},
                        {"calibrated_s", wait},
                        {"excess_s", a.uneven_excess_s},
                        {"uneven", a.uneven()}};
}

// The point's entry before its terms: where it ran, its label, utilisation, settings, grid.
json point_entry(const json& p, const RunConfig& c, const std::string& dir,
                 const std::string& machine) {
  return {{"dir", dir},
          {"machine", machine},
          {"index", p.at("index")},
          {"label", label_of(c, p)},
          // Model and hardware FLOP utilisation as the run measured them (null: unknown peak).
          {"mfu", p.value("throughput", json::object()).value("mfu", json())},
          {"hfu", p.value("throughput", json::object()).value("hfu", json())},
          {"settings", p.value("settings", json::object())},
          {"grid", p.at("grid")},
          {"precision", model::to_string(c.train.precision)},
          {"global_batch", c.train.global_batch},
          {"micro_batch", c.train.micro_batch}};
}

json pipeline_entry(const json& t, const RunConfig& c, const pm::Scenario& pc, const Analysed& a,
                    const pm::StepTimeBreakdown& br) {
  return {{"stages", pc.pp},
          {"micro_batches", pc.micro_batches()},
          {"virtual_stages", pc.virtual_stages},
          {"schedule", c.parallel.schedule},
          {"bubble_measured", t.value("bubble_fraction", 0.0)},
          {"bubble_model", t.value("bubble_fraction_model", 0.0)},
          {"bubble_ideal", t.value("bubble_fraction_ideal", 0.0)},
          {"bubble_predicted", a.predicted ? json(br.bubble_fraction) : json()}};
}

// The point's calls, what its checkpoints cost, its nodes and its diagnosis, when it has them.
void point_extras(const json& p, const RunConfig& c, const pm::StepTraffic& traffic,
                  const pm::Scenario& pc, const diagnosis::Host& host, const json& model_terms,
                  json& out) {
  if (p.contains("calls")) {
    const CommCosts costs =
        p.contains("calibration")
            ? comm_costs_of_point(calibration_from_json(p.at("calibration")), c.model, pc)
            : CommCosts{};
    out["calls"] =
        calls_table(p.at("calls"), traffic, pc, p.contains("calibration") ? &costs : nullptr);
  }
  // What its checkpoints cost and the cadence that implies (docs/checkpoint.md).
  if (p.contains("checkpoints"))
    out["checkpoint"] = checkpoint_figures(p, c.checkpoint.device_mtbf_h > 0
                                                  ? 1.0 / (c.checkpoint.device_mtbf_h * 3600)
                                                  : pm::llama3_failures_per_device_s());
  // Which axes cross nodes (docs/diagnosis.md, "Nodes and emulated links").
  if (p.contains("topology")) out["topology"] = p.at("topology");
  // Where the time went, rank by rank (docs/diagnosis.md); a summary from before the per-rank
  // series has none.
  out["diagnosis"] =
      p.contains("rank_series") ? diagnosis::diagnose(p, host, model_terms) : json::array();
}

}  // namespace

json predicted_time_terms(const Calibration& cal, const RunConfig& c) {
  const Prediction p = predict(cal, c, perf_config(c), MeasuredTerms{}, 0.0);
  json out = json::object();
  for (const json& t : p.terms) out[t.at("name").get<std::string>()] = t.at("predicted");
  return out;
}

json measured_time_terms(const json& p) {
  const RunConfig c = config_from_json(p.at("config"));
  const pm::Scenario pc = perf_config(c);
  const MeasuredTerms m = measured_terms(p);
  json out{{"step_time", p.at("time").at("step_median_s")}, {"compute", m.compute}};
  if (pc.tp > 1) out["tp"] = m.tp;
  if (pc.ep > 1) out["ep"] = m.ep;
  if (pc.dp > 1) out["dp"] = m.dp;
  if (pc.pp > 1) out["bubble"] = m.bubble;
  return out;
}

std::vector<std::string> unexplained_misses(const json& p) {
  if (!p.contains("calibration") || !p.contains("time")) return {};
  const RunConfig c = config_from_json(p.at("config"));
  Prediction pred = predict(calibration_from_json(p.at("calibration")), c, perf_config(c),
                            measured_terms(p), p.at("time").at("step_median_s"));
  add_steps_ranges(p, c.comm.overlap, c.train.warmup_steps, pred.terms);
  add_recheck(p, pred.terms);
  std::vector<std::string> out;
  for (const json& t : pred.terms) {
    const json& r = t.at("residual_pct");
    if (!r.is_number() || std::fabs(r.get<double>()) <= term_target_pct(t.at("name"))) continue;
    if (t.value("within_steps_range", false) || t.value("recheck_verdict", "") == "cal") continue;
    out.push_back(t.at("name"));
  }
  return out;
}

std::string point_label(const RunConfig& c) {
  return label_of(c, json());
}

Analysed analyse(const json& p, const std::string& dir, const std::string& machine,
                 const diagnosis::Host& host) {
  Analysed a;
  const RunConfig c = config_from_json(p.at("config"));
  const auto& t = p.at("time");
  json out = point_entry(p, c, dir, machine);
  a.model = p.at("config").at("model").dump() + " " + model::to_string(c.train.precision);
  a.model_label = model_label_of(c);
  a.measured_step = t.at("step_median_s");
  const pm::Scenario pc = perf_config(c);
  const MeasuredTerms m = measured_terms(p);
  // Model: traffic of rank 0 (stage 0) and memory of the largest rank, always; times when the
  // point was calibrated.
  const auto traffic = pm::step_traffic(c.model, pc, 0);
  const pm::MemoryEstimate mem = pm::largest_rank_memory(c.model, pc);
  Prediction pred;
  if (p.contains("calibration")) {
    pred = predict(calibration_from_json(p.at("calibration")), c, pc, m, a.measured_step);
    a.predicted = true;
    a.predicted_step = pred.br.step_time;
    rank_spread(p, c, pred.wait, a, out);
  } else {
    pred.terms.push_back(term("step_time", a.measured_step, 0, "s"));
  }
  traffic_and_memory_terms(p, traffic, mem, pred.terms);
  // Beside each time term, the range the point's own steps took (docs/report.md, "Noise").
  if (a.predicted) add_steps_ranges(p, c.comm.overlap, c.train.warmup_steps, pred.terms);
  // Beside each, the prediction rebuilt from the recheck after the point, and whose a miss is.
  if (a.predicted) add_recheck(p, pred.terms);
  // Beside each, what the point measured when the run ran it again (docs/report.md, "Rerun").
  if (a.predicted && p.contains("rerun")) add_rerun(p.at("rerun").at("measured"), pred.terms);
  out["terms"] = pred.terms;
  costliest_axis(m, out);
  if (pc.pp > 1) out["pipeline"] = pipeline_entry(t, c, pc, a, pred.br);
  if (a.predicted) term_most_off(pred.terms, out);
  out["measured_step_s"] = a.measured_step;
  out["predicted_step_s"] = a.predicted ? json(a.predicted_step) : json();
  point_extras(p, c, traffic, pc, host, pred.model_terms, out);
  a.point = out;
  return a;
}

}  // namespace paraxis::driver::report
