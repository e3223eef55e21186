// The process grid on 4 ranks: coordinates in both rank orders, the group each communicator
// spans, and the messages for shapes that do not fit.
#include <gtest/gtest.h>
#include <mpi.h>

#include "config/config_rules.hpp"
#include "parallel/process_grid.hpp"

using namespace paraxis::parallel;
using paraxis::config::ParallelConfig;
using paraxis::config::RankOrder;

namespace {

ParallelConfig shape(int tp, int pp, int dp, int ep, RankOrder order = RankOrder::tp_pp_dp) {
  ParallelConfig p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.ep = ep;
  p.order = order;
  return p;
}

// The grid rules' messages, one per line.
std::string grid_problem(const ParallelConfig& p, int world) {
  std::string text;
  for (const auto& v : paraxis::config::grid_rule_violations(p, world))
    text += v.keys.front() + ": " + v.message + "\n";
  return text;
}

}  // namespace

TEST(process_grid, coordinates_round_trip_in_both_orders) {
  for (const RankOrder order : {RankOrder::tp_pp_dp, RankOrder::tp_dp_pp}) {
    const ParallelConfig s = shape(2, 3, 4, 2, order);
    std::vector<int> seen(24, 0);
    for (int r = 0; r < 24; ++r) {
      const auto c = grid_coords_of(s, r);
      EXPECT_EQ(grid_rank_of(s, c.tp, c.pp, c.dp), r) << to_string(order);
      EXPECT_EQ(c.dp, c.edp * s.ep + c.ep);
      seen[r]++;
    }
  }
  // tp-pp-dp: tensor-parallel ranks adjacent, then the pipeline, replicas outermost.
  const ParallelConfig a = shape(2, 2, 2, 1, RankOrder::tp_pp_dp);
  EXPECT_EQ(grid_rank_of(a, 1, 0, 0), 1);
  EXPECT_EQ(grid_rank_of(a, 0, 1, 0), 2);
  EXPECT_EQ(grid_rank_of(a, 0, 0, 1), 4);
  // tp-dp-pp (Megatron-LM): data-parallel replicas before pipeline stages.
  const ParallelConfig b = shape(2, 2, 2, 1, RankOrder::tp_dp_pp);
  EXPECT_EQ(grid_rank_of(b, 0, 0, 1), 2);
  EXPECT_EQ(grid_rank_of(b, 0, 1, 0), 4);
}

TEST(process_grid, shapes_that_do_not_fit_name_the_keys) {
  EXPECT_EQ(grid_problem(shape(2, 1, 1, 1), 4),
            "parallel: tp * pp * dp = 2 * 1 * 1 = 2 but the run has 4 ranks\n");
  EXPECT_EQ(grid_problem(shape(1, 1, 4, 3), 4),
            "parallel.ep: ep = 3 does not divide parallel.dp = 4\n");
  EXPECT_EQ(grid_problem(shape(0, 1, 4, 1), 4), "parallel.tp: parallel.tp = 0, expected >= 1\n");
  EXPECT_EQ(grid_problem(shape(2, 1, 2, 2), 4), "");
  try {
    ProcessGrid g(MPI_COMM_WORLD, shape(3, 1, 1, 1));
    FAIL() << "a grid of 3 ranks on 4 must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "parallel: tp * pp * dp = 3 * 1 * 1 = 3 but the run has 4 ranks");
  }
}

TEST(process_grid, communicators_span_their_groups) {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ASSERT_EQ(world, 4);
  for (const RankOrder order : {RankOrder::tp_pp_dp, RankOrder::tp_dp_pp}) {
    ProcessGrid g(MPI_COMM_WORLD, shape(2, 1, 2, 2, order));
    auto size = [](MPI_Comm c) {
      int n = 0;
      MPI_Comm_size(c, &n);
      return n;
    };
    auto crank = [](MPI_Comm c) {
      int r = 0;
      MPI_Comm_rank(c, &r);
      return r;
    };
    EXPECT_EQ(size(g.tp()), 2);
    EXPECT_EQ(size(g.pp()), 1);
    EXPECT_EQ(size(g.dp()), 2);
    EXPECT_EQ(size(g.ep()), 2);
    EXPECT_EQ(size(g.edp()), 1);
    EXPECT_EQ(crank(g.tp()), g.coords().tp);
    EXPECT_EQ(crank(g.dp()), g.coords().dp);
    // Members of my tp group share my dp coordinate: sum of dp coords over the group = 2 * mine.
    int d = g.coords().dp, sum = 0;
    MPI_Allreduce(&d, &sum, 1, MPI_INT, MPI_SUM, g.tp());
    EXPECT_EQ(sum, 2 * d);
    EXPECT_EQ(g.world_rank(), grid_rank_of(g.shape(), g.coords().tp, g.coords().pp, g.coords().dp));
  }
}
