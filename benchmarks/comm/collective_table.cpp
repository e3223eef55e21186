// The entries of paraxis-bench-comm's collective table (see collective_table.hpp). Sizes
// follow nccl-tests doc/PERFORMANCE.md: all-reduce and broadcast S is the buffer,
// reduce-scatter the whole input, all-gather the whole output, all-to-all what a rank sends.
#include "collective_table.hpp"

#include <sstream>
#include <stdexcept>

namespace paraxis::bench_comm {

namespace {

using perfmodel::Collective;

std::size_t whole(const Shape& s) {
  return s.count;
}
std::size_t one_share(const Shape& s) {
  return s.per_rank;
}

// Sum over ranks of element j of every rank's input.
double sum_over_ranks(const Shape& s, std::size_t j) {
  double sum = 0;
  for (int q = 0; q < s.ranks; ++q) sum += s.input(q, j);
  return sum;
}

const CollectiveEntry kAllReduce{"all_reduce",
                                 Collective::all_reduce,
                                 "MPI_Allreduce",
                                 "sum",
                                 -1,
                                 false,
                                 false,
                                 whole,
                                 whole,
                                 [](const Shape& s, std::size_t i) { return sum_over_ranks(s, i); },
                                 [](parallel::Communicator& c, const CallArgs& a) {
                                   c.all_reduce(a.send, a.recv, a.count, a.dtype);
                                 },
                                 [](const CallArgs& a) {
                                   MPI_Allreduce(a.send, a.recv, static_cast<int>(a.per_rank),
                                                 a.mpi_type, a.mpi_sum, MPI_COMM_WORLD);
                                 }};

const CollectiveEntry kReduceScatter{
    "reduce_scatter",
    Collective::reduce_scatter,
    "MPI_Reduce_scatter_block",
    "sum",
    -1,
    true,
    false,
    whole,
    one_share,
    [](const Shape& s, std::size_t i) {
      return sum_over_ranks(s, static_cast<std::size_t>(s.rank) * s.per_rank + i);
    },
    [](parallel::Communicator& c, const CallArgs& a) {
      c.reduce_scatter(a.send, a.recv, a.per_rank, a.dtype);
    },
    [](const CallArgs& a) {
      MPI_Reduce_scatter_block(a.send, a.recv, static_cast<int>(a.per_rank), a.mpi_type, a.mpi_sum,
                               MPI_COMM_WORLD);
    }};

const CollectiveEntry kAllGather{"all_gather",
                                 Collective::all_gather,
                                 "MPI_Allgather",
                                 "none",
                                 -1,
                                 true,
                                 false,
                                 one_share,
                                 whole,
                                 [](const Shape& s, std::size_t i) {
                                   return s.input(static_cast<int>(i / s.per_rank), i % s.per_rank);
                                 },
                                 [](parallel::Communicator& c, const CallArgs& a) {
                                   c.all_gather(a.send, a.recv, a.per_rank, a.dtype);
                                 },
                                 [](const CallArgs& a) {
                                   const int pr = static_cast<int>(a.per_rank);
                                   MPI_Allgather(a.send, pr, a.mpi_type, a.recv, pr, a.mpi_type,
                                                 MPI_COMM_WORLD);
                                 }};

const CollectiveEntry kAllToAllV{
    "all_to_all_v",
    Collective::all_to_all,
    "MPI_Alltoallv",
    "none",
    -1,
    true,
    false,
    whole,
    whole,
    [](const Shape& s, std::size_t i) {
      return s.input(static_cast<int>(i / s.per_rank),
                     static_cast<std::size_t>(s.rank) * s.per_rank + i % s.per_rank);
    },
    [](parallel::Communicator& c, const CallArgs& a) {
      c.all_to_all_v(a.send, a.counts, a.displs, a.recv, a.counts, a.displs, a.dtype);
    },
    [](const CallArgs& a) {
      MPI_Alltoallv(a.send, a.counts, a.displs, a.mpi_type, a.recv, a.counts, a.displs, a.mpi_type,
                    MPI_COMM_WORLD);
    }};

// In place on the send buffer, root 0: every rank starts from the root's data, so refilling
// after the check restores the root's input everywhere.
const CollectiveEntry kBroadcast{
    "broadcast",
    Collective::broadcast,
    "MPI_Bcast",
    "none",
    0,
    false,
    true,
    whole,
    whole,
    [](const Shape& s, std::size_t i) { return s.input(0, i); },
    [](parallel::Communicator& c, const CallArgs& a) { c.broadcast(a.send, a.count, a.dtype, 0); },
    [](const CallArgs& a) {
      MPI_Bcast(a.send, static_cast<int>(a.per_rank), a.mpi_type, 0, MPI_COMM_WORLD);
    }};

}  // namespace

const std::vector<CollectiveEntry>& collective_table() {
  static const std::vector<CollectiveEntry> table{kAllReduce, kReduceScatter, kAllGather,
                                                  kAllToAllV, kBroadcast};
  return table;
}

std::vector<const CollectiveEntry*> select_collectives(const std::string& list) {
  const auto& table = collective_table();
  std::vector<const CollectiveEntry*> out;
  if (list == "all") {
    for (const auto& e : table) out.push_back(&e);
    return out;
  }
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    bool found = false;
    for (const auto& e : table)
      if (item == e.name) {
        out.push_back(&e);
        found = true;
      }
    if (!found) {
      std::string known;
      for (const auto& e : table) known += (known.empty() ? "" : ", ") + std::string(e.name);
      throw std::invalid_argument("--op '" + item +
                                  "': expected all or a comma-separated list of " + known);
    }
  }
  return out;
}

}  // namespace paraxis::bench_comm
