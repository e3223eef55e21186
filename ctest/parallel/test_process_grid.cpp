// The process grid on 4 ranks: coordinates in both rank orders, the group each communicator
// spans, and the messages for shapes that do not fit.
#include <gtest/gtest.h>
#include <mpi.h>

#include "parallel/process_grid.hpp"

using namespace paraxis::parallel;

TEST(process_grid, coordinates_round_trip_in_both_orders) {
  for (const char* order : {"tp-pp-dp", "tp-dp-pp"}) {
    GridShape s{2, 3, 4, 2, order};
    std::vector<int> seen(24, 0);
    for (int r = 0; r < 24; ++r) {
      const auto c = grid_coords_of(s, r);
      EXPECT_EQ(grid_rank_of(s, c.tp, c.pp, c.dp), r) << order;
      EXPECT_EQ(c.dp, c.edp * s.ep + c.ep);
      seen[r]++;
    }
  }
  // tp-pp-dp: tensor-parallel ranks adjacent, then the pipeline, replicas outermost.
  GridShape a{2, 2, 2, 1, "tp-pp-dp"};
  EXPECT_EQ(grid_rank_of(a, 1, 0, 0), 1);
  EXPECT_EQ(grid_rank_of(a, 0, 1, 0), 2);
  EXPECT_EQ(grid_rank_of(a, 0, 0, 1), 4);
  // tp-dp-pp (Megatron-LM): data-parallel replicas before pipeline stages.
  GridShape b{2, 2, 2, 1, "tp-dp-pp"};
  EXPECT_EQ(grid_rank_of(b, 0, 0, 1), 2);
  EXPECT_EQ(grid_rank_of(b, 0, 1, 0), 4);
}

TEST(process_grid, shapes_that_do_not_fit_name_the_keys) {
  EXPECT_NE(grid_problem({2, 1, 1, 1, "tp-pp-dp"}, 4).find("but the run has 4 ranks"),
            std::string::npos);
  EXPECT_NE(grid_problem({1, 1, 4, 3, "tp-pp-dp"}, 4)
                .find("parallel.ep = 3 does not divide parallel.dp = 4"),
            std::string::npos);
  EXPECT_NE(grid_problem({1, 1, 4, 1, "pp-tp-dp"}, 4).find("parallel.order"), std::string::npos);
  EXPECT_EQ(grid_problem({2, 1, 2, 2, "tp-pp-dp"}, 4), "");
  EXPECT_THROW(ProcessGrid(MPI_COMM_WORLD, GridShape{3, 1, 1, 1, "tp-pp-dp"}),
               std::invalid_argument);
}

TEST(process_grid, communicators_span_their_groups) {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ASSERT_EQ(world, 4);
  for (const char* order : {"tp-pp-dp", "tp-dp-pp"}) {
    ProcessGrid g(MPI_COMM_WORLD, GridShape{2, 1, 2, 2, order});
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
