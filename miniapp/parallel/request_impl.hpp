// The state behind a parallel::Request, shared by the communicator backends.
#pragma once

#include <mpi.h>

#include "parallel/communicator.hpp"
#include "parallel/mpi_staging.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::parallel {

struct Request::Impl {
  const char* op = "";
  std::size_t bytes = 0;
  double begin = 0;
  double exposed = 0;  // time spent blocked in test/wait
  bool done = false;   // the backend completed it (test/wait saw it)
  double done_at = 0;  // when the backend's completion was seen
  // Link emulation: seconds added, counted from the start (collectives: the emulated link
  // runs while the caller computes) or from the backend's completion (receives: the message
  // is charged when it is looked for). 0: nothing added.
  double extra = 0;
  bool extra_from_start = true;
  double ready_at() const { return extra_from_start ? begin + extra : done_at + extra; }
  MPI_Request mpi = MPI_REQUEST_NULL;
  watchdog::Wait wait;      // what wait() waits for, under the watchdog's deadline
  void* backend = nullptr;  // backend-specific completion handle (NCCL: a cudaEvent_t)
  // Staging (mpi_staging.hpp): the host buffers the MPI operation works on, held until it
  // completes, and where its result is copied then (copy_to null: nothing comes back).
  StagingPool::Lease staged_send, staged_recv;
  void* copy_to = nullptr;
  std::size_t copy_bytes = 0;
};

}  // namespace paraxis::parallel
