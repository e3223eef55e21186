// Nodes and the link emulation's cost model without MPI (docs/diagnosis.md, "Nodes and emulated
// links", "Slow links"): node maps (emulated and from host names), the groups of each axis and
// how many span nodes, and the added time of every operation kind against figures computed by
// hand from the documented formulas.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/link_emulation.hpp"
#include "parallel/topology.hpp"

using namespace paraxis::parallel;
using paraxis::config::LinkEmulation;
using paraxis::config::ParallelConfig;

namespace {

ParallelConfig grid(int tp, int pp, int dp, int ep = 1) {
  ParallelConfig p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.ep = ep;
  return p;
}

// 4 ranks on 2 emulated nodes ({0,1}, {2,3}), 10 us and 1 GB/s between them.
LinkModel two_nodes(LinkEmulation L = {}) {
  L.ranks_per_node = 2;
  L.latency_us = 10;
  L.bandwidth_gbs = 1;
  return make_link_model(L, emulated_nodes(4, 2));
}

std::string message_of(const LinkEmulation& L, const NodeMap& m) {
  try {
    make_link_model(L, m);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(node_map, emulated_nodes_are_consecutive_ranks) {
  const NodeMap m = emulated_nodes(5, 2);
  EXPECT_EQ(m.node, (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(m.nodes(), 3);
  EXPECT_TRUE(m.emulated());
  EXPECT_EQ(m.node_of(3), 1);
  EXPECT_THROW(m.node_of(5), std::out_of_range);
  EXPECT_THROW(emulated_nodes(4, 0), std::invalid_argument);
}

TEST(node_map, host_nodes_are_numbered_by_first_appearance) {
  const NodeMap m = nodes_from_hosts({"nid7", "nid2", "nid7", "nid9", "nid2"});
  EXPECT_EQ(m.node, (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(m.nodes(), 3);
  EXPECT_FALSE(m.emulated());
  EXPECT_EQ(m.ranks_per_node, 0);
}

TEST(topology, tp_inside_nodes_and_dp_across_them) {
  const ParallelConfig p = grid(2, 1, 2);
  EXPECT_EQ(axis_groups(p, "tp"), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(axis_groups(p, "dp"), (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  const TopologySummary t = summarize_topology(p, emulated_nodes(4, 2));
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.ranks_per_node, 2);
  EXPECT_TRUE(t.emulated);
  const int tp = 0, pp = 1, dp = 2, ep = 3;
  EXPECT_EQ(t.axes[tp].groups, 2);
  EXPECT_EQ(t.axes[tp].groups_spanning_nodes, 0);
  EXPECT_EQ(t.axes[dp].groups, 2);
  EXPECT_EQ(t.axes[dp].groups_spanning_nodes, 2);
  EXPECT_EQ(t.axes[pp].groups, 4);
  EXPECT_EQ(t.axes[pp].groups_spanning_nodes, 0);
  EXPECT_EQ(t.axes[ep].groups, 4);
  // One rank per node: every group of more than one rank spans nodes.
  const TopologySummary one = summarize_topology(p, emulated_nodes(4, 1));
  EXPECT_EQ(one.axes[tp].groups_spanning_nodes, 2);
  EXPECT_THROW(summarize_topology(p, emulated_nodes(8, 2)), std::invalid_argument);
}

TEST(topology, expert_groups_follow_the_data_parallel_ranks) {
  // dp4 with ep2: expert groups {0,1} and {2,3}; on nodes of 2 ranks none spans, on nodes of
  // 1 rank both do.
  const ParallelConfig p = grid(1, 1, 4, 2);
  EXPECT_EQ(axis_groups(p, "ep"), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(summarize_topology(p, emulated_nodes(4, 2)).axes[3].groups_spanning_nodes, 0);
  EXPECT_EQ(summarize_topology(p, emulated_nodes(4, 1)).axes[3].groups_spanning_nodes, 2);
  EXPECT_THROW(axis_groups(p, "edp"), std::invalid_argument);
}

TEST(link_delay, ring_tree_dissemination_and_pairwise_figures) {
  const LinkModel m = two_nodes();
  const LinkDelay world(m, {0, 1, 2, 3}, 0);
  ASSERT_TRUE(world.active());
  // Ring over 0-1-2-3-0: edges 1-2 and 3-0 cross; every step costs 10 us + (S/4) / 1 GB/s.
  EXPECT_NEAR(world.all_reduce(4000), 6 * (10e-6 + 1000e-9), 1e-12);
  EXPECT_NEAR(world.reduce_scatter(4000), 3 * (10e-6 + 1000e-9), 1e-12);
  EXPECT_NEAR(world.all_gather(4000), 3 * (10e-6 + 1000e-9), 1e-12);
  // Binomial tree from 0: round 1 (0->1) stays on node 0, round 2 (0->2, 1->3) crosses.
  EXPECT_NEAR(world.broadcast(1000, 0), 10e-6 + 1000e-9, 1e-12);
  EXPECT_NEAR(world.broadcast(1000, 2), 10e-6 + 1000e-9, 1e-12);
  // Dissemination: both rounds have a crossing pair; latency only.
  EXPECT_NEAR(world.barrier(), 2 * 10e-6, 1e-12);
  // Pairwise exchange of rank 0 (4-byte elements): step 1 sends 400 B to 1 (same node) and
  // receives 280 B from 3 (crossing); step 2 sends 800 B to 2 and receives 240 B from 2; step 3
  // sends 1200 B to 3 and receives from 1 (same node).
  const int sc[] = {0, 100, 200, 300}, rc[] = {0, 50, 60, 70};
  EXPECT_NEAR(world.all_to_all_v(sc, rc, 4),
              (10e-6 + 280e-9) + (10e-6 + 800e-9) + (10e-6 + 1200e-9), 1e-12);
  // Point-to-point: the receiver pays latency + bytes / bandwidth when the sender is elsewhere.
  EXPECT_NEAR(world.receive(2, 1000), 10e-6 + 1000e-9, 1e-12);
  EXPECT_EQ(world.receive(1, 1000), 0.0);
  // A two-rank group across the nodes: 2 ring steps of S/2.
  EXPECT_NEAR(LinkDelay(m, {0, 2}, 1).all_reduce(2000), 2 * (10e-6 + 1000e-9), 1e-12);
  // A group inside a node costs nothing and says so.
  const LinkDelay inside(m, {2, 3}, 0);
  EXPECT_FALSE(inside.active());
  EXPECT_EQ(inside.all_reduce(1 << 20), 0.0);
  EXPECT_EQ(inside.barrier(), 0.0);
}

TEST(link_delay, one_rank_per_node_crosses_on_every_round) {
  LinkEmulation L;
  L.ranks_per_node = 1;
  L.latency_us = 2000;
  const LinkModel m = make_link_model(L, emulated_nodes(4, 1));
  const LinkDelay d(m, {0, 1, 2, 3}, 3);
  EXPECT_NEAR(d.broadcast(8, 0), 2 * 2000e-6, 1e-12);  // ceil(log2 4) rounds
  EXPECT_NEAR(d.all_reduce(8), 6 * 2000e-6, 1e-12);    // no bandwidth cap: latency only
  EXPECT_NEAR(LinkDelay(m, {0, 1, 2}, 0).barrier(), 2 * 2000e-6, 1e-12);
}

TEST(link_delay, off_costs_nothing) {
  const LinkModel m = make_link_model(LinkEmulation{}, emulated_nodes(4, 1));
  EXPECT_FALSE(m.active());
  EXPECT_FALSE(LinkDelay(m, {0, 1, 2, 3}, 0).active());
  EXPECT_EQ(LinkDelay(m, {0, 1, 2, 3}, 0).all_reduce(1 << 20), 0.0);
}

TEST(slow_link, latency_and_bandwidth_on_the_ring_edge_between_its_ends) {
  LinkEmulation L;
  L.slow_ranks = {1, 2};
  L.slow_latency_us = 100;
  L.slow_bandwidth_factor = 0.25;
  const LinkModel m = two_nodes(L);
  // Edge 1-2 crosses nodes with 1 GB/s emulated: its bytes move at 0.25 GB/s, i.e.
  // 3 ns per byte more; every ring step adds the slow link's 100 us + 3 ns * S/4.
  const LinkDelay world(m, {0, 1, 2, 3}, 0);
  EXPECT_NEAR(world.all_reduce(4000), 6 * ((10e-6 + 1000e-9) + (100e-6 + 3000e-9)), 1e-12);
  EXPECT_NEAR(world.receive(1, 1000), 0.0, 1e-15);  // 1 -> 0: same node, not the slow link
  EXPECT_NEAR(LinkDelay(m, {0, 1, 2, 3}, 2).receive(1, 1000), 10e-6 + 1000e-9 + 100e-6 + 3000e-9,
              1e-12);
  // A group without the pair, or where the pair has no ring edge, is not slowed.
  EXPECT_NEAR(LinkDelay(m, {0, 2}, 0).all_reduce(2000), 2 * (10e-6 + 1000e-9), 1e-12);
  L.slow_ranks = {0, 2};
  const LinkModel skip = two_nodes(L);
  EXPECT_NEAR(LinkDelay(skip, {0, 1, 2, 3}, 0).all_reduce(4000), 6 * (10e-6 + 1000e-9), 1e-12);
  EXPECT_NEAR(LinkDelay(skip, {0, 2}, 0).all_reduce(2000),
              2 * ((10e-6 + 1000e-9) + (100e-6 + 3000e-9)), 1e-12);
}

TEST(slow_link, nodes_slow_every_edge_between_them) {
  LinkEmulation L;
  L.ranks_per_node = 1;
  L.slow_nodes = {0, 1};
  L.slow_latency_us = 50;
  const LinkModel m = make_link_model(L, emulated_nodes(3, 1));
  // No emulated link: only the slow one costs. Ring 0-1-2-0 has edge 0-1.
  EXPECT_NEAR(LinkDelay(m, {0, 1, 2}, 2).all_reduce(3), 4 * 50e-6, 1e-12);
  EXPECT_FALSE(LinkDelay(m, {1, 2}, 0).active());
  EXPECT_NEAR(LinkDelay(m, {1, 0}, 1).receive(0, 8), 50e-6, 1e-12);
}

TEST(slow_link, measured_speed_when_no_emulated_bandwidth_applies) {
  LinkEmulation L;
  L.ranks_per_node = 2;
  L.slow_ranks = {0, 1};  // inside node 0: the emulated bandwidth is not this link's
  L.bandwidth_gbs = 1;
  L.slow_bandwidth_factor = 0.5;
  const LinkModel m = make_link_model(L, emulated_nodes(4, 2));
  // At half of a measured 2 GB/s, 1000 B per ring step take 0.5 us more.
  EXPECT_NEAR(LinkDelay(m, {0, 1}, 0, 2e9).all_reduce(2000), 2 * 0.5e-6, 1e-15);
  // Speed unknown: the factor adds nothing (the communicator always measures it).
  EXPECT_EQ(LinkDelay(m, {0, 1}, 0).all_reduce(2000), 0.0);
  int a = -1, b = -1;
  EXPECT_TRUE(LinkDelay(m, {3, 1, 0}, 0).slow_pair_in_group(&a, &b));
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 2);
}

TEST(slow_link, ends_that_do_not_exist_are_refused) {
  LinkEmulation L;
  L.slow_nodes = {0, 2};
  const std::string m = message_of(L, nodes_from_hosts({"a", "a", "b", "b"}));
  EXPECT_NE(m.find("fault.slow_link.nodes"), std::string::npos) << m;
  EXPECT_NE(m.find("node 2 does not exist (this run has 2 nodes"), std::string::npos) << m;
  L.slow_nodes = {0, 1};
  const std::string one = message_of(L, nodes_from_hosts({"a", "a"}));
  EXPECT_NE(one.find("node 1 does not exist (this run has 1 node,"), std::string::npos) << one;
  L.slow_nodes = {};
  L.slow_ranks = {1, 4};
  EXPECT_NE(message_of(L, emulated_nodes(4, 2)).find("fault.slow_link.ranks"), std::string::npos);
  L.slow_ranks = {1, 1};
  EXPECT_NE(message_of(L, emulated_nodes(4, 2)).find("two different"), std::string::npos);
  L.slow_ranks = {1, 3};
  EXPECT_EQ(message_of(L, emulated_nodes(4, 2)), "");
}
