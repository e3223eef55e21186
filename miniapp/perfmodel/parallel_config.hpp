// The configuration every performance model evaluates: the parallel shape, the batch, the ZeRO
// stage, the pipeline schedule and the precision of one paraxis run (what a deck's parallel,
// train and comm sections resolve to), as a plain struct so that the models stay free of the
// driver, of MPI and of Kokkos.
#pragma once

#include <string>
#include <vector>

#include "model/model_config.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::perfmodel {

struct ParallelConfig {
  int tp = 1, pp = 1, dp = 1, ep = 1;
  int global_batch = 8;  // sequences per step, all replicas together
  int micro_batch = 1;   // sequences per micro-batch
  int zero = 0;
  parallel::ScheduleKind schedule = parallel::ScheduleKind::one_f_one_b;
  int virtual_stages = 1;  // model chunks per pipeline stage (interleaved only)
  bool sequence_parallel = false;
  model::Precision precision = model::Precision::fp32;
  double bucket_mb = 25;          // comm.bucket_mb: ZeRO-0 all-reduce buckets
  bool overlap = false;           // comm.overlap
  std::vector<int> stage_layers;  // layers per model chunk; empty: balanced by FLOPs

  // Sequence parallelism only changes anything with more than one tensor-parallel rank.
  bool sp() const { return sequence_parallel && tp > 1; }
  int world() const { return tp * pp * dp; }
  // m: micro-batches per data-parallel replica and step.
  int micro_batches() const { return global_batch / (dp * micro_batch); }
  int chunks() const { return pp * virtual_stages; }
  parallel::PipelineShape pipeline_shape() const { return {pp, micro_batches(), virtual_stages}; }
};

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
std::string describe(const ParallelConfig& c);

}  // namespace paraxis::perfmodel
