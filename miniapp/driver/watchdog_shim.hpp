// TEMPORARY (removed once parallel/watchdog.hpp lands): plain MPI waits with the watchdog's API.
#pragma once
#if __has_include("parallel/watchdog.hpp")
#include "parallel/watchdog.hpp"
#else
#include <mpi.h>
namespace paraxis::parallel::watchdog {
inline void configure(double) {}
inline void set_step(int) {}
inline void set_micro_batch(int) {}
inline void wait_all(int n, MPI_Request* r, const char*, const char*, MPI_Comm) {
  MPI_Waitall(n, r, MPI_STATUSES_IGNORE);
}
inline void barrier(MPI_Comm c, const char*) { MPI_Barrier(c); }
}  // namespace paraxis::parallel::watchdog
#endif
