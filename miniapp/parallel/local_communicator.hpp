// A Communicator that moves nothing: every collective and transfer is a local copy with the
// shapes of the real one, so the training step's own code (parallel_trainer.cpp: the schedule
// executor, ZeRO, recomputation, the split backward) runs its kernels at their sizes, with
// finite values, and no rank waits for another. The compute calibration times the step this
// way (driver/calibration_compute.cpp; docs/perfmodel.md, "Calibration").
//   - all-reduce: this rank's buffer is the result (as if every member held the same);
//   - reduce-scatter: this rank's own block; all-gather: this rank's block in every slot;
//   - all-to-all(v): every member routes as this one does, so from each source this rank
//     receives what it sends itself (an expert then computes ep times its own rows for it, on
//     average what the whole group sends it);
//   - send: nothing; receive: zeros; broadcast and barrier: nothing.
// The group's rank and size are those of `comm` (the real group), read once; no MPI call
// follows. Calls are recorded like any backend's (CommLog), so the time a step spends in
// them is blocked time, not compute.
#pragma once

#include <memory>

#include "parallel/communicator.hpp"

namespace paraxis::parallel {

// gathers_through (optional, not owned): all-gathers go through it instead (the real group).
// ZeRO-1/2 all-gather the updated parameters after AdamW; where the peers read them straight
// from this process's memory, the next AdamW writing those pages runs slower, and the
// calibration keeps that effect (docs/performance.md, "Output inside the timed steps, the
// VM's cores and MPI's zero-copy transport").
std::unique_ptr<Communicator> make_local_communicator(MPI_Comm comm, Axis axis, CommLog* log,
                                                      Communicator* gathers_through = nullptr);

}  // namespace paraxis::parallel
