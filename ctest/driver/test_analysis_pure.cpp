// The analysis library (miniapp/analysis/, docs/architecture.md "Layers") as pure functions on
// parsed results, linked without the driver and without MPI: `paraxis report`'s comparison of
// points (ranks, accuracy against issue 9's target, strong and weak scaling like with like,
// machines side by side) on hand-made analysed points, the point labels of the tables, and
// `paraxis plan`'s evaluation of a layout and its ranking from the input files.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "analysis/plan.hpp"
#include "analysis/report_parts.hpp"
#include "config/exit_codes.hpp"

using namespace paraxis::driver;
using nlohmann::json;

namespace {

// An analysed point: tp x dp ranks, global batch gb, micro-batch 1, measured and predicted
// step seconds, on `machine`.
report::Analysed analysed(int tp, int dp, int gb, double measured, double predicted,
                          const std::string& machine = "m1", const std::string& model = "gpt") {
  report::Analysed a;
  a.model = model;
  a.model_label = model;
  a.measured_step = measured;
  a.predicted_step = predicted;
  a.predicted = predicted > 0;
  a.point = {{"label", "tp" + std::to_string(tp) + " dp" + std::to_string(dp)},
             {"machine", machine},
             {"micro_batch", 1},
             {"global_batch", gb},
             {"grid", {{"world", tp * dp}, {"dp", dp}}},
             {"term_most_off", "compute"}};
  return a;
}

}  // namespace

TEST(analysis_compare, ranks_accuracy_and_misses) {
  // 1.0 against 0.95 (+5.3 %), 2.0 against 1.6 (+25 %: a miss), 1.5 unpredicted.
  std::vector<report::Analysed> all{analysed(1, 1, 4, 1.0, 0.95), analysed(2, 1, 8, 2.0, 1.6),
                                    analysed(1, 2, 4, 1.5, 0)};
  const report::Comparison cmp = report::compare_points(all);
  ASSERT_EQ(cmp.points.size(), 3u);
  EXPECT_EQ(cmp.points[0]["rank_measured"], 1);
  EXPECT_EQ(cmp.points[1]["rank_measured"], 3);
  EXPECT_EQ(cmp.points[2]["rank_measured"], 2);
  EXPECT_EQ(cmp.points[1]["rank_predicted"], 2);
  EXPECT_FALSE(cmp.points[2].contains("rank_predicted"));
  EXPECT_EQ(cmp.n_pred, 2);
  EXPECT_DOUBLE_EQ(cmp.max_abs, 25.0);
  EXPECT_DOUBLE_EQ(cmp.accuracy["mean_abs_residual_pct"].get<double>(),
                   (100.0 * 0.05 / 0.95 + 25.0) / 2);
  EXPECT_FALSE(cmp.accuracy["every_point_within_target"].get<bool>());
  ASSERT_EQ(cmp.misses.size(), 1u);
  EXPECT_EQ(cmp.misses[0]["label"], "tp2 dp1");
  EXPECT_EQ(cmp.misses[0]["term_most_off"], "compute");
}

TEST(analysis_compare, strong_and_weak_scaling_like_with_like) {
  // Another model's point never joins the tables.
  std::vector<report::Analysed> all{analysed(1, 1, 8, 4.0, 0),
                                    analysed(2, 1, 8, 2.5, 0),
                                    analysed(4, 1, 8, 1.6, 0),
                                    analysed(2, 2, 8, 1.25, 0),
                                    analysed(1, 1, 4, 2.0, 0),
                                    analysed(1, 2, 8, 2.2, 0),
                                    analysed(2, 1, 8, 0.1, 0, "m1", "other")};
  const report::Comparison cmp = report::compare_points(all);
  // Strong, gb 8: worlds 1 (4.0 s), 2 (the faster of 2.5 and 2.2) and 4 (of 1.6 and 1.25); gb 4
  // has one world only.
  ASSERT_EQ(cmp.strong.size(), 3u);
  EXPECT_EQ(cmp.strong[0]["world"], 1);
  EXPECT_DOUBLE_EQ(cmp.strong[0]["speedup"].get<double>(), 1.0);
  EXPECT_EQ(cmp.strong[1]["world"], 2);
  EXPECT_DOUBLE_EQ(cmp.strong[1]["step_s"].get<double>(), 2.2);
  EXPECT_EQ(cmp.strong[2]["world"], 4);
  EXPECT_DOUBLE_EQ(cmp.strong[2]["step_s"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(cmp.strong[2]["speedup"].get<double>(), 4.0 / 1.25);
  EXPECT_DOUBLE_EQ(cmp.strong[2]["efficiency"].get<double>(), 4.0 / 1.25 / 4);
  for (const auto& row : cmp.strong) EXPECT_EQ(row["model"], "gpt");
  // Weak, 4 per replica: gb 4 on dp 1 (2.0 s, 1 rank), gb 8 on dp 2 (2.2 s on 2 ranks, 1.25 s on
  // 4); then 8 per replica: the dp 1 points of gb 8.
  ASSERT_EQ(cmp.weak.size(), 6u);
  EXPECT_EQ(cmp.weak[0]["batch_per_replica"], 4);
  EXPECT_DOUBLE_EQ(cmp.weak[0]["efficiency"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(cmp.weak[1]["efficiency"].get<double>(), 2.0 / 2.2);
  EXPECT_DOUBLE_EQ(cmp.weak[2]["efficiency"].get<double>(), 2.0 / 1.25);
  EXPECT_EQ(cmp.weak[3]["batch_per_replica"], 8);
  EXPECT_DOUBLE_EQ(cmp.weak[5]["efficiency"].get<double>(), 4.0 / 1.6);
  EXPECT_TRUE(cmp.side.empty());  // one machine
}

TEST(analysis_compare, machines_side_by_side) {
  std::vector<report::Analysed> all{analysed(2, 1, 8, 2.0, 0, "alpha"),
                                    analysed(2, 1, 8, 3.0, 0, "beta"),
                                    analysed(1, 1, 8, 3.0, 0, "beta")};
  const report::Comparison cmp = report::compare_points(all);
  ASSERT_EQ(cmp.side.size(), 1u);
  EXPECT_EQ(cmp.side[0]["configuration"], "tp2 dp1 gpt gb8");
  EXPECT_DOUBLE_EQ(cmp.side[0]["step_s"]["alpha"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(cmp.side[0]["step_s"]["beta"].get<double>(), 3.0);
  EXPECT_EQ(cmp.n_pred, 0);
  EXPECT_FALSE(cmp.accuracy.contains("max_abs_residual_pct"));
}

TEST(analysis_labels, point_label_names_the_layout) {
  RunConfig c;
  c.parallel.tp = 2;
  c.parallel.pp = 2;
  const std::string label = report::point_label(c);
  EXPECT_EQ(label.rfind("tp2 pp2 dp1 z0 ", 0), 0u) << label;
}

// `paraxis plan` without MPI: the evaluation of one layout and the ranking, from the files.
TEST(analysis_plan, evaluates_a_layout_and_ranks_without_mpi) {
  const std::string inputs = PARAXIS_INPUTS_DIR;
  PlanOptions opt;
  opt.model_deck = inputs + "/small.yaml";
  opt.machine = inputs + "/machines/cpu-node.yaml";
  opt.layout = "tp=2,pp=1,dp=4,mb=1";
  EXPECT_EQ(evaluate_plan(opt), paraxis::exit_code::ok);
  opt.layout = "tp=1,pp=1";  // dp = 8 devices, global_batch 8 not a multiple of 8 * mb 4
  EXPECT_EQ(evaluate_plan(opt), paraxis::exit_code::not_ok);
  opt.layout = "tp=1,pp=1,tp=2";  // a field twice: bad input
  EXPECT_EQ(evaluate_plan(opt), paraxis::exit_code::bad_input);
  opt.layout.clear();
  opt.top = 3;
  opt.json_out = ::testing::TempDir() + "analysis_plan.json";
  ASSERT_EQ(evaluate_plan(opt), paraxis::exit_code::ok);
  std::ifstream in(opt.json_out);
  const json plan = json::parse(in);
  EXPECT_FALSE(plan.at("ranked").empty());
}
