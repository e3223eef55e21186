// The checkpoint calls of one point (point_saves.hpp).
#include "driver/point_saves.hpp"

#include <cstdio>
#include <fstream>

#include "checkpoint/root_layout.hpp"

namespace paraxis::driver {

namespace {

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

PointSaves::PointSaves(const RunConfig& cfg, const PointContext& ctx, model::Trainer& trainer,
                       PointResult& r)
    : cfg_(cfg),
      ctx_(ctx),
      trainer_(trainer),
      r_(r),
      root_(checkpoint_root(cfg, ctx.out_dir, ctx.index, ctx.total)),
      every_(cfg.checkpoint.every) {}

void PointSaves::resume() {
  if (!ctx_.resume.empty()) {
    r_.resumed = load_checkpoint(cfg_, trainer_, ctx_.resume, root_);
    if (ctx_.rank == 0)
      std::printf("  resumed from %s after step %d (%.3f s)\n",
                  r_.resumed["folder"].get<std::string>().c_str(), trainer_.steps_done(),
                  r_.resumed["read_s"]["max"].get<double>());
    std::fflush(stdout);
  }
  r_.lineage = lineage_json(ctx_.lineage);
}

void PointSaves::commit() {
  if (!pending_) return;
  nlohmann::json saved = pending_->finish();
  pending_.reset();
  if (saved.contains("refused")) {
    r_.checkpoints_refused.push_back(saved);
    if (ctx_.rank == 0) say_refused(root_, saved);
    return;
  }
  r_.checkpoints.push_back(std::move(saved));
  const nlohmann::json& c = r_.checkpoints.back();
  if (ctx_.rank == 0)
    std::printf("  checkpoint %s: %.0f bytes, training stalled %.3f s (%.3f s in all)\n",
                c["folder"].get<std::string>().c_str(), c["total_bytes"].get<double>(),
                c["exposed_s"]["max"].get<double>(), c["total_s"].get<double>());
}

// checkpoint.every: auto: the save after the first step, in the mode in use, measures the cost
// C (an asynchronous one's stall); the cadence is then Daly's interval at the system MTBF of the
// point's ranks, in steps, counted from that save. Whether a cadence save may follow at `done`.
bool PointSaves::save_auto(int done) {
  // The measuring save's figures, once committed on every rank (an asynchronous one's writes
  // run behind the steps until then).
  if (pending_ && !pending_->committed_everywhere()) return false;
  commit();
  if (auto_from_ == 0 || r_.checkpoints.empty()) {  // none yet, or not committed (not finite)
    pending_ = std::make_unique<CheckpointSave>(cfg_, trainer_, root_, ctx_.lineage, done,
                                                cfg_.checkpoint.async);
    auto_from_ = done;
    if (cfg_.checkpoint.async) return false;
    commit();
    if (r_.checkpoints.empty()) return false;
  }
  r_.checkpoint_auto =
      auto_cadence(cfg_, r_.checkpoints.back(), r_.steps.front().time_s, ctx_.world);
  every_ = r_.checkpoint_auto["every"].get<int>();
  say_auto_cadence(r_.checkpoint_auto, ctx_.rank);
  return done != auto_from_;
}

void PointSaves::after_step(int done) {
  if (pending_) pending_->poll();  // an asynchronous save's commit goes on; never waits
  if (every_ == kCheckpointAuto && !save_auto(done)) return;
  if (every_ <= 0 || (done - auto_from_) % every_ != 0) return;
  commit();  // the previous save, before this one stages into the same buffer
  pending_ = std::make_unique<CheckpointSave>(cfg_, trainer_, root_, ctx_.lineage, done,
                                              cfg_.checkpoint.async);
  if (!cfg_.checkpoint.async) commit();
}

std::string PointSaves::finish(std::string diverged) {
  commit();
  // An asynchronous measuring save committed only now (a short run, a slow disk): its cadence
  // is still chosen and recorded, though no step is left to use it.
  if (every_ == kCheckpointAuto && auto_from_ != 0 && !r_.checkpoints.empty()) save_auto(0);
  // The plain-I/O baseline, away from the saves (docs/checkpoint.md, "Cost").
  if (!r_.checkpoints.empty())
    r_.checkpoints.front()["baseline"] = io_baseline(root_, r_.checkpoints.front(), 3);
  // A state that was not finite diverged, even when no later loss showed it.
  if (diverged.empty() && !r_.checkpoints_refused.empty())
    diverged = "the state after step " + r_.checkpoints_refused.front()["step"].dump() +
               " is not finite (its checkpoint was not committed)";
  // A restart's cost to the first step: reading the checkpoint, then that step.
  if (!r_.resumed.is_null() && !r_.steps.empty())
    r_.resumed["restart_to_first_step_s"] =
        r_.resumed["read_s"]["max"].get<double>() + r_.steps.front().time_s;
  return diverged;
}

}  // namespace paraxis::driver
