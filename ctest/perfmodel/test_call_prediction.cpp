// One call's predicted time (perfmodel/call_prediction.hpp): the operation's own fit before its
// axis's link, the engine's operation names as the model's collectives, the power-of-two size
// buckets at their edges, and traffic_time as the sum of call_time over the calls it counts.
#include <gtest/gtest.h>

#include "perfmodel/call_prediction.hpp"
#include "perfmodel/step_time.hpp"

namespace pm = paraxis::perfmodel;
using pm::Collective;

TEST(call_prediction, own_fit_first_then_the_axis_link) {
  const pm::LinkCost axis{1e-6, 1e-9, 0}, own{5e-6, 3e-9, 0};
  const pm::OpLinks per_op{{Collective::all_gather, own}};
  EXPECT_DOUBLE_EQ(pm::call_time(Collective::all_gather, 4, 1 << 20, axis, &per_op),
                   3 * 5e-6 + (1 << 20) * 0.75 * 3e-9);
  EXPECT_DOUBLE_EQ(pm::call_time(Collective::all_reduce, 4, 1 << 20, axis, &per_op),
                   pm::ring_all_reduce_time(4, 1 << 20, axis));
  EXPECT_DOUBLE_EQ(pm::call_time(Collective::all_reduce, 4, 4096, axis, nullptr,
                                 pm::AllReduceAlgorithm::rabenseifner),
                   pm::rabenseifner_all_reduce_time(4, 4096, axis));
  // A group of one moves nothing; a transfer costs alpha + S beta whatever the group.
  EXPECT_EQ(pm::call_time(Collective::all_reduce, 1, 4096, axis), 0.0);
  EXPECT_DOUBLE_EQ(pm::call_time(Collective::point_to_point, 8, 1000, axis), 1e-6 + 1000 * 1e-9);
}

// The calibration's measured curve predicts the calls it covers (the same group size, S between
// its smallest and largest size): a measured size its own median, a size between two measured
// ones the straight line between them; outside the curve, or on another group size, the fit.
TEST(call_prediction, the_measured_curve_where_it_covers_the_call_then_the_fit) {
  const pm::LinkCost axis{1e-6, 1e-9, 0};
  pm::OpCost own{2e-6, 1e-10, 0};
  own.curve = {{8, 4e-6}, {65536, 20e-6}, {262144, 80e-6}};
  own.curve_ranks = 2;
  const pm::OpLinks per_op{{Collective::all_gather, own}};
  auto t = [&](int group, double S) {
    return pm::call_time(Collective::all_gather, group, S, axis, &per_op);
  };
  EXPECT_DOUBLE_EQ(t(2, 8), 4e-6);
  EXPECT_DOUBLE_EQ(t(2, 65536), 20e-6);
  EXPECT_DOUBLE_EQ(t(2, 262144), 80e-6);
  EXPECT_DOUBLE_EQ(t(2, 0.5 * (65536 + 262144)), 50e-6);
  // Outside the measured sizes, or on 4 ranks: the fit (ring all-gather, alpha-beta).
  EXPECT_DOUBLE_EQ(t(2, 1 << 20), pm::ring_all_gather_time(2, 1 << 20, own));
  EXPECT_DOUBLE_EQ(t(2, 4), pm::ring_all_gather_time(2, 4, own));
  EXPECT_DOUBLE_EQ(t(4, 65536), pm::ring_all_gather_time(4, 65536, own));
  EXPECT_FALSE(pm::measured_call_time(pm::OpCost(axis), 2, 65536).has_value());
  // A transfer's curve (a ping-pong of two ranks) serves a pipeline communicator of any size.
  pm::OpCost p2p{1e-6, 1e-9, 0};
  p2p.curve = {{1024, 3e-6}, {4096, 5e-6}};
  p2p.curve_ranks = 2;
  const pm::OpLinks pp{{Collective::point_to_point, p2p}};
  EXPECT_DOUBLE_EQ(pm::call_time(Collective::point_to_point, 4, 2560, axis, &pp), 4e-6);
}

TEST(call_prediction, engine_names_map_onto_the_model) {
  pm::LoggedOp o;
  ASSERT_TRUE(pm::logged_op("all_to_all_v", &o));
  EXPECT_EQ(o.op, Collective::all_to_all);
  EXPECT_FALSE(o.receive);
  ASSERT_TRUE(pm::logged_op("isend", &o));
  EXPECT_EQ(o.op, Collective::point_to_point);
  EXPECT_STREQ(pm::call_name(o), "point_to_point");
  ASSERT_TRUE(pm::logged_op("irecv", &o));
  EXPECT_TRUE(o.receive);
  EXPECT_STREQ(pm::call_name(o), "receive");
  for (const char* n : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "send", "recv"})
    EXPECT_TRUE(pm::logged_op(n, nullptr)) << n;
  EXPECT_FALSE(pm::logged_op("barrier", &o));
  EXPECT_FALSE(pm::logged_op("", &o));
}

TEST(call_prediction, power_of_two_buckets) {
  EXPECT_EQ(pm::size_bucket(0), 0u);
  EXPECT_EQ(pm::size_bucket(0.5), 0u);
  EXPECT_EQ(pm::size_bucket(1), 1u);
  EXPECT_EQ(pm::size_bucket(8), 8u);
  EXPECT_EQ(pm::size_bucket(1023), 512u);
  EXPECT_EQ(pm::size_bucket(1024), 1024u);
  EXPECT_EQ(pm::size_bucket(1025), 1024u);
  EXPECT_EQ(pm::size_bucket(3.0 * (1ull << 40)), 1ull << 41);
}

TEST(call_prediction, traffic_time_sums_call_time) {
  pm::AxisTraffic t;
  t.add(Collective::reduce_scatter, 65536, 3);
  t.add(Collective::all_gather, 4096, 2, /*group=*/2);  // a call's own group (expert units)
  t.add(Collective::all_reduce, 8);
  const pm::LinkCost link{2e-6, 1e-9, 0};
  const pm::OpLinks per_op{{Collective::all_reduce, {7e-6, 1e-9, 0}}};
  const double sum = 3 * pm::call_time(Collective::reduce_scatter, 4, 65536, link, &per_op) +
                     2 * pm::call_time(Collective::all_gather, 2, 4096, link, &per_op) +
                     pm::call_time(Collective::all_reduce, 4, 8, link, &per_op);
  EXPECT_DOUBLE_EQ(pm::traffic_time(t, 4, link, pm::AllReduceAlgorithm::ring, &per_op), sum);
}
