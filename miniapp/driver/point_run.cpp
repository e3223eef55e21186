// One sweep point on every rank (point_run.hpp): the grid, the calibration and the trainer are
// built here; the stages that follow (train, gather, verify) are point_stages.hpp's. Every wait
// on other ranks goes through the watchdog (parallel/watchdog.hpp), so a rank that stops
// responding ends the job with a message naming it instead of hanging it.
#include "driver/point_run.hpp"
#include "driver/point_checkpoint.hpp"

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "checkpoint/root_layout.hpp"
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

// Builds the point's grid (several ranks), calibrates (hardware.calibrate), then the trainer.
std::unique_ptr<model::Trainer> make_point_trainer(const RunConfig& cfg, int world,
                                                   std::unique_ptr<parallel::ProcessGrid>& grid,
                                                   Calibrator& calibrator, PointResult& r) {
  const auto& p = cfg.parallel;
  // One rank, nothing to shard: the single-rank reference trainer itself.
  const bool single = world == 1 && p.dp == 1 && p.zero == 0 && p.pp == 1 &&
                      cfg.comm.backend == config::CommBackend::mpi &&
                      p.schedule != schedule::ScheduleKind::gpipe;
  if (!single) {
    grid = std::make_unique<parallel::ProcessGrid>(MPI_COMM_WORLD, p);
    // A slow link's node that does not exist is refused here, on every rank, before anything
    // is calibrated (make_link_model throws naming fault.slow_link.nodes).
    parallel::make_link_model(cfg.comm.links, grid->nodes(cfg.comm.links.ranks_per_node));
  }
  if (cfg.hardware.calibrate) r.calibration = calibrator.calibrate(cfg, grid.get());
  if (single) return model::make_trainer(cfg.model, cfg.train);
  return parallel::make_parallel_trainer(cfg.model, cfg.train, p, cfg.comm, *grid,
                                         cfg.fault.slow_rank);
}

// A save not committed: why, and what `latest` still names.
void say_refused(const std::string& root, const nlohmann::json& saved) {
  std::ifstream in(root + "/" + checkpoint::kLatestFile);
  std::string latest;
  std::getline(in, latest);
  std::printf("  checkpoint after step %d not committed: %s; %s\n", saved["step"].get<int>(),
              saved["refused"].get<std::string>().c_str(),
              latest.empty() ? "there is no earlier checkpoint"
                             : ("latest still names " + latest + ", the last finite one").c_str());
  std::fflush(stdout);
}

}  // namespace

void run_point(const RunConfig& cfg, const PointContext& ctx, PointResult& r) {
  const int world = ctx.world, rank = ctx.rank;
  wd::configure(cfg.comm.timeout_s);
  wd::set_step(-1);
  wd::set_micro_batch(-1);
  kernels::set_automatic_gemm(cfg.hardware.gemm == GemmChoice::portable
                                  ? kernels::GemmVariant::portable
                                  : kernels::GemmVariant::automatic);
  std::unique_ptr<parallel::ProcessGrid> grid;
  parallel::clear_measured_links();  // fault.slow_axis: this point's figures only
  auto trainer = make_point_trainer(cfg, world, grid, *ctx.calibrator, r);
  for (const auto& [axis, l] : parallel::measured_links())
    r.slow_axis_links[axis] = {{"alpha_s", l.alpha_s}, {"bytes_per_s", l.bytes_per_s}};
  if (ctx.verify) trainer->record_routing(true);
  r.entropy_floor = trainer->corpus().entropy_floor(cfg.model.seq_len);
  r.parameters = trainer->parameter_count();
  r.flops_per_token = model::forward_flops_per_token(cfg.model);
  r.recompute_flops_per_token = model::recompute_forward_flops_per_token(
      cfg.model, cfg.train,
      model::split_layers(cfg.model, cfg.parallel.chunks(), cfg.parallel.stage_layers));
  if (rank == 0)
    std::printf(
        "point %zu/%zu: %s | %zu parameters, %s, corpus entropy floor %.4f nats (uniform %.4f)\n",
        ctx.index + 1, ctx.total, settings_text(r.point).c_str(), r.parameters,
        model::to_string(cfg.train.precision), r.entropy_floor,
        std::log(static_cast<double>(cfg.model.vocab)));
  std::fflush(stdout);  // before the steps: once they run, output_pacer.hpp paces the writes
  // A moment every rank shares (to a barrier's skew): the trace's time origin.
  wd::barrier(MPI_COMM_WORLD, "barrier before the first step");
  const double t0 = model::steady_seconds();
  // Checkpoints (docs/checkpoint.md): resume, then save on the deck's cadence.
  const std::string root = checkpoint_root(cfg, ctx.out_dir, ctx.index, ctx.total);
  if (!ctx.resume.empty()) {
    r.resumed = load_checkpoint(cfg, *trainer, ctx.resume, root);
    if (rank == 0)
      std::printf("  resumed from %s after step %d (%.3f s)\n",
                  r.resumed["folder"].get<std::string>().c_str(), trainer->steps_done(),
                  r.resumed["read_s"]["max"].get<double>());
    std::fflush(stdout);
  }
  // An asynchronous save's writes, fsync and commit run behind the next steps (polled at each
  // step's end); its figures are gathered at the next save (or the point's end).
  std::unique_ptr<CheckpointSave> pending;
  r.lineage = lineage_json(ctx.lineage);
  const auto commit = [&] {
    if (!pending) return;
    nlohmann::json saved = pending->finish();
    pending.reset();
    if (saved.contains("refused")) {
      r.checkpoints_refused.push_back(saved);
      if (rank == 0) say_refused(root, saved);
      return;
    }
    r.checkpoints.push_back(std::move(saved));
    const nlohmann::json& c = r.checkpoints.back();
    if (rank == 0)
      std::printf("  checkpoint %s: %.0f bytes, training stalled %.3f s (%.3f s in all)\n",
                  c["folder"].get<std::string>().c_str(), c["total_bytes"].get<double>(),
                  c["exposed_s"]["max"].get<double>(), c["total_s"].get<double>());
  };
  int every = cfg.checkpoint.every;
  int auto_from = 0;  // every: auto counts its interval from its first (measuring) save
  const auto save = [&](int done) {
    if (pending) pending->poll();  // an asynchronous save's commit goes on; never waits
    if (every == kCheckpointAuto) {
      // The measuring save's figures, once committed on every rank (an asynchronous one's
      // writes run behind the steps until then).
      if (pending && !pending->committed_everywhere()) return;
      commit();
      // checkpoint.every: auto: the save after the first step, in the mode in use, measures the
      // cost C (an asynchronous one's stall); the cadence is then Daly's interval at the system
      // MTBF of the point's ranks, in steps, counted from that save.
      if (auto_from == 0 || r.checkpoints.empty()) {  // none yet, or not committed (not finite)
        pending = std::make_unique<CheckpointSave>(cfg, *trainer, root, ctx.lineage, done,
                                                   cfg.checkpoint.async);
        auto_from = done;
        if (cfg.checkpoint.async) return;
        commit();
        if (r.checkpoints.empty()) return;
      }
      r.checkpoint_auto = auto_cadence(cfg, r.checkpoints.back(), r.steps.front().time_s, world);
      every = r.checkpoint_auto["every"].get<int>();
      say_auto_cadence(r.checkpoint_auto, rank);
      if (done == auto_from) return;
    }
    if (every <= 0 || (done - auto_from) % every != 0) return;
    commit();  // the previous save, before this one stages into the same buffer
    pending = std::make_unique<CheckpointSave>(cfg, *trainer, root, ctx.lineage, done,
                                               cfg.checkpoint.async);
    if (!cfg.checkpoint.async) commit();
  };
  std::string diverged = train_steps(cfg, rank, *trainer, r.steps, save);
  commit();
  // The plain-I/O baseline, away from the saves (docs/checkpoint.md, "Cost").
  if (!r.checkpoints.empty())
    r.checkpoints.front()["baseline"] = io_baseline(root, r.checkpoints.front(), 3);
  // A state that was not finite diverged, even when no later loss showed it.
  if (diverged.empty() && !r.checkpoints_refused.empty())
    diverged = "the state after step " + r.checkpoints_refused.front()["step"].dump() +
               " is not finite (its checkpoint was not committed)";
  // A restart's cost to the first step: reading the checkpoint, then that step.
  if (!r.resumed.is_null() && !r.steps.empty())
    r.resumed["restart_to_first_step_s"] =
        r.resumed["read_s"]["max"].get<double>() + r.steps.front().time_s;
  gather_steps_and_trace(cfg, world, rank, t0, r);
  gather_memory(trainer->memory(), world, r);
  if (!diverged.empty()) {
    r.status = PointStatus::diverged(diverged);
    if (rank == 0) std::printf("  diverged: %s; the sweep goes on\n", diverged.c_str());
    return;
  }
  // Every rank takes part in gathering the final parameters; rank 0 compares them with the
  // single-rank reference it computes now.
  std::vector<double> params = trainer->parameters();
  const double divergence = ctx.verify ? trainer->replica_divergence() : 0.0;
  trainer.reset();
  grid.reset();
  r.status = PointStatus::ok();
  if (!ctx.verify) return;
  verify_point(cfg, rank, params, divergence, r);
}

}  // namespace paraxis::driver
