// MPI return codes as exceptions, one message form for every MPI call of the parallel layer
// ("MPI <call> failed: <MPI_Error_string>"). MPI's default handler aborts before a code is ever
// returned; communicators that set MPI_ERRORS_RETURN get the message instead.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace paraxis::parallel {

inline void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string("MPI ") + what + " failed: " + std::string(msg, len));
}

}  // namespace paraxis::parallel
