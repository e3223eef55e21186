// Data parallelism with ZeRO stages 0-3 over the data-parallel group of a ProcessGrid.
// Each rank trains on its global_batch/dp sequences (the same micro-batches as the single-rank
// run, split by sample index) and the result is the single-rank training run:
//   0  gradients summed with a bucketed all-reduce (comm.bucket_mb), optionally overlapped
//      with backward (comm.overlap); every rank applies AdamW to everything
//   1  optimizer state sharded: gradients reduce-scattered once per step, each rank updates
//      its shard, parameters all-gathered
//   2  also gradients: reduce-scatter after every micro-batch into the owned shard; the full
//      gradient buffer lives only during the step
//   3  also parameters: each unit (embedding, block, head) is all-gathered before its forward
//      and again before its backward into a workspace that lives only during the step;
//      its gradients are reduce-scattered as soon as its backward is done
// Shards are per unit; units are padded to a multiple of dp, so uneven sizes need no case.
#pragma once

#include <memory>
#include <string>

#include "model/trainer.hpp"
#include "parallel/comm_log.hpp"
#include "parallel/process_grid.hpp"

namespace paraxis::parallel {

struct DataParallelOptions {
  int zero = 0;
  double bucket_mb = 25;
  bool overlap = false;
  std::string backend = "mpi";
};

// Collective over the grid. grid.shape() must have tp = pp = 1 (the data-parallel axis only).
std::unique_ptr<model::Trainer> make_data_parallel_trainer(const model::ModelConfig& m,
                                                           const model::TrainConfig& t,
                                                           const ProcessGrid& grid,
                                                           const DataParallelOptions& opt);

}  // namespace paraxis::parallel
