// `paraxis report`'s checkpoint figures (analysis/report_checkpoint.hpp) on a hand-made point:
// the median save is the checkpoint cost C, the system MTBF M = 1 / (rate x ranks), Young's
// interval sqrt(2 C M) and Daly's, in seconds and steps, the waste of Daly's model at Daly's
// interval and at the run's own cadence, the restart when the point resumed.
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
