// One sweep point on every rank (point_run.hpp). Every wait on other ranks goes through the
// watchdog (parallel/watchdog.hpp), so a rank that stops responding ends the job with a
// message naming it instead of hanging it.
#include "driver/point_run.hpp"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <thread>

#include "driver/verify.hpp"
#include "model/gpt_model.hpp"
#include "model/trainer.hpp"
#include "parallel/parallel_trainer.hpp"
#include "parallel/process_grid.hpp"
#include "parallel/watchdog.hpp"
#include "paraxis/kernels/gemm.hpp"

namespace paraxis::driver {

namespace wd = parallel::watchdog;

std::string settings_text(const SweepPoint& p) {
  std::string s;
  for (const auto& [k, v] : p.settings) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s.empty() ? "(deck as given)" : s;
}

std::string divergence_of(const model::StepResult& s) {
  auto bad = [&](const char* what, double v) {
    return std::string(what) + " is " +
           (std::isnan(v) ? "nan"
            : v > 0       ? "inf"
                          : "-inf") +
           " at step " + std::to_string(s.step + 1);
  };
  if (!std::isfinite(s.loss)) return bad("loss", s.loss);
  if (!std::isfinite(s.grad_norm)) return bad("gradient norm", s.grad_norm);
  return "";
}

namespace {

// Builds the point's grid (several ranks), calibrates (hardware.calibrate), then the trainer.
std::unique_ptr<model::Trainer> make_point_trainer(const RunConfig& cfg, int world,
                                                   std::unique_ptr<parallel::ProcessGrid>& grid,
                                                   Calibrator& calibrator, PointResult& r) {
  const auto& p = cfg.parallel;
  // One rank, nothing to shard: the single-rank reference trainer itself.
  const bool single = world == 1 && p.dp == 1 && p.zero == 0 && p.pp == 1 &&
                      cfg.comm.backend == config::CommBackend::mpi &&
                      p.schedule != schedule::ScheduleKind::gpipe;
  if (!single) grid = std::make_unique<parallel::ProcessGrid>(MPI_COMM_WORLD, p);
  if (cfg.hardware.calibrate) r.calibration = calibrator.calibrate(cfg, grid.get());
  if (single) return model::make_trainer(cfg.model, cfg.train);
  return parallel::make_parallel_trainer(cfg.model, cfg.train, p, cfg.comm, *grid);
}

// fault.hang: this rank stops responding (no progress, no answers to the watchdog's queries)
// until the job is ended around it.
[[noreturn]] void hang_forever(int rank, int step) {
  std::fprintf(stderr, "paraxis: rank %d stops responding before step %d (fault.hang)\n", rank,
               step + 1);
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

void print_step(const RunConfig& cfg, const model::StepResult& st, int s) {
  const double tokens = static_cast<double>(cfg.train.global_batch) * cfg.model.seq_len;
  std::printf("  step %4d/%d  loss %.6f  lm %.6f", s + 1, cfg.train.steps, st.loss, st.lm_loss);
  if (cfg.model.moe.experts > 0)
    std::printf("  aux %.4f  imbalance %.2f", st.aux_loss, st.moe.imbalance);
  for (const char* axis : {"tp", "pp", "dp", "ep"}) {
    const auto it = st.comm.find(axis);
    if (it != st.comm.end() && it->second.calls > 0)
      std::printf("  %s %.3f MB %.4f s", axis, it->second.bytes / 1e6, it->second.time_s);
  }
  if (cfg.parallel.pp > 1) std::printf("  bubble %.3f", st.bubble_fraction);
  std::printf("  %.4f s  %.0f tokens/s%s\n", st.time_s, tokens / st.time_s,
              s < cfg.train.warmup_steps ? "  (warm-up)" : "");
  std::fflush(stdout);
}

// Gathers `count` values of `type` from every rank to rank 0 (recv: world * count on rank 0).
void gather(const void* send, void* recv, int count, MPI_Datatype type, const char* what) {
  MPI_Request req;
  MPI_Igather(send, count, type, recv, count, type, 0, MPI_COMM_WORLD, &req);
  wd::wait_all(1, &req, what, "world", MPI_COMM_WORLD);
}

// Per-step metrics and trace events of every rank, to rank 0.
void gather_steps_and_trace(const RunConfig& cfg, const PointContext& ctx, double t0,
                            PointResult& r) {
  const int world = ctx.world, rank = ctx.rank;
  std::vector<double> mine;
  for (const auto& st : r.steps) {
    const auto v = rank_metrics(st);
    mine.insert(mine.end(), v.begin(), v.end());
  }
  std::vector<double> all(mine.size() * static_cast<std::size_t>(world));
  gather(mine.data(), all.data(), static_cast<int>(mine.size()), MPI_DOUBLE, "gather step metrics");
  const std::size_t per_step = rank_metric_names().size();
  if (rank == 0) {
    r.rank_steps.assign(world, std::vector<std::vector<double>>(r.steps.size()));
    for (int k = 0; k < world; ++k)
      for (std::size_t s = 0; s < r.steps.size(); ++s) {
        const double* p = &all[(static_cast<std::size_t>(k) * r.steps.size() + s) * per_step];
        r.rank_steps[k][s].assign(p, p + per_step);
      }
  }
  if (!cfg.output.trace) return;
  const std::string text = trace_events_json(r.steps, rank, t0).dump();
  int len = static_cast<int>(text.size());
  std::vector<int> lens(world), offs(world, 0);
  gather(&len, lens.data(), 1, MPI_INT, "gather trace sizes");
  for (int k = 1; k < world; ++k) offs[k] = offs[k - 1] + lens[k - 1];
  std::vector<char> buf(rank == 0 ? static_cast<std::size_t>(offs[world - 1] + lens[world - 1])
                                  : 0);
  MPI_Request req;
  MPI_Igatherv(text.data(), len, MPI_CHAR, buf.data(), lens.data(), offs.data(), MPI_CHAR, 0,
               MPI_COMM_WORLD, &req);
  wd::wait_all(1, &req, "gather trace events", "world", MPI_COMM_WORLD);
  if (rank == 0)
    for (int k = 0; k < world; ++k)
      for (auto& e : nlohmann::json::parse(buf.begin() + offs[k], buf.begin() + offs[k] + lens[k]))
        r.trace_events.push_back(std::move(e));
}

// Memory of every rank, to rank 0; `memory` is the rank with the largest peak.
void gather_memory(const model::MemoryReport& mine, int world, PointResult& r) {
  constexpr int kFields = 8;
  unsigned long long fields[kFields] = {
      mine.params_bytes, mine.grads_bytes,       mine.optimizer_bytes,  mine.activations_peak_bytes,
      mine.peak_bytes,   mine.params_peak_bytes, mine.grads_peak_bytes, mine.optimizer_peak_bytes};
  std::vector<unsigned long long> all(kFields * static_cast<std::size_t>(world));
  gather(fields, all.data(), kFields, MPI_UNSIGNED_LONG_LONG, "gather memory");
  r.memory = mine;
  for (int k = 0; k < world; ++k) {
    const unsigned long long* a = &all[kFields * static_cast<std::size_t>(k)];
    model::MemoryReport m{a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]};
    r.memory_per_rank.push_back(m);
    if (m.peak_bytes > r.memory.peak_bytes) r.memory = m;
  }
}

}  // namespace

void run_point(const RunConfig& cfg, const PointContext& ctx, PointResult& r) {
  const int world = ctx.world, rank = ctx.rank;
  wd::configure(cfg.comm.timeout_s);
  wd::set_step(-1);
  wd::set_micro_batch(-1);
  kernels::set_automatic_gemm(cfg.hardware.gemm == "portable" ? kernels::GemmVariant::portable
                                                              : kernels::GemmVariant::automatic);
  std::unique_ptr<parallel::ProcessGrid> grid;
  auto trainer = make_point_trainer(cfg, world, grid, *ctx.calibrator, r);
  if (ctx.verify) trainer->record_routing(true);
  r.entropy_floor = trainer->corpus().entropy_floor(cfg.model.seq_len);
  r.parameters = trainer->parameter_count();
  r.flops_per_token = model::forward_flops_per_token(cfg.model);
  if (rank == 0)
    std::printf(
        "point %zu/%zu: %s | %zu parameters, %s, corpus entropy floor %.4f nats (uniform %.4f)\n",
        ctx.index + 1, ctx.total, settings_text(r.point).c_str(), r.parameters,
        model::to_string(cfg.train.precision), r.entropy_floor,
        std::log(static_cast<double>(cfg.model.vocab)));
  // A moment every rank shares (to a barrier's skew): the trace's time origin.
  wd::barrier(MPI_COMM_WORLD, "barrier before the first step");
  const double t0 = model::steady_seconds();
  std::string diverged;
  const auto& fault = cfg.fault;
  for (int s = 0; s < cfg.train.steps && diverged.empty(); ++s) {
    if (fault.dead_rank.rank == rank && fault.dead_rank.at == "step" && fault.dead_rank.step == s)
      throw std::runtime_error("injected fault before step " + std::to_string(s + 1) +
                               " (fault.dead_rank)");
    if (fault.hang.rank == rank && fault.hang.step == s) hang_forever(rank, s);
    wd::set_step(s);
    r.steps.push_back(trainer->step());
    wd::set_step(-1);
    const auto& st = r.steps.back();
    if (rank == 0) print_step(cfg, st, s);
    // Loss and gradient norm are global values, the results of all-reductions and the same
    // on every rank, so every rank reaches the same verdict without another collective.
    diverged = divergence_of(st);
  }
  gather_steps_and_trace(cfg, ctx, t0, r);
  gather_memory(trainer->memory(), world, r);
  if (!diverged.empty()) {
    r.status = "diverged: " + diverged;
    if (rank == 0) std::printf("  diverged: %s; the sweep goes on\n", diverged.c_str());
    return;
  }
  // Every rank takes part in gathering the final parameters; rank 0 compares them with the
  // single-rank reference it computes now.
  std::vector<double> params = trainer->parameters();
  const double divergence = ctx.verify ? trainer->replica_divergence() : 0.0;
  trainer.reset();
  grid.reset();
  r.status = "ok";
  if (!ctx.verify) return;
  VerifyResult v;
  int verdict = 0;
  if (rank == 0) {
    v = verify_against_reference(cfg, r.steps, params, divergence);
    verdict = v.passed ? 1 : 0;
  }
  // Not under the watchdog's deadline: rank 0 trains the whole model alone meanwhile, which
  // takes longer than any step; it does no communication that could hang.
  MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
  v.passed = verdict == 1;
  r.verify = v;
  // Only rank 0 knows the reason; only rank 0 writes the results.
  if (!v.passed)
    r.status = "failed: --verify: " +
               (v.reason.empty() ? std::string("deviations beyond tolerance") : v.reason);
}

}  // namespace paraxis::driver
