// `paraxis run` and `paraxis check`: validate the deck on every rank (all ranks see the same
// errors and leave together, so nobody hangs), then run each sweep point, print per-step
// progress from rank 0, and rewrite the results after every point.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "driver/commands.hpp"
#include "driver/deck.hpp"
#include "driver/results.hpp"
#include "model/gpt_model.hpp"
#include "model/trainer.hpp"
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
  for (const auto& e : deck.errors) std::fprintf(stderr, "paraxis: error: %s\n", e.to_string().c_str());
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

}  // namespace

int check_command(const std::string& path, const std::vector<std::string>& overrides) {
  const Deck deck = load_deck(path, overrides, 0);
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
      std::printf("point %zu (%s): would be skipped: %s\n", i, settings_text(p).c_str(), p.skip_reason.c_str());
    }
  }
  std::printf("%s: ok, %zu point(s), %d would be skipped\n", path.c_str(), deck.points.size(), skipped);
  return 0;
}

int run_command(const RunOptions& opt) {
  const int rank = world_rank(), world = world_size();
  const Deck deck = load_deck(opt.deck, opt.overrides, world);
  if (!deck.errors.empty()) {
    if (rank == 0) report_errors(deck);
    return 2;
  }
  if (opt.verify && rank == 0)
    std::printf("paraxis: --verify: every point runs on one rank, the reference itself; nothing to compare\n");

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

  const nlohmann::json provenance = provenance_json(world);
  std::vector<PointResult> results;
  const std::size_t total = deck.points.size();
  const double run_begin = model::steady_seconds();
  int failures = 0;
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
        kernels::set_automatic_gemm(cfg.hardware.gemm == "portable" ? kernels::GemmVariant::portable
                                                                    : kernels::GemmVariant::automatic);
        auto trainer = model::make_trainer(cfg.model, cfg.train);
        r.entropy_floor = trainer->corpus().entropy_floor(cfg.model.seq_len);
        r.parameters = trainer->parameter_count();
        r.flops_per_token = model::forward_flops_per_token(cfg.model);
        const double tokens = static_cast<double>(cfg.train.global_batch) * cfg.model.seq_len;
        if (rank == 0)
          std::printf("point %zu/%zu: %s | %zu parameters, %s, corpus entropy floor %.4f nats (uniform %.4f)\n",
                      i + 1, total, settings_text(r.point).c_str(), r.parameters,
                      model::to_string(cfg.train.precision), r.entropy_floor,
                      std::log(static_cast<double>(cfg.model.vocab)));
        for (int s = 0; s < cfg.train.steps; ++s) {
          r.steps.push_back(trainer->step());
          const auto& st = r.steps.back();
          if (rank == 0) {
            std::printf("  step %4d/%d  loss %.6f  lm %.6f", s + 1, cfg.train.steps, st.loss, st.lm_loss);
            if (cfg.model.moe.experts > 0) std::printf("  aux %.4f  imbalance %.2f", st.aux_loss, st.moe.imbalance);
            std::printf("  %.4f s  %.0f tokens/s%s\n", st.time_s, tokens / st.time_s,
                        s < cfg.train.warmup_steps ? "  (warm-up)" : "");
            std::fflush(stdout);
          }
        }
        r.memory = trainer->memory();
        r.memory_per_rank = {r.memory};
        r.status = "ok";
      } catch (const std::exception& ex) {
        r.status = std::string("failed: ") + ex.what();
        ++failures;
      }
    }
    results.push_back(r);
    if (rank == 0) {
      write_summary(dir, deck.path, provenance, results);
      write_points_csv(dir, results);
      if (cfg.output.trace && r.status == "ok") write_trace(dir, r);
      const double now = model::steady_seconds();
      const double per_point = (now - run_begin) / static_cast<double>(i + 1);
      const double step_s = measured_median(r, [](const model::StepResult& s) { return s.time_s; });
      const double tokens = static_cast<double>(cfg.train.global_batch) * cfg.model.seq_len;
      std::printf("point %zu/%zu done in %.2f s: %s", i + 1, total, now - point_begin, r.status.c_str());
      if (r.status == "ok")
        std::printf(", step %.4f s, %.0f tokens/s, final loss %.6f", step_s, step_s > 0 ? tokens / step_s : 0.0,
                    r.steps.back().loss);
      std::printf(", about %.0f s left\n", per_point * static_cast<double>(total - i - 1));
      std::fflush(stdout);
    }
  }
  if (rank == 0) std::printf("results in %s/summary.json\n", dir.c_str());
  return failures ? 1 : 0;
}

}  // namespace paraxis::driver
