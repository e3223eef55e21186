// The MPI backend of Communicator: every operation is the non-blocking MPI-3 call completed by
// the watchdog's polling wait (no wait outlives comm.timeout_s), with bf16 as a 2-byte type and
// user reduction operators. Under staging (mpi_staging.hpp, comm.mpi_gpu_aware) each operation
// makes the same MPI call on host stand-ins for its buffers: the input copied in before, the
// result copied back after (a non-blocking one's at its completion, in test or wait), so results
// are bitwise those of the unstaged call and the copies are part of the recorded time.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "parallel/communicator.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/mpi_staging.hpp"
#include "parallel/request_impl.hpp"

namespace paraxis::parallel {

namespace {

// bf16 sum: MPI has no bfloat16, so a user operation adds in fp32 and rounds once per pair.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const paraxis::bf16*>(in);
  auto* b = static_cast<paraxis::bf16*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = paraxis::bf16(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const paraxis::bf16*>(in);
  auto* b = static_cast<paraxis::bf16*>(inout);
  for (int i = 0; i < *len; ++i)
    if (static_cast<float>(a[i]) > static_cast<float>(b[i])) b[i] = a[i];
}

struct MpiTypes {
  MPI_Datatype bf16 = MPI_DATATYPE_NULL;
  MPI_Op bf16_sum = MPI_OP_NULL, bf16_max = MPI_OP_NULL;
  MpiTypes() {
    MPI_Type_contiguous(2, MPI_BYTE, &bf16);
    MPI_Type_commit(&bf16);
    MPI_Op_create(&parallel::bf16_sum, 1, &bf16_sum);
    MPI_Op_create(&parallel::bf16_max, 1, &bf16_max);
    // MPI_Finalize deletes MPI_COMM_SELF's attributes first: free the handles there.
    int key = MPI_KEYVAL_INVALID;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &MpiTypes::release, &key, nullptr);
    MPI_Comm_set_attr(MPI_COMM_SELF, key, this);
  }
  static int release(MPI_Comm, int, void* attr, void*) {
    auto* t = static_cast<MpiTypes*>(attr);
    MPI_Type_free(&t->bf16);
    MPI_Op_free(&t->bf16_sum);
    MPI_Op_free(&t->bf16_max);
    return MPI_SUCCESS;
  }
};

const MpiTypes& mpi_types() {
  static MpiTypes t;  // created after MPI_Init, on first use
  return t;
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f64:
      return MPI_DOUBLE;
    case DType::f32:
      return MPI_FLOAT;
    case DType::bf16:
      return mpi_types().bf16;
    case DType::i32:
      return MPI_INT;
    case DType::i64:
      return MPI_LONG_LONG;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(DType t, ReduceOp op) {
  if (t == DType::bf16) return op == ReduceOp::sum ? mpi_types().bf16_sum : mpi_types().bf16_max;
  return op == ReduceOp::sum ? MPI_SUM : MPI_MAX;
}

int as_int(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument(std::string("MPI ") + what + ": count " + std::to_string(n) +
                                " exceeds INT_MAX; use smaller buckets (comm.bucket_mb)");
  return static_cast<int>(n);
}

// Host stand-ins for one operation's buffers (staging): s and r are what MPI is handed.
struct Stand {
  StagingPool::Lease send, recv;
  const void* s = nullptr;
  void* r = nullptr;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, Axis axis, CommLog* log, bool stage_all, bool device_build)
      : Communicator(axis, comm, log), comm_(comm), all_(stage_all), device_(device_build) {
    if (all_ || device_) pool_ = std::make_unique<StagingPool>();
  }
  bool stages_buffers() const override { return all_; }
  const StagingPool* staging_pool() const override { return pool_.get(); }

 private:
  const char* backend_name() const override { return "mpi"; }

  // Whether an operation's buffers go through host memory: every one under staging; in device
  // builds bf16 reductions always, since their operator is a host function (bf16_sum) that a
  // GPU-aware MPI would hand device pointers.
  bool staged(DType t, bool reduces) const {
    return all_ || (device_ && reduces && t == DType::bf16);
  }
  // In place when s == r + at: the input is recv[at, at + send_bytes) and is copied there.
  Stand stand_in(const void* s, void* r, std::size_t send_bytes, std::size_t recv_bytes,
                 std::size_t at) {
    Stand h;
    const bool in_place = s == static_cast<const char*>(r) + at;
    h.recv = pool_->lease(in_place ? std::max(recv_bytes, at + send_bytes) : recv_bytes);
    char* hr = StagingPool::data(h.recv);
    h.r = hr;
    if (in_place) {
      pool_->to_host(hr + at, s, send_bytes);
      h.s = hr + at;
    } else {
      h.send = pool_->lease(send_bytes);
      pool_->to_host(StagingPool::data(h.send), s, send_bytes);
      h.s = StagingPool::data(h.send);
    }
    return h;
  }
  Stand unstaged(const void* s, void* r) const {
    Stand h;
    h.s = s;
    h.r = r;
    return h;
  }
  void copy_back(const Stand& h, void* r, std::size_t bytes) {
    if (h.recv) pool_->from_host(r, StagingPool::data(h.recv), bytes);
  }
  // A request keeps its stand-ins until it completes; complete() copies the result back.
  static void keep(Request& q, Stand h, void* copy_to, std::size_t bytes) {
    q.impl_->staged_send = std::move(h.send);
    q.impl_->staged_recv = std::move(h.recv);
    q.impl_->copy_to = copy_to;
    q.impl_->copy_bytes = bytes;
  }
  void complete(Request& q) {
    auto& i = *q.impl_;
    if (i.staged_recv && i.copy_to)
      pool_->from_host(i.copy_to, StagingPool::data(i.staged_recv), i.copy_bytes);
    i.staged_send.reset();
    i.staged_recv.reset();
    i.copy_to = nullptr;
  }
  static Request fresh(watchdog::Wait w) {
    Request r;
    r.impl_ = std::make_unique<Request::Impl>();
    r.impl_->wait = std::move(w);
    return r;
  }

  void do_all_reduce(const void* s, void* r, std::size_t n, DType t, ReduceOp op) override {
    const std::size_t B = n * parallel::size_of(t);
    MPI_Request q = MPI_REQUEST_NULL;
    const watchdog::Wait w = collective("all_reduce");
    const Stand h = staged(t, true) ? stand_in(s, r, B, B, 0) : unstaged(s, r);
    check_mpi(MPI_Iallreduce(h.s == h.r ? MPI_IN_PLACE : h.s, h.r, as_int(n, "all_reduce"),
                             mpi_type(t), mpi_op(t, op), comm_, &q),
              "all_reduce");
    watchdog::wait_all(1, &q, w);
    copy_back(h, r, B);
  }
  void do_reduce_scatter(const void* s, void* r, std::size_t n, DType t, ReduceOp op) override {
    const std::size_t B = n * parallel::size_of(t);
    MPI_Request q = MPI_REQUEST_NULL;
    const watchdog::Wait w = collective("reduce_scatter");
    const Stand h = staged(t, true) ? stand_in(s, r, B * size_of_group(), B, 0) : unstaged(s, r);
    check_mpi(
        MPI_Ireduce_scatter_block(h.s == h.r ? MPI_IN_PLACE : h.s, h.r, as_int(n, "reduce_scatter"),
                                  mpi_type(t), mpi_op(t, op), comm_, &q),
        "reduce_scatter");
    watchdog::wait_all(1, &q, w);
    copy_back(h, r, B);
  }
  void do_all_gather(const void* s, void* r, std::size_t n, DType t) override {
    const std::size_t B = n * parallel::size_of(t), at = B * static_cast<std::size_t>(rank());
    MPI_Request q = MPI_REQUEST_NULL;
    const watchdog::Wait w = collective("all_gather");
    const Stand h = staged(t, false) ? stand_in(s, r, B, B * size_of_group(), at) : unstaged(s, r);
    const bool in_place = h.s == static_cast<const char*>(h.r) + at;
    check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : h.s, as_int(n, "all_gather"), mpi_type(t),
                             h.r, as_int(n, "all_gather"), mpi_type(t), comm_, &q),
              "all_gather");
    watchdog::wait_all(1, &q, w);
    copy_back(h, r, B * size_of_group());
  }
  void do_all_to_all_v(const void* s, const int* sc, const int* sd, void* r, const int* rc,
                       const int* rd, DType t) override {
    MPI_Request q = MPI_REQUEST_NULL;
    const watchdog::Wait w = collective("all_to_all_v");
    const std::size_t es = parallel::size_of(t);
    Stand h = unstaged(s, r);
    if (staged(t, false)) {
      // The extents the counts and displacements reach (elements), as one span each.
      std::size_t send_end = 0, recv_end = 0;
      for (int i = 0; i < size(); ++i) {
        if (sc[i] > 0) send_end = std::max(send_end, static_cast<std::size_t>(sd[i] + sc[i]));
        if (rc[i] > 0) recv_end = std::max(recv_end, static_cast<std::size_t>(rd[i] + rc[i]));
      }
      h.send = pool_->lease(send_end * es);
      h.recv = pool_->lease(recv_end * es);
      pool_->to_host(StagingPool::data(h.send), s, send_end * es);
      h.s = StagingPool::data(h.send);
      h.r = StagingPool::data(h.recv);
    }
    check_mpi(MPI_Ialltoallv(h.s, sc, sd, mpi_type(t), h.r, rc, rd, mpi_type(t), comm_, &q),
              "all_to_all_v");
    watchdog::wait_all(1, &q, w);
    if (!h.recv) return;
    // Only the blocks received go back (what lies between them is the caller's, as unstaged),
    // adjacent blocks as one copy.
    runs_.clear();
    for (int i = 0; i < size(); ++i)
      if (rc[i] > 0) runs_.emplace_back(rd[i], rd[i] + rc[i]);
    std::sort(runs_.begin(), runs_.end());
    const char* hr = StagingPool::data(h.recv);
    for (std::size_t i = 0; i < runs_.size();) {
      const int begin = runs_[i].first;
      int end = runs_[i].second;
      for (++i; i < runs_.size() && runs_[i].first <= end; ++i)
        end = std::max(end, runs_[i].second);
      const std::size_t off = static_cast<std::size_t>(begin) * es;
      pool_->from_host(static_cast<char*>(r) + off, hr + off,
                       static_cast<std::size_t>(end - begin) * es);
    }
  }
  void do_broadcast(void* buf, std::size_t n, DType t, int root) override {
    const std::size_t B = n * parallel::size_of(t);
    MPI_Request q = MPI_REQUEST_NULL;
    const watchdog::Wait w = collective("broadcast");
    Stand h = unstaged(buf, buf);
    if (staged(t, false)) {
      h.recv = pool_->lease(B);
      h.r = StagingPool::data(h.recv);
      if (rank() == root) pool_->to_host(StagingPool::data(h.recv), buf, B);
    }
    check_mpi(MPI_Ibcast(h.r, as_int(n, "broadcast"), mpi_type(t), root, comm_, &q), "broadcast");
    watchdog::wait_all(1, &q, w);
    if (rank() != root) copy_back(h, buf, B);
  }
  // A send's stand-in: its data copied in (no result comes back).
  Stand send_stand(const void* buf, std::size_t bytes) {
    Stand h;
    h.send = pool_->lease(bytes);
    pool_->to_host(StagingPool::data(h.send), buf, bytes);
    h.s = StagingPool::data(h.send);
    return h;
  }
  Stand recv_stand(std::size_t bytes) {
    Stand h;
    h.recv = pool_->lease(bytes);
    h.r = StagingPool::data(h.recv);
    return h;
  }
  void do_send(const void* buf, std::size_t n, DType t, int peer, int tag) override {
    const std::size_t B = n * parallel::size_of(t);
    const Stand h = staged(t, false) ? send_stand(buf, B) : unstaged(buf, nullptr);
    MPI_Request q = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(h.s, as_int(n, "send"), mpi_type(t), peer, tag, comm_, &q), "send");
    watchdog::wait_all(1, &q, point_to_point("send", peer));
  }
  void do_recv(void* buf, std::size_t n, DType t, int peer, int tag) override {
    const std::size_t B = n * parallel::size_of(t);
    const Stand h = staged(t, false) ? recv_stand(B) : unstaged(nullptr, buf);
    MPI_Request q = MPI_REQUEST_NULL;
    check_mpi(MPI_Irecv(h.r, as_int(n, "recv"), mpi_type(t), peer, tag, comm_, &q), "recv");
    watchdog::wait_all(1, &q, point_to_point("recv", peer));
    copy_back(h, buf, B);
  }
  Request do_isend(const void* buf, std::size_t n, DType t, int peer, int tag) override {
    const std::size_t B = n * parallel::size_of(t);
    Request r = fresh(point_to_point("isend", peer));
    Stand h = staged(t, false) ? send_stand(buf, B) : unstaged(buf, nullptr);
    check_mpi(MPI_Isend(h.s, as_int(n, "isend"), mpi_type(t), peer, tag, comm_, &r.impl_->mpi),
              "isend");
    keep(r, std::move(h), nullptr, 0);
    return r;
  }
  Request do_irecv(void* buf, std::size_t n, DType t, int peer, int tag) override {
    const std::size_t B = n * parallel::size_of(t);
    Request r = fresh(point_to_point("irecv", peer));
    Stand h = staged(t, false) ? recv_stand(B) : unstaged(nullptr, buf);
    check_mpi(MPI_Irecv(h.r, as_int(n, "irecv"), mpi_type(t), peer, tag, comm_, &r.impl_->mpi),
              "irecv");
    keep(r, std::move(h), buf, B);
    return r;
  }
  Request do_iall_reduce(const void* s, void* rb, std::size_t n, DType t, ReduceOp op) override {
    const std::size_t B = n * parallel::size_of(t);
    Request r = fresh(collective("all_reduce"));
    Stand h = staged(t, true) ? stand_in(s, rb, B, B, 0) : unstaged(s, rb);
    check_mpi(MPI_Iallreduce(h.s == h.r ? MPI_IN_PLACE : h.s, h.r, as_int(n, "iall_reduce"),
                             mpi_type(t), mpi_op(t, op), comm_, &r.impl_->mpi),
              "iall_reduce");
    keep(r, std::move(h), rb, B);
    return r;
  }
  Request do_ireduce_scatter(const void* s, void* rb, std::size_t n, DType t,
                             ReduceOp op) override {
    const std::size_t B = n * parallel::size_of(t);
    Request r = fresh(collective("reduce_scatter"));
    Stand h = staged(t, true) ? stand_in(s, rb, B * size_of_group(), B, 0) : unstaged(s, rb);
    check_mpi(MPI_Ireduce_scatter_block(h.s == h.r ? MPI_IN_PLACE : h.s, h.r,
                                        as_int(n, "ireduce_scatter"), mpi_type(t), mpi_op(t, op),
                                        comm_, &r.impl_->mpi),
              "ireduce_scatter");
    keep(r, std::move(h), rb, B);
    return r;
  }
  bool do_test(Request& r) override {
    int flag = 0;
    check_mpi(MPI_Test(&r.impl_->mpi, &flag, MPI_STATUS_IGNORE), "test");
    if (flag) complete(r);
    return flag != 0;
  }
  void do_wait(Request& r) override {
    watchdog::wait_all(1, &r.impl_->mpi, r.impl_->wait);
    complete(r);
  }
  void do_barrier() override {
    MPI_Request q = MPI_REQUEST_NULL;
    const watchdog::Wait w = collective("barrier");
    check_mpi(MPI_Ibarrier(comm_, &q), "barrier");
    watchdog::wait_all(1, &q, w);
  }
  std::size_t size_of_group() const { return static_cast<std::size_t>(size()); }

  MPI_Comm comm_;
  bool all_, device_;
  std::unique_ptr<StagingPool> pool_;
  std::vector<std::pair<int, int>> runs_;  // all_to_all_v's received blocks (reused)
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, Axis axis, CommLog* log) {
  return std::make_unique<MpiCommunicator>(comm, axis, log, mpi_staging(),
                                           build_device_kind() != DeviceKind::none);
}

}  // namespace paraxis::parallel
