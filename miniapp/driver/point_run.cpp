// One sweep point on every rank (point_run.hpp): the grid, the calibration and the trainer are
// built here; the checkpoint calls are point_saves.hpp's and the stages that follow (train,
// gather, verify) point_stages.hpp's. Every wait
// on other ranks goes through the watchdog (parallel/watchdog.hpp), so a rank that stops
// responding ends the job with a message naming it instead of hanging it.
#include "driver/point_run.hpp"

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "driver/point_recheck.hpp"
#include "driver/point_saves.hpp"
#include "driver/point_stages.hpp"
#include "model/gpt_model.hpp"
#include "model/trainer.hpp"
#include "parallel/link_emulation.hpp"
#include "parallel/link_measure.hpp"
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

namespace {

// The process-wide settings a point runs under: its watchdog (no step yet) and its GEMM choice.
void arm_point(const RunConfig& cfg) {
  wd::configure(cfg.comm.timeout_s);
  wd::set_step(-1);
  wd::set_micro_batch(-1);
  kernels::set_automatic_gemm(cfg.hardware.gemm == GemmChoice::portable
                                  ? kernels::GemmVariant::portable
                                  : kernels::GemmVariant::automatic);
}

// One rank, nothing to shard: the single-rank reference trainer itself, with no grid.
bool single_rank_point(const RunConfig& cfg, int world) {
  const auto& p = cfg.parallel;
  return world == 1 && p.dp == 1 && p.zero == 0 && p.pp == 1 &&
         cfg.comm.backend == config::CommBackend::mpi &&
         p.schedule != schedule::ScheduleKind::gpipe;
}

// The point's trainer on `grid`; without one, the single-rank reference trainer itself.
std::unique_ptr<model::Trainer> build_trainer(const RunConfig& cfg,
                                              const parallel::ProcessGrid* grid) {
  return grid ? parallel::make_parallel_trainer(cfg.model, cfg.train, cfg.parallel, cfg.comm, *grid,
                                                cfg.fault.slow_rank)
              : model::make_trainer(cfg.model, cfg.train);
}

// Builds the point's grid (several ranks), calibrates (hardware.calibrate), then the trainer;
// records the links fault.slow_axis measured for this point.
std::unique_ptr<model::Trainer> make_point_trainer(const RunConfig& cfg, int world,
                                                   std::unique_ptr<parallel::ProcessGrid>& grid,
                                                   Calibrator& calibrator, PointResult& r) {
  const auto& p = cfg.parallel;
  const bool single = single_rank_point(cfg, world);
  parallel::clear_measured_links();  // fault.slow_axis: this point's figures only
  if (!single) {
    grid = std::make_unique<parallel::ProcessGrid>(MPI_COMM_WORLD, p);
    // A slow link's node that does not exist is refused here, on every rank, before anything
    // is calibrated (make_link_model throws naming fault.slow_link.nodes).
    parallel::make_link_model(cfg.comm.links, grid->nodes(cfg.comm.links.ranks_per_node));
  }
  if (cfg.hardware.calibrate) r.calibration = calibrator.calibrate(cfg, grid.get());
  std::unique_ptr<model::Trainer> trainer = build_trainer(cfg, grid.get());
  for (const auto& [axis, l] : parallel::measured_links())
    r.slow_axis_links[axis] = {{"alpha_s", l.alpha_s}, {"bytes_per_s", l.bytes_per_s}};
  return trainer;
}

// What the point is, recorded before its steps (size, FLOPs, the corpus's entropy floor) and
// printed on rank 0.
void describe_point(const RunConfig& cfg, const PointContext& ctx, model::Trainer& trainer,
                    PointResult& r) {
  if (ctx.verify) trainer.record_routing(true);
  r.entropy_floor = trainer.corpus().entropy_floor(cfg.model.seq_len);
  r.parameters = trainer.parameter_count();
  r.flops_per_token = model::forward_flops_per_token(cfg.model);
  r.recompute_flops_per_token = model::recompute_forward_flops_per_token(
      cfg.model, cfg.train,
      model::split_layers(cfg.model, cfg.parallel.chunks(), cfg.parallel.stage_layers));
  if (ctx.rank == 0)
    std::printf(
        "point %zu/%zu: %s | %zu parameters, %s, corpus entropy floor %.4f nats (uniform %.4f)\n",
        ctx.index + 1, ctx.total, settings_text(r.point).c_str(), r.parameters,
        model::to_string(cfg.train.precision), r.entropy_floor,
        std::log(static_cast<double>(cfg.model.vocab)));
  std::fflush(stdout);  // before the steps: once they run, output_pacer.hpp paces the writes
}

}  // namespace

// The steps a point goes through: armed, built (grid, calibration, trainer), described, resumed,
// trained with its checkpoints saved on cadence, gathered to rank 0, then its verdict (diverged,
// ok, or --verify's comparison with the single-rank reference).
void run_point(const RunConfig& cfg, const PointContext& ctx, PointResult& r) {
  arm_point(cfg);
  std::unique_ptr<parallel::ProcessGrid> grid;
  auto trainer = make_point_trainer(cfg, ctx.world, grid, *ctx.calibrator, r);
  describe_point(cfg, ctx, *trainer, r);
  // A moment every rank shares (to a barrier's skew): the trace's time origin.
  wd::barrier(MPI_COMM_WORLD, "barrier before the first step");
  const double t0 = model::steady_seconds();
  PointSaves saves(cfg, ctx, *trainer, r);
  saves.resume();
  std::string diverged =
      train_steps(cfg, ctx.rank, *trainer, r.steps, [&saves](int done) { saves.after_step(done); });
  diverged = saves.finish(std::move(diverged));
  gather_steps_and_trace(cfg, ctx.world, ctx.rank, t0, r);
  gather_memory(trainer->memory(), ctx.world, r);
  if (!diverged.empty()) {
    r.status = PointStatus::diverged(diverged);
    if (ctx.rank == 0) std::printf("  diverged: %s; the sweep goes on\n", diverged.c_str());
    return;
  }
  // Every rank takes part in gathering the final parameters; rank 0 compares them with the
  // single-rank reference it computes now.
  std::vector<double> params = trainer->parameters();
  const double divergence = ctx.verify ? trainer->replica_divergence() : 0.0;
  trainer.reset();  // its memory freed before the recheck's compute-only trainer is built
  // The calibration timed again on the same ranks and communicators (docs/report.md, "Recheck"):
  // what tells a machine that changed since calibration from the model's miss; then, where a
  // miss is left unexplained, the steps run again (docs/report.md, "Rerun"): does it recur?
  if (r.calibration) {
    r.recheck = recheck_json(recheck_point(cfg, grid.get(), *r.calibration, r.steps), cfg);
    rerun_if_missed(
        cfg, ctx.world, ctx.rank, [&] { return build_trainer(cfg, grid.get()); }, r);
  }
  grid.reset();
  r.status = PointStatus::ok();
  if (!ctx.verify) return;
  verify_point(cfg, ctx.rank, params, divergence, r);
}

}  // namespace paraxis::driver
