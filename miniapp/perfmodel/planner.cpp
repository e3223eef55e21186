// Enumerates configurations for a machine, rejects those that break a rule or do not fit in
// memory, and ranks the rest by predicted step time.
#include "perfmodel/planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "config/config_rules.hpp"
#include "config/divisors.hpp"
#include "perfmodel/compute_efficiency.hpp"
#include "perfmodel/flops.hpp"
#include "perfmodel/model_chunks.hpp"
#include "perfmodel/shard_params.hpp"

namespace paraxis::perfmodel {

namespace {

using config::divisors;

// The machine's compute model with its own peak.
ComputeEfficiency machine_compute(const Machine& mc) {
  ComputeEfficiency e = mc.compute;
  e.peak_flops = mc.peak_flops;
  return e;
}

void validate(const PlanRequest& r, const Machine& mc) {
  // No "plan:" here: the command that calls the planner names itself.
  auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  if (mc.devices_per_node < 1 || mc.nodes < 1)
    fail("machine has " + std::to_string(mc.devices_per_node) + " devices per node and " +
         std::to_string(mc.nodes) + " nodes; expected >= 1 of each");
  if (!(mc.peak_flops > 0)) fail("machine peak_flops must be > 0");
  if (!(mc.memory_bytes > 0)) fail("machine memory_bytes must be > 0");
  if (!(mc.achievable_fraction > 0) || mc.achievable_fraction > 1)
    fail("achievable_fraction = " + std::to_string(mc.achievable_fraction) +
         ", expected in (0, 1]");
  if (mc.compute.memory_bytes_per_s > 0) perfmodel::validate(machine_compute(mc));
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

// The model's balanced cut into pipeline chunks (model::split_layers: a min-max dynamic
// programme, O(chunks * layers^2)), once per chunk count. The memory and time models cut the
// model again for every stage of every configuration, which dominated a large search (95 % of
// it for a 128-layer model on 3,072 devices); given the cut as stage_layers, split_layers only
// checks it, and the chunks are the same.
class ChunkCuts {
 public:
  explicit ChunkCuts(const model::ModelConfig& m) : m_(m) {}
  const std::vector<int>& layers_per_chunk(int chunks) {
    auto it = cuts_.find(chunks);
    if (it == cuts_.end()) {
      std::vector<int> counts;
      for (const auto& ch : split_layers(m_, chunks)) counts.push_back(ch.layers());
      it = cuts_.emplace(chunks, std::move(counts)).first;
    }
    return it->second;
  }

 private:
  const model::ModelConfig& m_;
  std::map<int, std::vector<int>> cuts_;
};

// Parts of the memory and time models that depend only on one shape (tp, pp, dp, ep) and a few
// of the configuration's fields, made once per shape and reused by every configuration of it
// (micro-batch size, sequence parallelism, schedule, ZeRO, recomputation): the schedule,
// validated once and walked once per stage (by kind, micro-batches, v); the chunk cut (by v);
// every stage's parameter shard (by sequence parallelism, v and ZeRO's padding multiple).
// Remaking them per configuration was nearly all of a large search's time. The configurations
// given have the cut of ChunkCuts as stage_layers.
class ShapeParts {
 public:
  struct Pipeline {
    schedule::Schedule schedule;
    ScheduleWalk walk;
  };
  explicit ShapeParts(const model::ModelConfig& m) : m_(m) {}
  void clear() {
    pipelines_.clear();
    chunks_.clear();
    units_.clear();
    replays.clear();
  }
  // The replays of the shape's schedules (pipeline(x).schedule), which live as long.
  ReplayMemo replays;
  const Pipeline& pipeline(const Scenario& x) {
    const auto shape = x.pipeline_shape();
    const auto key =
        std::make_tuple(static_cast<int>(x.schedule), shape.micro_batches, shape.virtual_stages);
    auto it = pipelines_.find(key);
    if (it == pipelines_.end()) {
      Pipeline p;
      p.schedule = schedule::make_schedule(x.schedule, shape);
      // replay_schedule's check, made once: predict_step_time then replays without it.
      const std::string problem = schedule::validate_schedule(p.schedule, shape);
      if (!problem.empty()) throw std::invalid_argument("replay_schedule: " + problem);
      p.walk = walk_schedule(x, p.schedule);
      it = pipelines_.emplace(key, std::move(p)).first;
    }
    return it->second;
  }
  const std::vector<ChunkLayers>& chunks(const Scenario& x) {
    auto it = chunks_.find(x.chunks());
    if (it == chunks_.end())
      it = chunks_.emplace(x.chunks(), split_layers(m_, x.chunks(), x.stage_layers)).first;
    return it->second;
  }
  const std::vector<std::vector<ParamUnit>>& units(const Scenario& x) {
    const int multiple = x.effective_zero() >= 1 ? x.dp : 1;
    const auto key = std::make_tuple(x.sequence_parallel, x.virtual_stages, multiple);
    auto it = units_.find(key);
    if (it == units_.end()) {
      std::vector<std::vector<ParamUnit>> all;
      for (int s = 0; s < x.pp; ++s) all.push_back(shard_units(m_, x, s));
      it = units_.emplace(key, std::move(all)).first;
    }
    return it->second;
  }

 private:
  const model::ModelConfig& m_;
  std::map<std::tuple<int, int, int>, Pipeline> pipelines_;
  std::map<int, std::vector<ChunkLayers>> chunks_;
  std::map<std::tuple<bool, int, int>, std::vector<std::vector<ParamUnit>>> units_;
};

// The largest stage's parameters, gradients and optimizer state (memory.hpp's
// model_state_bytes, which the memory model adds into every stage's peak): a lower bound of the
// configuration's peak memory that depends on neither the micro-batch, the schedule nor
// recomputation. When it alone exceeds the device the configuration is rejected without the
// full memory model, whose schedule walk is most of a large search's time.
double model_state_floor(const model::ModelConfig& m, const Scenario& x, ShapeParts* parts) {
  double most = 0;
  for (int s = 0; s < x.pp; ++s)
    most = std::max(
        most, model_state_bytes(parts ? parts->units(x)[s] : shard_units(m, x, s), x).total());
  return most;
}

// Memory, and unless it does not fit and `always_time` is false, the step time of `c`, which
// satisfies every rule. `reason` receives why it is rejected ("" when it fits).
// `floors` (when given) keeps model_state_floor per (zero, sp, v) of one shape (tp, pp, dp, ep):
// a configuration over it is rejected on it alone. `parts` (when given) supplies the shape's
// schedules, cut and shards.
using StateFloors = std::map<std::tuple<int, bool, int>, double>;
PlanEntry predict(const PlanRequest& r, const Machine& mc, const Scenario& c, ChunkCuts& cuts,
                  bool always_time, std::string& reason, StateFloors* floors = nullptr,
                  ShapeParts* parts = nullptr) {
  const model::ModelConfig& m = r.model;
  Scenario x = c;  // what the models see: the cut given when the configuration leaves it open
  if (x.stage_layers.empty()) x.stage_layers = cuts.layers_per_chunk(x.chunks());
  PlanEntry e;
  e.config = c;
  reason.clear();
  if (floors && !always_time) {
    const auto key = std::make_tuple(x.zero, x.sequence_parallel, x.virtual_stages);
    auto it = floors->find(key);
    if (it == floors->end()) it = floors->emplace(key, model_state_floor(m, x, parts)).first;
    if (it->second > mc.memory_bytes) {
      reason = "memory " + format_gb(it->second) + " > " + format_gb(mc.memory_bytes) +
               " (parameters, gradients and optimizer state alone)";
      return e;
    }
  }
  const ShapeParts::Pipeline* pipe = parts ? &parts->pipeline(x) : nullptr;
  const std::vector<ChunkLayers>* chunks = parts ? &parts->chunks(x) : nullptr;
  const std::vector<std::vector<ParamUnit>>* units = parts ? &parts->units(x) : nullptr;
  e.memory = parts ? largest_rank_memory(m, x, PrebuiltStages{&pipe->walk, chunks, units}, {},
                                         &e.memory_stage)
                   : largest_rank_memory(m, x, {}, &e.memory_stage);
  if (e.memory.peak > mc.memory_bytes)
    reason = "memory " + format_gb(e.memory.peak) + " > " + format_gb(mc.memory_bytes);
  if (!reason.empty() && !always_time) return e;
  e.intra_node = axis_tiers(x, mc.devices_per_node);
  StepTimeInputs in;
  in.flops_per_s = mc.peak_flops * mc.achievable_fraction;
  in.links = axis_links(x, mc);
  in.all_reduce = r.all_reduce;
  in.blocking_pipeline_transfers = mc.blocking_pipeline_transfers;
  if (parts) {
    in.schedule = &pipe->schedule;
    in.chunks = chunks;
    in.stage_units = units;
    in.replay_memo = &parts->replays;
  }
  // Work-dependent compute (compute_efficiency.hpp) when the machine gives a bandwidth.
  if (mc.compute.memory_bytes_per_s > 0) set_compute_times(machine_compute(mc), m, x, in);
  e.time = predict_step_time(m, x, in);
  const double tokens = static_cast<double>(x.global_batch) * m.seq_len;
  e.tokens_per_s = tokens / e.time.step_time;
  e.model_flops_per_s = step_flops(m, x.global_batch) / e.time.step_time;
  e.mfu = mfu(e.model_flops_per_s, mc.peak_flops, x.world());
  e.hardware_flops_per_s = hardware_step_flops(m, x) / e.time.step_time;
  e.hfu = mfu(e.hardware_flops_per_s, mc.peak_flops, x.world());
  return e;
}

}  // namespace

Evaluation evaluate(const PlanRequest& r, const Machine& mc, const Scenario& c) {
  validate(r, mc);
  Evaluation out;
  out.entry.config = c;
  out.violations = config::rule_violations(r.model, c.train(), c, 0);
  if (!out.violations.empty()) {
    out.reason = out.violations.front().message;
    return out;
  }
  ChunkCuts cuts(r.model);
  out.entry = predict(r, mc, c, cuts, true, out.reason);
  return out;
}

bool group_is_intra_node(int stride, int size, int devices_per_node) {
  if (size <= 1) return true;
  const long span = static_cast<long>(stride) * size;
  return span <= devices_per_node && devices_per_node % span == 0;
}

AxisTiers axis_tiers(const Scenario& c, int dpn) {
  // A group's stride is the product of the axes inside it in the rank order
  // (parallel/process_grid.cpp): tp-pp-dp puts the pipeline inside data parallelism, tp-dp-pp
  // (Megatron-LM's order) data parallelism, and with it the expert groups, inside the pipeline.
  const bool dp_inner = c.order == config::RankOrder::tp_dp_pp;
  const int dp_stride = dp_inner ? c.tp : c.tp * c.pp;
  AxisTiers t;
  t.tp = group_is_intra_node(1, c.tp, dpn);
  t.pp = group_is_intra_node(dp_inner ? c.tp * c.dp : c.tp, c.pp, dpn);
  t.dp = group_is_intra_node(dp_stride, c.dp, dpn);
  t.ep = group_is_intra_node(dp_stride, c.ep, dpn);
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

namespace {

struct Shape {
  int tp, pp, ep;
};

// Every shape (tp, pp, ep) of `devices`: ep divides the data-parallel degree of a MoE model.
std::vector<Shape> parallel_shapes(const model::ModelConfig& m, int devices) {
  std::vector<Shape> shapes;
  for (int tp : divisors(devices))
    for (int pp : divisors(devices / tp)) {
      const int dp = devices / (tp * pp);
      for (int ep : m.moe.experts > 0 ? divisors(dp) : std::vector<int>{1})
        shapes.push_back({tp, pp, ep});
    }
  return shapes;
}

bool asks_for(const PlanRequest& r, schedule::ScheduleKind kind) {
  return std::find(r.schedules.begin(), r.schedules.end(), kind) != r.schedules.end();
}

// The virtual stages searched for `kind` on pp stages (none: an interleaved schedule without a
// pipeline).
std::vector<int> virtual_stage_candidates(const PlanRequest& r, schedule::ScheduleKind kind,
                                          int pp) {
  if (kind != schedule::ScheduleKind::interleaved) return {1};
  std::vector<int> vs;
  if (pp > 1)
    for (int v = 2; v <= r.max_virtual_stages; ++v) vs.push_back(v);
  return vs;
}

// One shape's search: every micro-batch, sequence parallelism, schedule, virtual stages, ZeRO
// stage and recomputation, each configuration ranked or rejected into out.
class ShapeSearch {
 public:
  ShapeSearch(const PlanRequest& r, const Machine& mc, Plan& out)
      : r_(r), mc_(mc), m_(r.model), cuts_(r.model), parts_(r.model), out_(out) {}

  void search(const Shape& shape) {
    floors_.clear();
    parts_.clear();
    const int dp = mc_.devices() / (shape.tp * shape.pp);
    Scenario base;
    base.tp = shape.tp;
    base.pp = shape.pp;
    base.dp = dp;
    base.ep = shape.ep;
    base.global_batch = r_.global_batch;
    base.precision = r_.precision;
    base.bucket_mb = r_.bucket_mb;
    base.overlap = r_.overlap;
    if (const std::string problem = rule_problem(m_, base); !problem.empty()) {
      out_.rejected.push_back({base, problem});  // with micro_batch 1: no micro-batch fits
      return;
    }
    const std::vector<bool> sps = shape.tp > 1 && r_.try_sequence_parallel
                                      ? std::vector<bool>{false, true}
                                      : std::vector<bool>{false};
    for (int mb : micro_batch_candidates(r_.global_batch / dp, r_.max_micro_batch_values))
      for (bool sp : sps)
        for (auto kind : r_.schedules) {
          // Without a pipeline the schedules coincide but for gpipe keeping every
          // micro-batch's activations: one entry (1f1b, when asked for) is enough.
          if (shape.pp == 1 && kind != schedule::ScheduleKind::one_f_one_b &&
              asks_for(r_, schedule::ScheduleKind::one_f_one_b))
            continue;
          for (int v : virtual_stage_candidates(r_, kind, shape.pp))
            for (int zero : r_.zero_stages) search_zero(base, mb, sp, kind, v, zero);
        }
  }

 private:
  void search_zero(const Scenario& base, int mb, bool sp, schedule::ScheduleKind kind, int v,
                   int zero) {
    // A stage that runs as another (config::ParallelConfig::effective_zero: with one
    // data-parallel rank every stage is 0) is that one, listed once.
    Scenario c = base;
    c.zero = zero;
    if (c.effective_zero() != zero &&
        std::find(r_.zero_stages.begin(), r_.zero_stages.end(), 0) != r_.zero_stages.end())
      return;
    c.micro_batch = mb;
    c.sequence_parallel = sp;
    c.schedule = kind;
    c.virtual_stages = v;
    const std::string problem = rule_problem(m_, c);
    if (!problem.empty()) {
      out_.rejected.push_back({c, problem});
      return;
    }
    for (auto rc : r_.recomputes) {
      c.recompute = rc;
      c.recompute_layers = 0;  // full: every block
      // The rules above held without recomputation; some modes break a rule of their own
      // (zb-h1 with full).
      if (rc != model::Recompute::none) {
        if (const std::string broken = rule_problem(m_, c); !broken.empty()) {
          out_.rejected.push_back({c, broken});
          continue;
        }
      }
      PlanEntry e = predict(r_, mc_, c, cuts_, false, reason_, &floors_, &parts_);
      if (!reason_.empty())
        out_.rejected.push_back({c, reason_});
      else
        out_.ranked.push_back(std::move(e));
    }
  }

  const PlanRequest& r_;
  const Machine& mc_;
  const model::ModelConfig& m_;
  ChunkCuts cuts_;
  StateFloors floors_;
  ShapeParts parts_;
  std::string reason_;
  Plan& out_;
};

}  // namespace

Plan plan(const PlanRequest& r, const Machine& mc, const PlanProgress& progress) {
  validate(r, mc);
  // The shapes (tp, pp, ep) first: their count is the progress's total.
  const std::vector<Shape> shapes = parallel_shapes(r.model, mc.devices());
  Plan out;
  ShapeSearch search(r, mc, out);
  for (std::size_t si = 0; si < shapes.size(); ++si) {
    if (progress) progress(si, shapes.size());
    search.search(shapes[si]);
  }
  if (progress) progress(shapes.size(), shapes.size());
  std::stable_sort(out.ranked.begin(), out.ranked.end(),
                   [](const PlanEntry& a, const PlanEntry& b) {
                     if (a.time.step_time != b.time.step_time)
                       return a.time.step_time < b.time.step_time;
                     return a.memory.peak < b.memory.peak;
                   });
  return out;
}

}  // namespace paraxis::perfmodel
