// What a model shard exchanges with its peers, without knowing how: element types, reduction
// operators and CommGroup, the collectives of one group of ranks (the tensor-parallel group,
// the expert-parallel group). parallel/ implements CommGroup over MPI or NCCL (its
// Communicator, which also records every call); the model calls it and never sees MPI.
// A model shard whose group has one rank (or none is given) makes no call at all.
#pragma once

#include <cstddef>
#include <type_traits>

#include "paraxis/kernels/bf16.hpp"

namespace paraxis::model {

enum class DType { f64, f32, bf16, i32, i64 };

constexpr std::size_t size_of(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::bf16:
      return 2;
  }
  return 0;
}

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, double>)
    return DType::f64;
  else if constexpr (std::is_same_v<T, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<T, paraxis::bf16>)
    return DType::bf16;
  else if constexpr (std::is_same_v<T, int>)
    return DType::i32;
  else {
    static_assert(std::is_same_v<T, long long> || std::is_same_v<T, long>, "unsupported type");
    return DType::i64;
  }
}

enum class ReduceOp { sum, max };

// Collectives over one group of ranks. Buffers are in the memory space the implementation can
// read (host; device with a GPU-aware MPI or NCCL) and complete when the call returns.
class CommGroup {
 public:
  virtual ~CommGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place when send == recv. count: elements of each rank's buffer.
  virtual void all_reduce(const void* send, void* recv, std::size_t count, DType t,
                          ReduceOp op = ReduceOp::sum) = 0;
  // send: size() * recv_count elements; rank r receives block r, reduced.
  virtual void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t,
                              ReduceOp op = ReduceOp::sum) = 0;
  // recv: size() * send_count elements, block r from rank r.
  virtual void all_gather(const void* send, void* recv, std::size_t send_count, DType t) = 0;
  // Counts and displacements in elements, one per rank.
  virtual void all_to_all_v(const void* send, const int* send_counts, const int* send_displs,
                            void* recv, const int* recv_counts, const int* recv_displs,
                            DType t) = 0;

 protected:
  CommGroup() = default;
  CommGroup(const CommGroup&) = default;
  CommGroup& operator=(const CommGroup&) = default;
};

}  // namespace paraxis::model
