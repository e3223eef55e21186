// The slow axis's added time without MPI (docs/sensitivity.md, "Injection"): every round or
// message of a group on the slowed axis costs (factor - 1) (alpha_m + bytes / v_m + the
// emulated inter-node cost of that round) more, on top of what the emulated links add; groups
// not on the slowed axis add nothing. Figures computed by hand from the documented formula.
#include <gtest/gtest.h>

#include <vector>

#include "parallel/link_emulation.hpp"
#include "parallel/topology.hpp"

using namespace paraxis::parallel;
using paraxis::config::LinkEmulation;
using paraxis::config::SlowAxis;

namespace {

// alpha_m = 5 us, v_m = 2 GB/s.
const MeasuredLink kLink{5e-6, 2e9};

LinkModel model(double factor, int ranks_per_node, double latency_us = 0,
                double bandwidth_gbs = 0) {
  LinkEmulation L;
  L.ranks_per_node = ranks_per_node;
  L.latency_us = latency_us;
  L.bandwidth_gbs = bandwidth_gbs;
  L.slow_axis = SlowAxis::dp;
  L.slow_axis_factor = factor;
  return make_link_model(L, emulated_nodes(4, ranks_per_node));
}

}  // namespace

TEST(slow_axis, added_formula) {
  EXPECT_DOUBLE_EQ(slow_axis_added(3, kLink, 1e6, 0), 2 * (5e-6 + 1e6 / 2e9));
  EXPECT_DOUBLE_EQ(slow_axis_added(3, kLink, 1e6, 1e-3), 2 * (5e-6 + 1e6 / 2e9 + 1e-3));
  EXPECT_DOUBLE_EQ(slow_axis_added(1, kLink, 1e6, 1e-3), 0);  // the baseline adds nothing
  EXPECT_DOUBLE_EQ(slow_axis_added(5, MeasuredLink{1e-6, 0}, 1e6, 0), 4e-6);  // no speed known
}

TEST(slow_axis, ring_all_reduce_on_one_node) {
  // 4 ranks on one node: no emulated cost, only the measured link, 2(n-1) = 6 rounds of S/4.
  const LinkModel m = model(4, 4);
  const LinkDelay d(m, {0, 1, 2, 3}, 1, 0, &kLink);
  ASSERT_TRUE(d.active());
  const double S = 4e6;
  EXPECT_NEAR(d.all_reduce(4e6), 6 * 3 * (5e-6 + S / 4 / 2e9), 1e-15);
  EXPECT_NEAR(d.reduce_scatter(4e6), 3 * 3 * (5e-6 + S / 4 / 2e9), 1e-15);
  EXPECT_NEAR(d.all_gather(4e6), 3 * 3 * (5e-6 + S / 4 / 2e9), 1e-15);
  // Broadcast: ceil(log2 4) = 2 rounds of S; barrier: 2 rounds of latency.
  EXPECT_NEAR(d.broadcast(1000, 0), 2 * 3 * (5e-6 + 1000 / 2e9), 1e-15);
  EXPECT_NEAR(d.barrier(), 2 * 3 * 5e-6, 1e-15);
  // A message: charged on the receiver only.
  EXPECT_NEAR(d.receive(0, 2000), 3 * (5e-6 + 2000 / 2e9), 1e-15);
  EXPECT_EQ(d.receive(1, 2000), 0);
  // Pairwise exchange: per step the larger of send and receive.
  const int sc[4] = {0, 0, 100, 50}, rc[4] = {10, 0, 20, 30};
  // me = 1: step 1 sends 100 (to 2) receives 10 (from 0); step 2 sends 50 (to 3), receives 30
  // (from 3); step 3 sends 0 (to 0), receives 20 (from 2). Elements of 4 bytes.
  const double per = 3 * 5e-6, b = 3 / 2e9;
  EXPECT_NEAR(d.all_to_all_v(sc, rc, 4), (per + 400 * b) + (per + 200 * b) + (per + 80 * b), 1e-15);
}

TEST(slow_axis, factor_applies_to_the_emulated_link_too) {
  // One rank per node, 100 us and 1 GB/s between nodes: a 2-rank all-reduce of S pays 2 rounds
  // of (100 us + S/2 / 1 GB/s) emulated, and the slow axis (f - 1) times that plus the
  // measured link's cost.
  const LinkModel m = model(8, 1, 100, 1);
  const LinkDelay slowed(m, {0, 1}, 0, 0, &kLink), plain(m, {0, 1}, 0);
  const double S = 342016, emulated = 100e-6 + S / 2 / 1e9;
  EXPECT_NEAR(plain.all_reduce(342016), 2 * emulated, 1e-15);
  EXPECT_NEAR(slowed.all_reduce(342016), 2 * (emulated + 7 * (5e-6 + S / 2 / 2e9 + emulated)),
              1e-15);
}

TEST(slow_axis, other_groups_and_the_baseline_add_nothing) {
  // A group built without the measured link (not on the slowed axis) on one node: inactive.
  const LinkModel m = model(8, 4);
  EXPECT_FALSE(LinkDelay(m, {0, 1, 2, 3}, 0).active());
  // Factor 1: the sweep's baseline; the model is inactive, whatever the axis.
  const LinkModel base = model(1, 4);
  EXPECT_FALSE(base.active());
  EXPECT_FALSE(LinkDelay(base, {0, 1}, 0, 0, &kLink).active());
  // A group of one moves nothing.
  EXPECT_FALSE(LinkDelay(m, {2}, 0, 0, &kLink).active());
}
