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

#include "model/shard_layout.hpp"
#include "model/trainer.hpp"
#include "parallel/process_grid.hpp"

namespace paraxis::parallel {

struct ParallelOptions {
  int zero = 0;
  double bucket_mb = 25;
  bool overlap = false;
  std::string backend = "mpi";     // mpi | nccl
  std::string schedule = "1f1b";   // gpipe | 1f1b | interleaved
  int virtual_stages = 1;          // model chunks per pipeline stage (interleaved)
  std::vector<int> stage_layers;   // layers per model chunk; empty: balanced by modelled cost
  bool sequence_parallel = false;  // with tp > 1
};

// What the rank at `coords` holds: its tensor-parallel slice, its experts, and the model
// chunks of its pipeline stage (chunk c of pp * virtual_stages on stage c % pp), in model
// order. global_chunk_of (if given) receives, per local chunk, its model chunk index.
model::ShardLayout shard_layout_of(const model::ModelConfig& m, const GridShape& shape,
                                   const GridCoords& coords, const ParallelOptions& opt,
                                   std::vector<int>* global_chunk_of = nullptr);

// Collective over the grid's world. Throws std::invalid_argument (the same message on every
// rank) when the model, batch or options do not fit the grid.
std::unique_ptr<model::Trainer> make_parallel_trainer(const model::ModelConfig& m,
                                                      const model::TrainConfig& t,
                                                      const ProcessGrid& grid,
                                                      const ParallelOptions& opt);

}  // namespace paraxis::parallel
