// The training step on a process grid, every axis stacked: tensor (+ sequence) parallelism and
// expert parallelism inside the model shard (gpt_model.hpp), pipeline parallelism by a
// schedule of per-(micro-batch, chunk) actions (pipeline_schedule.hpp) executed with
// non-blocking point-to-point transfers, and data parallelism with ZeRO 0-3
// (zero_optimizer.hpp). The result of every step is the single-rank training run's
// (docs/parallel.md, "The correctness contract").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/parallel_config.hpp"
#include "model/shard_layout.hpp"
#include "model/trainer.hpp"
#include "parallel/process_grid.hpp"

namespace paraxis::parallel {

// What the rank at `coords` holds: its tensor-parallel slice, its experts, and the model
// chunks of its pipeline stage (chunk c of pp * virtual_stages on stage c % pp), in model
// order. global_chunk_of (if given) receives, per local chunk, its model chunk index.
model::ShardLayout shard_layout_of(const model::ModelConfig& m, const config::ParallelConfig& p,
                                   const GridCoords& coords,
                                   std::vector<int>* global_chunk_of = nullptr);

// Collective over the grid's world. Throws std::invalid_argument (the same message on every
// rank) when the configuration breaks a rule (config::rule_violations), `p` is not the
// grid's shape, or `slow` names a rank outside the grid or a factor < 1. `slow`
// (fault.slow_rank, docs/diagnosis.md): in its steps, world rank slow.rank computes
// slow.factor times slower (forward, backward, W and the optimizer step). Every step sets the
// wait time of its collectives (model::CommTotals::wait_s; clock offsets estimated here, once).
std::unique_ptr<model::Trainer> make_parallel_trainer(
    const model::ModelConfig& m, const model::TrainConfig& t, const config::ParallelConfig& p,
    const config::CommConfig& comm, const ProcessGrid& grid, const config::SlowRank& slow = {});

// The same engine and step with every training collective and transfer a local copy
// (local_communicator.hpp), no emulated link, no fault and no wait attribution: this rank's
// shard runs its stage's schedule alone, its kernels at the step's shapes. What the compute
// calibration times (driver/calibration_compute.cpp): each span of a step's StepResult is one
// action (forward, backward, backward_weight of a micro-batch and chunk, or the optimizer),
// its compute the span less its blocked_s. Collective over the grid's data-parallel groups
// only where ZeRO-1/2's parameter gathers stay real (local_communicator.hpp): every rank of
// the grid builds it and runs the same steps.
std::unique_ptr<model::Trainer> make_compute_only_trainer(const model::ModelConfig& m,
                                                          const model::TrainConfig& t,
                                                          const config::ParallelConfig& p,
                                                          const config::CommConfig& comm,
                                                          const ProcessGrid& grid);

}  // namespace paraxis::parallel
