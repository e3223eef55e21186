// Calibration of the compute: the point's own trainer and step. On a grid, the training
// step's engine (parallel/parallel_trainer.hpp, make_compute_only_trainer) on this rank's
// shard, every collective and transfer replaced by a local copy
// (parallel/local_communicator.hpp): its schedule executor, ZeRO, recomputation and split
// backward run as in training, and each action's compute is its span less the time blocked in
// those copies, as the step itself counts compute (StepResult::compute_s). Without a grid, the
// single-rank trainer the point runs (nothing to copy).
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/statistics.hpp"
#include "driver/calibration_detail.hpp"
#include "model/trainer.hpp"
#include "parallel/parallel_trainer.hpp"
#include "parallel/process_grid.hpp"
#include "parallel/watchdog.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver {

namespace {

// Compute seconds of every action of the timed steps: per local chunk, forward, backward (B
// of a split backward) and W; the optimizer step's, once a step; with a pipeline, each step's
// engine time per action (engine_overhead).
struct ActionSamples {
  std::vector<std::vector<double>> forward, backward, weight;
  std::vector<double> optimizer, overhead;
  // Per local chunk, per timed step, the seconds of its forward, backward and W actions.
  std::vector<std::vector<double>> forward_step, backward_step, weight_step;
};

// The engine's own seconds per compute action in a compute-only step's pipelined part: its span
// less its compute actions (fenced, as the step's busy time) and less the transfers' copies (the
// pipeline's sends and receives, which the model prices as point-to-point times), over the
// actions: the schedule executor between actions (posting and testing the transfers, the
// watchdog's marks, a micro-batch's tokens loaded), and the barrier's edges.
double engine_overhead(const model::StepResult& r) {
  const int actions = r.forward_actions + r.backward_actions + r.backward_weight_actions;
  double copies = 0;
  for (const auto& c : r.comm_spans)
    if (std::string(c.axis) == "pp" &&
        (std::string(c.op) == "isend" || std::string(c.op) == "irecv"))
      copies += c.exposed;
  const double rest = r.pipeline_span_s - r.pipeline_busy_s - copies;
  return actions > 0 ? std::max(0.0, rest) / actions : 0.0;
}

// 1 + timed_steps steps of the trainer (the calibration: 5), the first a warm-up: the chunks'
// compute with the memory traffic of the step (activation sets in flight, gradients accumulating),
// not one micro-batch in a warm cache.
ActionSamples time_steps(model::Trainer& engine, std::size_t chunks, int timed_steps) {
  ActionSamples s;
  s.forward.resize(chunks);
  s.backward.resize(chunks);
  s.weight.resize(chunks);
  for (auto* per_step : {&s.forward_step, &s.backward_step, &s.weight_step})
    per_step->assign(chunks, std::vector<double>(static_cast<std::size_t>(timed_steps), 0.0));
  for (int rep = 0; rep <= timed_steps; ++rep) {
    const model::StepResult r = engine.step();
    if (rep == 0) continue;
    if (r.pipeline_span_s > 0) s.overhead.push_back(engine_overhead(r));
    for (const auto& sp : r.spans) {
      const double t = sp.end - sp.begin - sp.blocked_s;
      const std::string name = sp.name;
      if (name == "optimizer") s.optimizer.push_back(t);
      if (sp.chunk < 0 || static_cast<std::size_t>(sp.chunk) >= chunks) continue;
      const auto add = [&](std::vector<std::vector<double>>& all,
                           std::vector<std::vector<double>>& per_step) {
        all[sp.chunk].push_back(t);
        per_step[sp.chunk][rep - 1] += t;
      };
      if (name == "forward") add(s.forward, s.forward_step);
      if (name == "backward") add(s.backward, s.backward_step);
      if (name == "backward_weight") add(s.weight, s.weight_step);
    }
  }
  return s;
}

// The trainer the point trains with, timed: the parallel engine with local copies for its
// collectives on a grid (parallel::make_compute_only_trainer), the single-rank reference
// itself without one (model::make_trainer: it communicates nothing).
std::unique_ptr<model::Trainer> timed_trainer(const RunConfig& cfg,
                                              const parallel::ProcessGrid* grid) {
  if (!grid) return model::make_trainer(cfg.model, cfg.train);
  return parallel::make_compute_only_trainer(cfg.model, cfg.train, cfg.parallel, cfg.comm, *grid);
}

// The optimizer's time from its samples, one a step (five in the calibration): the second fastest.
// On a shared machine a time slice lost inside its sub-millisecond interval multiplies it (the
// single-rank step's own optimizer at load 18 on 2 cores: 0.77 ms, or 13-25 ms in 4 of 8 steps); a
// median of the samples, each after a step's compute, fell on such a sample in 2 of 3 calibrations
// there. The second fastest stands up to two lost slices and to one sample faster than the
// rest.
double optimizer_time(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return samples[std::min<std::size_t>(1, samples.size() - 1)];
}

// A pipeline's samples for the replay of their variation and its engine time per action (its
// mean over the timed steps, repeated_action_time), per model chunk: this rank's chunks, every
// other chunk as many zeros (reduce_over_ranks keeps each sample's slowest holder).
void keep_pipeline_samples(const ActionSamples& s, const std::vector<int>& global_of, int total,
                           bool split, ComputeCalibration& out) {
  std::size_t n = 0;
  for (const auto& f : s.forward) n = std::max(n, f.size());
  const std::vector<double> none(n, 0.0);
  out.forward_samples_s.assign(total, none);
  out.backward_samples_s.assign(total, none);
  if (split) out.backward_weight_samples_s.assign(total, none);
  out.action_overhead_s.assign(total, 0.0);
  const double overhead = repeated_action_time(s.overhead);
  const auto keep = [n](std::vector<double>& to, const std::vector<double>& from) {
    if (from.size() != n)
      throw std::logic_error("calibration: a chunk timed " + std::to_string(from.size()) +
                             " actions, another " + std::to_string(n));
    to = from;
  };
  for (std::size_t c = 0; c < global_of.size(); ++c) {
    keep(out.forward_samples_s[global_of[c]], s.forward[c]);
    keep(out.backward_samples_s[global_of[c]], s.backward[c]);
    if (split) keep(out.backward_weight_samples_s[global_of[c]], s.weight[c]);
    out.action_overhead_s[global_of[c]] = overhead;
  }
}

// Per model chunk (zeros for the chunks this rank does not hold), per timed step, this rank's
// seconds in the chunk's forward, backward and W actions: what the spread between the chunk's
// holders is read from (holder_spread).
struct StepSeconds {
  std::vector<std::vector<double>> forward, backward, weight;
};

// This rank's chunks (their model chunk indices) timed by the step, each action's mean over
// every micro-batch of the timed steps (five in the calibration) less the samples that lost a time
// slice (repeated_action_time: the step adds its actions up, so the mean, not the median, predicts
// it); per_step: their seconds per timed step. Memory: the peak the step held.
ComputeCalibration time_shard(const RunConfig& cfg, const parallel::ProcessGrid* grid,
                              int timed_steps, StepSeconds& per_step) {
  const auto& p = cfg.parallel;
  std::vector<int> global_of;
  parallel::shard_layout_of(cfg.model, p, grid ? grid->coords() : parallel::GridCoords{},
                            &global_of);
  ActionSamples s;
  std::size_t peak = 0;
  {
    const auto trainer = timed_trainer(cfg, grid);
    s = time_steps(*trainer, global_of.size(), timed_steps);
    peak = trainer->memory().peak_bytes;
  }
  ComputeCalibration out;
  const int total = p.pp * p.virtual_stages;
  out.forward_s.assign(total, 0.0);
  out.backward_s.assign(total, 0.0);
  out.backward_weight_s.assign(total, 0.0);
  const bool split = schedule::splits_backward(p.schedule);
  for (std::size_t c = 0; c < global_of.size(); ++c) {
    out.forward_s[global_of[c]] = repeated_action_time(s.forward[c]);
    out.backward_s[global_of[c]] = repeated_action_time(s.backward[c]);
    if (split) out.backward_weight_s[global_of[c]] = repeated_action_time(s.weight[c]);
  }
  const std::vector<double> none(static_cast<std::size_t>(timed_steps), 0.0);
  per_step = {{static_cast<std::size_t>(total), none},
              {static_cast<std::size_t>(total), none},
              {static_cast<std::size_t>(total), none}};
  for (std::size_t c = 0; c < global_of.size(); ++c) {
    per_step.forward[global_of[c]] = s.forward_step[c];
    per_step.backward[global_of[c]] = s.backward_step[c];
    per_step.weight[global_of[c]] = s.weight_step[c];
  }
  out.optimizer_s = optimizer_time(s.optimizer);
  out.peak_bytes = peak;
  if (p.pp > 1) keep_pipeline_samples(s, global_of, total, split, out);
  return out;
}

// A pipeline's samples and engine time per action, each the slowest holder's (the ranks that hold
// a chunk run its actions at once, sample by sample); every rank has the same lengths.
void reduce_pipeline_samples(ComputeCalibration& c) {
  namespace wd = parallel::watchdog;
  const auto reduce = [](std::vector<double>& v) {
    wd::all_reduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX,
                   MPI_COMM_WORLD, "calibration: reduce the pipeline's action samples");
  };
  for (auto* per_chunk :
       {&c.forward_samples_s, &c.backward_samples_s, &c.backward_weight_samples_s})
    for (auto& v : *per_chunk) reduce(v);
  if (!c.action_overhead_s.empty()) reduce(c.action_overhead_s);
}

// The holders' spread per chunk (calibration_detail::median_spread) from every rank's seconds
// per timed step (zeros for the chunks it does not hold).
std::vector<double> holder_spread(const std::vector<std::vector<double>>& per_step,
                                  const std::vector<double>& holders, int actions) {
  namespace wd = parallel::watchdog;
  const std::size_t steps = per_step.empty() ? 0 : per_step.front().size();
  std::vector<double> slowest;
  for (const auto& v : per_step) slowest.insert(slowest.end(), v.begin(), v.end());
  std::vector<double> sum = slowest;
  const int n = static_cast<int>(slowest.size());
  wd::all_reduce(MPI_IN_PLACE, slowest.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                 "calibration: the slowest holder's seconds per step");
  wd::all_reduce(MPI_IN_PLACE, sum.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                 "calibration: the holders' seconds per step");
  return calibration_detail::median_spread(slowest, sum, holders, steps, actions);
}

// Every chunk's times from every rank that holds it: its tensor-parallel ranks, data-parallel
// replicas and expert-parallel ranks compute it at the same time and meet in their
// collectives. The mean is what a rank computes on average; the slowest, the step's critical
// path, is the mean plus the holders' spread (holder_spread; the others wait the difference
// where they meet). The optimizer's time from the slowest rank.
void reduce_over_ranks(ComputeCalibration& c, const StepSeconds& per_step, int actions) {
  const int n = static_cast<int>(c.forward_s.size());
  std::vector<double> holders(n, 0.0);
  for (int k = 0; k < n; ++k) holders[k] = c.forward_s[k] > 0 ? 1.0 : 0.0;
  namespace wd = parallel::watchdog;
  const char* what = "calibration: reduce the chunk times";
  const auto reduce = [&](std::vector<double>& v, MPI_Op op) {
    wd::all_reduce(MPI_IN_PLACE, v.data(), n, MPI_DOUBLE, op, MPI_COMM_WORLD, what);
  };
  reduce(holders, MPI_SUM);
  reduce(c.forward_mean_s, MPI_SUM);
  reduce(c.backward_mean_s, MPI_SUM);
  reduce(c.backward_weight_mean_s, MPI_SUM);
  const auto spread_f = holder_spread(per_step.forward, holders, actions);
  const auto spread_b = holder_spread(per_step.backward, holders, actions);
  const auto spread_w = holder_spread(per_step.weight, holders, actions);
  for (int k = 0; k < n; ++k) {
    const double h = std::max(holders[k], 1.0);
    c.forward_mean_s[k] /= h;
    c.backward_mean_s[k] /= h;
    c.backward_weight_mean_s[k] /= h;
    c.forward_s[k] = c.forward_mean_s[k] + spread_f[k];
    c.backward_s[k] = c.backward_mean_s[k] + spread_b[k];
    c.backward_weight_s[k] = c.backward_weight_mean_s[k] + spread_w[k];
  }
  reduce_pipeline_samples(c);
  wd::all_reduce(MPI_IN_PLACE, &c.optimizer_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                 "calibration: slowest optimizer time");
  unsigned long long peak = c.peak_bytes;
  wd::all_reduce(MPI_IN_PLACE, &peak, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD,
                 "calibration: largest peak memory");
  c.peak_bytes = static_cast<std::size_t>(peak);
}

}  // namespace

namespace calibration_detail {

std::string compute_key(const RunConfig& c) {
  std::ostringstream os;
  const auto& m = c.model;
  const auto& p = c.parallel;
  os << m.vocab << ' ' << m.seq_len << ' ' << m.hidden << ' ' << m.heads << ' ' << m.layers << ' '
     << m.ffn << ' ' << m.moe.experts << ' ' << m.moe.top_k << ' ' << m.moe.every << ' '
     << m.moe.capacity_factor << ' ' << m.moe.router_skew << " | " << c.train.micro_batch << ' '
     << model::to_string(c.train.precision) << ' ' << to_string(c.hardware.gemm) << " | " << p.tp
     << ' ' << p.pp << ' ' << p.dp << ' ' << p.ep << ' ' << p.zero << ' ' << p.virtual_stages << ' '
     << p.sequence_parallel << ' ' << config::to_string(p.order) << ' '
     << schedule::to_string(p.schedule) << ' ' << c.train.global_batch << " | "
     << model::to_string(m.attention) << ' ' << model::to_string(c.train.recompute) << ' '
     << c.train.recompute_layers << ' ' << c.comm.overlap << ' ' << c.comm.bucket_mb;
  for (int l : p.stage_layers) os << ' ' << l;
  return os.str();
}

std::vector<double> median_spread(const std::vector<double>& slowest,
                                  const std::vector<double>& sum,
                                  const std::vector<double>& holders, std::size_t steps,
                                  int actions) {
  std::vector<double> out(holders.size(), 0.0);
  for (std::size_t k = 0; k < holders.size(); ++k) {
    if (holders[k] < 2 || steps == 0) continue;
    std::vector<double> d;
    for (std::size_t j = 0; j < steps; ++j)
      d.push_back(slowest[k * steps + j] - sum[k * steps + j] / holders[k]);
    out[k] = median(d) / std::max(actions, 1);
  }
  return out;
}

ComputeCalibration calibrate_compute(const RunConfig& cfg, const parallel::ProcessGrid* grid,
                                     int timed_steps) {
  StepSeconds per_step;
  ComputeCalibration c = time_shard(cfg, grid, timed_steps, per_step);
  c.forward_mean_s = c.forward_s;
  c.backward_mean_s = c.backward_s;
  c.backward_weight_mean_s = c.backward_weight_s;
  if (grid)
    reduce_over_ranks(c, per_step, config::pipeline_shape(cfg.train, cfg.parallel).micro_batches);
  double busy = 0;
  for (std::size_t k = 0; k < c.forward_s.size(); ++k)
    busy += c.forward_mean_s[k] + c.backward_mean_s[k] + c.backward_weight_mean_s[k];
  const double tokens = static_cast<double>(cfg.train.micro_batch) * cfg.model.seq_len;
  // Model FLOPs of one micro-batch's forward + backward over every chunk, per rank.
  const double flops = 3.0 * model::forward_flops_per_token(cfg.model) * tokens /
                       static_cast<double>(cfg.parallel.tp);
  c.flops_per_s = busy > 0 ? flops / busy : 0;
  return c;
}

}  // namespace calibration_detail

}  // namespace paraxis::driver
