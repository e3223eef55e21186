// Enumerates configurations for a machine, rejects those that break a rule or do not fit in
// memory, and ranks the rest by predicted step time.
#include "perfmodel/planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "config/config_rules.hpp"
#include "perfmodel/flops.hpp"

namespace paraxis::perfmodel {

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int k = 1; k <= n; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

void validate(const PlanRequest& r, const Machine& mc) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("plan: " + what); };
  if (mc.devices_per_node < 1 || mc.nodes < 1)
    fail("machine has " + std::to_string(mc.devices_per_node) + " devices per node and " +
         std::to_string(mc.nodes) + " nodes; expected >= 1 of each");
  if (!(mc.peak_flops > 0)) fail("machine peak_flops must be > 0");
  if (!(mc.memory_bytes > 0)) fail("machine memory_bytes must be > 0");
  if (!(mc.achievable_fraction > 0) || mc.achievable_fraction > 1)
    fail("achievable_fraction = " + std::to_string(mc.achievable_fraction) +
         ", expected in (0, 1]");
  // The model and the batch on their own (one rank): every configuration would break these.
  model::TrainConfig t;
  t.global_batch = r.global_batch;
  for (const auto& v : config::rule_violations(r.model, t, config::ParallelConfig{}, 0))
    fail(v.keys.front() + ": " + v.message);
  if (r.recomputes.empty()) fail("no recompute mode to try, expected at least one");
  for (int z : r.zero_stages)
    if (z < 0 || z > 3) fail("zero stage " + std::to_string(z) + ", expected 0 .. 3");
}

// The first configuration rule `c` breaks (config_rules.hpp), or "".
std::string rule_problem(const model::ModelConfig& m, const Scenario& c) {
  const auto v = config::rule_violations(m, c.train(), c, 0);
  return v.empty() ? std::string() : v.front().message;
}

}  // namespace

bool group_is_intra_node(int stride, int size, int devices_per_node) {
  if (size <= 1) return true;
  const long span = static_cast<long>(stride) * size;
  return span <= devices_per_node && devices_per_node % span == 0;
}

AxisTiers axis_tiers(const Scenario& c, int dpn) {
  AxisTiers t;
  t.tp = group_is_intra_node(1, c.tp, dpn);
  t.pp = group_is_intra_node(c.tp, c.pp, dpn);
  t.dp = group_is_intra_node(c.tp * c.pp, c.dp, dpn);
  t.ep = group_is_intra_node(c.tp * c.pp, c.ep, dpn);
  return t;
}

AxisLinks axis_links(const Scenario& c, const Machine& mc) {
  const AxisTiers t = axis_tiers(c, mc.devices_per_node);
  auto pick = [&](bool intra) { return intra ? mc.intra_node : mc.inter_node; };
  return {pick(t.tp), pick(t.pp), pick(t.dp), pick(t.ep)};
}

std::vector<int> micro_batch_candidates(int sequences_per_replica, int max_values) {
  const auto all = divisors(std::max(sequences_per_replica, 1));
  const int n = static_cast<int>(all.size());
  if (max_values < 1 || n <= max_values) return all;
  std::vector<int> out;
  if (max_values == 1) return {all.front()};
  for (int i = 0; i < max_values; ++i) {
    const int idx =
        static_cast<int>(std::lround(static_cast<double>(i) * (n - 1) / (max_values - 1)));
    if (out.empty() || out.back() != all[idx]) out.push_back(all[idx]);
  }
  return out;
}

std::string format_gb(double bytes) {
  const double gb = bytes / 1e9;
  char buf[64];
  if (std::fabs(gb - std::round(gb)) < 0.05)
    std::snprintf(buf, sizeof buf, "%.0f GB", std::round(gb));
  else
    std::snprintf(buf, sizeof buf, "%.1f GB", gb);
  return buf;
}

Plan plan(const PlanRequest& r, const Machine& mc) {
  validate(r, mc);
  const model::ModelConfig& m = r.model;
  const int devices = mc.devices();
  const double rate = mc.peak_flops * mc.achievable_fraction;
  const double flops = step_flops(m, r.global_batch);
  Plan out;
  for (int tp : divisors(devices))
    for (int pp : divisors(devices / tp)) {
      const int dp = devices / (tp * pp);
      const std::vector<int> eps = m.moe.experts > 0 ? divisors(dp) : std::vector<int>{1};
      for (int ep : eps) {
        Scenario base;
        base.tp = tp;
        base.pp = pp;
        base.dp = dp;
        base.ep = ep;
        base.global_batch = r.global_batch;
        base.precision = r.precision;
        base.bucket_mb = r.bucket_mb;
        base.overlap = r.overlap;
        if (const std::string problem = rule_problem(m, base); !problem.empty()) {
          out.rejected.push_back({base, problem});  // with micro_batch 1: no micro-batch fits
          continue;
        }
        const std::vector<bool> sps = tp > 1 && r.try_sequence_parallel
                                          ? std::vector<bool>{false, true}
                                          : std::vector<bool>{false};
        for (int mb : micro_batch_candidates(r.global_batch / dp, r.max_micro_batch_values))
          for (bool sp : sps)
            for (auto kind : r.schedules) {
              // Without a pipeline the schedules coincide but for gpipe keeping every
              // micro-batch's activations: one entry (1f1b, when asked for) is enough.
              if (pp == 1 && kind != schedule::ScheduleKind::one_f_one_b &&
                  std::find(r.schedules.begin(), r.schedules.end(),
                            schedule::ScheduleKind::one_f_one_b) != r.schedules.end())
                continue;
              std::vector<int> vs{1};
              if (kind == schedule::ScheduleKind::interleaved) {
                vs.clear();
                if (pp > 1)
                  for (int v = 2; v <= r.max_virtual_stages; ++v) vs.push_back(v);
              }
              for (int v : vs)
                for (int zero : r.zero_stages) {
                  // A stage that runs as another (config::ParallelConfig::effective_zero:
                  // with one data-parallel rank every stage is 0) is that one, listed once.
                  Scenario c = base;
                  c.zero = zero;
                  if (c.effective_zero() != zero &&
                      std::find(r.zero_stages.begin(), r.zero_stages.end(), 0) !=
                          r.zero_stages.end())
                    continue;
                  c.micro_batch = mb;
                  c.sequence_parallel = sp;
                  c.schedule = kind;
                  c.virtual_stages = v;
                  const std::string problem = rule_problem(m, c);
                  if (!problem.empty()) {
                    out.rejected.push_back({c, problem});
                    continue;
                  }
                  for (auto rc : r.recomputes) {
                    c.recompute = rc;
                    c.recompute_layers = 0;  // full: every block
                    PlanEntry e;
                    e.config = c;
                    e.memory = largest_rank_memory(m, c, {}, &e.memory_stage);
                    if (e.memory.peak > mc.memory_bytes) {
                      out.rejected.push_back({c, "memory " + format_gb(e.memory.peak) + " > " +
                                                     format_gb(mc.memory_bytes)});
                      continue;
                    }
                    e.intra_node = axis_tiers(c, mc.devices_per_node);
                    StepTimeInputs in;
                    in.flops_per_s = rate;
                    in.links = axis_links(c, mc);
                    in.all_reduce = r.all_reduce;
                    e.time = predict_step_time(m, c, in);
                    e.tokens_per_s =
                        static_cast<double>(r.global_batch) * m.seq_len / e.time.step_time;
                    e.model_flops_per_s = flops / e.time.step_time;
                    e.mfu = mfu(e.model_flops_per_s, mc.peak_flops, devices);
                    out.ranked.push_back(std::move(e));
                  }
                }
            }
      }
    }
  std::stable_sort(out.ranked.begin(), out.ranked.end(),
                   [](const PlanEntry& a, const PlanEntry& b) {
                     if (a.time.step_time != b.time.step_time)
                       return a.time.step_time < b.time.step_time;
                     return a.memory.peak < b.memory.peak;
                   });
  return out;
}

}  // namespace paraxis::perfmodel
