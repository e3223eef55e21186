// The zero-bubble schedule ZB-H1 (Qi et al. 2023) without MPI: its order, its validity for every
// shape up to p = 8, m = 32 (with the other schedules in test_pipeline_schedule.cpp), at most p
// sets in flight, the bubble against the formulas (unit and uneven times, the range where
// bubble_fraction_formula is exact), hand-broken W's refused by name, and the per-stage-time
// replay on a timeline worked by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "schedule/pipeline_schedule.hpp"
#include "schedule/stage_time_replay.hpp"
#include "schedule_test_helpers.hpp"

using namespace paraxis::schedule;
using namespace schedule_test;

namespace {

const ScheduleKind zb = ScheduleKind::zb_h1;

// Every action of one kind takes the same time on every stage.
ActionDuration times(double tf, double tb, double tw) {
  return [=](int, const Action& a) { return a.kind == F ? tf : a.kind == B ? tb : tw; };
}

std::string refusal(ScheduleKind k, PipelineShape s, double tf, double tb, double tw) {
  try {
    bubble_fraction_formula(k, s, tf, tb, tw);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(zb_h1, runs_1f1b_with_each_stage_s_deferring_w_by_s_micro_batches) {
  const Schedule sched = make_schedule(zb, {4, 6, 1});
  // Stage 0: W right after its B; stage 1: W(j - 1) after B(j); the last stage defers 3 and
  // ends with the W's it still owes.
  const std::vector<Action> stage0 = {{F, 0, 0}, {F, 1, 0}, {F, 2, 0}, {F, 3, 0}, {B, 0, 0},
                                      {W, 0, 0}, {F, 4, 0}, {B, 1, 0}, {W, 1, 0}, {F, 5, 0},
                                      {B, 2, 0}, {W, 2, 0}, {B, 3, 0}, {W, 3, 0}, {B, 4, 0},
                                      {W, 4, 0}, {B, 5, 0}, {W, 5, 0}};
  const std::vector<Action> stage1 = {{F, 0, 1}, {F, 1, 1}, {F, 2, 1}, {B, 0, 1}, {F, 3, 1},
                                      {B, 1, 1}, {W, 0, 1}, {F, 4, 1}, {B, 2, 1}, {W, 1, 1},
                                      {F, 5, 1}, {B, 3, 1}, {W, 2, 1}, {B, 4, 1}, {W, 3, 1},
                                      {B, 5, 1}, {W, 4, 1}, {W, 5, 1}};
  const std::vector<Action> stage3 = {{F, 0, 3}, {B, 0, 3}, {F, 1, 3}, {B, 1, 3}, {F, 2, 3},
                                      {B, 2, 3}, {F, 3, 3}, {B, 3, 3}, {W, 0, 3}, {F, 4, 3},
                                      {B, 4, 3}, {W, 1, 3}, {F, 5, 3}, {B, 5, 3}, {W, 2, 3},
                                      {W, 3, 3}, {W, 4, 3}, {W, 5, 3}};
  EXPECT_EQ(computes(sched[0]), stage0);
  EXPECT_EQ(computes(sched[1]), stage1);
  EXPECT_EQ(computes(sched[3]), stage3);
  // B carries 1F1B's backward transfers; W has none.
  const Schedule small = make_schedule(zb, {3, 1, 1});
  const std::vector<Action> middle = {{RA, 0, 1}, {F, 0, 1},  {SA, 0, 1}, {RG, 0, 1},
                                      {B, 0, 1},  {SG, 0, 1}, {W, 0, 1}};
  EXPECT_EQ(small[1], middle);
  EXPECT_TRUE(splits_backward(sched));
  EXPECT_TRUE(splits_backward(zb));
  for (ScheduleKind k :
       {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved}) {
    EXPECT_FALSE(splits_backward(k)) << to_string(k);
    EXPECT_FALSE(splits_backward(make_schedule(k, {2, 4, 1}))) << to_string(k);
  }
}

// With T_F = T_B = T_W the step takes 3m + p - 1 for m >= p (the paper's bubble
// (p-1)(T_F + T_B - T_W)) and 2m + 2p - 1 for m < p, where stage 0 waits 2p - 1 for its first
// gradient and then has 2m of work. Every stage holds min(p, m) sets at its peak: p, 1F1B's peak.
TEST(zb_h1, unit_times_give_3m_plus_p_minus_1_with_at_most_p_sets_in_flight) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 32; ++m) {
      const PipelineShape shape{p, m, 1};
      const ReplayResult r = replay_schedule(make_schedule(zb, shape), shape, times(1, 1, 1));
      const double makespan = m >= p ? 3 * m + p - 1 : 2 * m + 2 * p - 1;
      ASSERT_EQ(r.makespan, makespan) << "p=" << p << " m=" << m;
      if (m >= p) {
        ASSERT_NEAR(r.mean_bubble_fraction, ideal_bubble_fraction(zb, shape), 1e-12);
      }
      ASSERT_NEAR(r.mean_bubble_fraction, bubble_fraction_formula(zb, shape, 1, 1, 1), 1e-12);
      for (int s = 0; s < p; ++s) {
        ASSERT_EQ(r.busy[s], 3 * m);
        ASSERT_EQ(r.peak_live[s], std::min(p, m)) << "p=" << p << " m=" << m << " stage " << s;
        ASSERT_LE(r.peak_live[s], p);
      }
      if (m >= p) {
        ASSERT_EQ(r.peak_live[0], p);
      }
    }
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(zb, {4, 8, 1}), 3.0 / 27.0);
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(zb, {1, 5, 1}), 0.0);
  // 1F1B on the same unit work (backward = B + W = 2): the bubble is 3 times zb-h1's.
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(ScheduleKind::one_f_one_b, {4, 8, 1}), 3.0 / 11.0);
}

// bubble_fraction_formula is exact, on every stage, for tw <= min(tf, tb); it is then Qi et
// al.'s (p-1)(tf+tb-tw) / (m(tf+tb+tw) + (p-1)(tf+tb-tw)) for m >= p.
TEST(zb_h1, replay_bubble_equals_the_formula_for_tw_at_most_min_tf_tb) {
  const std::vector<std::vector<double>> cases = {{1, 1, 1},       {1, 2, 1},   {2, 1, 0.5},
                                                  {1.5, 2.5, 1.5}, {1, 3, 0},   {0.5, 0.75, 0.25},
                                                  {3, 2, 1.75},    {2, 2, 1.25}};
  for (const auto& t : cases) {
    const double tf = t[0], tb = t[1], tw = t[2];
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 32; ++m) {
        const PipelineShape shape{p, m, 1};
        const ReplayResult r = replay_schedule(make_schedule(zb, shape), shape, times(tf, tb, tw));
        const double formula = bubble_fraction_formula(zb, shape, tf, tb, tw);
        for (int s = 0; s < p; ++s)
          ASSERT_NEAR(r.bubble_fraction[s], formula, 1e-12)
              << "tf=" << tf << " tb=" << tb << " tw=" << tw << " p=" << p << " m=" << m
              << " stage " << s;
        if (m >= p) {
          const double idle = (p - 1) * (tf + tb - tw);
          ASSERT_NEAR(formula, idle / (m * (tf + tb + tw) + idle), 1e-12);
        }
      }
  }
  // Outside the range the formula is below the replay: tw > tf, stage 0's B + W (1.5) outlasts
  // the tf + tb (1.25) between gradients. Stage 1: F0 [0.25, 0.5] B0 [0.5, 1.5] F1 [1.5, 1.75]
  // B1 [1.75, 2.75] W0 W1 [2.75, 3.75]; stage 0: F0 F1 [0, 0.5] B0 [1.5, 2.5] W0 [2.5, 3]
  // B1 [3, 4] W1 [4, 4.5]: 4.5 against the formula's 2 * 1.75 + 0.75 = 4.25.
  const PipelineShape shape{2, 2, 1};
  const ReplayResult r = replay_schedule(make_schedule(zb, shape), shape, times(0.25, 1, 0.5));
  EXPECT_DOUBLE_EQ(r.makespan, 4.5);
  EXPECT_DOUBLE_EQ(bubble_fraction_formula(zb, shape, 0.25, 1, 0.5), 0.75 / 4.25);
  EXPECT_GT(r.bubble_fraction[0], 0.75 / 4.25);
  // The range is tight: just above min(tf, tb) (tw > tf, then tw > tb), every shape with
  // p, m >= 2 replays a larger bubble than the formula.
  for (const auto& t : std::vector<std::vector<double>>{{1, 2, 1.125}, {2, 1, 1.125}})
    for (int p = 2; p <= 8; ++p)
      for (int m = 2; m <= 32; ++m) {
        const PipelineShape sh{p, m, 1};
        const ReplayResult late =
            replay_schedule(make_schedule(zb, sh), sh, times(t[0], t[1], t[2]));
        ASSERT_GT(late.bubble_fraction[0], bubble_fraction_formula(zb, sh, t[0], t[1], t[2]) + 1e-9)
            << "tf=" << t[0] << " tb=" << t[1] << " p=" << p << " m=" << m;
      }
}

TEST(zb_h1, formula_of_the_other_schedules_ignores_times_and_bad_input_is_refused) {
  for (double tw : {0.0, 5.0}) {
    EXPECT_DOUBLE_EQ(bubble_fraction_formula(ScheduleKind::one_f_one_b, {4, 8, 1}, 1, 2, tw),
                     3.0 / 11.0);
    EXPECT_DOUBLE_EQ(bubble_fraction_formula(ScheduleKind::gpipe, {4, 8, 1}, 1, 2, tw), 3.0 / 11.0);
    EXPECT_DOUBLE_EQ(bubble_fraction_formula(ScheduleKind::interleaved, {4, 8, 2}, 1, 2, tw),
                     3.0 / 19.0);
  }
  EXPECT_EQ(refusal(zb, {4, 8, 1}, 1, 1, 2.5),
            "bubble_fraction_formula: zb-h1 with tw = 2.500000 > tf + tb = 2.000000: the formula "
            "does not hold there (replay the schedule)");
  EXPECT_DOUBLE_EQ(bubble_fraction_formula(zb, {4, 8, 1}, 1, 1, 2), 0.0);  // tw = tf + tb
  EXPECT_EQ(refusal(zb, {4, 8, 1}, 1, -1, 0),
            "bubble_fraction_formula: tb = -1.000000, expected a finite time >= 0");
  EXPECT_TRUE(
      contains(refusal(zb, {4, 8, 1}, std::numeric_limits<double>::quiet_NaN(), 1, 1), "tf = nan"));
  // A step of no length has no bubble, as in the replay.
  EXPECT_EQ(bubble_fraction_formula(zb, {4, 8, 1}, 0, 0, 0), 0.0);
  EXPECT_EQ(
      replay_schedule(make_schedule(zb, {4, 8, 1}), {4, 8, 1}, times(0, 0, 0)).bubble_fraction,
      std::vector<double>(4, 0.0));
  EXPECT_EQ(bubble_fraction_formula(ScheduleKind::gpipe, {4, 8, 1}, 0, 0, 0), 0.0);
  EXPECT_EQ(refusal(zb, {4, 8, 2}, 1, 1, 1),
            "bubble_fraction_formula: zb-h1 schedule: virtual stages v = 2 must be 1 (only the "
            "interleaved schedule runs several chunks per stage)");
  EXPECT_TRUE(contains(refusal(ScheduleKind::interleaved, {4, 6, 2}, 1, 1, 0), "not divisible"));
  EXPECT_TRUE(contains(refusal(zb, {0, 8, 1}, 1, 1, 1), "stages p = 0"));
}

TEST(zb_h1, broken_backward_weights_are_named) {
  const PipelineShape shape{2, 4, 1};
  const Schedule good = make_schedule(zb, shape);
  ASSERT_EQ(validate_schedule(good, shape), "");
  Schedule s = good;
  move_before(s[0], {W, 1, 0}, {B, 1, 0});
  EXPECT_EQ(validate_schedule(s, shape),
            "stage 0: backward_weight(mb 1, chunk 0) before its backward");
  s = good;
  erase(s[1], {W, 2, 1});
  EXPECT_EQ(validate_schedule(s, shape), "stage 1: backward_weight(mb 2, chunk 1) missing");
  s = good;
  s[1].push_back({W, 2, 1});
  EXPECT_EQ(validate_schedule(s, shape), "stage 1: backward_weight(mb 2, chunk 1) repeated");
  s = good;
  erase(s[1], {W, 0, 1});
  s[0].push_back({W, 0, 1});
  EXPECT_EQ(validate_schedule(s, shape),
            "stage 0: backward_weight(mb 0, chunk 1) on the wrong stage: chunk 1 lives on stage 1");
  s = good;
  s[0].push_back({W, 4, 0});
  EXPECT_EQ(validate_schedule(s, shape),
            "stage 0: backward_weight(mb 4, chunk 0) outside micro-batches 0 .. 3, chunks 0 .. 1");
  // One W makes a schedule split: 1F1B with a single W lacks all the others.
  s = make_schedule(ScheduleKind::one_f_one_b, shape);
  s[1].push_back({W, 3, 1});
  EXPECT_EQ(validate_schedule(s, shape), "stage 0: backward_weight(mb 0, chunk 0) missing");
  try {
    replay_schedule(s, shape, times(1, 1, 1));
    FAIL() << "replay of a schedule missing W's returned";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "backward_weight(mb 0, chunk 0) missing")) << e.what();
  }
}

// W waits for no message, so deferring every W to the end of its stage stays valid; the sets
// then live until the end (a set lives until its W), m of them, as under GPipe.
TEST(zb_h1, a_set_lives_until_its_w_and_w_waits_for_no_message) {
  const PipelineShape shape{2, 4, 1};
  Schedule late = make_schedule(zb, shape);
  for (auto& list : late) {
    std::stable_partition(list.begin(), list.end(), [](const Action& a) { return a.kind != W; });
  }
  ASSERT_EQ(validate_schedule(late, shape), "");
  const ReplayResult r = replay_schedule(late, shape, times(1, 1, 1));
  EXPECT_EQ(r.peak_live, (std::vector<int>{4, 4}));
  EXPECT_EQ(replay_schedule(make_schedule(zb, shape), shape, times(1, 1, 1)).peak_live,
            (std::vector<int>{2, 2}));
  // The same schedule without its W's runs backwards whole: a set lives until its backward.
  Schedule whole = make_schedule(zb, shape);
  for (auto& list : whole) {
    list.erase(
        std::remove_if(list.begin(), list.end(), [](const Action& a) { return a.kind == W; }),
        list.end());
  }
  ASSERT_EQ(validate_schedule(whole, shape), "");
  EXPECT_EQ(replay_schedule(whole, shape, times(1, 1, 1)).peak_live, (std::vector<int>{2, 1}));
}

// zb-h1, p = 2, m = 3; stage 0: F 1, B 2, W 0.5; stage 1: F 2, B 3, W 1. By hand:
//   stage 0 runs F0 F1 B0 W0 F2 B1 W1 B2 W2, stage 1 F0 B0 F1 B1 W0 F2 B2 W1 W2.
//   stage 0: F0 [0,1] F1 [1,2]
//   stage 1: F0 [1,3] B0 [3,6] (gradient 0 at 6)
//   stage 0: B0 [6,8] W0 [8,8.5] F2 [8.5,9.5]
//   stage 1: F1 [6,8] B1 [8,11] (gradient 1 at 11) W0 [11,12] F2 [12,14] B2 [14,17] (at 17)
//            W1 [17,18] W2 [18,19]
//   stage 0: B1 [11,13] W1 [13,13.5] B2 [17,19] W2 [19,19.5]
// makespan 19.5; busy 3 * 3.5 = 10.5 and 3 * 6 = 18. Stage 1 holds sets 0 and 1 from F1 to
// W0: 2 sets where 1F1B's last stage holds 1.
// 1F1B on the same times (backward = B + W: 2.5 and 4), stage 0 F0 F1 B0 F2 B1 B2, stage 1
// F0 B0 F1 B1 F2 B2: stage 0 F0 [0,1] F1 [1,2]; stage 1 F0 [1,3] B0 [3,7]; stage 0 B0
// [7,9.5] F2 [9.5,10.5]; stage 1 F1 [7,9] B1 [9,13] F2 [13,15] B2 [15,19]; stage 0 B1
// [13,15.5] B2 [19,21.5]: makespan 21.5.
TEST(zb_h1, replay_with_stage_times_matches_a_hand_computed_timeline) {
  const PipelineShape shape{2, 3, 1};
  const ReplayResult r = replay_with_stage_times(zb, shape, {1.0, 2.0}, {2.0, 3.0}, {0.5, 1.0});
  const Schedule sched = make_schedule(zb, shape);
  EXPECT_DOUBLE_EQ(r.makespan, 19.5);
  EXPECT_EQ(r.busy, (std::vector<double>{10.5, 18.0}));
  EXPECT_DOUBLE_EQ(r.bubble_fraction[0], 9.0 / 19.5);
  EXPECT_DOUBLE_EQ(r.bubble_fraction[1], 1.5 / 19.5);
  EXPECT_EQ(r.peak_live, (std::vector<int>{2, 2}));
  auto span = [&](int s, const Action& a) {
    const int i = position(sched[s], a);
    return std::vector<double>{r.start[s][i], r.end[s][i]};
  };
  EXPECT_EQ(span(0, {W, 0, 0}), (std::vector<double>{8.0, 8.5}));
  EXPECT_EQ(span(0, {F, 2, 0}), (std::vector<double>{8.5, 9.5}));
  EXPECT_EQ(span(1, {W, 0, 1}), (std::vector<double>{11.0, 12.0}));
  EXPECT_EQ(span(1, {F, 2, 1}), (std::vector<double>{12.0, 14.0}));
  EXPECT_EQ(span(0, {B, 2, 0}), (std::vector<double>{17.0, 19.0}));
  EXPECT_EQ(span(1, {W, 2, 1}), (std::vector<double>{18.0, 19.0}));
  // An unsplit schedule runs B + W as one backward: the same as the 4-argument overload.
  const ReplayResult f =
      replay_with_stage_times(ScheduleKind::one_f_one_b, shape, {1.0, 2.0}, {2.0, 3.0}, {0.5, 1.0});
  EXPECT_DOUBLE_EQ(f.makespan, 21.5);
  EXPECT_EQ(f.end,
            replay_with_stage_times(ScheduleKind::one_f_one_b, shape, {1.0, 2.0}, {2.5, 4.0}).end);
}

TEST(zb_h1, replay_with_stage_times_refuses_missing_w_times_and_wrong_sizes) {
  const PipelineShape shape{2, 4, 1};
  try {
    replay_with_stage_times(zb, shape, {1.0, 1.0}, {2.0, 2.0});
    FAIL() << "zb-h1 replayed without W times";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "replay_with_stage_times: the zb-h1 schedule splits each backward into B and W and "
              "needs the W times (the overload with backward_input_s and backward_weight_s)");
  }
  try {
    replay_with_stage_times(zb, {3, 3, 1}, {1.0, 1.0, 1.0}, {2.0, 2.0, 2.0}, {1.0, 1.0});
    FAIL() << "two W times for three stages accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "replay_with_stage_times: 3 forward and 3 backward-input and 2 backward-weight "
              "times for 3 stages; expected one of each per stage");
  }
}
