// What every performance model evaluates: one run's parallel configuration (config/: the one
// type the deck, the parallel engine and the models share) with the batch, the precision and the
// data-parallel bucketing of that run, as plain values so that the models stay free of the
// driver, of MPI and of Kokkos. The models read the effective settings (effective_zero(), sp()).
#pragma once

#include <string>
#include <vector>

#include "config/parallel_config.hpp"
#include "model/model_config.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::perfmodel {

struct Scenario : config::ParallelConfig {
  int global_batch = 8;  // sequences per step, all replicas together
  int micro_batch = 1;   // sequences per micro-batch
  model::Precision precision = model::Precision::fp32;
  model::Recompute recompute = model::Recompute::none;  // train.recompute
  int recompute_layers = 0;  // train.recompute_layers (full: first N blocks per chunk; 0 all)
  double bucket_mb = 25;     // comm.bucket_mb: ZeRO-0 all-reduce buckets
  bool overlap = false;      // comm.overlap

  // m: micro-batches per data-parallel replica and step (config::micro_batches).
  int micro_batches() const { return config::micro_batches(train(), *this); }
  schedule::PipelineShape pipeline_shape() const { return config::pipeline_shape(train(), *this); }
  // The batch as the training configuration states it.
  model::TrainConfig train() const;
};

// The scenario of a run: its parallel, communication and training sections.
Scenario scenario_of(const config::ParallelConfig& p, const config::CommConfig& comm,
                     const model::TrainConfig& t);

// Element sizes in bytes, per precision, as paraxis stores them (docs/model.md, "Precision"):
// activations and parameters in the training type; gradients, Adam moments, master weights
// and accumulators (LayerNorm statistics, loss sums) in fp64 for fp64 and fp32 otherwise.
struct ElementBytes {
  int activation = 4;   // e
  int accumulator = 4;  // a
  int gradient = 4;     // g
  int parameter = 4;    // t
};
ElementBytes element_bytes(model::Precision p);

// Whether the training type differs from the gradient type, so that the optimizer keeps an
// fp32 master copy of the parameters (bf16).
bool has_master_copy(model::Precision p);

// One line naming every degree, e.g. "tp=2 pp=2 dp=2 ep=1 mb=1 zero=1 1f1b sp".
std::string describe(const Scenario& c);

}  // namespace paraxis::perfmodel
