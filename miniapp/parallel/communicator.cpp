// Communicator: event recording around every call, the link emulation's added time inside it,
// and the choice of backend (MPI: mpi_communicator.cpp; NCCL: nccl_communicator.cpp).
#include "parallel/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "parallel/link_measure.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/request_impl.hpp"

namespace paraxis::parallel {

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* to_string(Axis a) {
  switch (a) {
    case Axis::tp:
      return "tp";
    case Axis::pp:
      return "pp";
    case Axis::dp:
      return "dp";
    case Axis::ep:
      return "ep";
    case Axis::edp:
      return "edp";
    case Axis::world:
      return "world";
    case Axis::count:
      break;
  }
  return "unknown";
}

Axis axis_named(const std::string& name) {
  for (int a = 0; a < static_cast<int>(Axis::count); ++a)
    if (name == to_string(static_cast<Axis>(a))) return static_cast<Axis>(a);
  throw std::invalid_argument("no communicator axis is named '" + name + "'");
}

bool is_receive(const char* op) {
  return std::strcmp(op, "recv") == 0 || std::strcmp(op, "irecv") == 0;
}

double CommLog::blocked_within(double begin, double end) const {
  double s = 0;
  for (const auto& b : blocked_)
    s += std::max(0.0, std::min(b.end, end) - std::max(b.begin, begin));
  return s;
}

std::array<AxisTotals, static_cast<std::size_t>(Axis::count)> CommLog::totals() const {
  std::array<AxisTotals, static_cast<std::size_t>(Axis::count)> t{};
  for (const auto& e : events_) {
    auto& a = t[static_cast<std::size_t>(e.axis == Axis::edp ? Axis::dp : e.axis)];
    a.time_s += e.end - e.begin;
    a.exposed_s += e.exposed;
    // A transfer's bytes are counted once, by its sender.
    if (!is_receive(e.op)) a.bytes += e.bytes;
    a.calls += 1;
  }
  return t;
}

Request::Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
Request::~Request() = default;

Communicator::Communicator(Axis axis, MPI_Comm comm, CommLog* log)
    : axis_(axis), mpi_comm_(comm), log_(log) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
}

watchdog::Wait Communicator::collective(const char* op) const {
  watchdog::Wait w;
  w.op = op;
  w.axis = to_string(axis_);
  w.comm = mpi_comm_;
  w.seq = watchdog::next_seq(mpi_comm_);
  return w;
}

watchdog::Wait Communicator::point_to_point(const char* op, int peer) const {
  watchdog::Wait w;
  w.op = op;
  w.axis = to_string(axis_);
  w.comm = mpi_comm_;
  w.peer = peer;
  return w;
}

void Communicator::record(const char* op, std::size_t bytes, double begin, double end,
                          double exposed) {
  // A group of one moves nothing (its collectives are local copies): nothing to record.
  if (log_ && size_ > 1) log_->add({axis_, op, bytes, begin, end, exposed, 0.0, size_});
}

void Communicator::blocked(double begin, double end) {
  if (log_ && size_ > 1) log_->add_blocked(begin, end);
}

// A blocking call: the caller was blocked from its start to its end.
void Communicator::record_blocking(const char* op, std::size_t bytes, double begin, double end) {
  blocked(begin, end);
  record(op, bytes, begin, end, end - begin);
}

Request Communicator::start(Request r, const char* op, std::size_t bytes) {
  if (!r.impl_) r.impl_ = std::make_unique<Request::Impl>();
  r.impl_->op = op;
  r.impl_->bytes = bytes;
  return r;
}

// Logical bytes follow nccl-tests: all-reduce and broadcast count the buffer, reduce-scatter
// the (size * recv_count) input, all-gather the (size * send_count) output, all-to-all(v) the
// data this rank sends. The link emulation's time is added after the backend's (links_ null:
// nothing, not even a clock read more).
void Communicator::all_reduce(const void* s, void* r, std::size_t n, DType t, ReduceOp op) {
  const double b = steady_now();
  do_all_reduce(s, r, n, t, op);
  const std::size_t S = n * size_of(t);
  const double e = hold(steady_now(), links_ ? links_->all_reduce(S) : 0);
  record_blocking("all_reduce", S, b, e);
}

void Communicator::reduce_scatter(const void* s, void* r, std::size_t n, DType t, ReduceOp op) {
  const double b = steady_now();
  do_reduce_scatter(s, r, n, t, op);
  const std::size_t S = n * size_of(t) * static_cast<std::size_t>(size_);
  const double e = hold(steady_now(), links_ ? links_->reduce_scatter(S) : 0);
  record_blocking("reduce_scatter", S, b, e);
}

void Communicator::all_gather(const void* s, void* r, std::size_t n, DType t) {
  const double b = steady_now();
  do_all_gather(s, r, n, t);
  const std::size_t S = n * size_of(t) * static_cast<std::size_t>(size_);
  const double e = hold(steady_now(), links_ ? links_->all_gather(S) : 0);
  record_blocking("all_gather", S, b, e);
}

void Communicator::all_to_all_v(const void* s, const int* sc, const int* sd, void* r, const int* rc,
                                const int* rd, DType t) {
  std::size_t sent = 0;
  for (int i = 0; i < size_; ++i) sent += static_cast<std::size_t>(sc[i]);
  const double b = steady_now();
  do_all_to_all_v(s, sc, sd, r, rc, rd, t);
  const double e = hold(steady_now(), links_ ? links_->all_to_all_v(sc, rc, size_of(t)) : 0);
  record_blocking("all_to_all_v", sent * size_of(t), b, e);
}

void Communicator::broadcast(void* buf, std::size_t n, DType t, int root) {
  const double b = steady_now();
  do_broadcast(buf, n, t, root);
  const double e = hold(steady_now(), links_ ? links_->broadcast(n * size_of(t), root) : 0);
  record_blocking("broadcast", n * size_of(t), b, e);
}

// Point-to-point: the receiver pays the link's time, the sender nothing.
void Communicator::send(const void* buf, std::size_t n, DType t, int peer, int tag) {
  const double b = steady_now();
  do_send(buf, n, t, peer, tag);
  const double e = steady_now();
  record_blocking("send", n * size_of(t), b, e);
}

void Communicator::recv(void* buf, std::size_t n, DType t, int peer, int tag) {
  const double b = steady_now();
  do_recv(buf, n, t, peer, tag);
  const double e = hold(steady_now(), links_ ? links_->receive(peer, n * size_of(t)) : 0);
  record_blocking("recv", n * size_of(t), b, e);
}

Request Communicator::isend(const void* buf, std::size_t n, DType t, int peer, int tag) {
  const double b = steady_now();
  Request r = start(do_isend(buf, n, t, peer, tag), "isend", n * size_of(t));
  r.impl_->begin = b;
  const double e = steady_now();
  r.impl_->exposed = e - b;
  blocked(b, e);
  return r;
}

Request Communicator::irecv(void* buf, std::size_t n, DType t, int peer, int tag) {
  const double b = steady_now();
  Request r = start(do_irecv(buf, n, t, peer, tag), "irecv", n * size_of(t));
  r.impl_->begin = b;
  if (links_) {
    r.impl_->extra = links_->receive(peer, n * size_of(t));
    r.impl_->extra_from_start = false;
  }
  const double e = steady_now();
  r.impl_->exposed = e - b;
  blocked(b, e);
  return r;
}

Request Communicator::iall_reduce(const void* s, void* rb, std::size_t n, DType t, ReduceOp op) {
  const double b = steady_now();
  Request r = start(do_iall_reduce(s, rb, n, t, op), "all_reduce", n * size_of(t));
  r.impl_->begin = b;
  if (links_) r.impl_->extra = links_->all_reduce(n * size_of(t));
  const double e = steady_now();
  r.impl_->exposed = e - b;
  blocked(b, e);
  return r;
}

Request Communicator::ireduce_scatter(const void* s, void* rb, std::size_t n, DType t,
                                      ReduceOp op) {
  const double b = steady_now();
  const std::size_t S = n * size_of(t) * static_cast<std::size_t>(size_);
  Request r = start(do_ireduce_scatter(s, rb, n, t, op), "reduce_scatter", S);
  r.impl_->begin = b;
  if (links_) r.impl_->extra = links_->reduce_scatter(S);
  const double e = steady_now();
  r.impl_->exposed = e - b;
  blocked(b, e);
  return r;
}

// A request with added time completes when the backend has completed it and its ready time
// (Request::Impl::ready_at) has passed; the backend is asked only until it completes.
bool Communicator::test(Request& r) {
  if (!r.impl_) return true;
  auto& q = *r.impl_;
  const double b = steady_now();
  if (!q.done && do_test(r)) {
    q.done = true;
    q.done_at = steady_now();
  }
  const double e = steady_now();
  q.exposed += e - b;
  blocked(b, e);
  const bool complete = q.done && (q.extra <= 0 || e >= q.ready_at());
  if (complete) {
    record(q.op, q.bytes, q.begin, e, q.exposed);
    r.impl_.reset();
  }
  return complete;
}

void Communicator::wait(Request& r) {
  if (!r.impl_) return;
  auto& q = *r.impl_;
  const double b = steady_now();
  if (!q.done) {
    do_wait(r);
    q.done = true;
    q.done_at = steady_now();
  }
  double e = steady_now();
  if (q.extra > 0 && e < q.ready_at()) {
    hold_until(q.ready_at(), mpi_comm_);
    e = steady_now();
  }
  q.exposed += e - b;
  blocked(b, e);
  record(q.op, q.bytes, q.begin, e, q.exposed);
  r.impl_.reset();
}

void Communicator::barrier() {
  const double b = steady_now();
  do_barrier();
  const double e = hold(steady_now(), links_ ? links_->barrier() : 0);
  record_blocking("barrier", 0, b, e);
}

double Communicator::hold(double end, double extra) const {
  if (!(extra > 0)) return end;
  hold_until(end + extra, mpi_comm_);
  return steady_now();
}

void hold_until(double t, MPI_Comm comm) {
  // Few, long sleeps: on shared cores every wake-up may wait for a core, so a hold of n short
  // sleeps could overshoot n times.
  constexpr double kChunk = 10e-3, kSpin = 5e-5;
  double next_service = 0;
  for (;;) {
    const double now = steady_now();
    if (now >= t) return;
    if (now >= next_service) {
      watchdog::service();
      int flag = 0;  // a probe drives MPI's progress engine (nothing is received)
      check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE),
                "iprobe (link emulation)");
      next_service = now + kChunk;
    }
    const double left = t - now;
    if (left > 2 * kSpin)
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(left - kSpin, kChunk)));
    else
      std::this_thread::yield();
  }
}

namespace {

constexpr std::size_t kSpeedBytes = 1 << 20;

// The slow link's own speed in bytes/s: the fastest of 3 ping-pongs of 1 MiB between its two
// ends (group ranks a and b), half the round trip each; 0 on the other members.
double measure_link_speed(MPI_Comm comm, int me, int a, int b, const char* axis) {
  const double half = fastest_half_round_trip(comm, me, a, b, kSpeedBytes, 3, axis,
                                              "link emulation: slow link ping-pong");
  return half > 0 ? static_cast<double>(kSpeedBytes) / half : 0.0;
}

}  // namespace

void Communicator::emulate_links(const LinkModel& model) {
  links_.reset();
  world_ranks_.assign(static_cast<std::size_t>(size_), 0);
  MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  MPI_Comm_group(mpi_comm_, &mine);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(static_cast<std::size_t>(size_));
  for (int i = 0; i < size_; ++i) ranks[static_cast<std::size_t>(i)] = i;
  MPI_Group_translate_ranks(mine, size_, ranks.data(), world, world_ranks_.data());
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  if (!model.active()) return;
  // fault.slow_axis: a group of the slowed axis (edp counts as dp) measures its links once,
  // before any time is added, and the group agrees on the figures (link_measure.hpp).
  const auto s = model.links.slow_axis;
  const Axis slowed_axis = s == config::SlowAxis::tp   ? Axis::tp
                           : s == config::SlowAxis::pp ? Axis::pp
                           : s == config::SlowAxis::dp ? Axis::dp
                           : s == config::SlowAxis::ep ? Axis::ep
                                                       : Axis::count;
  MeasuredLink measured;
  const MeasuredLink* slowed = nullptr;
  if (model.links.slows_an_axis() && size_ > 1 &&
      (axis_ == Axis::edp ? Axis::dp : axis_) == slowed_axis) {
    measured = measure_group_link(mpi_comm_, to_string(axis_));
    note_measured_link(to_string(axis_), measured);
    slowed = &measured;
  }
  LinkDelay d(model, world_ranks_, rank_, 0, slowed);
  if (!d.active()) return;
  int a = -1, b = -1;
  const auto& L = model.links;
  if (L.slow_bandwidth_factor < 1 && d.slow_pair_in_group(&a, &b) &&
      !(L.bandwidth_gbs > 0 && model.crosses_nodes(world_ranks_[static_cast<std::size_t>(a)],
                                                   world_ranks_[static_cast<std::size_t>(b)]))) {
    // Every member learns the speed the two ends measured, so all add the same time.
    double speed = measure_link_speed(mpi_comm_, rank_, a, b, to_string(axis_));
    watchdog::all_reduce(MPI_IN_PLACE, &speed, 1, MPI_DOUBLE, MPI_MAX, mpi_comm_,
                         "link emulation: the slow link's speed", to_string(axis_));
    links_ = std::make_unique<LinkDelay>(model, world_ranks_, rank_, speed, slowed);
    return;
  }
  links_ = std::make_unique<LinkDelay>(std::move(d));
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, Axis axis, CommLog* log);
#ifdef PARAXIS_ENABLE_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, Axis axis, CommLog* log);
#endif

std::unique_ptr<Communicator> make_communicator(config::CommBackend backend, MPI_Comm comm,
                                                Axis axis, CommLog* log) {
  switch (backend) {
    case config::CommBackend::mpi:
      return make_mpi_communicator(comm, axis, log);
    case config::CommBackend::nccl:
#ifdef PARAXIS_ENABLE_NCCL
      return make_nccl_communicator(comm, axis, log);
#else
      throw std::invalid_argument(
          "comm.backend = nccl, but this paraxis was built without NCCL (configure with "
          "-DPARAXIS_ENABLE_NCCL=ON against a CUDA Kokkos)");
#endif
  }
  throw std::logic_error("make_communicator: backend value " +
                         std::to_string(static_cast<int>(backend)) + " has no communicator");
}

std::unique_ptr<Communicator> make_communicator(config::CommBackend backend, MPI_Comm comm,
                                                Axis axis, CommLog* log, const LinkModel& links) {
  auto c = make_communicator(backend, comm, axis, log);
  c->emulate_links(links);
  return c;
}

}  // namespace paraxis::parallel
