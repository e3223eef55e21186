// What each rank measures per step, gathered to rank 0 (rank_metric_names, rank_metrics), and
// the pipeline figures of a point taken from them: per-stage action times gathered here, the
// schedule replayed by the schedule layer (schedule/stage_time_replay.hpp).
#include <algorithm>

#include "analysis/statistics.hpp"
#include "driver/results.hpp"
#include "parallel/process_grid.hpp"
#include "schedule/pipeline_schedule.hpp"
#include "schedule/stage_time_replay.hpp"

namespace paraxis::driver {

const std::vector<std::string>& rank_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{"step_s",
                               "forward_s",
                               "backward_s",
                               "optimizer_s",
                               "compute_s",
                               "bubble_fraction",
                               "pipeline_span_s",
                               "pipeline_busy_s",
                               "forward_actions",
                               "backward_actions",
                               "peak_live_activations",
                               "backward_weight_s",
                               "backward_weight_actions"};
    for (const char* axis : {"tp", "pp", "dp", "ep"})
      for (const char* f : {"time_s", "exposed_s", "bytes", "calls"})
        n.push_back(std::string("comm.") + axis + "." + f);
    // Wait for the group's last rank (docs/diagnosis.md, "Wait time"); after the others so
    // the earlier names keep their positions.
    for (const char* axis : {"tp", "pp", "dp", "ep"})
      n.push_back(std::string("comm.") + axis + ".wait_s");
    n.push_back("injected_s");  // fault.slow_rank's added compute (0: not slowed)
    return n;
  }();
  return names;
}

std::vector<double> rank_metrics(const model::StepResult& s) {
  std::vector<double> v{s.time_s,
                        s.forward_s,
                        s.backward_s,
                        s.optimizer_s,
                        s.compute_s,
                        s.bubble_fraction,
                        s.pipeline_span_s,
                        s.pipeline_busy_s,
                        static_cast<double>(s.forward_actions),
                        static_cast<double>(s.backward_actions),
                        static_cast<double>(s.peak_live_activations),
                        s.backward_weight_s,
                        static_cast<double>(s.backward_weight_actions)};
  for (const char* axis : {"tp", "pp", "dp", "ep"}) {
    const auto it = s.comm.find(axis);
    const model::CommTotals t = it == s.comm.end() ? model::CommTotals{} : it->second;
    v.insert(v.end(),
             {t.time_s, t.exposed_s, static_cast<double>(t.bytes), static_cast<double>(t.calls)});
  }
  for (const char* axis : {"tp", "pp", "dp", "ep"}) {
    const auto it = s.comm.find(axis);
    v.push_back(it == s.comm.end() ? 0.0 : it->second.wait_s);
  }
  v.push_back(s.injected_s);
  return v;
}

namespace {
// Median over measured steps of a per-rank metric (rank_metric_names order).
double rank_median(const PointResult& r, int rank, const std::string& name) {
  const auto& names = rank_metric_names();
  const auto k =
      static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  std::vector<double> v;
  for (std::size_t s = 0; s < r.steps.size(); ++s)
    if (is_measured_step(r.steps[s].step, r.point.config.train.warmup_steps))
      v.push_back(r.rank_steps.at(rank).at(s).at(k));
  return median(v);
}
}  // namespace

PipelineFigures pipeline_figures(const PointResult& r) {
  const auto& c = r.point.config;
  const auto& p = c.parallel;
  PipelineFigures f;
  const schedule::PipelineShape shape = config::pipeline_shape(c.train, p);
  f.micro_batches = shape.micro_batches;
  f.ideal = schedule::ideal_bubble_fraction(p.schedule, shape);
  if (r.rank_steps.empty()) return f;
  // Measured: each rank's bubble (median over measured steps), and their mean.
  const int world = static_cast<int>(r.rank_steps.size());
  std::vector<double> fwd_sum(p.pp, 0), bwd_sum(p.pp, 0), wgt_sum(p.pp, 0), live(p.pp, 0);
  std::vector<int> ranks_in(p.pp, 0);
  double sum = 0;
  for (int k = 0; k < world; ++k) {
    const double b = rank_median(r, k, "bubble_fraction");
    f.measured_per_rank.push_back(b);
    sum += b;
    const int st = parallel::grid_coords_of(p, k).pp;
    const double nf = std::max(1.0, rank_median(r, k, "forward_actions"));
    const double nb = std::max(1.0, rank_median(r, k, "backward_actions"));
    fwd_sum[st] += rank_median(r, k, "forward_s") / nf;
    bwd_sum[st] += rank_median(r, k, "backward_s") / nb;
    // W of a split backward (0 actions, 0 s otherwise).
    const double nw = std::max(1.0, rank_median(r, k, "backward_weight_actions"));
    wgt_sum[st] += rank_median(r, k, "backward_weight_s") / nw;
    live[st] = std::max(live[st], rank_median(r, k, "peak_live_activations"));
    ++ranks_in[st];
  }
  f.measured_mean = sum / world;
  // Model: the schedule replayed with this run's mean forward, backward (B) and W action times
  // per stage (schedule/stage_time_replay.hpp); formula: the schedule's closed form with their
  // means over the stages.
  double tf = 0, tb = 0, tw = 0;
  for (int st = 0; st < p.pp; ++st) {
    const int n = std::max(1, ranks_in[st]);
    f.forward_s.push_back(fwd_sum[st] / n);
    f.backward_s.push_back(bwd_sum[st] / n);
    f.backward_weight_s.push_back(wgt_sum[st] / n);
    f.peak_live.push_back(static_cast<int>(live[st]));
    tf += f.forward_s.back() / p.pp;
    tb += f.backward_s.back() / p.pp;
    tw += f.backward_weight_s.back() / p.pp;
  }
  const auto rep = schedule::replay_with_stage_times(p.schedule, shape, f.forward_s, f.backward_s,
                                                     f.backward_weight_s);
  f.model = rep.mean_bubble_fraction;
  f.model_per_stage = rep.bubble_fraction;
  // zb-h1's closed form is exact for tw <= min(tf, tb) (schedule/pipeline_schedule.hpp); beyond
  // it understates the bubble, and the replay is the figure.
  f.formula = schedule::splits_backward(p.schedule) && tw > std::min(tf, tb)
                  ? rep.mean_bubble_fraction
                  : schedule::bubble_fraction_formula(p.schedule, shape, tf, tb, tw);
  return f;
}

}  // namespace paraxis::driver
