// NCCL backend (PARAXIS_ENABLE_NCCL): collectives on the stream of Kokkos' default CUDA
// execution space instance, so they are ordered with the kernels around them. The unique id
// travels over the MPI communicator of the same group. all-to-all(v) is a grouped set of
// ncclSend/ncclRecv; barrier is a one-element all-reduce. Blocking calls wait for the stream
// so their recorded time is the transfer's; non-blocking ones record a CUDA event that
// test()/wait() query. Every wait polls (cudaStreamQuery / cudaEventQuery, and
// ncclCommGetAsyncError) under the watchdog's deadline; at expiry the NCCL communicator is
// aborted (ncclCommAbort) before the diagnosis ends the job.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <Kokkos_Core.hpp>
#include <stdexcept>
#include <string>

#include "parallel/communicator.hpp"
#include "parallel/request_impl.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::parallel {

namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw std::runtime_error(std::string("NCCL ") + what + " failed: " + ncclGetErrorString(r));
}
void check_cuda(cudaError_t r, const char* what) {
  if (r != cudaSuccess)
    throw std::runtime_error(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(r));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f64:
      return ncclFloat64;
    case DType::f32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  return op == ReduceOp::sum ? ncclSum : ncclMax;
}

cudaStream_t kokkos_stream() {
#ifdef KOKKOS_ENABLE_CUDA
  return Kokkos::DefaultExecutionSpace().cuda_stream();
#else
  return nullptr;
#endif
}

// What the watchdog polls: the stream (blocking calls) or an event (requests), and the
// communicator's asynchronous error (a peer's failure surfaces there, not in the stream).
struct Pending {
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  ncclComm_t comm = nullptr;
};

bool pending_done(void* context) {
  const auto* p = static_cast<const Pending*>(context);
  const cudaError_t q = p->event ? cudaEventQuery(p->event) : cudaStreamQuery(p->stream);
  if (q == cudaSuccess) return true;
  if (q != cudaErrorNotReady) check_cuda(q, p->event ? "event query" : "stream query");
  ncclResult_t async = ncclSuccess;
  check_nccl(ncclCommGetAsyncError(p->comm, &async), "get async error");
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
  if (async == ncclInProgress) return false;
#endif
  check_nccl(async, "asynchronous operation");
  return false;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm comm, Axis axis, CommLog* log) : Communicator(axis, comm, log) {
    ncclUniqueId id;
    if (rank() == 0) check_nccl(ncclGetUniqueId(&id), "get unique id");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    check_nccl(ncclCommInitRank(&comm_, size(), id, rank()), "comm init");
    stream_ = kokkos_stream();
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
  }

 private:
  const char* backend_name() const override { return "nccl"; }
  static void abort_comm(void* self) {
    auto* c = static_cast<NcclCommunicator*>(self);
    ncclCommAbort(c->comm_);
    c->comm_ = nullptr;  // aborted: not destroyed again
  }
  // Waits for the stream (event == nullptr) or the event, under the watchdog's deadline.
  void finish(const watchdog::Wait& w, cudaEvent_t event = nullptr) {
    Pending p{stream_, event, comm_};
    watchdog::wait_until(&pending_done, &p, w, &NcclCommunicator::abort_comm, this);
  }

  void do_all_reduce(const void* s, void* r, std::size_t n, DType t, ReduceOp op) override {
    const watchdog::Wait w = collective("all_reduce");
    check_nccl(ncclAllReduce(s, r, n, nccl_type(t), nccl_op(op), comm_, stream_), "all_reduce");
    finish(w);
  }
  void do_reduce_scatter(const void* s, void* r, std::size_t n, DType t, ReduceOp op) override {
    if (s == r) throw std::invalid_argument("NCCL reduce_scatter: in-place needs recv inside send");
    const watchdog::Wait w = collective("reduce_scatter");
    check_nccl(ncclReduceScatter(s, r, n, nccl_type(t), nccl_op(op), comm_, stream_),
               "reduce_scatter");
    finish(w);
  }
  void do_all_gather(const void* s, void* r, std::size_t n, DType t) override {
    const watchdog::Wait w = collective("all_gather");
    check_nccl(ncclAllGather(s, r, n, nccl_type(t), comm_, stream_), "all_gather");
    finish(w);
  }
  void do_all_to_all_v(const void* s, const int* sc, const int* sd, void* r, const int* rc,
                       const int* rd, DType t) override {
    const std::size_t es = parallel::size_of(t);
    const watchdog::Wait w = collective("all_to_all_v");
    check_nccl(ncclGroupStart(), "group start");
    for (int p = 0; p < size(); ++p) {
      if (sc[p] > 0)
        check_nccl(ncclSend(static_cast<const char*>(s) + static_cast<std::size_t>(sd[p]) * es,
                            static_cast<std::size_t>(sc[p]), nccl_type(t), p, comm_, stream_),
                   "send");
      if (rc[p] > 0)
        check_nccl(ncclRecv(static_cast<char*>(r) + static_cast<std::size_t>(rd[p]) * es,
                            static_cast<std::size_t>(rc[p]), nccl_type(t), p, comm_, stream_),
                   "recv");
    }
    check_nccl(ncclGroupEnd(), "group end");
    finish(w);
  }
  void do_broadcast(void* buf, std::size_t n, DType t, int root) override {
    const watchdog::Wait w = collective("broadcast");
    check_nccl(ncclBroadcast(buf, buf, n, nccl_type(t), root, comm_, stream_), "broadcast");
    finish(w);
  }
  void do_send(const void* buf, std::size_t n, DType t, int peer, int) override {
    check_nccl(ncclSend(buf, n, nccl_type(t), peer, comm_, stream_), "send");
    finish(point_to_point("send", peer));
  }
  void do_recv(void* buf, std::size_t n, DType t, int peer, int) override {
    check_nccl(ncclRecv(buf, n, nccl_type(t), peer, comm_, stream_), "recv");
    finish(point_to_point("recv", peer));
  }
  Request with_event(const watchdog::Wait& w) {
    Request r;
    r.impl_ = std::make_unique<Request::Impl>();
    cudaEvent_t ev;
    check_cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "event create");
    check_cuda(cudaEventRecord(ev, stream_), "event record");
    r.impl_->backend = ev;
    r.impl_->wait = w;
    return r;
  }
  Request do_isend(const void* buf, std::size_t n, DType t, int peer, int) override {
    check_nccl(ncclSend(buf, n, nccl_type(t), peer, comm_, stream_), "send");
    return with_event(point_to_point("isend", peer));
  }
  Request do_irecv(void* buf, std::size_t n, DType t, int peer, int) override {
    check_nccl(ncclRecv(buf, n, nccl_type(t), peer, comm_, stream_), "recv");
    return with_event(point_to_point("irecv", peer));
  }
  Request do_iall_reduce(const void* s, void* rb, std::size_t n, DType t, ReduceOp op) override {
    const watchdog::Wait w = collective("all_reduce");
    check_nccl(ncclAllReduce(s, rb, n, nccl_type(t), nccl_op(op), comm_, stream_), "all_reduce");
    return with_event(w);
  }
  Request do_ireduce_scatter(const void* s, void* rb, std::size_t n, DType t,
                             ReduceOp op) override {
    const watchdog::Wait w = collective("reduce_scatter");
    check_nccl(ncclReduceScatter(s, rb, n, nccl_type(t), nccl_op(op), comm_, stream_),
               "reduce_scatter");
    return with_event(w);
  }
  bool do_test(Request& r) override {
    auto ev = static_cast<cudaEvent_t>(r.impl_->backend);
    const cudaError_t q = cudaEventQuery(ev);
    if (q == cudaErrorNotReady) return false;
    check_cuda(q, "event query");
    cudaEventDestroy(ev);
    return true;
  }
  void do_wait(Request& r) override {
    auto ev = static_cast<cudaEvent_t>(r.impl_->backend);
    finish(r.impl_->wait, ev);
    cudaEventDestroy(ev);
  }
  void do_barrier() override {
    float one = 1.0f;
    float* d = nullptr;
    check_cuda(cudaMalloc(&d, sizeof(float)), "malloc");
    check_cuda(cudaMemcpy(d, &one, sizeof(float), cudaMemcpyHostToDevice), "memcpy");
    const watchdog::Wait w = collective("barrier");
    check_nccl(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, comm_, stream_), "barrier");
    finish(w);
    cudaFree(d);
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, Axis axis, CommLog* log) {
  return std::make_unique<NcclCommunicator>(comm, axis, log);
}

}  // namespace paraxis::parallel
