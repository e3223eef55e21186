// One interface for the collectives and point-to-point transfers every parallel axis uses.
// Backends: MPI (host buffers, or device buffers with a GPU-aware MPI) and NCCL (CUDA builds
// with PARAXIS_ENABLE_NCCL, on the Kokkos CUDA stream). The public calls are non-virtual:
// they record a CommEvent and dispatch to the backend, so every backend is measured alike.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>

#include "parallel/comm_log.hpp"
#include "paraxis/kernels/bf16.hpp"

namespace paraxis::parallel {

enum class DType { f64, f32, bf16, i32, i64 };
std::size_t size_of(DType t);

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

// A non-blocking operation in flight. wait() completes it (and records its event).
class Request {
 public:
  Request();
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  ~Request();
  bool active() const { return impl_ != nullptr; }
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  Axis axis() const { return axis_; }
  const char* backend() const { return backend_name(); }

  // In place when send == recv. count: elements of each rank's buffer.
  void all_reduce(const void* send, void* recv, std::size_t count, DType t,
                  ReduceOp op = ReduceOp::sum);
  // send: size() * recv_count elements; rank r receives block r, reduced.
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t,
                      ReduceOp op = ReduceOp::sum);
  // recv: size() * send_count elements, block r from rank r. In place when send is
  // recv + rank() * send_count.
  void all_gather(const void* send, void* recv, std::size_t send_count, DType t);
  // Counts and displacements in elements, one per rank.
  void all_to_all_v(const void* send, const int* send_counts, const int* send_displs, void* recv,
                    const int* recv_counts, const int* recv_displs, DType t);
  void broadcast(void* buf, std::size_t count, DType t, int root);
  void send(const void* buf, std::size_t count, DType t, int peer, int tag);
  void recv(void* buf, std::size_t count, DType t, int peer, int tag);
  Request isend(const void* buf, std::size_t count, DType t, int peer, int tag);
  Request irecv(void* buf, std::size_t count, DType t, int peer, int tag);
  Request iall_reduce(const void* send, void* recv, std::size_t count, DType t,
                      ReduceOp op = ReduceOp::sum);
  Request ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t,
                          ReduceOp op = ReduceOp::sum);
  // Drive progress of outstanding requests without blocking (MPI has no progress thread
  // under Serial Kokkos); returns true once `r` has completed.
  bool test(Request& r);
  void wait(Request& r);
  void barrier();

  // Typed conveniences over Kokkos Views (contiguous).
  template <class V>
  void all_reduce_inplace(const V& v, ReduceOp op = ReduceOp::sum) {
    using T = std::remove_cv_t<typename V::value_type>;
    all_reduce(v.data(), v.data(), v.span(), dtype_of<T>(), op);
  }
  double all_reduce_sum(double x) {
    all_reduce(&x, &x, 1, DType::f64);
    return x;
  }

  CommLog* log() const { return log_; }
  void set_log(CommLog* log) { log_ = log; }

 protected:
  Communicator(Axis axis, int rank, int size, CommLog* log)
      : axis_(axis), rank_(rank), size_(size), log_(log) {}
  virtual const char* backend_name() const = 0;
  virtual void do_all_reduce(const void*, void*, std::size_t, DType, ReduceOp) = 0;
  virtual void do_reduce_scatter(const void*, void*, std::size_t, DType, ReduceOp) = 0;
  virtual void do_all_gather(const void*, void*, std::size_t, DType) = 0;
  virtual void do_all_to_all_v(const void*, const int*, const int*, void*, const int*, const int*,
                               DType) = 0;
  virtual void do_broadcast(void*, std::size_t, DType, int) = 0;
  virtual void do_send(const void*, std::size_t, DType, int, int) = 0;
  virtual void do_recv(void*, std::size_t, DType, int, int) = 0;
  virtual Request do_isend(const void*, std::size_t, DType, int, int) = 0;
  virtual Request do_irecv(void*, std::size_t, DType, int, int) = 0;
  virtual Request do_iall_reduce(const void*, void*, std::size_t, DType, ReduceOp) = 0;
  virtual Request do_ireduce_scatter(const void*, void*, std::size_t, DType, ReduceOp) = 0;
  virtual bool do_test(Request&) = 0;
  virtual void do_wait(Request&) = 0;
  virtual void do_barrier() = 0;

  Request start(Request r, const char* op, std::size_t bytes);
  void record(const char* op, std::size_t bytes, double begin, double end, double exposed);

 private:
  Axis axis_;
  int rank_, size_;
  CommLog* log_;
};

// A communicator over `comm` (not owned; the ProcessGrid owns it). backend: "mpi" | "nccl".
std::unique_ptr<Communicator> make_communicator(const std::string& backend, MPI_Comm comm,
                                                Axis axis, CommLog* log);

double steady_now();

}  // namespace paraxis::parallel
