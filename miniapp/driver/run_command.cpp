// `paraxis run` and `paraxis check`: validate the deck on every rank (all ranks see the same
// errors and leave together, so nobody hangs), then run each sweep point, print per-step
// progress from rank 0, and rewrite the results after every point.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "driver/commands.hpp"
#include "driver/deck.hpp"
#include "driver/results.hpp"
#include "model/gpt_model.hpp"
#include "model/trainer.hpp"
#include "parallel/parallel_trainer.hpp"
#include "parallel/process_grid.hpp"
#include "paraxis/kernels/gemm.hpp"

namespace paraxis::driver {

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void report_errors(const Deck& deck) {
  for (const auto& e : deck.errors)
    std::fprintf(stderr, "paraxis: error: %s\n", e.to_string().c_str());
  std::fprintf(stderr, "paraxis: %zu error(s) in %s\n", deck.errors.size(), deck.path.c_str());
}

std::string default_out_dir() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[64];
  std::strftime(buf, sizeof(buf), "paraxis-run-%Y%m%d-%H%M%S", std::localtime(&now));
  return buf;
}

std::string settings_text(const SweepPoint& p) {
  std::string s;
  for (const auto& [k, v] : p.settings) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s.empty() ? "(deck as given)" : s;
}

// Largest deviation of a parallel run from the single-rank reference (DESIGN.md).
struct Tolerance {
  double loss_rel, param_rel;
};
Tolerance tolerance_for(model::Precision p) {
  switch (p) {
    case model::Precision::fp64:
      return {1e-9, 1e-9};
    case model::Precision::fp32:
      return {1e-4, 1e-4};
    case model::Precision::bf16:
      return {2e-2, 2e-2};
  }
  return {0, 0};
}

// Builds the point's grid (several ranks), calibrates (hardware.calibrate), then the trainer.
std::unique_ptr<model::Trainer> make_point_trainer(const RunConfig& cfg, int world,
                                                   std::unique_ptr<parallel::ProcessGrid>& grid,
                                                   Calibrator& calibrator, PointResult& r) {
  const auto& p = cfg.parallel;
  // One rank, nothing to shard: the single-rank reference trainer itself.
  const bool single = world == 1 && p.dp == 1 && p.zero == 0 && p.pp == 1 &&
                      cfg.comm.backend == "mpi" && p.schedule != "gpipe";
  parallel::GridShape shape{p.tp, p.pp, p.dp, p.ep, p.order};
  if (!single) grid = std::make_unique<parallel::ProcessGrid>(MPI_COMM_WORLD, shape);
  if (cfg.hardware.calibrate) r.calibration = calibrator.calibrate(cfg, grid.get());
  if (single) return model::make_trainer(cfg.model, cfg.train);
  return parallel::make_parallel_trainer(cfg.model, cfg.train, *grid, parallel_options(cfg));
}

void run_point(const RunConfig& cfg, int world, int rank, bool verify, std::size_t i,
               std::size_t total, Calibrator& calibrator, PointResult& r) {
  kernels::set_automatic_gemm(cfg.hardware.gemm == "portable" ? kernels::GemmVariant::portable
                                                              : kernels::GemmVariant::automatic);
  std::unique_ptr<parallel::ProcessGrid> grid;
  auto trainer = make_point_trainer(cfg, world, grid, calibrator, r);
  if (verify) trainer->record_routing(true);
  r.entropy_floor = trainer->corpus().entropy_floor(cfg.model.seq_len);
  r.parameters = trainer->parameter_count();
  r.flops_per_token = model::forward_flops_per_token(cfg.model);
  const double tokens = static_cast<double>(cfg.train.global_batch) * cfg.model.seq_len;
  if (rank == 0)
    std::printf(
        "point %zu/%zu: %s | %zu parameters, %s, corpus entropy floor %.4f nats (uniform %.4f)\n",
        i + 1, total, settings_text(r.point).c_str(), r.parameters,
        model::to_string(cfg.train.precision), r.entropy_floor,
        std::log(static_cast<double>(cfg.model.vocab)));
  // A moment every rank shares (to a barrier's skew): the trace's time origin.
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = model::steady_seconds();
  for (int s = 0; s < cfg.train.steps; ++s) {
    if (s == cfg.train.fault_step && rank == cfg.train.fault_rank)
      throw std::runtime_error("injected fault before step " + std::to_string(s + 1) +
                               " (train.fault_step = " + std::to_string(s) + ")");
    r.steps.push_back(trainer->step());
    const auto& st = r.steps.back();
    if (rank == 0) {
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
  }
  // Per-step metrics and trace events of every rank, to rank 0.
  {
    std::vector<double> mine;
    for (const auto& st : r.steps) {
      const auto v = rank_metrics(st);
      mine.insert(mine.end(), v.begin(), v.end());
    }
    std::vector<double> all(mine.size() * static_cast<std::size_t>(world));
    MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
               static_cast<int>(mine.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    const std::size_t per_step = rank_metric_names().size();
    if (rank == 0) {
      r.rank_steps.assign(world, std::vector<std::vector<double>>(r.steps.size()));
      for (int k = 0; k < world; ++k)
        for (std::size_t s = 0; s < r.steps.size(); ++s) {
          const double* p = &all[(static_cast<std::size_t>(k) * r.steps.size() + s) * per_step];
          r.rank_steps[k][s].assign(p, p + per_step);
        }
    }
    if (cfg.output.trace) {
      const std::string text = trace_events_json(r.steps, rank, t0).dump();
      int len = static_cast<int>(text.size());
      std::vector<int> lens(world), offs(world, 0);
      MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
      for (int k = 1; k < world; ++k) offs[k] = offs[k - 1] + lens[k - 1];
      std::vector<char> buf(rank == 0 ? static_cast<std::size_t>(offs[world - 1] + lens[world - 1])
                                      : 0);
      MPI_Gatherv(text.data(), len, MPI_CHAR, buf.data(), lens.data(), offs.data(), MPI_CHAR, 0,
                  MPI_COMM_WORLD);
      if (rank == 0)
        for (int k = 0; k < world; ++k)
          for (auto& e :
               nlohmann::json::parse(buf.begin() + offs[k], buf.begin() + offs[k] + lens[k]))
            r.trace_events.push_back(std::move(e));
    }
  }
  // Memory of every rank, to rank 0; `memory` is the rank with the largest peak.
  const model::MemoryReport mine = trainer->memory();
  constexpr int kFields = 8;
  unsigned long long fields[kFields] = {
      mine.params_bytes, mine.grads_bytes,       mine.optimizer_bytes,  mine.activations_peak_bytes,
      mine.peak_bytes,   mine.params_peak_bytes, mine.grads_peak_bytes, mine.optimizer_peak_bytes};
  std::vector<unsigned long long> all(kFields * static_cast<std::size_t>(world));
  MPI_Gather(fields, kFields, MPI_UNSIGNED_LONG_LONG, all.data(), kFields, MPI_UNSIGNED_LONG_LONG,
             0, MPI_COMM_WORLD);
  r.memory = mine;
  for (int k = 0; k < world; ++k) {
    const unsigned long long* a = &all[kFields * static_cast<std::size_t>(k)];
    model::MemoryReport m{a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]};
    r.memory_per_rank.push_back(m);
    if (m.peak_bytes > r.memory.peak_bytes) r.memory = m;
  }
  // Every rank takes part in gathering the final parameters; rank 0 compares them with the
  // single-rank reference it computes now.
  std::vector<double> params = trainer->parameters();
  const double divergence = verify ? trainer->replica_divergence() : 0.0;
  trainer.reset();
  grid.reset();
  if (verify) {
    VerifyResult v;
    int verdict = 0;
    if (rank == 0) {
      RunConfig ref = cfg;
      ref.parallel = ParallelConfig{};
      ref.comm.overlap = false;
      auto reference = model::make_trainer(ref.model, ref.train);
      reference->record_routing(true);
      const int K = cfg.model.moe.top_k;
      for (int s = 0; s < cfg.train.steps; ++s) {
        const auto rs = reference->step();
        // Routing flips: tokens whose top-k experts differ (possible in fp32 near ties).
        const auto& a = r.steps[s].routing;
        const auto& b = rs.routing;
        long flips = a.size() == b.size() ? 0 : static_cast<long>(std::max(a.size(), b.size()) / K);
        for (std::size_t t = 0; a.size() == b.size() && t < a.size(); t += K)
          flips += std::equal(a.begin() + t, a.begin() + t + K, b.begin() + t) ? 0 : 1;
        if (flips > 0 && v.first_flip_step < 0) v.first_flip_step = s;
        v.routing_flips += flips;
        // The tolerances apply while no token has flipped: after a flip the runs diverge
        // legitimately (a different expert was chosen), so later steps are not compared.
        if (v.first_flip_step >= 0) continue;
        const double rel =
            std::fabs(r.steps[s].loss - rs.loss) / std::max(std::fabs(rs.loss), 1e-300);
        v.max_loss_rel_diff = std::max(v.max_loss_rel_diff, rel);
      }
      const Tolerance tol = tolerance_for(cfg.train.precision);
      v.loss_tolerance = tol.loss_rel;
      const auto ref_params = reference->parameters();
      for (std::size_t k = 0; k < ref_params.size(); ++k) {
        v.max_param_abs = std::max(v.max_param_abs, std::fabs(ref_params[k]));
        v.max_param_abs_diff = std::max(v.max_param_abs_diff, std::fabs(ref_params[k] - params[k]));
      }
      v.param_tolerance = tol.param_rel * v.max_param_abs;
      const bool params_ok = v.first_flip_step >= 0 || v.max_param_abs_diff <= v.param_tolerance;
      v.replica_divergence = divergence;
      v.passed = v.max_loss_rel_diff <= v.loss_tolerance && params_ok && divergence == 0;
      if (divergence != 0)
        std::printf("  verify: copies of a replicated parameter differ across ranks by %.3e\n",
                    divergence);
      if (v.first_flip_step >= 0)
        std::printf(
            "  verify: %ld routing flip(s), the first in step %d: steps from there on and "
            "the final parameters are not compared\n",
            v.routing_flips, v.first_flip_step + 1);
      verdict = v.passed ? 1 : 0;
      std::printf(
          "  verify: max loss rel diff %.3e (tolerance %.1e), max param abs diff %.3e "
          "(tolerance %.3e): %s\n",
          v.max_loss_rel_diff, v.loss_tolerance, v.max_param_abs_diff, v.param_tolerance,
          v.passed ? "PASSED" : "FAILED");
    }
    MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
    v.passed = verdict == 1;
    r.verify = v;
  }
  r.status =
      (!verify || r.verify->passed) ? "ok" : "failed: --verify found deviations beyond tolerance";
}

}  // namespace

parallel::ParallelOptions parallel_options(const RunConfig& c) {
  parallel::ParallelOptions o;
  o.zero = c.parallel.zero;
  o.bucket_mb = c.comm.bucket_mb;
  o.overlap = c.comm.overlap;
  o.backend = c.comm.backend;
  o.schedule = c.parallel.schedule;
  o.virtual_stages = c.parallel.virtual_stages;
  o.stage_layers = c.parallel.stage_layers;
  o.sequence_parallel = c.parallel.sequence_parallel;
  return o;
}

int check_command(const std::string& path, const std::vector<std::string>& overrides, int ranks) {
  const Deck deck = load_deck(path, overrides, ranks);
  if (world_rank() != 0) return deck.errors.empty() ? 0 : 2;
  if (!deck.errors.empty()) {
    report_errors(deck);
    return 2;
  }
  int skipped = 0;
  for (std::size_t i = 0; i < deck.points.size(); ++i) {
    const auto& p = deck.points[i];
    if (!p.skip_reason.empty()) {
      ++skipped;
      std::printf("point %zu (%s): would be skipped: %s\n", i + 1, settings_text(p).c_str(),
                  p.skip_reason.c_str());
    }
  }
  std::printf("%s: ok, %zu point(s), %d would be skipped\n", path.c_str(), deck.points.size(),
              skipped);
  return 0;
}

int run_command(const RunOptions& opt) {
  const int rank = world_rank(), world = world_size();
  const Deck deck = load_deck(opt.deck, opt.overrides, world);
  if (!deck.errors.empty()) {
    if (rank == 0) report_errors(deck);
    return 2;
  }

  std::string dir = opt.out_dir;
  if (dir.empty()) dir = deck.points.front().config.output.dir;
  if (dir.empty()) dir = default_out_dir();
  int dir_ok = 1;
  if (rank == 0) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      std::fprintf(stderr, "paraxis: error: cannot create output directory '%s': %s\n", dir.c_str(),
                   ec.message().c_str());
      dir_ok = 0;
    }
  }
  MPI_Bcast(&dir_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!dir_ok) return 2;

  const nlohmann::json provenance = provenance_json(world, opt.command_line);
  std::vector<PointResult> results;
  const std::size_t total = deck.points.size();
  const double run_begin = model::steady_seconds();
  int failures = 0;
  bool aborted = false;
  Calibrator calibrator;
  for (std::size_t i = 0; i < total; ++i) {
    PointResult r;
    r.index = static_cast<int>(i);
    r.point = deck.points[i];
    r.world = world;
    const auto& cfg = r.point.config;
    const double point_begin = model::steady_seconds();
    if (!r.point.skip_reason.empty()) {
      r.status = "skipped: " + r.point.skip_reason;
    } else {
      try {
        run_point(cfg, world, rank, opt.verify, i, total, calibrator, r);
      } catch (const std::exception& ex) {
        // A rank that fails cannot tell whether the others are waiting for it in a
        // collective: with several ranks, end the job (earlier points are already written);
        // alone, record the point, write the results and stop the sweep.
        std::fprintf(stderr, "paraxis: error: rank %d failed in point %zu/%zu (%s): %s\n", rank,
                     i + 1, total, settings_text(r.point).c_str(), ex.what());
        std::fflush(stderr);
        // mpiexec forwards output asynchronously and MPI_Abort tears the job down at once:
        // give the message a moment to reach the user's terminal or batch log first.
        if (world > 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          MPI_Abort(MPI_COMM_WORLD, 3);
        }
        r.status = std::string("failed: ") + ex.what();
        aborted = true;
      }
    }
    if (r.status.rfind("failed", 0) == 0) ++failures;  // also --verify deviations
    results.push_back(r);
    if (rank == 0) {
      write_summary(dir, deck.path, provenance, results);
      write_points_csv(dir, results);
      if (cfg.output.trace && r.status == "ok") write_trace(dir, r);
      const double now = model::steady_seconds();
      const double per_point = (now - run_begin) / static_cast<double>(i + 1);
      const double step_s = measured_median(r, [](const model::StepResult& s) { return s.time_s; });
      const double tokens = static_cast<double>(cfg.train.global_batch) * cfg.model.seq_len;
      std::printf("point %zu/%zu [%s] done in %.2f s: %s", i + 1, total,
                  settings_text(r.point).c_str(), now - point_begin, r.status.c_str());
      if (r.status == "ok")
        std::printf(", step %.4f s, %.0f tokens/s, final loss %.6f", step_s,
                    step_s > 0 ? tokens / step_s : 0.0, r.steps.back().loss);
      std::printf(", about %.0f s left\n", per_point * static_cast<double>(total - i - 1));
      std::fflush(stdout);
    }
    if (aborted) break;
  }
  if (rank == 0) std::printf("results in %s/summary.json\n", dir.c_str());
  return failures ? 1 : 0;
}

}  // namespace paraxis::driver
