// Inside the watchdog (not for other callers): what each rank knows of its communicators, the
// wait it is in, and the control channel on which ranks ask each other where they are.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "parallel/watchdog.hpp"

namespace paraxis::parallel::watchdog::detail {

double now();

// Per communicator (cached on it as an MPI attribute, so a freed communicator's handle reused
// by a new one starts afresh): its members' world ranks, a key that names the group on every
// member (a hash of those ranks), and how many collectives this rank has started on it.
struct CommRecord {
  std::uint64_t key = 0;
  long started = 0;
  int rank = 0;
  std::vector<int> world;  // world rank of each member, by rank in the communicator
};
CommRecord& record_of(MPI_Comm comm);

// The wait this rank is in, which its answers describe.
struct Current {
  bool active = false;
  Wait wait;
  double since = 0;
};
Current& current();

// Creates the control channel (collective over MPI_COMM_WORLD) unless it exists.
void open_channel();
bool channel_open();

// At expiry: asks the members of w's group, waits up to grace_s() for their answers while
// answering theirs, and fills d. Returns true, with d unfinished, when done(context) completed
// the wait meanwhile.
bool diagnose(const Wait& w, double waited_s, Poll done, void* context, Diagnosis& d);

}  // namespace paraxis::parallel::watchdog::detail
