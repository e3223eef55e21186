// Reading a checkpoint once per job (docs/checkpoint.md, "Read once"): collective over a
// communicator. Every rank names the saved shards it will read (Reader::shards_of for each of
// its regions); a shard that several ranks need (ZeRO-0 replicas, tensors replicated over tensor
// parallelism, the whole master copies a ZeRO 1-2 rank loads) is read from storage and verified
// by one of them and sent to the others over the communicator. Afterwards each rank's Reader
// holds every shard it named (Reader::keep), so its reads make no further storage access.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "checkpoint/reader.hpp"
#include "checkpoint/writer.hpp"  // WaitFunction

namespace paraxis::checkpoint {

struct ReadOnceStats {
  std::size_t read_bytes = 0;      // this rank: read from storage (and verified)
  std::size_t received_bytes = 0;  // this rank: received from the rank that read them
  std::size_t sent_bytes = 0;      // this rank: sent to ranks that need what it read
  double read_s = 0;               // this rank: reading and verifying its shards
  double exchange_s = 0;           // this rank: the sends and receives
};

// Which rank reads saved shard s: needers[s] is the sorted list of ranks that need it (empty:
// nobody). Each shard goes to one of its needers, the largest shards first, each to the needer
// with the fewest bytes assigned so far (the lowest rank on a tie): every rank computes the same
// plan from the same lists. Returns the reader per shard (-1: nobody needs it).
std::vector<int> read_once_plan(const std::vector<std::vector<int>>& needers,
                                const std::vector<std::size_t>& shard_bytes);

// Collective over `comm` (every rank of it calls, with the same checkpoint folder open): see the
// top of this file. `needed` are this rank's shard numbers (Reader::shards_of). A shard that
// cannot be read or fails its checksum makes every rank throw the same std::runtime_error: the
// Reader's message on the (lowest) failing rank, naming the file and the tensor.
// `wait` completes the requests it starts (the driver's watchdog; writer.hpp).
ReadOnceStats read_once(MPI_Comm comm, const Reader& reader, const std::vector<std::size_t>& needed,
                        const WaitFunction& wait);

}  // namespace paraxis::checkpoint
