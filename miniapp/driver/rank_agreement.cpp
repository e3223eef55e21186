// Rank agreement (rank_agreement.hpp): command lines gathered to rank 0 and compared; the
// deck's bytes read once and broadcast. Both use MPI directly: they run before the run's
// configuration (and so before the watchdog's deadline) is known.
#include "driver/rank_agreement.hpp"

#include <mpi.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "deck/deck.hpp"
#include "io/input_file.hpp"

namespace paraxis::driver {

namespace {

// Sends a string from rank 0 to every rank (length first).
void broadcast_string(std::string& s) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  unsigned long long n = s.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  if (rank != 0) s.assign(n, '\0');
  // MPI counts are int: send in chunks so that a large deck cannot overflow them.
  constexpr unsigned long long kChunk = 1ull << 30;
  for (unsigned long long off = 0; off < n; off += kChunk)
    MPI_Bcast(&s[off], static_cast<int>(std::min(kChunk, n - off)), MPI_CHAR, 0, MPI_COMM_WORLD);
}

}  // namespace

std::string command_line_disagreement(int argc, char** argv) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // The arguments, NUL-separated (argv[0] may legitimately differ: a relative or full path).
  std::string mine;
  for (int i = 1; i < argc; ++i) mine.append(argv[i]).push_back('\0');
  std::string reference = mine;
  broadcast_string(reference);
  int differs = mine == reference ? 0 : 1;
  std::vector<int> all(static_cast<std::size_t>(world));
  MPI_Allgather(&differs, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::ostringstream ranks;
  int count = 0;
  for (int k = 0; k < world; ++k)
    if (all[static_cast<std::size_t>(k)]) ranks << (count++ ? ", " : "") << k;
  if (count == 0) return "";
  auto printable = [](std::string s) {
    for (auto& c : s)
      if (c == '\0') c = ' ';
    return s;
  };
  std::ostringstream msg;
  msg << "rank" << (count > 1 ? "s " : " ") << ranks.str() << (count > 1 ? " were" : " was")
      << " started with arguments different from rank 0's (an MPMD launch mistake?); rank 0: '"
      << printable(reference) << "'";
  // Name the first differing rank's own arguments too: rank 0 cannot see them otherwise.
  int first = -1;
  for (int k = 0; k < world && first < 0; ++k)
    if (all[static_cast<std::size_t>(k)]) first = k;
  std::string theirs = rank == first ? mine : std::string();
  if (first != 0) {
    unsigned long long n = theirs.size();
    MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, first, MPI_COMM_WORLD);
    theirs.resize(n);
    if (n > 0) MPI_Bcast(&theirs[0], static_cast<int>(n), MPI_CHAR, first, MPI_COMM_WORLD);
  }
  msg << ", rank " << first << ": '" << printable(theirs) << "'";
  return msg.str();
}

std::string read_on_rank0_and_broadcast(const std::string& path, std::string& error) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string text;
  error.clear();
  if (rank == 0) {
    try {
      text = io::read_regular_file(path, "deck", kMaxDeckBytes);
    } catch (const io::ReadError& e) {
      error = "cannot read the deck: " + e.reason;
    }
  }
  broadcast_string(error);
  if (!error.empty()) return "";
  broadcast_string(text);
  return text;
}

}  // namespace paraxis::driver
