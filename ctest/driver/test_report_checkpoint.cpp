// `paraxis report`'s checkpoint figures (analysis/report_checkpoint.hpp) on a hand-made point:
// the median save is the checkpoint cost C, the system MTBF M = 1 / (rate x ranks), Young's
// interval sqrt(2 C M) and Daly's, in seconds and steps, the waste of Daly's model at Daly's
// interval and at the run's own cadence, the restart when the point resumed; asynchronous
// saves' stall by part.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/report_checkpoint.hpp"
#include "perfmodel/checkpoint.hpp"

using nlohmann::json;
using namespace paraxis;

namespace {

json save(double total_s, double write_s, double bytes) {
  return {{"total_s", total_s},
          {"write_s", {{"min", write_s / 2}, {"mean", write_s / 2}, {"max", write_s}}},
          {"bytes", {{"min", bytes}, {"mean", bytes}, {"max", bytes}}},
          {"aggregate_bytes_per_s", 4 * bytes / write_s}};
}

json point() {
  json first = save(10, 8, 1e9);
  first["baseline"] = {{"write_s", {{"min", 7.0}, {"mean", 7.5}, {"max", 8.1}}}};
  return {{"grid", {{"world", 4}}},
          {"time", {{"step_median_s", 0.5}}},
          {"config", {{"checkpoint", {{"every", 100}}}}},
          {"checkpoints", {first, save(12, 9, 1e9), save(11, 10, 1e9)}}};
}

}  // namespace

TEST(report_checkpoint, cost_and_cadence_follow_the_formulas) {
  const double rate = 1e-7;  // failures per rank-second
  const json c = driver::report::checkpoint_figures(point(), rate);
  ASSERT_FALSE(c.is_null());
  EXPECT_EQ(c["saves"], 3);
  EXPECT_DOUBLE_EQ(c["checkpoint_s"].get<double>(), 11.0);  // the median save
  EXPECT_DOUBLE_EQ(c["write_s_max"].get<double>(), 9.0);
  // The baseline's slowest write (8.1 s) over the median save's (9 s).
  EXPECT_DOUBLE_EQ(c["checkpoint_to_baseline_write"].get<double>(), 0.9);
  const double m = 1 / (rate * 4);
  EXPECT_DOUBLE_EQ(c["system_mtbf_s"].get<double>(), m);
  EXPECT_NEAR(c["young_interval_s"].get<double>(), std::sqrt(2 * 11.0 * m), 1e-9);
  const double daly =
      std::sqrt(2 * 11.0 * m) * (1 + std::sqrt(11.0 / (2 * m)) / 3 + (11.0 / (2 * m)) / 9) - 11.0;
  EXPECT_NEAR(c["daly_interval_s"].get<double>(), daly, 1e-6);
  EXPECT_NEAR(c["daly_interval_steps"].get<double>(), daly / 0.5, 1e-5);
  // Daly's expected wall time T = M e^{R/M} (e^{(tau + C)/M} - 1) W / tau; waste (T - W) / T.
  auto waste = [&](double tau) {
    const double t = m * std::exp(0 / m) * (std::exp((tau + 11.0) / m) - 1) / tau;
    return (t - 1) / t;
  };
  EXPECT_NEAR(c["waste_at_daly"].get<double>(), waste(daly), 1e-9);
  EXPECT_NEAR(c["waste_at_run_cadence"].get<double>(), waste(100 * 0.5), 1e-9);
  // Checkpointing every 50 s at a cost of 11 s wastes more than Daly's interval.
  EXPECT_GT(c["waste_at_run_cadence"].get<double>(), c["waste_at_daly"].get<double>());
  EXPECT_FALSE(c.contains("restart_s"));
}

TEST(report_checkpoint, a_resumed_point_gives_its_restart_and_no_save_gives_nothing) {
  json p = point();
  p["resumed"] = {{"restart_to_first_step_s", 30.0}};
  const json c = driver::report::checkpoint_figures(p, 1e-7);
  EXPECT_DOUBLE_EQ(c["restart_s"].get<double>(), 30.0);
  const double m = 1 / (1e-7 * 4), tau = c["daly_interval_s"].get<double>();
  const double t = m * std::exp(30.0 / m) * (std::exp((tau + 11.0) / m) - 1) / tau;
  EXPECT_NEAR(c["waste_at_daly"].get<double>(), (t - 1) / t, 1e-9);
  p.erase("checkpoints");
  EXPECT_TRUE(driver::report::checkpoint_figures(p, 1e-7).is_null());
  EXPECT_EQ(driver::report::checkpoint_markdown(json::array()), "");
}

// Asynchronous saves: the stall's parts (medians over saves) and the saves that waited for their
// write longer than their staging took, named in report.md; a synchronous point has none.
TEST(report_checkpoint, asynchronous_saves_give_their_stall_by_part) {
  json p = point();
  p["label"] = "dp1";
  const double staging[] = {0.03, 0.02, 0.025}, join[] = {0.2, 0.0, 0.01},
               write[] = {0.9, 0.2, 0.3};
  for (int i = 0; i < 3; ++i) {
    json& s = p["checkpoints"][i];
    s["async"] = true;
    s["staging_s"] = {{"min", staging[i]}, {"mean", staging[i]}, {"max", staging[i]}};
    s["join_wait_s"] = {{"min", join[i]}, {"mean", join[i]}, {"max", join[i]}};
    s["write_s"]["max"] = write[i];
    s["async_can_hide"] = true;
  }
  // Saves after steps 2, 4, 6 (the point's checkpoints' own steps) are followed by steps[2], [4],
  // [6]; steps[1], [3], [5] come before them: ratios 1.2, 1.0, 1.5 -> median 1.2.
  p["checkpoints"][0]["step"] = 2;
  p["checkpoints"][1]["step"] = 4;
  p["checkpoints"][2]["step"] = 6;
  const double t[] = {0.5, 0.5, 0.6, 0.4, 0.4, 0.2, 0.3};
  for (int k = 0; k < 7; ++k) p["steps"].push_back({{"step", k}, {"time_s", t[k]}});
  const json c = driver::report::checkpoint_figures(p, 1e-7);
  ASSERT_TRUE(c.contains("async")) << c.dump();
  EXPECT_NEAR(c["async"]["step_after_save_ratio"].get<double>(), 1.2, 1e-12);
  EXPECT_DOUBLE_EQ(c["async"]["staging_s"].get<double>(), 0.025);
  EXPECT_DOUBLE_EQ(c["async"]["join_wait_s"].get<double>(), 0.01);
  EXPECT_EQ(c["async"]["saves_waiting_for_storage"], 1);  // 0.2 > 0.03; 0.01 < 0.025
  EXPECT_DOUBLE_EQ(c["async"]["longest_write_s"].get<double>(), 0.9);
  EXPECT_TRUE(c["async"]["can_hide"].get<bool>());
  p["checkpoint"] = c;
  const std::string md = driver::report::checkpoint_markdown(json::array({p}));
  EXPECT_NE(md.find("dp1: asynchronous saves, the stall by part (medians over saves): staging "
                    "0.025 s, waiting for the write 0.010 s"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("1 of 3 saves waited longer for their write than their staging took (longest "
                    "write 0.9 s)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("the step right after a save took 1.2 of the step before it"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("every core"), std::string::npos) << md;
  p["checkpoints"][1]["async_can_hide"] = false;
  p["checkpoint"] = driver::report::checkpoint_figures(p, 1e-7);
  EXPECT_FALSE(p["checkpoint"]["async"]["can_hide"].get<bool>());
  EXPECT_NE(driver::report::checkpoint_markdown(json::array({p})).find("every core of their host"),
            std::string::npos);
  EXPECT_FALSE(driver::report::checkpoint_figures(point(), 1e-7).contains("async"));
  p.erase("steps");  // no step pair recorded: no ratio
  EXPECT_FALSE(
      driver::report::checkpoint_figures(p, 1e-7)["async"].contains("step_after_save_ratio"));
}
