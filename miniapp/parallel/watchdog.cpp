// The watchdog's deadline: configuration, the polling wait every blocking operation ends in,
// the blocking conveniences built on it, and what expiry does (watchdog.hpp).
#include "parallel/watchdog.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "config/parallel_config.hpp"
#include "parallel/mpi_check.hpp"
#include "parallel/watchdog_channel.hpp"

namespace paraxis::parallel::watchdog {

namespace {

// A wait spins without yielding this long (short operations pay nothing for the deadline),
// and answers the other ranks' questions at most this often.
constexpr double kSpinSeconds = 2e-3;
constexpr double kServiceInterval = 1e-3;

struct State {
  double timeout_s = 600;  // PyTorch's NCCL watchdog default, as comm.timeout_s
  // Spinning before yielding: kSpinSeconds, or 0 on a host with more ranks than cores, where a
  // spinning rank takes the core from the rank it waits for (configure decides).
  double spin_s = kSpinSeconds;
  int step = -1, micro_batch = -1;
  ExpiryHandler handler;
};

State& state() {
  static State s;
  return s;
}

// Marks this rank as waiting (for its answers) until the wait ends, however it ends.
class InWait {
 public:
  InWait(const Wait& w, double since) : saved_(detail::current()) {
    detail::current() = {true, w, since};
  }
  ~InWait() { detail::current() = saved_; }
  InWait(const InWait&) = delete;
  InWait& operator=(const InWait&) = delete;

 private:
  detail::Current saved_;
};

struct Requests {
  int n;
  MPI_Request* requests;
};

bool requests_done(void* context) {
  auto* r = static_cast<Requests*>(context);
  int flag = 0;
  check_mpi(MPI_Testall(r->n, r->requests, &flag, MPI_STATUSES_IGNORE), "testall");
  return flag != 0;
}

}  // namespace

// mpiexec forwards output asynchronously and MPI_Abort tears the job down at once: the message
// gets a moment to reach the terminal or batch log first (as the driver's own end of a job).
void abort_job(const Diagnosis& d) {
  std::fflush(stdout);
  std::fputs(d.message().c_str(), stderr);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  MPI_Abort(MPI_COMM_WORLD, exit_code::hang);
  std::_Exit(exit_code::hang);  // MPI_Abort does not return; in case an implementation does
}

void configure(double timeout_s) {
  if (!(timeout_s >= config::kMinTimeoutS && timeout_s <= config::kMaxTimeoutS))
    throw std::invalid_argument("watchdog: comm.timeout_s = " + std::to_string(timeout_s) +
                                " must be a number of seconds in [" +
                                std::to_string(config::kMinTimeoutS) + ", " +
                                std::to_string(config::kMaxTimeoutS) + "]");
  state().timeout_s = timeout_s;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return;
  detail::open_channel();
  // Ranks sharing this host against the cores this process may run on.
  MPI_Comm host = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host),
            "split by host");
  int on_host = 1;
  MPI_Comm_size(host, &on_host);
  MPI_Comm_free(&host);
  state().spin_s = on_host > usable_cores() ? 0.0 : kSpinSeconds;
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

double spin_s() {
  return state().spin_s;
}

double timeout_s() {
  return state().timeout_s;
}

double grace_s() {
  return std::min(2.0, std::max(0.25, state().timeout_s / 4));
}

void set_step(int step) {
  state().step = step;
}
void set_micro_batch(int micro_batch) {
  state().micro_batch = micro_batch;
}
int step() {
  return state().step;
}
int micro_batch() {
  return state().micro_batch;
}

void set_expiry_handler(ExpiryHandler handler) {
  state().handler = std::move(handler);
}

long next_seq(MPI_Comm comm) {
  return detail::record_of(comm).started++;
}

void wait_until(Poll done, void* context, const Wait& wait, void (*abort_backend)(void*),
                void* abort_context) {
  Wait w = wait;
  if (w.peer < 0 && w.seq < 0) w.seq = next_seq(w.comm);
  if (done(context)) return;  // the common case: no clock, no bookkeeping
  const double t0 = detail::now(), deadline = t0 + state().timeout_s;
  const InWait in_wait(w, t0);
  double next_service = t0 + kServiceInterval;
  bool expired = false;
  for (;;) {
    if (done(context)) return;
    const double t = detail::now();
    if (t >= next_service) {
      service();
      next_service = t + kServiceInterval;
    }
    if (!expired && t >= deadline) {
      Diagnosis d;
      if (detail::diagnose(w, t - t0, done, context, d)) return;  // completed meanwhile
      d.elapsed_s = detail::now() - t0;
      expired = true;
      if (abort_backend) abort_backend(abort_context);
      if (state().handler)
        state().handler(d);
      else
        abort_job(d);
      if (abort_backend)
        throw std::runtime_error(std::string("watchdog: ") + w.op + " on " + w.axis +
                                 " was aborted at the deadline and cannot complete");
    }
    // Past the first milliseconds (at once on an oversubscribed host), let other processes on
    // the same cores run (the rank this one waits for may be one of them).
    if (t - t0 > state().spin_s) std::this_thread::yield();
  }
}

void wait_all(int n, MPI_Request* requests, const Wait& w) {
  Requests r{n, requests};
  wait_until(&requests_done, &r, w);
}

void wait_all(int n, MPI_Request* requests, const char* op, const char* axis, MPI_Comm comm) {
  Wait w;
  w.op = op;
  w.axis = axis;
  w.comm = comm;
  wait_all(n, requests, w);
}

void barrier(MPI_Comm comm, const char* what, const char* axis) {
  MPI_Request r = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibarrier(comm, &r), "ibarrier");
  wait_all(1, &r, what, axis, comm);
}

void all_reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm, const char* what, const char* axis) {
  MPI_Request r = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(send, recv, count, type, op, comm, &r), "iallreduce");
  wait_all(1, &r, what, axis, comm);
}

void broadcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, const char* what,
               const char* axis) {
  MPI_Request r = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(buf, count, type, root, comm, &r), "ibcast");
  wait_all(1, &r, what, axis, comm);
}

void all_gather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                int recv_count, MPI_Datatype recv_type, MPI_Comm comm, const char* what,
                const char* axis) {
  MPI_Request r = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(send, send_count, send_type, recv, recv_count, recv_type, comm, &r),
            "iallgather");
  wait_all(1, &r, what, axis, comm);
}

void all_gather_v(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                  const int* recv_counts, const int* displs, MPI_Datatype recv_type, MPI_Comm comm,
                  const char* what, const char* axis) {
  MPI_Request r = MPI_REQUEST_NULL;
  check_mpi(
      MPI_Iallgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm, &r),
      "iallgatherv");
  wait_all(1, &r, what, axis, comm);
}

}  // namespace paraxis::parallel::watchdog
