// One interface for the collectives and point-to-point transfers every parallel axis uses.
// Backends: MPI (host buffers, or device buffers with a GPU-aware MPI) and NCCL (CUDA builds
// with PARAXIS_ENABLE_NCCL, on the Kokkos CUDA stream). The public calls are non-virtual:
// they record a CommEvent and dispatch to the backend, so every backend is measured alike.
// Every blocking wait has the watchdog's deadline (watchdog.hpp): a collective is numbered on
// its communicator when it starts, and a wait that outlives comm.timeout_s ends the job with a
// diagnosis. With a LinkModel (link_emulation.hpp), an operation whose data crosses emulated
// nodes or the injected slow link takes longer by the model's figure, added inside the call so
// its CommEvent includes it (docs/diagnosis.md, "Nodes and emulated links"). The MPI backend
// stages device buffers through host memory when the library cannot read them
// (mpi_staging.hpp, comm.mpi_gpu_aware), also inside the call.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "config/parallel_config.hpp"
#include "model/collectives.hpp"
#include "parallel/comm_log.hpp"
#include "parallel/link_emulation.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::parallel {

class StagingPool;
using model::DType;
using model::dtype_of;
using model::ReduceOp;
using model::size_of;

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

class Communicator : public model::CommGroup {
 public:
  int rank() const final { return rank_; }
  int size() const final { return size_; }
  Axis axis() const { return axis_; }
  const char* backend() const { return backend_name(); }
  // The MPI communicator of the group (NCCL: the one its unique id travelled over).
  MPI_Comm mpi_comm() const { return mpi_comm_; }

  // In place when send == recv. count: elements of each rank's buffer.
  void all_reduce(const void* send, void* recv, std::size_t count, DType t,
                  ReduceOp op = ReduceOp::sum) final;
  // send: size() * recv_count elements; rank r receives block r, reduced.
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t,
                      ReduceOp op = ReduceOp::sum) final;
  // recv: size() * send_count elements, block r from rank r. In place when send is
  // recv + rank() * send_count.
  void all_gather(const void* send, void* recv, std::size_t send_count, DType t) final;
  // Counts and displacements in elements, one per rank.
  void all_to_all_v(const void* send, const int* send_counts, const int* send_displs, void* recv,
                    const int* recv_counts, const int* recv_displs, DType t) final;
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

  CommLog* log() const { return log_; }

  // Applies the link emulation to every later operation: collective over the group (every
  // member calls it with the same model). When the slow link lies inside the group, has
  // bandwidth_factor < 1 and no emulated bandwidth applies to it, its two ends first measure
  // its own speed (a ping-pong) and the group agrees on it. Nothing is applied when the model
  // is inactive or the group sits on one node away from the slow link.
  void emulate_links(const LinkModel& model);
  // The emulation this group applies; nullptr: none.
  const LinkDelay* link_delay() const { return links_.get(); }
  // World ranks of the members, in group-rank order.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // Whether every operation's buffers go through host memory (MPI under staging,
  // mpi_staging.hpp; fixed when the communicator is made), and the host buffers it uses
  // (nullptr: none; a device build's MPI communicator has them for bf16 reductions anyway).
  virtual bool stages_buffers() const { return false; }
  virtual const StagingPool* staging_pool() const { return nullptr; }

 protected:
  Communicator(Axis axis, MPI_Comm comm, CommLog* log);
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
  // What a backend's wait tells the watchdog. collective() numbers the operation: call it when
  // the operation starts, once per collective.
  watchdog::Wait collective(const char* op) const;
  watchdog::Wait point_to_point(const char* op, int peer) const;
  void record(const char* op, std::size_t bytes, double begin, double end, double exposed);
  void record_blocking(const char* op, std::size_t bytes, double begin, double end);
  // The caller was blocked in a call (or a test or wait of a request) over [begin, end).
  void blocked(double begin, double end);
  // Holds the caller until `end + extra` (extra <= 0: returns end at once) and returns the
  // time it ends; other ranks' watchdog questions are answered meanwhile.
  double hold(double end, double extra) const;

 private:
  Axis axis_;
  MPI_Comm mpi_comm_;
  int rank_ = 0, size_ = 1;
  CommLog* log_;
  std::vector<int> world_ranks_;
  std::unique_ptr<LinkDelay> links_;
};

// A communicator over `comm` (not owned; the ProcessGrid owns it).
// Without a LinkModel nothing is emulated: for communicators that carry no training traffic
// (metrics, synchronisation). With one: collective over comm (emulate_links).
std::unique_ptr<Communicator> make_communicator(config::CommBackend backend, MPI_Comm comm,
                                                Axis axis, CommLog* log);
std::unique_ptr<Communicator> make_communicator(config::CommBackend backend, MPI_Comm comm,
                                                Axis axis, CommLog* log, const LinkModel& links);

// Waits until steady_now() >= t without starving the rest of the job: sleeps in steps of at
// most 10 ms (other ranks may share the cores), yields the last 50 us, and every 10 ms answers
// the watchdog's questions and lets MPI progress outstanding requests on comm.
void hold_until(double t, MPI_Comm comm);

double steady_now();

}  // namespace paraxis::parallel
