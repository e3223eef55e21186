// The watchdog (parallel/watchdog.hpp) on 2-3 ranks: operations that complete are unchanged
// (results, recorded events, no expiry); a wait that outlives comm.timeout_s produces a
// diagnosis naming the operation, axis, communicator, step, micro-batch and the rank that did
// not arrive — not answering when it stopped polling, elsewhere (with what it waits for) when
// it waits for something else. The expiry handler records instead of ending the job; the late
// rank (1) sleeps without polling the watchdog until every expired rank has signalled it, then
// joins, so the operation completes and the ranks resynchronise. Timing bounds are generous
// (a shared machine): they prove a deadline, not a speed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "parallel/comm_log.hpp"
#include "parallel/communicator.hpp"
#include "parallel/watchdog.hpp"

namespace {

using namespace paraxis::parallel;
namespace wd = paraxis::parallel::watchdog;

constexpr double kTimeout = 1.0;  // the deadline of the expiry tests
constexpr int kSignal = 77;       // tag of "my wait has expired" on the side communicator
constexpr int kLate = 1;          // the rank that stops polling

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// A communicator of every rank, freed at the end of the test.
struct Dup {
  MPI_Comm comm = MPI_COMM_NULL;
  Dup() { MPI_Comm_dup(MPI_COMM_WORLD, &comm); }
  ~Dup() { MPI_Comm_free(&comm); }
};

// What expiry handed to the handler, and when; the handler returns so the wait goes on.
struct Expiries {
  std::vector<wd::Diagnosis> seen;
  std::vector<double> at;
  std::vector<MPI_Request> signals;
  int one = 1;
  MPI_Comm side = MPI_COMM_NULL;
  // Records the diagnosis and tells the late rank over `side` (plain MPI, no watchdog).
  void install() {
    wd::set_expiry_handler([this](const wd::Diagnosis& d) {
      seen.push_back(d);
      at.push_back(now());
      if (side != MPI_COMM_NULL) {
        MPI_Request r;
        MPI_Isend(&one, 1, MPI_INT, kLate, kSignal, side, &r);
        signals.push_back(r);
      }
    });
  }
  ~Expiries() {
    for (auto& r : signals) MPI_Wait(&r, MPI_STATUS_IGNORE);
    wd::set_expiry_handler(nullptr);
  }
};

// The late rank: no watchdog polling (it neither progresses the operation nor answers
// queries) until `expected` signals came, or 30 s (then the test fails instead of hanging).
void sleep_until_signalled(MPI_Comm side, int expected) {
  const double t0 = now();
  int got = 0;
  while (got < expected && now() - t0 < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kSignal, side, &flag, &st);
    if (flag) {
      int v = 0;
      MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, kSignal, side, MPI_STATUS_IGNORE);
      ++got;
    }
  }
}

const wd::Member* member(const wd::Diagnosis& d, int rank) {
  for (const auto& m : d.members)
    if (m.rank == rank) return &m;
  return nullptr;
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

TEST(watchdog, configure_rejects_a_deadline_that_is_not_a_positive_number) {
  EXPECT_THROW(wd::configure(0), std::invalid_argument);
  EXPECT_THROW(wd::configure(-3), std::invalid_argument);
  EXPECT_THROW(wd::configure(std::nan("")), std::invalid_argument);
  EXPECT_THROW(wd::configure(INFINITY), std::invalid_argument);
  wd::configure(42);
  EXPECT_DOUBLE_EQ(wd::timeout_s(), 42);
  EXPECT_DOUBLE_EQ(wd::grace_s(), 2.0);
  wd::configure(1);
  EXPECT_DOUBLE_EQ(wd::grace_s(), 0.25);
}

// Every operation of the MPI backend completes under the watchdog with the same results and
// events as before: one event per call, the whole call's time, exposed == end - begin for
// blocking calls; collectives are numbered alike on every rank; nothing expires.
TEST(watchdog, completed_operations_keep_their_results_and_events) {
  wd::configure(60);
  Expiries ex;
  ex.install();
  Dup d;
  CommLog log;
  auto c = make_communicator(paraxis::config::CommBackend::mpi, d.comm, Axis::dp, &log);
  const int p = c->size(), me = c->rank();

  std::vector<double> x(5, me + 1.0);
  c->all_reduce(x.data(), x.data(), x.size(), DType::f64);
  for (double v : x) EXPECT_DOUBLE_EQ(v, p * (p + 1) / 2.0);
  std::vector<float> in(2 * p), block(2);
  for (int k = 0; k < 2 * p; ++k) in[k] = static_cast<float>(k + me);
  c->reduce_scatter(in.data(), block.data(), 2, DType::f32);
  EXPECT_FLOAT_EQ(block[0], static_cast<float>(p * 2 * me + p * (p - 1) / 2));
  std::vector<int> gathered(p);
  int mine = 10 * me;
  c->all_gather(&mine, gathered.data(), 1, DType::i32);
  for (int k = 0; k < p; ++k) EXPECT_EQ(gathered[k], 10 * k);
  std::vector<int> counts(p, 1), displs(p), out(p);
  for (int k = 0; k < p; ++k) displs[k] = k;
  std::vector<int> send(p);
  for (int k = 0; k < p; ++k) send[k] = 100 * me + k;
  c->all_to_all_v(send.data(), counts.data(), displs.data(), out.data(), counts.data(),
                  displs.data(), DType::i32);
  for (int k = 0; k < p; ++k) EXPECT_EQ(out[k], 100 * k + me);
  long long root_value = me == 0 ? 1234 : 0;
  c->broadcast(&root_value, 1, DType::i64, 0);
  EXPECT_EQ(root_value, 1234);
  // A ring: send to the next, receive from the previous (even ranks send first).
  const int next = (me + 1) % p, prev = (me + p - 1) % p;
  double token = me, got = -1;
  if (me % 2 == 0) {
    c->send(&token, 1, DType::f64, next, 3);
    c->recv(&got, 1, DType::f64, prev, 3);
  } else {
    c->recv(&got, 1, DType::f64, prev, 3);
    c->send(&token, 1, DType::f64, next, 3);
  }
  EXPECT_DOUBLE_EQ(got, prev);
  double y = 1;
  Request r = c->iall_reduce(&y, &y, 1, DType::f64);
  c->wait(r);
  EXPECT_DOUBLE_EQ(y, p);
  c->barrier();

  const char* ops[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all_v", "broadcast",
                       "send",       "recv",           "all_reduce", "barrier"};
  const auto& ev = log.events();
  ASSERT_EQ(ev.size(), 9u);
  for (std::size_t k = 0; k < ev.size(); ++k) {
    const std::string op = me % 2 == 1 && (k == 5 || k == 6) ? ops[11 - k] : ops[k];
    EXPECT_EQ(op, ev[k].op) << k;
    EXPECT_EQ(ev[k].axis, Axis::dp);
    EXPECT_LE(ev[k].begin, ev[k].end);
    if (k != 7) {
      EXPECT_DOUBLE_EQ(ev[k].exposed, ev[k].end - ev[k].begin) << ev[k].op;
    }
  }
  EXPECT_EQ(ev[0].bytes, 5 * sizeof(double));
  EXPECT_EQ(ev[1].bytes, 2 * sizeof(float) * p);
  // Seven collectives so far on this communicator, numbered 0..6 on every rank.
  const long seq = wd::next_seq(d.comm);
  EXPECT_EQ(seq, 7);
  EXPECT_TRUE(ex.seen.empty());
}

// Rank 1 stops polling before an all-reduce: every other rank's wait expires after the
// deadline, names the operation, axis, communicator, step and micro-batch, and rank 1 as not
// answering (the others as arrived); once rank 1 joins, the all-reduce completes correctly.
TEST(watchdog_expiry, a_rank_that_stops_polling_is_named_not_answering) {
  wd::configure(kTimeout);
  Dup d, side;
  CommLog log;
  auto c = make_communicator(paraxis::config::CommBackend::mpi, d.comm, Axis::dp, &log);
  const int me = c->rank(), p = c->size();
  Expiries ex;
  ex.side = side.comm;
  ex.install();
  wd::set_step(6);
  wd::set_micro_batch(2);
  double x = me + 1.0;
  const double t0 = now();
  if (me == kLate) sleep_until_signalled(side.comm, p - 1);
  c->all_reduce(&x, &x, 1, DType::f64);
  wd::set_step(-1);
  wd::set_micro_batch(-1);
  EXPECT_DOUBLE_EQ(x, p * (p + 1) / 2.0);
  ASSERT_EQ(log.events().size(), 1u);  // the operation is recorded once, as any other
  if (me == kLate) {
    EXPECT_TRUE(ex.seen.empty());
    return;
  }
  ASSERT_EQ(ex.seen.size(), 1u);
  const wd::Diagnosis& g = ex.seen[0];
  EXPECT_EQ(g.op, "all_reduce");
  EXPECT_EQ(g.axis, "dp");
  EXPECT_EQ(g.seq, 0);
  EXPECT_EQ(g.peer, -1);
  EXPECT_EQ(g.comm_rank, me);
  EXPECT_EQ(g.comm_size, p);
  EXPECT_EQ(g.world_rank, world_rank());
  EXPECT_EQ(g.step, 6);
  EXPECT_EQ(g.micro_batch, 2);
  EXPECT_DOUBLE_EQ(g.timeout_s, kTimeout);
  EXPECT_GE(g.elapsed_s, kTimeout);
  EXPECT_GE(ex.at[0] - t0, kTimeout);
  EXPECT_LT(ex.at[0] - t0, kTimeout + wd::grace_s() + 10);
  ASSERT_EQ(g.members.size(), static_cast<std::size_t>(p - 1));
  for (int r = 0; r < p; ++r) {
    if (r == me) continue;
    const wd::Member* m = member(g, r);
    ASSERT_NE(m, nullptr) << r;
    EXPECT_EQ(m->world_rank, r);
    EXPECT_EQ(m->arrival, r == kLate ? wd::Arrival::not_answering : wd::Arrival::arrived) << r;
  }
  EXPECT_EQ(g.missing(), std::vector<int>{kLate});
  const std::string msg = g.message();
  EXPECT_TRUE(contains(msg, "all_reduce #0 on dp (rank " + std::to_string(me) + " of " +
                                std::to_string(p) + "), step 7, micro-batch 3"))
      << msg;
  EXPECT_TRUE(contains(msg, "rank 1 of dp (world rank 1): not answering")) << msg;
  EXPECT_TRUE(contains(msg, "not arrived: rank(s) 1 of dp (world rank(s) 1)")) << msg;
  EXPECT_TRUE(contains(msg, "exit code 5")) << msg;
}

// Rank 1 waits for messages on another communicator while the others all-reduce: they name
// it as elsewhere, with its operation, peer, axis, step and micro-batch. Each of them sends
// rank 1 its message once its diagnosis is made, so rank 1 joins only after every expiry. If
// rank 1's own wait expires meanwhile, its diagnosis names its peer as busy in the all-reduce.
TEST(watchdog_expiry, a_rank_waiting_for_something_else_is_named_with_its_wait) {
  wd::configure(kTimeout);
  Dup d, pipe;
  auto dp = make_communicator(paraxis::config::CommBackend::mpi, d.comm, Axis::dp, nullptr);
  auto pp = make_communicator(paraxis::config::CommBackend::mpi, pipe.comm, Axis::pp, nullptr);
  const int me = dp->rank(), p = dp->size();
  Expiries ex;
  ex.install();
  double sent = 3.5;
  std::vector<double> messages(p, 0);
  MPI_Request unblock = MPI_REQUEST_NULL;
  if (me != kLate)
    wd::set_expiry_handler([&](const wd::Diagnosis& g) {
      ex.seen.push_back(g);
      if (unblock == MPI_REQUEST_NULL)
        MPI_Isend(&sent, 1, MPI_DOUBLE, kLate, 9, pipe.comm, &unblock);
    });
  wd::set_step(me == kLate ? 9 : 4);
  wd::set_micro_batch(me == kLate ? 1 : -1);
  if (me == kLate) {
    std::vector<Request> from;
    for (int r = 0; r < p; ++r)
      if (r != kLate) from.push_back(pp->irecv(&messages[r], 1, DType::f64, r, 9));
    for (auto& r : from) pp->wait(r);
  }
  double x = 1;
  dp->all_reduce(&x, &x, 1, DType::f64);
  if (unblock != MPI_REQUEST_NULL) MPI_Wait(&unblock, MPI_STATUS_IGNORE);
  wd::set_step(-1);
  wd::set_micro_batch(-1);
  EXPECT_DOUBLE_EQ(x, p);
  if (me == kLate) {
    for (int r = 0; r < p; ++r) EXPECT_DOUBLE_EQ(messages[r], r == kLate ? 0 : 3.5);
    for (const auto& g : ex.seen) {  // its receives may also expire: the peers all-reduce
      EXPECT_EQ(g.op, "irecv");
      ASSERT_EQ(g.members.size(), 1u);
      EXPECT_EQ(g.members[0].rank, g.peer);
      EXPECT_EQ(g.members[0].arrival, wd::Arrival::elsewhere);
      EXPECT_TRUE(contains(g.members[0].doing, "all_reduce #0 on dp")) << g.members[0].doing;
    }
    return;
  }
  ASSERT_EQ(ex.seen.size(), 1u);
  const wd::Diagnosis& g = ex.seen[0];
  EXPECT_EQ(g.op, "all_reduce");
  EXPECT_EQ(g.step, 4);
  EXPECT_EQ(g.micro_batch, -1);
  const wd::Member* late = member(g, kLate);
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->arrival, wd::Arrival::elsewhere);
  // Waiting for rank 0's message, or (3 ranks) already for rank 2's.
  EXPECT_TRUE(contains(late->doing, "irecv (peer rank ")) << late->doing;
  EXPECT_TRUE(contains(late->doing,
                       ") on pp (rank 1 of " + std::to_string(p) + "), step 10, micro-batch 2"))
      << late->doing;
  for (int r = 0; r < p; ++r)
    if (r != me && r != kLate) {
      EXPECT_EQ(member(g, r)->arrival, wd::Arrival::arrived) << r;
    }
  EXPECT_EQ(g.missing(), std::vector<int>{kLate});
  EXPECT_TRUE(contains(g.message(), "all_reduce #0 on dp (rank " + std::to_string(me) + " of " +
                                        std::to_string(p) + "), step 5;"))
      << g.message();
  EXPECT_TRUE(contains(g.message(), "rank 1 of dp (world rank 1): elsewhere: irecv (peer rank"))
      << g.message();
}

// A receive whose sender stops polling: the diagnosis names the point-to-point operation, its
// peer, and only that peer (not answering).
TEST(watchdog_expiry, a_receive_names_its_silent_sender) {
  wd::configure(kTimeout);
  Dup d, side;
  auto pp = make_communicator(paraxis::config::CommBackend::mpi, d.comm, Axis::pp, nullptr);
  const int me = pp->rank();
  Expiries ex;
  ex.side = side.comm;
  ex.install();
  double v = me == kLate ? 2.25 : 0;
  const double t0 = now();
  if (me == kLate) {
    sleep_until_signalled(side.comm, 1);
    pp->send(&v, 1, DType::f64, 0, 5);
  } else if (me == 0) {
    pp->recv(&v, 1, DType::f64, kLate, 5);
    EXPECT_DOUBLE_EQ(v, 2.25);
    ASSERT_EQ(ex.seen.size(), 1u);
    const wd::Diagnosis& g = ex.seen[0];
    EXPECT_EQ(g.op, "recv");
    EXPECT_EQ(g.axis, "pp");
    EXPECT_EQ(g.peer, kLate);
    EXPECT_EQ(g.seq, -1);
    EXPECT_LT(ex.at[0] - t0, kTimeout + wd::grace_s() + 10);
    ASSERT_EQ(g.members.size(), 1u);
    EXPECT_EQ(g.members[0].rank, kLate);
    EXPECT_EQ(g.members[0].arrival, wd::Arrival::not_answering);
    EXPECT_TRUE(contains(g.message(), "recv (peer rank 1) on pp")) << g.message();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me != 0 && me != kLate) {
    EXPECT_TRUE(ex.seen.empty());
  }
}

}  // namespace
