// The state behind a parallel::Request, shared by the communicator backends.
#pragma once

#include <mpi.h>

#include "parallel/communicator.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::parallel {

struct Request::Impl {
  const char* op = "";
  std::size_t bytes = 0;
  double begin = 0;
  double exposed = 0;  // time spent blocked in test/wait
  bool done = false;
  MPI_Request mpi = MPI_REQUEST_NULL;
  watchdog::Wait wait;      // what wait() waits for, under the watchdog's deadline
  void* backend = nullptr;  // backend-specific completion handle (NCCL: a cudaEvent_t)
};

}  // namespace paraxis::parallel
