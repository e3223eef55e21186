// Every rank runs the same deck. On a cluster the deck may sit on a node-local path, and an
// MPMD launch can give ranks different arguments: rather than let ranks parse different
// configurations (and hang in mismatched collectives), rank 0 reads the deck and broadcasts
// it, and every rank's command line is compared with rank 0's before anything runs.
#pragma once

#include <string>
#include <vector>

namespace paraxis::driver {

// Collective over MPI_COMM_WORLD. Returns "" when every rank was started with the same
// arguments (argv[1..]); otherwise (on every rank) one message naming the ranks that differ
// from rank 0 and how.
std::string command_line_disagreement(int argc, char** argv);

// Collective over MPI_COMM_WORLD: rank 0 reads the deck (a regular file of at most
// kMaxDeckBytes, io/input_file.hpp) and every rank receives its bytes. `error` is set (on every
// rank, the same text) when rank 0 cannot read it or refuses it.
std::string read_on_rank0_and_broadcast(const std::string& path, std::string& error);

}  // namespace paraxis::driver
