// The link emulation inside the communicator on 2 and 4 ranks (docs/diagnosis.md, "Nodes and
// emulated links", "Slow links"): operations whose data crosses emulated nodes, or the
// injected slow link, take at least the model's added time and their CommLog events include
// it; operations that cross nothing get nothing; the slow link's ends are checked at run time.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "driver/results.hpp"
#include "parallel/communicator.hpp"
#include "parallel/process_grid.hpp"

using namespace paraxis::parallel;
using paraxis::config::CommBackend;
using paraxis::config::LinkEmulation;
using paraxis::model::DType;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// World ranks {0,1}, {2,3}, ...: a pair per communicator.
struct Pair {
  MPI_Comm comm = MPI_COMM_NULL;
  Pair() { MPI_Comm_split(MPI_COMM_WORLD, world_rank() / 2, world_rank(), &comm); }
  ~Pair() { MPI_Comm_free(&comm); }
};

LinkModel latency_model(int ranks_per_node, double latency_us) {
  LinkEmulation L;
  L.ranks_per_node = ranks_per_node;
  L.latency_us = latency_us;
  return make_link_model(L, emulated_nodes(world_size(), ranks_per_node));
}

double last_duration(const CommLog& log, const char* op) {
  for (auto it = log.events().rbegin(); it != log.events().rend(); ++it)
    if (std::string(it->op) == op) return it->end - it->begin;
  ADD_FAILURE() << "no " << op << " event";
  return -1;
}

// Every rank agrees (a failing rank fails the test everywhere).
bool all_ranks(bool ok, MPI_Comm comm = MPI_COMM_WORLD) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, comm);
  return v == 1;
}

// A barrier that sleeps while it waits (an MPI barrier would spin on a shared core).
void sleeping_barrier() {
  MPI_Request q = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &q);
  for (int done = 0; !done;) {
    MPI_Test(&q, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

constexpr double kLatency = 2000e-6;  // 2 ms per crossing message

}  // namespace

TEST(link_emulation, ping_pong_across_nodes_pays_latency_on_each_receive) {
  Pair pair;
  CommLog log;
  auto c = make_communicator(CommBackend::mpi, pair.comm, Axis::pp, &log, latency_model(1, 2000));
  ASSERT_NE(c->link_delay(), nullptr);
  EXPECT_EQ(c->world_ranks(), (std::vector<int>{world_rank() / 2 * 2, world_rank() / 2 * 2 + 1}));
  std::vector<float> a(256, 1.0f), b(256, 0.0f);
  const double t0 = steady_now();
  if (c->rank() == 0) {
    c->send(a.data(), a.size(), DType::f32, 1, 1);
    c->recv(b.data(), b.size(), DType::f32, 1, 2);
  } else {
    c->recv(b.data(), b.size(), DType::f32, 0, 1);
    c->send(a.data(), a.size(), DType::f32, 0, 2);
  }
  const double round_trip = steady_now() - t0;
  EXPECT_EQ(b[0], 1.0f);
  // Rank 0 waits for two crossing messages; each receive's event holds its 2 ms.
  if (c->rank() == 0) {
    EXPECT_GE(round_trip, 2 * kLatency);
  }
  EXPECT_GE(last_duration(log, "recv"), kLatency);
  // Non-blocking: the receive's wait pays the latency.
  Request r;
  if (c->rank() == 0)
    r = c->isend(a.data(), a.size(), DType::f32, 1, 3);
  else
    r = c->irecv(b.data(), b.size(), DType::f32, 0, 3);
  const double w0 = steady_now();
  c->wait(r);
  if (c->rank() == 1) {
    EXPECT_GE(steady_now() - w0, kLatency);
    EXPECT_GE(last_duration(log, "irecv"), kLatency);
    EXPECT_GE(log.events().back().exposed, kLatency);
  }
}

TEST(link_emulation, collectives_across_nodes_take_the_added_time) {
  Pair pair;
  CommLog log;
  auto c = make_communicator(CommBackend::mpi, pair.comm, Axis::dp, &log, latency_model(1, 2000));
  std::vector<double> x(64, 1.0 + c->rank());
  // Two ranks: the ring all-reduce has 2 (n - 1) = 2 crossing steps.
  c->all_reduce(x.data(), x.data(), x.size(), DType::f64);
  EXPECT_EQ(x[0], 3.0);
  EXPECT_GE(last_duration(log, "all_reduce"), 2 * kLatency);
  EXPECT_GE(log.events().back().exposed, 2 * kLatency);
  c->broadcast(x.data(), x.size(), DType::f64, 0);  // one tree round
  EXPECT_GE(last_duration(log, "broadcast"), kLatency);
  c->barrier();
  EXPECT_GE(last_duration(log, "barrier"), kLatency);
  std::vector<double> y(2 * 8, 0.0), z(2 * 8, 0.0);
  const int counts[] = {8, 8}, displs[] = {0, 8};
  c->all_to_all_v(y.data(), counts, displs, z.data(), counts, displs, DType::f64);
  EXPECT_GE(last_duration(log, "all_to_all_v"), kLatency);  // one pairwise step
  // Started, then waited: complete no earlier than its start plus the added time.
  Request r = c->iall_reduce(x.data(), x.data(), x.size(), DType::f64);
  c->wait(r);
  EXPECT_GE(last_duration(log, "all_reduce"), 2 * kLatency);
  EXPECT_EQ(x[0], 6.0);
  // test() keeps saying "not yet" until the added time has passed.
  const double t0 = steady_now();
  r = c->iall_reduce(x.data(), x.data(), x.size(), DType::f64);
  while (!c->test(r)) {
  }
  EXPECT_GE(steady_now() - t0, 2 * kLatency);
  EXPECT_EQ(x[0], 12.0);
}

TEST(link_emulation, ranks_on_one_node_add_nothing) {
  Pair pair;
  CommLog log;
  // 20 ms a message: far above what time-sharing the cores with other jobs costs a plain
  // all-reduce here.
  auto c = make_communicator(CommBackend::mpi, pair.comm, Axis::dp, &log, latency_model(2, 20000));
  EXPECT_EQ(c->link_delay(), nullptr);  // both members on one emulated node
  std::vector<double> x(64, 1.0);
  double fastest = 1e9;
  for (int rep = 0; rep < 10; ++rep) {
    c->all_reduce(x.data(), x.data(), x.size(), DType::f64);
    fastest = std::min(fastest, last_duration(log, "all_reduce"));
  }
  // The emulation would have added 40 ms; the fastest of ten plain ones is well below.
  EXPECT_LT(fastest, 20e-3);
  EXPECT_EQ(x[0], 1024.0);
}

TEST(slow_link, slows_only_the_operations_that_cross_it) {
  if (world_size() != 4) GTEST_SKIP() << "4 ranks";
  paraxis::config::ParallelConfig shape;
  shape.dp = 4;
  ProcessGrid grid(MPI_COMM_WORLD, shape);
  // Nodes from the host names (hardware.ranks_per_node = 0).
  const NodeMap nodes = grid.nodes(0);
  EXPECT_EQ(grid.host_names().size(), 4u);
  EXPECT_EQ(nodes.nodes(),
            static_cast<int>(
                std::set<std::string>(grid.host_names().begin(), grid.host_names().end()).size()));
  ASSERT_NE(world_host_names(), nullptr);
  ASSERT_TRUE(run_nodes(4, 0).has_value());
  EXPECT_EQ(run_nodes(4, 0)->node, nodes.node);
  EXPECT_FALSE(run_nodes(5, 0).has_value());
  LinkEmulation L;
  L.slow_ranks = {0, 1};
  // 10 ms a message: the operations that do not cross the link stay far below it even when
  // other jobs share the cores.
  L.slow_latency_us = 10000;
  const LinkModel model = make_link_model(L, nodes);
  const double slow = 10000e-6;
  CommLog log;
  auto world = make_communicator(CommBackend::mpi, MPI_COMM_WORLD, Axis::dp, &log, model);
  Pair pair;
  auto half = make_communicator(CommBackend::mpi, pair.comm, Axis::tp, &log, model);
  const int me = world_rank();
  // Ring 0-1-2-3-0 has the edge 0-1: every member's all-reduce pays 2 (n - 1) = 6 steps.
  std::vector<float> x(32, 1.0f);
  world->all_reduce(x.data(), x.data(), x.size(), DType::f32);
  EXPECT_GE(last_duration(log, "all_reduce"), 6 * slow);
  EXPECT_EQ(x[0], 4.0f);
  // {0, 1} pays 2 steps; {2, 3} is not slowed at all.
  if (me < 2) {
    ASSERT_NE(half->link_delay(), nullptr);
    half->all_reduce(x.data(), x.data(), x.size(), DType::f32);
    EXPECT_GE(last_duration(log, "all_reduce"), 2 * slow);
  } else {
    EXPECT_EQ(half->link_delay(), nullptr);
    double fastest = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
      half->all_reduce(x.data(), x.data(), x.size(), DType::f32);
      fastest = std::min(fastest, last_duration(log, "all_reduce"));
    }
    EXPECT_LT(fastest, 2 * slow);
  }
  // Point-to-point on the world communicator: 0 <-> 1 crosses the slow link, 2 <-> 3 not.
  // One pair at a time, the other asleep: four ranks time-share two cores here, and a pair
  // spinning in its receives would slow the other's.
  const int peer = me ^ 1;
  std::vector<float> b(32, 0.0f);
  double fastest = 1e9;
  for (int turn = 0; turn < 2; ++turn) {
    if (me / 2 == turn)
      for (int rep = 0; rep < 10; ++rep) {
        if (me % 2 == 0) {
          world->send(x.data(), x.size(), DType::f32, peer, 7);
          world->recv(b.data(), b.size(), DType::f32, peer, 8);
        } else {
          world->recv(b.data(), b.size(), DType::f32, peer, 7);
          world->send(x.data(), x.size(), DType::f32, peer, 8);
        }
        fastest = std::min(fastest, last_duration(log, "recv"));
      }
    sleeping_barrier();
  }
  if (me < 2) {
    EXPECT_GE(fastest, slow);
  } else {
    EXPECT_LT(fastest, slow);
  }
  EXPECT_EQ(world->link_delay()->receive(peer, 128), me < 2 ? slow : 0.0);
}

TEST(slow_link, bandwidth_factor_without_emulated_bandwidth_uses_a_measured_speed) {
  if (world_size() != 4) GTEST_SKIP() << "4 ranks";
  LinkEmulation L;
  L.ranks_per_node = 2;
  L.slow_ranks = {0, 1};
  L.slow_bandwidth_factor = 0.5;
  const LinkModel model = make_link_model(L, emulated_nodes(4, 2));
  auto world = make_communicator(CommBackend::mpi, MPI_COMM_WORLD, Axis::dp, nullptr, model);
  ASSERT_NE(world->link_delay(), nullptr);
  // The figure depends on the speed the ends measured: every member must hold the same.
  double f[2] = {world->link_delay()->all_reduce(1 << 20), 0};
  f[1] = -f[0];
  MPI_Allreduce(MPI_IN_PLACE, f, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_GT(f[0], 0.0);
  EXPECT_EQ(f[0], -f[1]);
}

TEST(slow_link, a_node_that_does_not_exist_is_refused_on_every_rank) {
  if (world_size() != 4) GTEST_SKIP() << "4 ranks";
  paraxis::config::ParallelConfig shape;
  shape.dp = 4;
  ProcessGrid grid(MPI_COMM_WORLD, shape);
  LinkEmulation L;
  L.slow_nodes = {0, grid.nodes(0).nodes()};  // one past the last node of the hosts
  L.slow_latency_us = 10;
  std::string message;
  try {
    make_link_model(L, grid.nodes(0));
  } catch (const std::invalid_argument& e) {
    message = e.what();
  }
  EXPECT_TRUE(all_ranks(message.find("fault.slow_link.nodes") != std::string::npos)) << message;
}

TEST(topology, summary_json_names_the_axes_that_span_nodes) {
  // tp2 x dp2 on emulated nodes of 2 ranks: tensor parallelism inside the nodes, data
  // parallelism across them.
  paraxis::driver::PointResult r;
  r.world = 4;
  auto& c = r.point.config;
  c.parallel.tp = 2;
  c.parallel.dp = 2;
  c.comm.links.ranks_per_node = 2;
  r.status = paraxis::driver::PointStatus::failed("before its first step");
  const auto t = paraxis::driver::point_to_json(r).at("topology");
  EXPECT_EQ(t.at("nodes"), 2);
  EXPECT_EQ(t.at("ranks_per_node"), 2);
  EXPECT_EQ(t.at("emulated"), true);
  EXPECT_EQ(t.at("node_of"), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(t.at("axes").at("tp").at("groups"), 2);
  EXPECT_EQ(t.at("axes").at("tp").at("groups_spanning_nodes"), 0);
  EXPECT_EQ(t.at("axes").at("dp").at("groups"), 2);
  EXPECT_EQ(t.at("axes").at("dp").at("groups_spanning_nodes"), 2);
  EXPECT_EQ(t.at("axes").at("pp").at("groups_spanning_nodes"), 0);
  // Nodes from host names that no grid has gathered for this world size: no topology, not a
  // guess.
  c.comm.links.ranks_per_node = 0;
  r.world = 64;
  c.parallel.dp = 32;
  EXPECT_FALSE(paraxis::driver::point_to_json(r).contains("topology"));
}
