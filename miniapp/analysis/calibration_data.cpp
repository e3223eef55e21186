// The calibration's JSON form and the collectives' costs from it (calibration_data.hpp).
#include "analysis/calibration_data.hpp"

#include <algorithm>

#include "analysis/summary_reader.hpp"  // collective_named

namespace paraxis::driver {

namespace pm = paraxis::perfmodel;

namespace {

nlohmann::json sequence_to_json(const SequenceCalibration& q) {
  nlohmann::json calls = nlohmann::json::array();
  for (const auto& s : q.calls)
    calls.push_back({{"op", pm::to_string(s.op)},
                     {"bytes", s.bytes},
                     {"ranks", s.group},
                     {"after_compute", s.after_compute},
                     {"compute_share", s.compute_share},
                     {"seconds", s.seconds}});
  return {{"sweep_bytes", q.sweep_bytes},
          {"sweep_s", q.sweep_s},
          {"later_sweep_s", q.later_sweep_s},
          {"calls", calls}};
}

SequenceCalibration sequence_from_json(const nlohmann::json& j) {
  SequenceCalibration q;
  q.sweep_bytes = j.at("sweep_bytes").get<std::size_t>();
  q.sweep_s = j.at("sweep_s").get<double>();
  q.later_sweep_s = j.at("later_sweep_s").get<double>();
  for (const auto& c : j.at("calls"))
    q.calls.push_back({collective_named(c.at("op").get<std::string>()), c.at("bytes").get<double>(),
                       c.at("ranks").get<int>(), c.at("after_compute").get<bool>(),
                       c.at("seconds").get<double>(), c.value("compute_share", 0.0)});
  return q;
}

}  // namespace

nlohmann::json calibration_to_json(const Calibration& c) {
  nlohmann::json comm = nlohmann::json::object();
  for (const auto& f : c.comm) {
    nlohmann::json s = nlohmann::json::array();
    for (const auto& [S, t] : f.samples) s.push_back({S, t});
    comm[f.axis][f.op] = {{"ranks", f.ranks},
                          {"alpha_s", f.alpha},
                          {"beta_s_per_byte", f.beta},
                          {"latency_s", f.latency},
                          {"beta_eff_s_per_byte", f.beta_eff},
                          {"rms_residual_s", f.rms_residual},
                          {"samples", s}};
    if (f.async_progress >= 0) comm[f.axis][f.op]["async_progress"] = f.async_progress;
  }
  nlohmann::json out = {{"seconds", c.seconds},
                        {"comm", comm},
                        {"compute",
                         {{"forward_s_per_chunk", c.compute.forward_s},
                          {"backward_s_per_chunk", c.compute.backward_s},
                          {"forward_mean_s_per_chunk", c.compute.forward_mean_s},
                          {"backward_mean_s_per_chunk", c.compute.backward_mean_s},
                          {"backward_weight_s_per_chunk", c.compute.backward_weight_s},
                          {"backward_weight_mean_s_per_chunk", c.compute.backward_weight_mean_s},
                          {"optimizer_s", c.compute.optimizer_s},
                          {"flops_per_s", c.compute.flops_per_s},
                          {"peak_bytes", c.compute.peak_bytes}}}};
  auto& k = out["compute"];
  const auto& v = c.compute;
  if (!v.action_overhead_s.empty()) k["action_overhead_s_per_chunk"] = v.action_overhead_s;
  if (!v.forward_samples_s.empty()) k["forward_samples_s_per_chunk"] = v.forward_samples_s;
  if (!v.backward_samples_s.empty()) k["backward_samples_s_per_chunk"] = v.backward_samples_s;
  if (!v.backward_weight_samples_s.empty())
    k["backward_weight_samples_s_per_chunk"] = v.backward_weight_samples_s;
  if (!c.dp_sequence.calls.empty()) out["dp_sequence"] = sequence_to_json(c.dp_sequence);
  if (!c.tp_sequence.calls.empty()) out["tp_sequence"] = sequence_to_json(c.tp_sequence);
  return out;
}

Calibration calibration_from_json(const nlohmann::json& j) {
  Calibration c;
  c.seconds = j.value("seconds", 0.0);
  for (const auto& [axis, ops] : j.at("comm").items())
    for (const auto& [op, f] : ops.items()) {
      CommCalibration cc;
      cc.axis = axis;
      cc.op = op;
      cc.ranks = f.at("ranks");
      cc.alpha = f.at("alpha_s");
      cc.beta = f.at("beta_s_per_byte");
      cc.latency = f.value("latency_s", 0.0);
      cc.beta_eff = f.value("beta_eff_s_per_byte", 0.0);
      cc.rms_residual = f.value("rms_residual_s", 0.0);
      cc.async_progress = f.value("async_progress", -1.0);
      for (const auto& s : f.at("samples")) cc.samples.push_back({s.at(0), s.at(1)});
      c.comm.push_back(std::move(cc));
    }
  const auto& k = j.at("compute");
  c.compute.forward_s = k.at("forward_s_per_chunk").get<std::vector<double>>();
  c.compute.backward_s = k.at("backward_s_per_chunk").get<std::vector<double>>();
  c.compute.forward_mean_s = k.value("forward_mean_s_per_chunk", c.compute.forward_s);
  c.compute.backward_mean_s = k.value("backward_mean_s_per_chunk", c.compute.backward_s);
  c.compute.backward_weight_s =
      k.value("backward_weight_s_per_chunk", std::vector<double>(c.compute.backward_s.size(), 0.0));
  c.compute.backward_weight_mean_s =
      k.value("backward_weight_mean_s_per_chunk", c.compute.backward_weight_s);
  c.compute.optimizer_s = k.at("optimizer_s");
  c.compute.flops_per_s = k.at("flops_per_s");
  c.compute.peak_bytes = k.value("peak_bytes", std::size_t{0});
  using Samples = std::vector<std::vector<double>>;
  c.compute.action_overhead_s = k.value("action_overhead_s_per_chunk", std::vector<double>{});
  c.compute.forward_samples_s = k.value("forward_samples_s_per_chunk", Samples{});
  c.compute.backward_samples_s = k.value("backward_samples_s_per_chunk", Samples{});
  c.compute.backward_weight_samples_s = k.value("backward_weight_samples_s_per_chunk", Samples{});
  if (j.contains("dp_sequence")) c.dp_sequence = sequence_from_json(j.at("dp_sequence"));
  if (j.contains("tp_sequence")) c.tp_sequence = sequence_from_json(j.at("tp_sequence"));
  return c;
}

double CommCosts::dp_overlap(pm::Collective reduction) const {
  for (const auto op : {reduction, pm::Collective::all_reduce})
    if (const auto it = dp_overlap_of.find(op); it != dp_overlap_of.end()) return it->second;
  return 1.0;
}

CommCosts comm_costs_of(const std::vector<CommCalibration>& fits) {
  CommCosts c;
  for (const auto& f : fits) {
    auto& o = c.op_links;
    auto& l = c.links;
    pm::OpLinks* ops = axis_slot(f.axis, o.tp, o.pp, o.dp, o.ep);
    pm::LinkCost* axis = axis_slot(f.axis, l.tp, l.pp, l.dp, l.ep);
    if (!ops || !axis) continue;
    const pm::LinkCost link{f.alpha, f.beta, 0.0};
    pm::OpCost measured = link;  // the operation's own: its fit and its measured curve
    measured.curve = f.samples;
    std::sort(measured.curve.begin(), measured.curve.end());
    measured.curve_ranks = f.ranks;
    (*ops)[collective_named(f.op)] = measured;
    if (f.axis == "dp" && f.async_progress >= 0)
      c.dp_overlap_of[collective_named(f.op)] = f.async_progress;
    if (f.axis == "pp" && collective_named(f.op) == pm::Collective::point_to_point)
      c.pipeline_transfer_occupancy = 1.0;
    // Operations not calibrated: the axis's first fit, never another operation's curve.
    if (axis->alpha == 0 && axis->beta == 0) *axis = link;
  }
  return c;
}

CommCosts comm_costs_of_calibration(const Calibration& c) {
  CommCosts costs = comm_costs_of(c.comm);
  costs.dp_sequence = c.dp_sequence.calls;
  costs.tp_sequence = c.tp_sequence.calls;
  return costs;
}

CommCosts comm_costs_of_point(const Calibration& c, const model::ModelConfig& m,
                              const pm::Scenario& s) {
  CommCosts costs = comm_costs_of_calibration(c);
  costs.tp_step = pm::tensor_parallel_step_sequence(m, s, costs.tp_sequence);
  return costs;
}

}  // namespace paraxis::driver
