// Result writers: JSON summary, CSV table, Chrome trace.
#include "driver/results.hpp"

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "driver/statistics.hpp"
#include "io/checked_file.hpp"
#include "parallel/process_grid.hpp"
#include "paraxis/build_info.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver {

using nlohmann::json;

double measured_median(const PointResult& r, double (*get)(const model::StepResult&)) {
  std::vector<double> v;
  for (const auto& s : r.steps)
    if (s.step >= r.point.config.train.warmup_steps) v.push_back(get(s));
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
}  // namespace

namespace {
// Median over measured steps of a per-rank metric (rank_metric_names order).
double rank_median(const PointResult& r, int rank, const std::string& name) {
  const auto& names = rank_metric_names();
  const auto k =
      static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  std::vector<double> v;
  for (std::size_t s = 0; s < r.steps.size(); ++s)
    if (r.steps[s].step >= r.point.config.train.warmup_steps)
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
  std::vector<double> fwd_sum(p.pp, 0), bwd_sum(p.pp, 0), live(p.pp, 0);
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
    live[st] = std::max(live[st], rank_median(r, k, "peak_live_activations"));
    ++ranks_in[st];
  }
  f.measured_mean = sum / world;
  // Model: the schedule replayed with this run's mean forward and backward action times per
  // stage (Narayanan et al.'s formula for uniform stages; uneven stages as they ran).
  for (int st = 0; st < p.pp; ++st) {
    f.forward_s.push_back(fwd_sum[st] / std::max(1, ranks_in[st]));
    f.backward_s.push_back(bwd_sum[st] / std::max(1, ranks_in[st]));
    f.peak_live.push_back(static_cast<int>(live[st]));
  }
  const auto sched = schedule::make_schedule(p.schedule, shape);
  const auto rep =
      schedule::replay_schedule(sched, shape, [&](int stage, const schedule::Action& a) {
        return a.kind == schedule::ActionKind::forward ? f.forward_s[stage] : f.backward_s[stage];
      });
  f.model = rep.mean_bubble_fraction;
  return f;
}

json point_to_json(const PointResult& r) {
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
  j["status"] = r.status;
  if (r.steps.empty()) return j;
  json steps = json::array();
  for (const auto& s : r.steps) {
    json e{{"step", s.step},
           {"loss", s.loss},
           {"lm_loss", s.lm_loss},
           {"aux_loss", s.aux_loss},
           {"grad_norm", s.grad_norm},
           {"time_s", s.time_s},
           {"measured", s.step >= c.train.warmup_steps}};
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
  j["steps"] = steps;
  const double step_s = measured_median(r, [](const model::StepResult& s) { return s.time_s; });
  const double fwd = measured_median(r, [](const model::StepResult& s) { return s.forward_s; });
  const double bwd = measured_median(r, [](const model::StepResult& s) { return s.backward_s; });
  const double opt = measured_median(r, [](const model::StepResult& s) { return s.optimizer_s; });
  const double compute = measured_median(r, [](const model::StepResult& s) { return s.compute_s; });
  // Communication per axis: medians over measured steps of each step's totals (rank 0).
  json comm = json::object();
  for (const char* axis : {"tp", "pp", "dp", "ep"}) {
    auto get = [&](auto field) {
      std::vector<double> v;
      for (const auto& s : r.steps) {
        if (s.step < c.train.warmup_steps) continue;
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

  j["time"] = {{"step_median_s", step_s},
               {"forward_s", fwd},
               {"backward_s", bwd},
               {"optimizer_s", opt},
               {"compute_s", compute},
               {"bubble_fraction", 0.0},
               {"bubble_fraction_model", 0.0},
               {"bubble_fraction_ideal", 0.0},
               {"comm", comm}};
  if (c.parallel.pp > 1) {
    const PipelineFigures pf = pipeline_figures(r);
    j["time"]["bubble_fraction"] = pf.measured_mean;
    j["time"]["bubble_fraction_model"] = pf.model;
    j["time"]["bubble_fraction_ideal"] = pf.ideal;
    j["time"]["bubble_fraction_per_rank"] = pf.measured_per_rank;
    j["pipeline"] = {{"stages", c.parallel.pp},
                     {"micro_batches", pf.micro_batches},
                     {"virtual_stages", c.parallel.virtual_stages},
                     {"schedule", schedule::to_string(c.parallel.schedule)},
                     {"forward_action_s_per_stage", pf.forward_s},
                     {"backward_action_s_per_stage", pf.backward_s},
                     {"peak_live_activations_per_stage", pf.peak_live}};
  }
  // Across ranks: min, mean and max of each per-step metric, then the median over measured steps.
  if (!r.rank_steps.empty()) {
    json ranks = json::object();
    const auto& names = rank_metric_names();
    for (std::size_t k = 0; k < names.size(); ++k) {
      std::vector<double> mins, means, maxs;
      for (std::size_t s = 0; s < r.steps.size(); ++s) {
        if (r.steps[s].step < c.train.warmup_steps) continue;
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
      ranks[names[k]] = {
          {"min", median(mins)}, {"mean", median(means)}, {"max", median(maxs)}};
    }
    j["time"]["ranks"] = ranks;
  }
  if (r.calibration) j["calibration"] = calibration_to_json(*r.calibration);
  j["memory"] = memory_json(r.memory);
  j["memory_per_rank"] = json::array();
  for (const auto& m : r.memory_per_rank) j["memory_per_rank"].push_back(memory_json(m));
  const double tokens = static_cast<double>(c.train.global_batch) * c.model.seq_len;
  const double tps = step_s > 0 ? tokens / step_s : 0;
  const double flops = 3.0 * r.flops_per_token * tps;
  j["throughput"] = {
      {"tokens_per_s", tps},
      {"model_flops_per_s", flops},
      {"model_flops_per_step", 3.0 * r.flops_per_token * tokens},
      {"mfu", c.hardware.peak_flops > 0 ? json(flops / (c.hardware.peak_flops * r.world))
                                        : json(nullptr)}};
  j["model"] = {{"parameters", r.parameters}, {"forward_flops_per_token", r.flops_per_token}};
  j["corpus"] = {{"entropy_floor", r.entropy_floor},
                 {"uniform_loss", std::log(static_cast<double>(c.model.vocab))},
                 {"branching", c.train.corpus_branching}};
  if (r.verify) {
    j["verify"] = {
        {"max_loss_rel_diff", r.verify->max_loss_rel_diff},
        {"max_param_abs_diff", r.verify->max_param_abs_diff},
        {"max_param_abs", r.verify->max_param_abs},
        {"loss_tolerance", r.verify->loss_tolerance},
        {"param_tolerance", r.verify->param_tolerance},
        {"routing_flips", r.verify->routing_flips},
        {"replica_divergence", r.verify->replica_divergence},
        {"first_flip_step",
         r.verify->first_flip_step < 0 ? json(nullptr) : json(r.verify->first_flip_step)},
        {"steps_compared", r.verify->steps_compared},
        {"routing_replayed", r.verify->routing_replayed},
        {"passed", r.verify->passed},
        {"reason", r.verify->passed ? json(nullptr) : json(r.verify->reason)}};
  }
  const auto& last = r.steps.back();
  j["final"] = {{"loss", last.loss},
                {"lm_loss", last.lm_loss},
                {"lm_loss_above_floor", last.lm_loss - r.entropy_floor}};
  return j;
}

const std::vector<std::string>& rank_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{
        "step_s",          "forward_s",        "backward_s",           "optimizer_s",
        "compute_s",       "bubble_fraction",  "pipeline_span_s",      "pipeline_busy_s",
        "forward_actions", "backward_actions", "peak_live_activations"};
    for (const char* axis : {"tp", "pp", "dp", "ep"})
      for (const char* f : {"time_s", "exposed_s", "bytes", "calls"})
        n.push_back(std::string("comm.") + axis + "." + f);
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
                        static_cast<double>(s.peak_live_activations)};
  for (const char* axis : {"tp", "pp", "dp", "ep"}) {
    const auto it = s.comm.find(axis);
    const model::CommTotals t = it == s.comm.end() ? model::CommTotals{} : it->second;
    v.insert(v.end(),
             {t.time_s, t.exposed_s, static_cast<double>(t.bytes), static_cast<double>(t.calls)});
  }
  return v;
}

json trace_events_json(const std::vector<model::StepResult>& steps, int rank, double t0) {
  json events = json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"args", {{"name", "rank " + std::to_string(rank)}}}});
  events.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"tid", 0},
                    {"args", {{"name", "compute"}}}});
  events.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"tid", 1},
                    {"args", {{"name", "communication"}}}});
  for (const auto& s : steps) {
    for (const auto& sp : s.spans) {
      // One slice per action: "F3" / "B3" (micro-batch 3), ".c1" for this rank's chunk 1.
      std::string name = sp.name;
      json args{{"step", s.step}};
      if (sp.micro_batch >= 0) {
        name = std::string(1, static_cast<char>(std::toupper(sp.name[0]))) +
               std::to_string(sp.micro_batch) +
               (sp.chunk > 0 ? ".c" + std::to_string(sp.chunk) : "");
        args["micro_batch"] = sp.micro_batch;
        args["chunk"] = sp.chunk;
      }
      events.push_back({{"name", name},
                        {"cat", "compute"},
                        {"ph", "X"},
                        {"pid", rank},
                        {"tid", 0},
                        {"ts", (sp.begin - t0) * 1e6},
                        {"dur", (sp.end - sp.begin) * 1e6},
                        {"args", args}});
    }
    for (const auto& c : s.comm_spans)
      events.push_back(
          {{"name", std::string(c.axis) + ":" + c.op},
           {"cat", "comm"},
           {"ph", "X"},
           {"pid", rank},
           {"tid", 1},
           {"ts", (c.begin - t0) * 1e6},
           {"dur", (c.end - c.begin) * 1e6},
           {"args", {{"step", s.step}, {"bytes", c.bytes}, {"exposed_us", c.exposed * 1e6}}}});
  }
  return events;
}

json provenance_json(int world, const std::string& command_line) {
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  std::string mpi(lib, static_cast<std::size_t>(len));
  while (!mpi.empty() && (mpi.back() == '\n' || mpi.back() == ' ')) mpi.pop_back();
  const auto nl = mpi.find('\n');
  if (nl != std::string::npos) mpi = mpi.substr(0, nl);

  // Host names of every rank, gathered to rank 0.
  char name[MPI_MAX_PROCESSOR_NAME];
  int nlen = 0;
  MPI_Get_processor_name(name, &nlen);
  std::vector<char> all(static_cast<std::size_t>(world) * MPI_MAX_PROCESSOR_NAME, '\0');
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0');
  std::copy(name, name + nlen, mine.begin());
  MPI_Gather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
             MPI_CHAR, 0, MPI_COMM_WORLD);
  std::set<std::string> hosts;
  std::map<std::string, int> ranks_on;
  for (int r = 0; r < world; ++r) {
    const std::string h(&all[static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    hosts.insert(h);
    ++ranks_on[h];
  }
  int most_ranks = 0;
  for (const auto& [h, n] : ranks_on) most_ranks = std::max(most_ranks, n);

  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return json{{"paraxis_version", build_info::version},
              {"command_line", command_line},
              {"git_hash", build_info::git_hash},
              {"kokkos_version", build_info::kokkos_version},
              {"kokkos_devices", build_info::kokkos_devices},
              {"execution_space", Kokkos::DefaultExecutionSpace::name()},
              {"threads", Kokkos::DefaultExecutionSpace().concurrency()},
              {"compiler", build_info::cxx_compiler},
              {"cxx_flags", build_info::cxx_flags},
              {"build_type", build_info::build_type},
              {"native_arch", build_info::native_arch},
              {"kokkos_kernels", build_info::kokkos_kernels},
              {"mpi_library", mpi},
              {"world", world},
              {"hosts", hosts},
              // More ranks than cores on a host: every figure includes time-sharing.
              {"max_ranks_per_host", most_ranks},
              {"cores_per_host", std::thread::hardware_concurrency()},
              {"date", date}};
}

void write_summary(const std::string& dir, const std::string& deck_path, const json& provenance,
                   const std::vector<PointResult>& points,
                   const std::function<void()>& before_rename) {
  json j{{"schema", "paraxis.summary/1"}, {"deck", deck_path}, {"provenance", provenance}};
  j["points"] = json::array();
  for (const auto& p : points) j["points"].push_back(point_to_json(p));
  io::write_file_checked(dir + "/summary.json", j.dump(2) + '\n', before_rename);
}

void write_points_csv(const std::string& dir, const std::vector<PointResult>& points) {
  std::ostringstream out;
  out << "index,status,world,tp,pp,dp,ep,zero,schedule,precision,global_batch,micro_batch,"
         "step_median_s,tokens_per_s,model_flops_per_s,final_loss,peak_bytes\n";
  for (const auto& r : points) {
    const auto& c = r.point.config;
    std::string status = r.status;
    std::replace(status.begin(), status.end(), ',', ';');
    std::replace(status.begin(), status.end(), '"', '\'');
    const double step_s = measured_median(r, [](const model::StepResult& s) { return s.time_s; });
    const double tokens = static_cast<double>(c.train.global_batch) * c.model.seq_len;
    const double tps = step_s > 0 ? tokens / step_s : 0;
    out << r.index << ",\"" << status << "\"," << r.world << ',' << c.parallel.tp << ','
        << c.parallel.pp << ',' << c.parallel.dp << ',' << c.parallel.ep << ',' << c.parallel.zero
        << ',' << schedule::to_string(c.parallel.schedule) << ','
        << model::to_string(c.train.precision) << ',' << c.train.global_batch << ','
        << c.train.micro_batch << ',' << step_s << ',' << tps << ','
        << 3.0 * r.flops_per_token * tps << ',' << (r.steps.empty() ? 0.0 : r.steps.back().loss)
        << ',' << r.memory.peak_bytes << '\n';
  }
  io::write_file_checked(dir + "/points.csv", out.str());
}

void write_trace(const std::string& dir, const PointResult& r) {
  if (r.trace_events.empty()) return;
  io::write_file_checked(
      dir + "/trace-" + std::to_string(r.index) + ".json",
      json{{"traceEvents", r.trace_events}, {"displayTimeUnit", "ms"}}.dump() + '\n');
}

}  // namespace paraxis::driver
