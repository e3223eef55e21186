// Wait time gathered over a group (parallel::attribute_waits) from hand-made events whose start
// times are known, with and without a clock offset; groups whose ranks recorded different
// collectives are refused with a note; the clock offset's ping-pong on one host finds 0 within
// its stated accuracy. Two ranks (more: skipped).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>

#include "parallel/communicator.hpp"
#include "parallel/parallel_trainer_metrics.hpp"

using namespace paraxis;
using parallel::Axis;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
bool two_ranks() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n == 2;
}

// Rank 0 starts the all-reduce at 10.0 and rank 1 at 10.5; rank 1 starts the (non-blocking,
// recorded first because it completed first) reduce-scatter at 19.75, rank 0 at 20.0. A send
// on the same axis, and a tp collective that is not this communicator's.
parallel::CommLog hand_made_log(int rank, double exposed) {
  parallel::CommLog log;
  log.add({Axis::dp, "reduce_scatter", 64, 20.0 - 0.25 * rank, 21.0, exposed});
  log.add({Axis::dp, "all_reduce", 64, 10.0 + 0.5 * rank, 11.0, exposed});
  log.add({Axis::dp, "isend", 64, 12.0, 12.1, 0.03});
  log.add({Axis::tp, "all_reduce", 64, 1.0 + 7 * rank, 9.0, exposed});
  return log;
}

const parallel::CommEvent& find(const parallel::CommLog& log, Axis a, const char* op) {
  for (const auto& e : log.events())
    if (e.axis == a && std::string(e.op) == op) return e;
  throw std::logic_error(std::string("no event ") + op);
}

}  // namespace

TEST(wait_time, early_ranks_wait_for_the_last_arrival) {
  if (!two_ranks()) GTEST_SKIP() << "two ranks";
  const int rank = world_rank();
  auto log = hand_made_log(rank, 2.0);
  auto dp = parallel::make_communicator(config::CommBackend::mpi, MPI_COMM_WORLD, Axis::dp, &log);
  EXPECT_EQ(parallel::attribute_waits(log, *dp, 0.0), "");
  EXPECT_DOUBLE_EQ(find(log, Axis::dp, "all_reduce").wait, rank == 0 ? 0.5 : 0.0);
  EXPECT_DOUBLE_EQ(find(log, Axis::dp, "reduce_scatter").wait, rank == 0 ? 0.0 : 0.25);
  EXPECT_DOUBLE_EQ(find(log, Axis::dp, "isend").wait, 0.03);  // point-to-point: its exposed time
  EXPECT_DOUBLE_EQ(find(log, Axis::tp, "all_reduce").wait, 0.0);  // another communicator's
}

TEST(wait_time, the_charge_is_at_most_the_exposed_time) {
  if (!two_ranks()) GTEST_SKIP() << "two ranks";
  const int rank = world_rank();
  auto log = hand_made_log(rank, 0.1);
  auto dp = parallel::make_communicator(config::CommBackend::mpi, MPI_COMM_WORLD, Axis::dp, &log);
  EXPECT_EQ(parallel::attribute_waits(log, *dp, 0.0), "");
  EXPECT_DOUBLE_EQ(find(log, Axis::dp, "all_reduce").wait, rank == 0 ? 0.1 : 0.0);
}

TEST(wait_time, clock_offsets_are_applied) {
  if (!two_ranks()) GTEST_SKIP() << "two ranks";
  const int rank = world_rank();
  auto log = hand_made_log(rank, 2.0);
  auto dp = parallel::make_communicator(config::CommBackend::mpi, MPI_COMM_WORLD, Axis::dp, &log);
  // Rank 1's clock reads 0.5 s ahead of rank 0's: it started the all-reduce with rank 0, and
  // the reduce-scatter 0.75 s before it.
  EXPECT_EQ(parallel::attribute_waits(log, *dp, rank == 1 ? -0.5 : 0.0), "");
  EXPECT_DOUBLE_EQ(find(log, Axis::dp, "all_reduce").wait, 0.0);
  EXPECT_DOUBLE_EQ(find(log, Axis::dp, "reduce_scatter").wait, rank == 0 ? 0.0 : 0.75);
}

TEST(wait_time, different_collectives_per_rank_are_noted_not_attributed) {
  if (!two_ranks()) GTEST_SKIP() << "two ranks";
  const int rank = world_rank();
  auto log = hand_made_log(rank, 2.0);
  if (rank == 1) log.add({Axis::dp, "all_gather", 64, 30.0, 31.0, 1.0});
  auto dp = parallel::make_communicator(config::CommBackend::mpi, MPI_COMM_WORLD, Axis::dp, &log);
  const std::string note = parallel::attribute_waits(log, *dp, 0.0);
  EXPECT_NE(note.find("comm.dp"), std::string::npos) << note;
  EXPECT_NE(note.find("(2, 3 by group rank)"), std::string::npos) << note;
  for (const auto& e : log.events()) {
    if (std::string(e.op) != "isend") {
      EXPECT_EQ(e.wait, 0.0) << e.op;
    }
  }
}

namespace {
// Rank 1's clock in the test below: 50 ms ahead of the host's, or 200 ms behind it.
double ahead_50ms() {
  return parallel::steady_now() + 0.05;
}
double behind_200ms() {
  return parallel::steady_now() - 0.2;
}
}  // namespace

TEST(wait_time, clock_offset_has_the_sign_of_the_skew) {
  if (!two_ranks()) GTEST_SKIP() << "two ranks";
  // Rank 0's clock reads local + offset: a rank whose clock runs 50 ms ahead has offset -50 ms,
  // one 200 ms behind +200 ms, within the estimate's own accuracy (any load). A sign error
  // (mid - t_root) would report +50 ms and -200 ms, and charge waits to the wrong ranks.
  for (const auto& [clock, want] : {std::pair{&ahead_50ms, -0.05}, std::pair{&behind_200ms, 0.2}}) {
    const auto c =
        parallel::estimate_clock_offset(MPI_COMM_WORLD, /*always_measure=*/true, 8,
                                        world_rank() == 1 ? clock : parallel::steady_now);
    if (world_rank() != 1) continue;
    EXPECT_TRUE(c.measured);
    EXPECT_LE(std::abs(c.offset_s - want), c.accuracy_s + 1e-9)
        << "offset " << c.offset_s << " s, expected " << want << " s within " << c.accuracy_s;
  }
}

TEST(wait_time, clock_offset_on_one_host_is_zero_within_its_accuracy) {
  if (!two_ranks()) GTEST_SKIP() << "two ranks";
  const int rank = world_rank();
  // One host: every rank shares rank 0's steady clock, nothing is measured.
  const auto shared = parallel::estimate_clock_offset(MPI_COMM_WORLD);
  EXPECT_FALSE(shared.measured);
  EXPECT_EQ(shared.offset_s, 0.0);
  // Measured anyway: the true offset is 0, and Cristian's bound holds.
  const auto c = parallel::estimate_clock_offset(MPI_COMM_WORLD, /*always_measure=*/true, 8);
  EXPECT_EQ(c.measured, rank != 0);
  if (rank != 0) {
    // Cristian's bound holds however long the round trips took on a busy machine.
    EXPECT_GT(c.accuracy_s, 0.0);
    EXPECT_LE(std::abs(c.offset_s), c.accuracy_s + 1e-9)
        << "offset " << c.offset_s << " accuracy " << c.accuracy_s;
  }
  EXPECT_THROW(parallel::estimate_clock_offset(MPI_COMM_WORLD, true, 0), std::invalid_argument);
}
