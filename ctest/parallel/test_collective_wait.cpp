// The arithmetic of wait time (parallel/collective_wait.hpp) from given start times and clock
// offsets, and the injected slowdown's stretch of an interval (model::stretch_interval); no MPI.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "model/gpt_model.hpp"
#include "parallel/collective_wait.hpp"

namespace {

using paraxis::parallel::arrival_waits;
using paraxis::parallel::charged_wait;

TEST(collective_wait, each_rank_waits_for_the_last_arrival) {
  // Three ranks, two collectives: rank 2 last in the first, rank 0 last in the second.
  const std::vector<std::vector<double>> begins{{1.0, 5.0}, {1.2, 4.5}, {1.7, 4.9}};
  const auto w = arrival_waits(begins, {0, 0, 0});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_DOUBLE_EQ(w[0][0], 0.7);
  EXPECT_DOUBLE_EQ(w[1][0], 0.5);
  EXPECT_DOUBLE_EQ(w[2][0], 0.0);
  EXPECT_DOUBLE_EQ(w[0][1], 0.0);
  EXPECT_DOUBLE_EQ(w[1][1], 0.5);
  EXPECT_NEAR(w[2][1], 0.1, 1e-12);
}

TEST(collective_wait, clock_offsets_move_every_rank_to_the_reference_clock) {
  // Rank 1's clock runs 10 s behind rank 0's: read raw it would look 10 s early and seem to
  // wait 10 s; corrected, it arrives 0.25 s after rank 0, which waits for it.
  const std::vector<std::vector<double>> begins{{100.0}, {90.25}};
  const auto raw = arrival_waits(begins, {0, 0});
  EXPECT_DOUBLE_EQ(raw[1][0], 9.75);
  const auto w = arrival_waits(begins, {0, 10.0});
  EXPECT_DOUBLE_EQ(w[0][0], 0.25);
  EXPECT_DOUBLE_EQ(w[1][0], 0.0);
}

TEST(collective_wait, different_collective_counts_are_refused) {
  EXPECT_THROW(arrival_waits({{1.0, 2.0}, {1.0}}, {0, 0}), std::invalid_argument);
  EXPECT_THROW(arrival_waits({{1.0}, {1.0}}, {0}), std::invalid_argument);
  EXPECT_TRUE(arrival_waits({}, {}).empty());
}

TEST(collective_wait, the_charge_is_at_most_the_time_blocked) {
  EXPECT_DOUBLE_EQ(charged_wait(0.3, 1.0), 0.3);
  EXPECT_DOUBLE_EQ(charged_wait(0.3, 0.1), 0.1);  // non-blocking: computed meanwhile
  EXPECT_DOUBLE_EQ(charged_wait(-0.2, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(charged_wait(0.3, -1.0), 0.0);
}

TEST(collective_wait, slowdown_stretches_an_interval_by_factor_minus_one_times_its_length) {
  using paraxis::model::steady_seconds;
  using paraxis::model::stretch_interval;
  const double end = steady_seconds();
  const double stretched = stretch_interval(end, 0.01, 3.0);
  // Exactly (3 - 1) x 10 ms more, however late the scheduler woke the wait, which has passed
  // (to the rounding of a steady clock's seconds: 7e-12 s a step after 10 hours of uptime).
  EXPECT_NEAR(stretched - end, 0.02, 1e-9);
  EXPECT_GE(steady_seconds(), stretched);
  // Off: returns the end at once.
  EXPECT_EQ(stretch_interval(end, 0.01, 1.0), end);
  EXPECT_EQ(stretch_interval(end, 0.0, 3.0), end);
}

}  // namespace
