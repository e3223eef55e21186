// paraxis-bench-comm's table of collectives, one entry per operation as nccl-tests has one
// source file per operation: what the operation is for the performance model (its bus-bandwidth
// factor comes from perfmodel::busbw_factor, nowhere else), how a size S splits over the ranks,
// how to call it through parallel::Communicator and as the raw MPI call it wraps, and the exact
// value each output element must hold. The generic sweep (bench_comm.cpp) does the rest.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "parallel/communicator.hpp"
#include "perfmodel/collectives.hpp"

namespace paraxis::bench_comm {

// The input element i of `rank`: a small integer, so every sum over ranks is exact in bf16
// (integers up to 256), fp32 and fp64. `span` keeps |sum| <= 256 for up to 256 ranks.
inline int span_for(int ranks) {
  return ranks <= 32 ? 8 : 1;
}
inline double input_value(int rank, std::size_t i, int span) {
  const std::size_t m = static_cast<std::size_t>(2 * span + 1);
  return static_cast<double>(static_cast<long>((i * 7 + static_cast<std::size_t>(rank) * 3) % m) -
                             span);
}

// One (operation, size) as a rank sees it: count is nccl-tests' element count (S / element
// size), per_rank the elements each rank contributes or receives per peer.
struct Shape {
  int rank = 0, ranks = 1, span = 8;
  std::size_t count = 0, per_rank = 0;
  double input(int q, std::size_t i) const { return input_value(q, i, span); }
};

// The arguments of one call, the same for the paraxis and the raw side (same buffers).
struct CallArgs {
  void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0, per_rank = 0;
  const int* counts = nullptr;  // per_rank for every peer (all-to-all-v)
  const int* displs = nullptr;  // per_rank * peer
  parallel::DType dtype{};
  MPI_Datatype mpi_type = MPI_DATATYPE_NULL;
  MPI_Op mpi_sum = MPI_OP_NULL;
};

struct CollectiveEntry {
  const char* name;                  // row name, --op value and the CommLog event's op
  perfmodel::Collective collective;  // for the bus-bandwidth factor
  const char* raw_call;              // the MPI call of the baseline
  const char* redop;                 // "sum" or "none"
  int root;                          // -1: no root
  // count is rounded down to a multiple of the ranks and per_rank = count / ranks; otherwise
  // per_rank = count.
  bool split_over_ranks;
  // The output lives in the send buffer (in place; the root's input stays, other ranks' is
  // overwritten) rather than in the receive buffer.
  bool in_place;
  std::size_t (*send_elems)(const Shape&);
  std::size_t (*out_elems)(const Shape&);
  double (*expected)(const Shape&, std::size_t i);  // output element i on s.rank
  void (*paraxis)(parallel::Communicator&, const CallArgs&);
  void (*raw)(const CallArgs&);
};

// Every operation, in the order of the sweep.
const std::vector<CollectiveEntry>& collective_table();

// "all" or a comma-separated list of names; throws std::invalid_argument naming the unknown
// entry and the known ones.
std::vector<const CollectiveEntry*> select_collectives(const std::string& list);

}  // namespace paraxis::bench_comm
