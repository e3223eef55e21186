// The checkpoint calls of one point (docs/checkpoint.md): --resume before the first step, the
// saves on the deck's cadence after the steps (checkpoint.every: N, or auto's cadence measured
// by a first synchronous save), an asynchronous save committed at the next step's end, and what
// the point records of them. The saves themselves: point_checkpoint.hpp.
#pragma once

#include <memory>
#include <string>

#include "driver/point_checkpoint.hpp"
#include "driver/point_run.hpp"

namespace paraxis::driver {

class PointSaves {
 public:
  // Records the point's lineage in r; nothing is read or written yet.
  PointSaves(const RunConfig& cfg, const PointContext& ctx, model::Trainer& trainer,
             PointResult& r);
  PointSaves(const PointSaves&) = delete;
  PointSaves& operator=(const PointSaves&) = delete;

  // --resume (when given): loads the checkpoint into the trainer, records r.resumed, says so.
  void resume();
  // After `done` completed steps (train_steps's after_step): polls a pending asynchronous save
  // (its writes, fsync and commit run behind the steps; never waits), then saves when the
  // cadence says so, committing the previous save first.
  void after_step(int done);
  // After the last step: commits a pending save, takes the plain-I/O baseline and the restart's
  // cost to the first step. Returns `diverged`, or, when it is empty and a save was refused, why
  // the state diverged (not finite even where no later loss showed it).
  std::string finish(std::string diverged);

 private:
  void commit();
  bool save_auto(int done);  // every: auto; whether a cadence save may follow

  const RunConfig& cfg_;
  const PointContext& ctx_;
  model::Trainer& trainer_;
  PointResult& r_;
  std::string root_;
  std::unique_ptr<CheckpointSave> pending_;  // an asynchronous save, its writes behind a step
  int every_;
  int auto_from_ = 0;  // every: auto counts its interval from its first (measuring) save
};

}  // namespace paraxis::driver
