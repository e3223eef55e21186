// The bubble's replay with the engine's time per action and with the actions' variation
// (StepTimeInputs::action_overhead_s, ::variation; docs/perfmodel.md "Step time"): each against
// a hand-built pipeline whose answer is known.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "perfmodel/step_time.hpp"
#include "perfmodel_test_util.hpp"
#include "schedule/pipeline_schedule.hpp"

using namespace paraxis::perfmodel;
using paraxis::schedule::ScheduleKind;
using perfmodel_test::config;

namespace {

paraxis::model::ModelConfig eight_layers() {
  auto m = perfmodel_test::tiny_model();
  m.layers = 8;
  return m;
}

// 1F1B over 2 stages with `m` micro-batches, every chunk's forward f and backward b, no link
// costs (no transfers, no pp term).
StepTimeInputs two_stages(double f, double b) {
  StepTimeInputs in;
  in.forward_s.assign(2, f);
  in.backward_s.assign(2, b);
  return in;
}

Scenario one_f_one_b(int m) {
  auto c = config(1, 2, 1, 1, m);
  c.schedule = ScheduleKind::one_f_one_b;
  return c;
}

}  // namespace

TEST(pipeline_variation, engine_time_adds_once_per_action_on_the_critical_path) {
  // 1F1B, p = 2, m = 8, F = 1, B = 2 on both stages: the critical path is stage 0's first
  // forward, stage 1's 8 forwards and backwards, stage 0's last backward: 2m + 2(p - 1) = 18
  // actions, each o longer. The stages' compute stays; the engine's time is bubble: each
  // stage's span grows by 18 o, its busy time by its 16 actions' o, all of it counted idle.
  const auto c = one_f_one_b(8);
  StepTimeInputs in = two_stages(1.0, 2.0);
  const auto base = predict_step_time(eight_layers(), c, in);
  const double o = 0.25;
  in.action_overhead_s.assign(2, o);
  const auto b = predict_step_time(eight_layers(), c, in);
  EXPECT_NEAR(base.pipeline_span, 27.0, 1e-12);  // F + m (F + B) + B
  EXPECT_NEAR(b.pipeline_span, base.pipeline_span + 18 * o, 1e-12);
  EXPECT_NEAR(b.bubble, base.bubble + 18 * o, 1e-12);
  EXPECT_NEAR(b.compute, base.compute, 1e-12);
  EXPECT_NEAR(b.step_time, base.step_time + 18 * o, 1e-12);
  EXPECT_NEAR(b.bubble_fraction * b.pipeline_span, b.bubble, 1e-12);  // both stages alike
  // zb-h1 charges each W too, and all of the engine's time is bubble: the reported (last)
  // stage's bubble grows by exactly what its span grows, its compute not at all.
  auto zb = c;
  zb.schedule = ScheduleKind::zb_h1;
  in.backward_weight_s.assign(2, 1.0);  // B = 2, W = 1
  in.action_overhead_s.clear();
  const auto zb_base = predict_step_time(eight_layers(), zb, in);
  in.action_overhead_s.assign(2, o);
  const auto zb_o = predict_step_time(eight_layers(), zb, in);
  EXPECT_GT(zb_o.pipeline_span - zb_base.pipeline_span, 18 * o);
  EXPECT_NEAR(zb_o.bubble - zb_base.bubble, zb_o.pipeline_span - zb_base.pipeline_span, 1e-12);
  EXPECT_NEAR(zb_o.compute, zb_base.compute, 1e-12);
  in.action_overhead_s.assign(2, -o);
  EXPECT_THROW(predict_step_time(eight_layers(), zb, in), std::invalid_argument);
  in.action_overhead_s.assign(3, o);
  EXPECT_THROW(predict_step_time(eight_layers(), zb, in), std::invalid_argument);
}

TEST(pipeline_variation, the_replay_of_samples_holds_the_expected_makespan) {
  // 1F1B, p = 2, m = 2, every backward b = 0.5, every forward 1 or 3 with probability 1/2
  // (mean 2): stage 0's forwards a0, a1, stage 1's c0, c1. By hand (transfers free): stage 1's
  // second forward starts when both its first backward (a0 + c0 + b) and stage 0's second
  // forward (a0 + a1) have ended, and everything after follows it:
  //   makespan = a0 + max(c0 + b, a1) + c1 + 2 b.
  // The mean times give 2 + max(2.5, 2) + 2 + 1 = 7.5; the expectation is
  // 2 + (1.5 + 3 + 3.5 + 3.5) / 4 + 2 + 1 = 7.875 (max over (c0, a1) = (1,1), (1,3), (3,1),
  // (3,3)). Each stage's busy time is 2 + 2 x 0.5 = 5 on average, so its bubble 2.875, not 2.5.
  const auto c = one_f_one_b(2);
  StepTimeInputs in = two_stages(2.0, 0.5);
  const auto mean = predict_step_time(eight_layers(), c, in);
  EXPECT_NEAR(mean.pipeline_span, 7.5, 1e-12);
  EXPECT_NEAR(mean.bubble, 2.5, 1e-12);
  // Samples in any unit: a draw is the chunk's forward_s times the sample over their mean.
  in.variation.forward = {{1.0, 3.0}, {10.0, 30.0}};
  in.variation.draws = 20000;  // the makespan's standard deviation is 1.63: 0.012 standard error
  in.variation.seed = 7;
  const auto drawn = predict_step_time(eight_layers(), c, in);
  EXPECT_NEAR(drawn.pipeline_span, 7.875, 0.05);
  EXPECT_NEAR(drawn.bubble, 2.875, 0.05);
  EXPECT_NEAR(drawn.compute, mean.compute, 1e-12);  // the compute term keeps the mean times
  EXPECT_NEAR(drawn.step_time, drawn.compute + drawn.bubble, 1e-12);
  // Seeded: the same inputs give the same prediction, bit for bit.
  EXPECT_EQ(predict_step_time(eight_layers(), c, in).pipeline_span, drawn.pipeline_span);
  // No draws, or samples that do not vary: the replay of the mean times, exactly.
  in.variation.draws = 0;
  EXPECT_EQ(predict_step_time(eight_layers(), c, in).pipeline_span, mean.pipeline_span);
  in.variation.draws = 100;
  in.variation.forward = {{4.0, 4.0, 4.0}, {}};  // chunk 1: no samples, its own time
  EXPECT_EQ(predict_step_time(eight_layers(), c, in).pipeline_span, mean.pipeline_span);
}

TEST(pipeline_variation, backward_samples_vary_the_backward_alone) {
  // 1F1B, p = 2, m = 2, forwards 1, the last stage's backward d0, d1 in {0.5, 1.5} (mean 1),
  // stage 0's backward 1. Stage 1 runs F, B, F, B back to back after stage 0's first forward
  // (stage 0's second forward, at 2, is never late), and stage 0's last backward follows:
  //   makespan = 1 + (1 + d0) + (1 + d1) + 1,
  // linear in the draws: its expectation is the mean times' replay, 6 (no Jensen gap where no
  // dependency meets another stage's varying action).
  const auto c = one_f_one_b(2);
  StepTimeInputs in = two_stages(1.0, 1.0);
  in.variation.backward = {{}, {0.5, 1.5}};
  in.variation.draws = 4000;
  const auto b = predict_step_time(eight_layers(), c, in);
  EXPECT_NEAR(b.pipeline_span, 6.0, 0.05);
  // A sample list per chunk, each of non-negative samples with a positive mean.
  in.variation.backward = {{0.5, 1.5}};
  EXPECT_THROW(predict_step_time(eight_layers(), c, in), std::invalid_argument);
  in.variation.backward = {{}, {-0.5, 1.5}};
  EXPECT_THROW(predict_step_time(eight_layers(), c, in), std::invalid_argument);
  in.variation.backward = {{}, {0.0, 0.0}};
  EXPECT_THROW(predict_step_time(eight_layers(), c, in), std::invalid_argument);
}
