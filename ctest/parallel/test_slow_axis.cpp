// fault.slow_axis inside the communicator on 2 ranks (docs/sensitivity.md, "Injection"): a
// communicator of the slowed axis measures its link once (both ranks agree on the figures) and
// every later operation takes at least the added time of the documented formula, with the time
// in its CommLog event; a communicator of another axis over the same ranks gets nothing added
// and measures nothing; the factor-1 baseline adds nothing either.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "parallel/communicator.hpp"
#include "parallel/link_measure.hpp"

using namespace paraxis::parallel;
using paraxis::config::CommBackend;
using paraxis::config::LinkEmulation;
using paraxis::config::SlowAxis;
using paraxis::model::DType;

namespace {

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Both ranks on one node (no emulated cost): only the slow axis adds.
LinkModel slow_dp(double factor) {
  LinkEmulation L;
  L.ranks_per_node = world_size();
  L.slow_axis = SlowAxis::dp;
  L.slow_axis_factor = factor;
  return make_link_model(L, emulated_nodes(world_size(), world_size()));
}

struct Dup {
  MPI_Comm comm = MPI_COMM_NULL;
  Dup() { MPI_Comm_dup(MPI_COMM_WORLD, &comm); }
  ~Dup() { MPI_Comm_free(&comm); }
};

double last_duration(const CommLog& log) {
  return log.events().empty() ? -1 : log.events().back().end - log.events().back().begin;
}

}  // namespace

TEST(slow_axis, the_slowed_axis_pays_and_the_others_do_not) {
  if (world_size() != 2) GTEST_SKIP() << "a 2-rank test";
  clear_measured_links();
  Dup a, b;
  CommLog dp_log, tp_log;
  const LinkModel m = slow_dp(20);
  auto dp = make_communicator(CommBackend::mpi, a.comm, Axis::dp, &dp_log, m);
  auto tp = make_communicator(CommBackend::mpi, b.comm, Axis::tp, &tp_log, m);
  // Measured once, on the slowed axis only, and the same figures on both ranks.
  const auto links = measured_links();
  ASSERT_EQ(links.count("dp"), 1u);
  EXPECT_EQ(links.count("tp"), 0u);
  const MeasuredLink l = links.at("dp");
  EXPECT_GT(l.alpha_s, 0);
  EXPECT_LT(l.alpha_s, 0.1);  // a ping-pong on one host: far below 100 ms
  EXPECT_GT(l.bytes_per_s, 0);
  double mine[2] = {l.alpha_s, l.bytes_per_s}, most[2] = {0, 0}, least[2] = {0, 0};
  MPI_Allreduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(mine, least, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(most[0], least[0]);
  EXPECT_EQ(most[1], least[1]);
  ASSERT_NE(dp->link_delay(), nullptr);
  EXPECT_EQ(tp->link_delay(), nullptr);  // nothing added, not even a clock read

  // A 2-rank ring all-reduce of S: 2 rounds of S/2, each (f - 1) (alpha + S/2 / v) more.
  const std::size_t n = 1 << 16;  // 256 KiB of floats
  const double S = 4.0 * n;
  const double added = 2 * 19 * (l.alpha_s + S / 2 / l.bytes_per_s);
  EXPECT_NEAR(dp->link_delay()->all_reduce(static_cast<std::size_t>(S)), added, 1e-12 * added);
  std::vector<float> x(n, 1.0f);
  dp->all_reduce(x.data(), x.data(), n, DType::f32, ReduceOp::sum);
  EXPECT_GE(last_duration(dp_log), added);  // a hold never ends early
  EXPECT_EQ(x[0], 2.0f);
  // The same operation on the other axis runs with no delay object (above): nothing added.
  tp->all_reduce(x.data(), x.data(), n, DType::f32, ReduceOp::sum);
  EXPECT_EQ(x[0], 4.0f);
  // Point-to-point on the slowed axis: the receiver pays (f - 1) (alpha + bytes / v).
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    dp->send(x.data(), n, DType::f32, 1, 7);
  } else {
    dp->recv(x.data(), n, DType::f32, 0, 7);
    EXPECT_GE(last_duration(dp_log), 19 * (l.alpha_s + S / l.bytes_per_s));
  }
  clear_measured_links();
}

TEST(slow_axis, the_baseline_measures_and_adds_nothing) {
  if (world_size() != 2) GTEST_SKIP() << "a 2-rank test";
  clear_measured_links();
  Dup a;
  CommLog log;
  auto dp = make_communicator(CommBackend::mpi, a.comm, Axis::dp, &log, slow_dp(1));
  EXPECT_TRUE(measured_links().empty());
  EXPECT_EQ(dp->link_delay(), nullptr);
}
