// The copy-only Communicator (local_communicator.hpp).
#include "parallel/local_communicator.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstddef>

namespace paraxis::parallel {

namespace {

using Bytes =
    Kokkos::View<char*, Kokkos::DefaultExecutionSpace::memory_space, Kokkos::MemoryUnmanaged>;

Bytes bytes_at(const void* p, std::size_t n) {
  return Bytes(const_cast<char*>(static_cast<const char*>(p)), n);
}

// Device bytes, copied (the collectives' buffers are in the default memory space).
void copy_bytes(const void* s, void* r, std::size_t n) {
  if (s == r || n == 0) return;
  Kokkos::deep_copy(bytes_at(r, n), bytes_at(s, n));
}

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(MPI_Comm comm, Axis axis, CommLog* log, Communicator* gathers_through)
      : Communicator(axis, comm, log), gathers_(gathers_through) {}

 protected:
  const char* backend_name() const override { return "local"; }
  void do_all_reduce(const void* s, void* r, std::size_t n, DType t, ReduceOp) override {
    copy_bytes(s, r, n * size_of(t));
  }
  void do_reduce_scatter(const void* s, void* r, std::size_t n, DType t, ReduceOp) override {
    const std::size_t b = n * size_of(t);
    copy_bytes(static_cast<const char*>(s) + static_cast<std::size_t>(rank()) * b, r, b);
  }
  void do_all_gather(const void* s, void* r, std::size_t n, DType t) override {
    if (gathers_) return gathers_->all_gather(s, r, n, t);
    const std::size_t b = n * size_of(t);
    for (int k = 0; k < size(); ++k)
      copy_bytes(s, static_cast<char*>(r) + static_cast<std::size_t>(k) * b, b);
  }
  void do_all_to_all_v(const void* send, const int* send_counts, const int* send_displs, void* recv,
                       const int* recv_counts, const int* recv_displs, DType t) override {
    const std::size_t e = size_of(t);
    const char* own =
        static_cast<const char*>(send) + static_cast<std::size_t>(send_displs[rank()]) * e;
    for (int s = 0; s < size(); ++s) {
      const int n = std::min(recv_counts[s], send_counts[rank()]);
      copy_bytes(own, static_cast<char*>(recv) + static_cast<std::size_t>(recv_displs[s]) * e,
                 static_cast<std::size_t>(n) * e);
    }
  }
  void do_broadcast(void*, std::size_t, DType, int) override {}
  void do_send(const void*, std::size_t, DType, int, int) override {}
  void do_recv(void* buf, std::size_t n, DType t, int, int) override {
    Kokkos::deep_copy(bytes_at(buf, n * size_of(t)), char(0));
  }
  Request do_isend(const void*, std::size_t, DType, int, int) override { return Request(); }
  Request do_irecv(void* buf, std::size_t n, DType t, int peer, int tag) override {
    do_recv(buf, n, t, peer, tag);
    return Request();
  }
  Request do_iall_reduce(const void* s, void* r, std::size_t n, DType t, ReduceOp op) override {
    do_all_reduce(s, r, n, t, op);
    return Request();
  }
  Request do_ireduce_scatter(const void* s, void* r, std::size_t n, DType t, ReduceOp op) override {
    do_reduce_scatter(s, r, n, t, op);
    return Request();
  }
  bool do_test(Request&) override { return true; }
  void do_wait(Request&) override {}
  void do_barrier() override {}

 private:
  Communicator* gathers_;
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator(MPI_Comm comm, Axis axis, CommLog* log,
                                                      Communicator* gathers_through) {
  return std::make_unique<LocalCommunicator>(comm, axis, log, gathers_through);
}

}  // namespace paraxis::parallel
