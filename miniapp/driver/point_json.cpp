// The JSON of one sweep point in summary.json (docs/results.md; every field declared in
// analysis/results_schema_table.cpp): its configuration, steps, medians over measured steps,
// per-axis communication, pipeline figures, per-rank statistics, memory, throughput and --verify
// figures.
#include <cmath>
#include <utility>

#include "analysis/statistics.hpp"
#include "driver/call_accounting.hpp"
#include "driver/results.hpp"
#include "parallel/topology.hpp"
#include "perfmodel/parallel_config.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver {

using nlohmann::json;

double measured_median(const PointResult& r, double (*get)(const model::StepResult&)) {
  std::vector<double> v;
  for (const auto& s : r.steps)
    if (is_measured_step(s.step, r.point.config.train.warmup_steps)) v.push_back(get(s));
  return median(std::move(v));
}

namespace {
json memory_json(const model::MemoryReport& m) {
  return json{{"params_bytes", m.params_bytes},
              {"grads_bytes", m.grads_bytes},
              {"optimizer_bytes", m.optimizer_bytes},
              {"activations_peak_bytes", m.activations_peak_bytes},
              {"peak_bytes", m.peak_bytes},
              {"params_peak_bytes", m.params_peak_bytes},
              {"grads_peak_bytes", m.grads_peak_bytes},
              {"optimizer_peak_bytes", m.optimizer_peak_bytes}};
}
// The node of every rank and, per axis, how many groups span nodes (docs/results.md); null
// when the host names the nodes come from are unknown (a point that failed before its grid
// was built): the point then has no `topology`.
json topology_json(const PointResult& r) {
  const auto& c = r.point.config;
  const auto nodes = parallel::run_nodes(r.world, c.comm.links.ranks_per_node);
  if (!nodes || r.world != c.parallel.world()) return nullptr;
  const parallel::TopologySummary t = parallel::summarize_topology(c.parallel, *nodes);
  json axes = json::object();
  for (std::size_t a = 0; a < t.axes.size(); ++a)
    axes[parallel::topology_axis_names()[a]] = {
        {"groups", t.axes[a].groups}, {"groups_spanning_nodes", t.axes[a].groups_spanning_nodes}};
  return {{"nodes", t.nodes},
          {"ranks_per_node", t.emulated ? json(t.ranks_per_node) : json(nullptr)},
          {"emulated", t.emulated},
          {"node_of", nodes->node},
          {"axes", axes}};
}

// The point as configured: index, config, settings, grid, topology, the injected slow axis.
json point_head(const PointResult& r) {
  const auto& c = r.point.config;
  json j;
  j["index"] = r.index;
  j["config"] = config_to_json(c);
  j["settings"] = json::object();
  for (const auto& [k, v] : r.point.settings) j["settings"][k] = v;
  j["grid"] = {{"world", r.world},
               {"tp", c.parallel.tp},
               {"pp", c.parallel.pp},
               {"dp", c.parallel.dp},
               {"ep", c.parallel.ep}};
  if (json t = topology_json(r); !t.is_null()) j["topology"] = std::move(t);
  // fault.slow_axis as injected (docs/sensitivity.md): the axis, the factor and the links the
  // slowed communicators of rank 0 measured (none at factor 1, the sweep's baseline).
  if (c.comm.links.slow_axis != config::SlowAxis::none)
    j["slow_axis"] = {{"axis", config::to_string(c.comm.links.slow_axis)},
                      {"factor", c.comm.links.slow_axis_factor},
                      {"links", r.slow_axis_links}};
  j["status"] = r.status.text();
  return j;
}

json steps_json(const PointResult& r) {
  const auto& c = r.point.config;
  json steps = json::array();
  for (const auto& s : r.steps) {
    json e{{"step", s.step},
           {"loss", s.loss},
           {"lm_loss", s.lm_loss},
           {"aux_loss", s.aux_loss},
           {"grad_norm", s.grad_norm},
           {"time_s", s.time_s},
           {"measured", is_measured_step(s.step, c.train.warmup_steps)}};
    if (c.model.moe.experts > 0)
      e["moe"] = {{"tokens_per_expert_min", s.moe.min_tokens},
                  {"tokens_per_expert_mean", s.moe.mean_tokens},
                  {"tokens_per_expert_max", s.moe.max_tokens},
                  {"load_imbalance", s.moe.imbalance},
                  {"tokens_dropped", s.moe.dropped},
                  {"tokens_per_expert", s.moe.tokens_per_expert},
                  {"dropped_per_expert", s.moe.dropped_per_expert}};
    steps.push_back(e);
  }
  return steps;
}

// Communication per axis: medians over measured steps of each step's totals (rank 0).
json comm_json(const PointResult& r) {
  const auto& c = r.point.config;
  json comm = json::object();
  for (const char* axis : {"tp", "pp", "dp", "ep"}) {
    auto get = [&](auto field) {
      std::vector<double> v;
      for (const auto& s : r.steps) {
        if (!is_measured_step(s.step, c.train.warmup_steps)) continue;
        const auto it = s.comm.find(axis);
        v.push_back(it == s.comm.end() ? 0.0 : field(it->second));
      }
      return median(std::move(v));
    };
    comm[axis] = {
        {"time_s", get([](const model::CommTotals& t) { return t.time_s; })},
        {"exposed_s", get([](const model::CommTotals& t) { return t.exposed_s; })},
        {"bytes", get([](const model::CommTotals& t) { return static_cast<double>(t.bytes); })},
        {"calls", get([](const model::CommTotals& t) { return static_cast<double>(t.calls); })}};
  }
  return comm;
}

// `time` (medians over measured steps, the bubble) and, with pp > 1, `pipeline`.
void time_json(const PointResult& r, json& j) {
  const auto& c = r.point.config;
  auto med = [&](double (*get)(const model::StepResult&)) { return measured_median(r, get); };
  j["time"] = {
      {"step_median_s", med([](const model::StepResult& s) { return s.time_s; })},
      {"forward_s", med([](const model::StepResult& s) { return s.forward_s; })},
      {"backward_s", med([](const model::StepResult& s) { return s.backward_s; })},
      {"backward_weight_s", med([](const model::StepResult& s) { return s.backward_weight_s; })},
      {"optimizer_s", med([](const model::StepResult& s) { return s.optimizer_s; })},
      {"compute_s", med([](const model::StepResult& s) { return s.compute_s; })},
      {"bubble_fraction", 0.0},
      {"bubble_fraction_model", 0.0},
      {"bubble_fraction_formula", 0.0},
      {"bubble_fraction_ideal", 0.0},
      {"comm", comm_json(r)}};
  if (c.parallel.pp == 1) return;
  const PipelineFigures pf = pipeline_figures(r);
  j["time"]["bubble_fraction"] = pf.measured_mean;
  j["time"]["bubble_fraction_model"] = pf.model;
  j["time"]["bubble_fraction_formula"] = pf.formula;
  j["time"]["bubble_fraction_ideal"] = pf.ideal;
  j["time"]["bubble_fraction_per_rank"] = pf.measured_per_rank;
  j["pipeline"] = {{"stages", c.parallel.pp},
                   {"micro_batches", pf.micro_batches},
                   {"virtual_stages", c.parallel.virtual_stages},
                   {"schedule", schedule::to_string(c.parallel.schedule)},
                   {"forward_action_s_per_stage", pf.forward_s},
                   {"backward_action_s_per_stage", pf.backward_s},
                   {"backward_weight_action_s_per_stage", pf.backward_weight_s},
                   {"bubble_fraction_model_per_stage", pf.model_per_stage},
                   {"peak_live_activations_per_stage", pf.peak_live}};
}

// Across ranks: min, mean and max of each per-step metric, then the median over measured steps.
json rank_stats_json(const PointResult& r) {
  const auto& c = r.point.config;
  json ranks = json::object();
  const auto& names = rank_metric_names();
  for (std::size_t k = 0; k < names.size(); ++k) {
    std::vector<double> mins, means, maxs;
    for (std::size_t s = 0; s < r.steps.size(); ++s) {
      if (!is_measured_step(r.steps[s].step, c.train.warmup_steps)) continue;
      double mn = 1e300, mx = -1e300, sum = 0;
      for (const auto& rank : r.rank_steps) {
        const double v = rank.at(s).at(k);
        mn = std::min(mn, v);
        mx = std::max(mx, v);
        sum += v;
      }
      mins.push_back(mn);
      maxs.push_back(mx);
      means.push_back(sum / static_cast<double>(r.rank_steps.size()));
    }
    ranks[names[k]] = {{"min", median(mins)}, {"mean", median(means)}, {"max", median(maxs)}};
  }
  return ranks;
}

// Every rank's own per-step series of what locates a slowdown (docs/diagnosis.md): step
// numbers, then per metric one array per rank, one value per step (warm-up steps too).
json rank_series_json(const PointResult& r) {
  const auto& names = rank_metric_names();
  json series{{"steps", json::array()}};
  for (const auto& st : r.steps) series["steps"].push_back(st.step);
  for (std::size_t k = 0; k < names.size(); ++k) {
    const std::string& n = names[k];
    auto ends_with = [&](const char* tail) {
      const std::size_t t = std::char_traits<char>::length(tail);
      return n.size() >= t && n.compare(n.size() - t, t, tail) == 0;
    };
    const bool wanted = n == "step_s" || n == "compute_s" || n == "bubble_fraction" ||
                        (n.rfind("comm.", 0) == 0 &&
                         (ends_with(".time_s") || ends_with(".wait_s") || ends_with(".exposed_s")));
    if (!wanted) continue;
    json per_rank = json::array();
    for (const auto& rank : r.rank_steps) {
      json v = json::array();
      for (std::size_t s = 0; s < r.steps.size(); ++s) v.push_back(rank.at(s).at(k));
      per_rank.push_back(v);
    }
    series[n] = per_rank;
  }
  return series;
}

// The calibration, rank 0's calls per (axis, op, size bucket) predicted from it
// (call_accounting), the checkpoints written and the one resumed from (docs/checkpoint.md).
void calibration_calls_checkpoints(const PointResult& r, json& j) {
  if (r.calibration) j["calibration"] = calibration_to_json(*r.calibration);
  if (!r.recheck.is_null()) j["recheck"] = r.recheck;
  if (!r.rerun.is_null()) j["rerun"] = r.rerun;
  const auto& c = r.point.config;
  const CommCosts costs =
      r.calibration ? comm_costs_of_point(*r.calibration, c.model,
                                          perfmodel::scenario_of(c.parallel, c.comm, c.train))
                    : CommCosts{};
  j["calls"] =
      calls_json(r.steps, r.point.config.train.warmup_steps, r.calibration ? &costs : nullptr);
  if (!r.checkpoints.empty()) j["checkpoints"] = r.checkpoints;
  if (!r.resumed.is_null()) j["resumed"] = r.resumed;
  if (!r.checkpoint_auto.is_null()) j["checkpoint_auto"] = r.checkpoint_auto;
  if (!r.checkpoints_refused.empty()) j["checkpoints_refused"] = r.checkpoints_refused;
  if (!r.lineage.is_null()) j["lineage"] = r.lineage;
}

// Tokens and FLOPs per second from the measured step; hardware FLOPs: the model's, plus the
// forward work train.recompute runs again.
json throughput_json(const PointResult& r) {
  const auto& c = r.point.config;
  const double step_s = measured_median(r, [](const model::StepResult& s) { return s.time_s; });
  const double tokens = static_cast<double>(c.train.global_batch) * c.model.seq_len;
  const double tps = step_s > 0 ? tokens / step_s : 0;
  const double flops = 3.0 * r.flops_per_token * tps;
  const double hw_per_token = 3.0 * r.flops_per_token + r.recompute_flops_per_token;
  const double peak = c.hardware.peak_flops * r.world;
  return {{"tokens_per_s", tps},
          {"model_flops_per_s", flops},
          {"model_flops_per_step", 3.0 * r.flops_per_token * tokens},
          {"mfu", peak > 0 ? json(flops / peak) : json(nullptr)},
          {"hardware_flops_per_s", hw_per_token * tps},
          {"hardware_flops_per_step", hw_per_token * tokens},
          {"hfu", peak > 0 ? json(hw_per_token * tps / peak) : json(nullptr)}};
}

json verify_json(const VerifyResult& v) {
  return {{"max_loss_rel_diff", v.max_loss_rel_diff},
          {"max_param_abs_diff", v.max_param_abs_diff},
          {"max_param_abs", v.max_param_abs},
          {"loss_tolerance", v.loss_tolerance},
          {"param_tolerance", v.param_tolerance},
          {"routing_flips", v.routing_flips},
          {"replica_divergence", v.replica_divergence},
          {"first_flip_step", v.first_flip_step < 0 ? json(nullptr) : json(v.first_flip_step)},
          {"steps_compared", v.steps_compared},
          {"routing_replayed", v.routing_replayed},
          {"passed", v.passed},
          {"reason", v.passed ? json(nullptr) : json(v.reason)}};
}

}  // namespace

json point_to_json(const PointResult& r) {
  const auto& c = r.point.config;
  json j = point_head(r);
  if (r.steps.empty()) return j;
  j["steps"] = steps_json(r);
  time_json(r, j);
  if (!r.rank_steps.empty()) {
    j["time"]["ranks"] = rank_stats_json(r);
    j["rank_series"] = rank_series_json(r);
  }
  calibration_calls_checkpoints(r, j);
  j["memory"] = memory_json(r.memory);
  j["memory_per_rank"] = json::array();
  for (const auto& m : r.memory_per_rank) j["memory_per_rank"].push_back(memory_json(m));
  j["throughput"] = throughput_json(r);
  j["model"] = {{"parameters", r.parameters}, {"forward_flops_per_token", r.flops_per_token}};
  j["corpus"] = {{"entropy_floor", r.entropy_floor},
                 {"uniform_loss", std::log(static_cast<double>(c.model.vocab))},
                 {"branching", c.train.corpus_branching}};
  if (r.verify) j["verify"] = verify_json(*r.verify);
  const auto& last = r.steps.back();
  j["final"] = {{"loss", last.loss},
                {"lm_loss", last.lm_loss},
                {"lm_loss_above_floor", last.lm_loss - r.entropy_floor}};
  return j;
}

}  // namespace paraxis::driver
