// The watchdog: a deadline (comm.timeout_s) on every blocking wait of the engine, so that a
// rank that stops responding ends the job with a diagnosis instead of hanging it. Waits poll
// non-blocking MPI requests (or a backend's completion test); while polling, every rank
// answers the others' questions on a control channel (a duplicate of MPI_COMM_WORLD). A wait
// that outlives the deadline asks every member of its group what it is doing, prints one
// message (operation, axis, communicator, step, micro-batch, and per member: arrived,
// elsewhere, or not answering) and ends the job with exit code 5. docs/parallel.md, "Watchdog".
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "config/exit_codes.hpp"

namespace paraxis::parallel::watchdog {

// Collective over MPI_COMM_WORLD (every rank, once per run point or per run): sets the deadline
// of every blocking wait and, the first time, creates the control channel. Throws
// std::invalid_argument unless timeout_s is in [config::kMinTimeoutS, config::kMaxTimeoutS]. Before
// the first call the deadline is 600 s and expiry cannot ask the other ranks anything (they are
// reported as unknown). It also decides how a wait polls: on a host with more ranks than usable
// cores (MPI_COMM_TYPE_SHARED against sched_getaffinity) it yields the core between polls at once
// instead of spinning its first 2 ms (a spinning rank would take the core from the rank it
// waits for; docs/parallel.md, "Watchdog").
void configure(double timeout_s);
double timeout_s();
// The cores this process may run on (sched_getaffinity; hardware_concurrency as fallback).
int usable_cores();
// How long a wait spins before it yields the core between polls: 2e-3, or 0 when oversubscribed.
double spin_s();
// How long an expired wait waits for the answers of the group: a quarter of the deadline,
// at least 0.25 s and at most 2 s (answers come at once from ranks that are polling).
double grace_s();

// Where this rank is, for the expiry message: 0-based indices as in summary.json (printed
// 1-based, like the step lines); -1: outside a step / micro-batch.
void set_step(int step);
void set_micro_batch(int micro_batch);
int step();
int micro_batch();

// What a rank waits for.
struct Wait {
  const char* op = "";            // "all_reduce", "recv", "gather trace events", ...
  const char* axis = "";          // "tp", "pp", "dp", "ep", "edp", "world"
  MPI_Comm comm = MPI_COMM_NULL;  // its group: the members asked at expiry
  long seq = -1;  // a collective's number on comm (next_seq); -1: numbered when the wait starts
  int peer = -1;  // point-to-point: the other end (its rank in comm); -1: a collective
};

// Numbers a collective started now on comm: 0, 1, 2, ... per communicator, the same on every
// member because every member starts the group's collectives in the same order.
long next_seq(MPI_Comm comm);

// Completes the n requests, or at the deadline prints the diagnosis and ends the job. The
// 5-argument form is a collective on comm started just before (numbered now).
void wait_all(int n, MPI_Request* requests, const char* op, const char* axis, MPI_Comm comm);
void wait_all(int n, MPI_Request* requests, const Wait& w);

// The same for a backend without MPI requests: polls done(context) until it returns true.
// abort_backend (optional) runs at expiry before the expiry handler (NCCL: ncclCommAbort); if
// it ran and the handler returns, the wait throws std::runtime_error (the operation can no
// longer complete).
using Poll = bool (*)(void* context);
void wait_until(Poll done, void* context, const Wait& w, void (*abort_backend)(void*) = nullptr,
                void* abort_context = nullptr);

// Blocking conveniences on the non-blocking MPI-3 calls, for code outside the communicators
// (the driver, calibration, the trainer's metadata). `what` names the operation in the message.
void barrier(MPI_Comm comm, const char* what, const char* axis = "world");
void all_reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm, const char* what, const char* axis = "world");
void broadcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, const char* what,
               const char* axis = "world");
void all_gather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                int recv_count, MPI_Datatype recv_type, MPI_Comm comm, const char* what,
                const char* axis = "world");
void all_gather_v(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                  const int* recv_counts, const int* displs, MPI_Datatype recv_type, MPI_Comm comm,
                  const char* what, const char* axis = "world");

// ---- expiry
enum class Arrival {
  arrived,        // has started this collective (waits in it, or for something after it)
  elsewhere,      // answered from another wait
  not_answering,  // no answer within the grace: stalled, dead, or computing without waiting
  unknown,        // could not be asked (configure was not called)
};
const char* to_string(Arrival a);

struct Member {
  int rank = -1;  // in the communicator
  int world_rank = -1;
  Arrival arrival = Arrival::unknown;
  std::string doing;  // what it answered it waits for (empty without an answer)
};

struct Diagnosis {
  std::string op, axis;
  long seq = -1;
  int peer = -1;  // point-to-point: the other end (rank in the communicator)
  int comm_rank = 0, comm_size = 1, world_rank = 0;
  int step = -1, micro_batch = -1;
  double elapsed_s = 0, timeout_s = 0;
  std::vector<Member> members;  // every other member asked (the peer for point-to-point)
  // Ranks (in the communicator) whose arrival is not known to be `arrived`.
  std::vector<int> missing() const;
  // The message the default handler prints (several lines, ends with a newline).
  std::string message() const;
};

// What expiry does. The default prints Diagnosis::message() on stderr and calls
// MPI_Abort(MPI_COMM_WORLD, exit_code::hang); it never returns. A handler that returns lets the
// wait go on (without another deadline): tests use that to check the diagnosis and then let the
// late rank catch up. An empty function restores the default.
using ExpiryHandler = std::function<void(const Diagnosis&)>;
void set_expiry_handler(ExpiryHandler handler);
// What the default handler does: prints d.message() on stderr, gives it half a second to reach
// the log, and ends the job with exit_code::hang. A handler that records the expiry first (the
// driver's failure record) ends with it.
[[noreturn]] void abort_job(const Diagnosis& d);

// Answers the queries that other ranks sent to this one (waits do this themselves).
void service();

}  // namespace paraxis::parallel::watchdog
