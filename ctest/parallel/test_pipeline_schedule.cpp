// Pipeline schedules without MPI: every generated schedule validates, hand-broken ones are
// refused with the right message, the replay reproduces the textbook bubble formulas and the
// activation-memory bounds, and bad names and shapes are refused with their values.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "schedule/pipeline_schedule.hpp"
#include "schedule/stage_time_replay.hpp"
#include "schedule_test_helpers.hpp"

using namespace paraxis::schedule;

using namespace schedule_test;

namespace {

// Every shape the generators accept with p <= 8, m <= 32, v <= 4.
std::vector<std::tuple<ScheduleKind, PipelineShape>> all_shapes() {
  std::vector<std::tuple<ScheduleKind, PipelineShape>> out;
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 32; ++m) {
      out.push_back({ScheduleKind::gpipe, {p, m, 1}});
      out.push_back({ScheduleKind::one_f_one_b, {p, m, 1}});
      out.push_back({ScheduleKind::zb_h1, {p, m, 1}});
      if (m % p == 0)
        for (int v = 1; v <= 4; ++v) out.push_back({ScheduleKind::interleaved, {p, m, v}});
    }
  return out;
}

}  // namespace

TEST(pipeline_schedule, names_round_trip_and_unknown_name_is_refused_by_name) {
  for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved,
                         ScheduleKind::zb_h1})
    EXPECT_EQ(parse_schedule(to_string(k)), k);
  EXPECT_STREQ(to_string(ScheduleKind::one_f_one_b), "1f1b");
  EXPECT_STREQ(to_string(ScheduleKind::zb_h1), "zb-h1");
  EXPECT_STREQ(to_string(RG), "recv_gradient");
  EXPECT_STREQ(to_string(W), "backward_weight");
  try {
    parse_schedule("2f2b");
    FAIL() << "2f2b accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown pipeline schedule \"2f2b\" (expected gpipe, 1f1b, interleaved or zb-h1)");
  }
}

TEST(pipeline_schedule, bad_shapes_are_refused_with_their_values) {
  auto message = [](ScheduleKind k, PipelineShape s) -> std::string {
    try {
      make_schedule(k, s);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(message(ScheduleKind::interleaved, {4, 6, 2}),
            "interleaved schedule: micro-batches m = 6 not divisible by stages p = 4");
  EXPECT_TRUE(contains(message(ScheduleKind::gpipe, {0, 4, 1}), "stages p = 0"));
  EXPECT_TRUE(contains(message(ScheduleKind::one_f_one_b, {2, 0, 1}), "micro-batches m = 0"));
  EXPECT_TRUE(contains(message(ScheduleKind::interleaved, {2, 4, 0}), "virtual stages v = 0"));
  EXPECT_TRUE(contains(message(ScheduleKind::gpipe, {2, 4, 2}), "gpipe schedule: virtual"));
  EXPECT_TRUE(contains(message(ScheduleKind::one_f_one_b, {2, 4, 3}), "v = 3 must be 1"));
  EXPECT_EQ(message(ScheduleKind::zb_h1, {2, 4, 2}),
            "zb-h1 schedule: virtual stages v = 2 must be 1 (only the interleaved schedule runs "
            "several chunks per stage)");
  EXPECT_THROW(ideal_bubble_fraction(ScheduleKind::gpipe, {2, -1, 1}), std::invalid_argument);
}

TEST(pipeline_schedule, chunks_are_assigned_round_robin_over_stages) {
  const PipelineShape s{4, 8, 3};
  for (int c = 0; c < 12; ++c) {
    EXPECT_EQ(chunk_stage(s, c), c % 4);
    EXPECT_EQ(chunk_local_index(s, c), c / 4);
  }
  EXPECT_THROW(chunk_stage(s, 12), std::invalid_argument);
  EXPECT_THROW(chunk_local_index(s, -1), std::invalid_argument);
}

TEST(pipeline_schedule, every_schedule_up_to_p8_m32_v4_is_valid) {
  for (const auto& [kind, shape] : all_shapes()) {
    const Schedule sched = make_schedule(kind, shape);
    ASSERT_EQ(validate_schedule(sched, shape), "")
        << to_string(kind) << " p=" << shape.stages << " m=" << shape.micro_batches
        << " v=" << shape.virtual_stages;
  }
}

TEST(pipeline_schedule, transfers_sit_next_to_their_compute_and_p1_has_none) {
  for (const auto& [kind, shape] : all_shapes()) {
    const Schedule sched = make_schedule(kind, shape);
    for (const auto& list : sched) {
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        if (is_compute(a)) continue;
        ASSERT_GT(shape.stages, 1) << "transfer with p = 1";
        // A receive is posted right before the compute that consumes it, a send issued right
        // after the compute that produced it.
        const bool is_recv = a.kind == RA || a.kind == RG;
        const bool on_activation = a.kind == RA || a.kind == SA;
        const Action compute{on_activation ? F : B, a.micro_batch, a.chunk};
        ASSERT_EQ(list.at(is_recv ? i + 1 : i - 1), compute) << to_string(a.kind);
      }
    }
  }
}

TEST(pipeline_schedule, one_f_one_b_warms_up_then_alternates_then_cools_down) {
  const Schedule sched = make_schedule(ScheduleKind::one_f_one_b, {4, 6, 1});
  // Stage 1 of 4: two warm-up forwards, four forward/backward pairs, two cool-down backwards.
  const std::vector<Action> expected = {{F, 0, 1}, {F, 1, 1}, {F, 2, 1}, {B, 0, 1},
                                        {F, 3, 1}, {B, 1, 1}, {F, 4, 1}, {B, 2, 1},
                                        {F, 5, 1}, {B, 3, 1}, {B, 4, 1}, {B, 5, 1}};
  EXPECT_EQ(computes(sched[1]), expected);
  // The full list of the middle stage, transfers included.
  const Schedule small = make_schedule(ScheduleKind::one_f_one_b, {3, 1, 1});
  const std::vector<Action> middle = {{RA, 0, 1}, {F, 0, 1}, {SA, 0, 1},
                                      {RG, 0, 1}, {B, 0, 1}, {SG, 0, 1}};
  EXPECT_EQ(small[1], middle);
}

TEST(pipeline_schedule, gpipe_runs_all_forwards_then_backwards_in_reverse) {
  const Schedule sched = make_schedule(ScheduleKind::gpipe, {2, 3, 1});
  const std::vector<Action> expected = {{F, 0, 0}, {F, 1, 0}, {F, 2, 0},
                                        {B, 2, 0}, {B, 1, 0}, {B, 0, 0}};
  EXPECT_EQ(computes(sched[0]), expected);
}

TEST(pipeline_schedule, interleaved_follows_megatron_order_for_p2_v2_m4) {
  // Worked by hand from the virtual-index formulas: stage 0 warms up with
  // (p - s - 1) * 2 + (v - 1) * p = 4 forwards, stage 1 with 2.
  const Schedule sched = make_schedule(ScheduleKind::interleaved, {2, 4, 2});
  const std::vector<Action> stage0 = {
      {F, 0, 0}, {F, 1, 0}, {F, 0, 2}, {F, 1, 2}, {F, 2, 0}, {B, 0, 2}, {F, 3, 0}, {B, 1, 2},
      {F, 2, 2}, {B, 0, 0}, {F, 3, 2}, {B, 1, 0}, {B, 2, 2}, {B, 3, 2}, {B, 2, 0}, {B, 3, 0}};
  const std::vector<Action> stage1 = {
      {F, 0, 1}, {F, 1, 1}, {F, 0, 3}, {B, 0, 3}, {F, 1, 3}, {B, 1, 3}, {F, 2, 1}, {B, 0, 1},
      {F, 3, 1}, {B, 1, 1}, {F, 2, 3}, {B, 2, 3}, {F, 3, 3}, {B, 3, 3}, {B, 2, 1}, {B, 3, 1}};
  EXPECT_EQ(computes(sched[0]), stage0);
  EXPECT_EQ(computes(sched[1]), stage1);
  // m == p: every forward first (warm-up covers all v * m), like GPipe per chunk.
  const Schedule all_warm = make_schedule(ScheduleKind::interleaved, {2, 2, 2});
  const std::vector<Action> warm0 = {{F, 0, 0}, {F, 1, 0}, {F, 0, 2}, {F, 1, 2},
                                     {B, 0, 2}, {B, 1, 2}, {B, 0, 0}, {B, 1, 0}};
  EXPECT_EQ(computes(all_warm[0]), warm0);
}

TEST(pipeline_schedule, missing_backward_is_named) {
  const PipelineShape shape{2, 4, 1};
  Schedule sched = make_schedule(ScheduleKind::one_f_one_b, shape);
  erase(sched[0], {B, 1, 0});
  EXPECT_EQ(validate_schedule(sched, shape), "stage 0: backward(mb 1, chunk 0) missing");
}

TEST(pipeline_schedule, duplicated_forward_is_named) {
  const PipelineShape shape{2, 4, 1};
  Schedule sched = make_schedule(ScheduleKind::one_f_one_b, shape);
  sched[1].insert(sched[1].begin() + position(sched[1], {F, 2, 1}) + 1, Action{F, 2, 1});
  EXPECT_EQ(validate_schedule(sched, shape), "stage 1: forward(mb 2, chunk 1) repeated");
}

TEST(pipeline_schedule, backward_before_its_forward_is_named) {
  const PipelineShape shape{2, 4, 1};
  Schedule sched = make_schedule(ScheduleKind::one_f_one_b, shape);
  move_before(sched[1], {B, 1, 1}, {RA, 1, 1});
  EXPECT_EQ(validate_schedule(sched, shape), "stage 1: backward(mb 1, chunk 1) before its forward");
}

TEST(pipeline_schedule, removed_receive_is_named) {
  const PipelineShape shape{2, 4, 1};
  Schedule sched = make_schedule(ScheduleKind::one_f_one_b, shape);
  erase(sched[1], {RA, 2, 1});
  EXPECT_EQ(validate_schedule(sched, shape),
            "stage 1: forward(mb 2, chunk 1) without recv_activation(mb 2, chunk 1) posted "
            "before it");
  Schedule no_grad = make_schedule(ScheduleKind::gpipe, shape);
  erase(no_grad[0], {RG, 3, 0});
  EXPECT_EQ(validate_schedule(no_grad, shape),
            "stage 0: backward(mb 3, chunk 0) without recv_gradient(mb 3, chunk 0) posted "
            "before it");
}

TEST(pipeline_schedule, removed_send_is_named) {
  const PipelineShape shape{2, 4, 1};
  Schedule no_activation = make_schedule(ScheduleKind::one_f_one_b, shape);
  erase(no_activation[0], {SA, 3, 0});
  EXPECT_EQ(validate_schedule(no_activation, shape),
            "stage 1: recv_activation(mb 3, chunk 1) has no matching send_activation(mb 3, "
            "chunk 0) on stage 0");
  Schedule no_gradient = make_schedule(ScheduleKind::one_f_one_b, shape);
  erase(no_gradient[1], {SG, 0, 1});
  EXPECT_EQ(validate_schedule(no_gradient, shape),
            "stage 0: recv_gradient(mb 0, chunk 0) has no matching send_gradient(mb 0, chunk 1) "
            "on stage 1");
}

TEST(pipeline_schedule, send_before_the_compute_that_produces_it_is_named) {
  const PipelineShape shape{2, 2, 1};
  Schedule sched = make_schedule(ScheduleKind::one_f_one_b, shape);
  move_before(sched[0], {SA, 1, 0}, {F, 1, 0});
  EXPECT_EQ(validate_schedule(sched, shape),
            "stage 0: send_activation(mb 1, chunk 0) before forward(mb 1, chunk 0), which "
            "produces its data");
}

TEST(pipeline_schedule, compute_on_the_wrong_stage_is_named) {
  const PipelineShape shape{2, 2, 1};
  Schedule sched = make_schedule(ScheduleKind::gpipe, shape);
  erase(sched[1], {F, 0, 1});
  sched[0].push_back({F, 0, 1});
  EXPECT_EQ(validate_schedule(sched, shape),
            "stage 0: forward(mb 0, chunk 1) on the wrong stage: chunk 1 lives on stage 1");
}

TEST(pipeline_schedule, malformed_actions_and_stage_count_are_named) {
  const PipelineShape shape{2, 2, 1};
  Schedule sched = make_schedule(ScheduleKind::gpipe, shape);
  sched[0].push_back({F, 2, 0});
  EXPECT_TRUE(contains(validate_schedule(sched, shape), "forward(mb 2, chunk 0) outside"));
  EXPECT_TRUE(contains(validate_schedule(make_schedule(ScheduleKind::gpipe, {3, 2, 1}), shape),
                       "3 stages"));
  // The last chunk has nobody to send its output to.
  Schedule extra = make_schedule(ScheduleKind::gpipe, shape);
  extra[1].insert(extra[1].begin() + position(extra[1], {F, 0, 1}) + 1, Action{SA, 0, 1});
  EXPECT_TRUE(contains(validate_schedule(extra, shape), "send_activation(mb 0, chunk 1): no "))
      << validate_schedule(extra, shape);
}

TEST(pipeline_schedule, single_stage_runs_chunks_in_order_without_transfers) {
  // p = 1, v = 2: both chunks on stage 0, handed over in memory, so order alone matters.
  const PipelineShape shape{1, 1, 2};
  const Schedule sched = make_schedule(ScheduleKind::interleaved, shape);
  const std::vector<Action> expected = {{F, 0, 0}, {F, 0, 1}, {B, 0, 1}, {B, 0, 0}};
  EXPECT_EQ(sched[0], expected);
  Schedule swapped = sched;
  std::swap(swapped[0][0], swapped[0][1]);
  EXPECT_EQ(validate_schedule(swapped, shape),
            "stage 0: forward(mb 0, chunk 1) before forward(mb 0, chunk 0), whose output it "
            "consumes");
  swapped = sched;
  std::swap(swapped[0][2], swapped[0][3]);
  EXPECT_EQ(validate_schedule(swapped, shape),
            "stage 0: backward(mb 0, chunk 0) before backward(mb 0, chunk 1), whose gradient it "
            "consumes");
  swapped = sched;
  swapped[0].insert(swapped[0].begin() + 1, Action{SA, 0, 0});
  EXPECT_EQ(validate_schedule(swapped, shape),
            "stage 0: send_activation(mb 0, chunk 0): no transfer to chunk 1 (same stage)");
}

TEST(pipeline_schedule, stages_waiting_on_each_other_deadlock) {
  // Stage 0 runs backward(0) before sending activation 0: it waits for the gradient that
  // stage 1 can only send after the forward that waits for that activation.
  const PipelineShape shape{2, 1, 1};
  Schedule sched = make_schedule(ScheduleKind::one_f_one_b, shape);
  move_after(sched[0], {SA, 0, 0}, {B, 0, 0});
  const std::string expected =
      "deadlock: stage 0 blocked in backward(mb 0, chunk 0) waiting for send_gradient(mb 0, "
      "chunk 1) on stage 1; stage 1 blocked in forward(mb 0, chunk 1) waiting for "
      "send_activation(mb 0, chunk 0) on stage 0";
  EXPECT_EQ(validate_schedule(sched, shape), expected);
  try {
    replay_schedule(sched, shape, [](int, const Action&) { return 1.0; });
    FAIL() << "replay of a deadlocked schedule returned";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), expected)) << e.what();
  }
}

TEST(pipeline_schedule, micro_batch_order_mismatch_deadlocks) {
  // Each order is fine on its own: stage 0 does micro-batch 0 to completion first, stage 1
  // starts with micro-batch 1, whose activation stage 0 sends only after backward(0).
  const PipelineShape shape{2, 2, 1};
  Schedule sched(2);
  sched[0] = {{F, 0, 0}, {SA, 0, 0}, {RG, 0, 0}, {B, 0, 0},
              {F, 1, 0}, {SA, 1, 0}, {RG, 1, 0}, {B, 1, 0}};
  sched[1] = {{RA, 1, 1}, {F, 1, 1}, {B, 1, 1}, {SG, 1, 1},
              {RA, 0, 1}, {F, 0, 1}, {B, 0, 1}, {SG, 0, 1}};
  const std::string problem = validate_schedule(sched, shape);
  EXPECT_TRUE(contains(problem, "stage 0 blocked in backward(mb 0, chunk 0)")) << problem;
  EXPECT_TRUE(contains(problem, "stage 1 blocked in forward(mb 1, chunk 1)")) << problem;
  // The same orders, matched, run.
  std::swap(sched[1][0], sched[1][4]);
  std::swap(sched[1][1], sched[1][5]);
  std::swap(sched[1][2], sched[1][6]);
  std::swap(sched[1][3], sched[1][7]);
  EXPECT_EQ(validate_schedule(sched, shape), "");
}

TEST(pipeline_schedule, gpipe_and_1f1b_replay_gives_bubble_p_minus_1_over_m_plus_p_minus_1) {
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b})
    for (double tb : {1.0, 2.0})
      for (auto [p, m] : std::vector<std::pair<int, int>>{
               {1, 1}, {1, 5}, {2, 1}, {2, 8}, {3, 2}, {4, 4}, {4, 7}, {5, 16}, {8, 3}, {8, 32}}) {
        const PipelineShape shape{p, m, 1};
        const ReplayResult r = replay_schedule(
            make_schedule(kind, shape), shape,
            [tb](int, const Action& a) { return a.kind == ActionKind::forward ? 1.0 : tb; });
        const double formula = double(p - 1) / (m + p - 1);
        EXPECT_DOUBLE_EQ(ideal_bubble_fraction(kind, shape), formula);
        EXPECT_NEAR(r.makespan, (m + p - 1) * (1 + tb), 1e-12);
        EXPECT_NEAR(r.mean_bubble_fraction, formula, 1e-12);
        for (int s = 0; s < p; ++s) {
          EXPECT_NEAR(r.busy[s], m * (1 + tb), 1e-12);
          EXPECT_NEAR(r.bubble_fraction[s], formula, 1e-12)
              << to_string(kind) << " p=" << p << " m=" << m << " stage " << s << " tb=" << tb;
        }
      }
}

// Narayanan et al. claim the interleaved bubble time is (p - 1)(tf + tb) / v when each chunk
// takes 1/v of a stage's time. In this replay (transfers free and non-blocking) that holds
// exactly for every shape the generator accepts: the groups of p micro-batches per chunk make
// the first of a group return from stage p - 1 exactly when stage 0 finishes the group, so
// no stage ever waits in the steady state, and the fill and drain each cost p - 1 chunk steps.
TEST(pipeline_schedule, interleaved_replay_gives_bubble_p_minus_1_over_vm_plus_p_minus_1) {
  for (double tb : {1.0, 2.0})
    for (int p = 1; p <= 8; ++p)
      for (int v = 2; v <= 4; ++v)
        for (int m = p; m <= 32; m += p) {
          const PipelineShape shape{p, m, v};
          const ReplayResult r = replay_schedule(
              make_schedule(ScheduleKind::interleaved, shape), shape,
              [=](int, const Action& a) { return (a.kind == ActionKind::forward ? 1.0 : tb) / v; });
          const double formula = double(p - 1) / (v * m + p - 1);
          ASSERT_DOUBLE_EQ(ideal_bubble_fraction(ScheduleKind::interleaved, shape), formula);
          ASSERT_NEAR(r.makespan, m * (1 + tb) + (p - 1) * (1 + tb) / v, 1e-12)
              << "p=" << p << " v=" << v << " m=" << m << " tb=" << tb;
          ASSERT_NEAR(r.mean_bubble_fraction, formula, 1e-12);
          for (int s = 0; s < p; ++s) ASSERT_NEAR(r.bubble_fraction[s], formula, 1e-12);
        }
}

TEST(pipeline_schedule, replay_starts_each_compute_after_its_input_is_sent) {
  for (const auto& [kind, shape_in] :
       std::vector<std::tuple<ScheduleKind, PipelineShape>>{{ScheduleKind::gpipe, {3, 4, 1}},
                                                            {ScheduleKind::one_f_one_b, {4, 9, 1}},
                                                            {ScheduleKind::interleaved, {3, 6, 3}},
                                                            {ScheduleKind::zb_h1, {4, 9, 1}}}) {
    // A copy the lambdas below may capture (C++17 lambdas cannot capture structured bindings;
    // GCC accepts it, clang does not).
    const PipelineShape shape = shape_in;
    const Schedule sched = make_schedule(kind, shape);
    // Uneven durations per stage and kind, so any missed dependency shows.
    const ReplayResult r = replay_schedule(sched, shape, [](int s, const Action& a) {
      return (a.kind == F ? 1.0 : a.kind == B ? 2.5 : 0.75) + 0.25 * s;
    });
    const int C = shape.chunks();
    auto done_at = [&](ActionKind k, int mb, int c) {
      const int s = chunk_stage(shape, c);
      return r.end[s][position(sched[s], {k, mb, c})];
    };
    for (int s = 0; s < shape.stages; ++s) {
      double clock = 0;
      for (std::size_t i = 0; i < sched[s].size(); ++i) {
        const Action& a = sched[s][i];
        EXPECT_GE(r.start[s][i], clock);  // in order, one at a time
        clock = r.end[s][i];
        if (a.kind == F && a.chunk > 0) {
          EXPECT_GE(r.start[s][i], done_at(F, a.micro_batch, a.chunk - 1));
        }
        if (a.kind == B && a.chunk < C - 1) {
          EXPECT_GE(r.start[s][i], done_at(B, a.micro_batch, a.chunk + 1));
        }
        if (a.kind == B) {
          EXPECT_GE(r.start[s][i], done_at(F, a.micro_batch, a.chunk));
        }
        if (a.kind == W) {
          EXPECT_GE(r.start[s][i], done_at(B, a.micro_batch, a.chunk));
        }
        if (!is_compute(a)) {
          EXPECT_EQ(r.start[s][i], r.end[s][i]);  // transfers take no time
        }
      }
    }
  }
}

TEST(pipeline_schedule, gpipe_keeps_m_activations_and_1f1b_min_p_minus_s_m) {
  auto unit = [](int, const Action&) { return 1.0; };
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 32; ++m) {
      const PipelineShape shape{p, m, 1};
      const ReplayResult g =
          replay_schedule(make_schedule(ScheduleKind::gpipe, shape), shape, unit);
      const ReplayResult f =
          replay_schedule(make_schedule(ScheduleKind::one_f_one_b, shape), shape, unit);
      for (int s = 0; s < p; ++s) {
        ASSERT_EQ(g.peak_live[s], m) << "gpipe p=" << p << " m=" << m << " stage " << s;
        ASSERT_EQ(f.peak_live[s], std::min(p - s, m))
            << "1f1b p=" << p << " m=" << m << " stage " << s;
        ASSERT_LE(f.peak_live[s], p);
      }
    }
}

// The interleaved warm-up keeps (p - s - 1) * 2 + (v - 1) * p + 1 chunk activation sets on
// stage s (all v * m when m == p). On stage 0 that is v * p + p - 1 chunk sets, i.e.
// p + (p - 1) / v micro-batches' worth against 1F1B's p: Megatron-LM's factor 2 costs memory.
TEST(pipeline_schedule, interleaved_keeps_its_warm_up_plus_one_chunk_activations) {
  auto unit = [](int, const Action&) { return 1.0; };
  for (int p = 1; p <= 8; ++p)
    for (int v = 1; v <= 4; ++v)
      for (int m = p; m <= 32; m += p) {
        const PipelineShape shape{p, m, v};
        const ReplayResult r =
            replay_schedule(make_schedule(ScheduleKind::interleaved, shape), shape, unit);
        for (int s = 0; s < p; ++s) {
          const int expected = m == p ? v * m : (p - s - 1) * 2 + (v - 1) * p + 1;
          ASSERT_EQ(r.peak_live[s], expected) << "p=" << p << " v=" << v << " m=" << m;
        }
        if (m > p) {
          ASSERT_EQ(r.peak_live[0], v * p + p - 1);
        }
      }
}

// The driver's bubble model (schedule/stage_time_replay.hpp), by hand: gpipe, p = 2, m = 2,
// forward 1 s / 2 s and backward 3 s / 4 s on stages 0 / 1.
//   stage 0: F0 [0,1] F1 [1,2]; B1 after stage 1's B1: [9,12]; B0 after stage 1's B0: [13,16]
//   stage 1: F0 [1,3] F1 [3,5] B1 [5,9] B0 [9,13]
// makespan 16; busy 8 and 12: bubbles 0.5 and 0.25, mean 0.375.
TEST(pipeline_schedule, replay_with_stage_times_matches_a_hand_computed_gpipe_timeline) {
  const PipelineShape shape{2, 2, 1};
  const ReplayResult r =
      replay_with_stage_times(ScheduleKind::gpipe, shape, {1.0, 2.0}, {3.0, 4.0});
  EXPECT_DOUBLE_EQ(r.makespan, 16.0);
  ASSERT_EQ(r.bubble_fraction.size(), 2u);
  EXPECT_DOUBLE_EQ(r.busy[0], 8.0);
  EXPECT_DOUBLE_EQ(r.busy[1], 12.0);
  EXPECT_DOUBLE_EQ(r.bubble_fraction[0], 0.5);
  EXPECT_DOUBLE_EQ(r.bubble_fraction[1], 0.25);
  EXPECT_DOUBLE_EQ(r.mean_bubble_fraction, 0.375);
  // Uniform stages: the textbook (p-1)/(v*m+p-1), here interleaved p = 2, v = 2, m = 4: 1/9.
  const PipelineShape il{2, 4, 2};
  EXPECT_NEAR(replay_with_stage_times(ScheduleKind::interleaved, il, {0.5, 0.5}, {1.0, 1.0})
                  .mean_bubble_fraction,
              1.0 / 9.0, 1e-12);
}

TEST(pipeline_schedule, replay_with_stage_times_refuses_times_not_one_per_stage) {
  const PipelineShape shape{3, 3, 1};
  try {
    replay_with_stage_times(ScheduleKind::one_f_one_b, shape, {1.0, 1.0}, {2.0, 2.0, 2.0});
    FAIL() << "two forward times for three stages accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("2 forward and 3 backward times for 3 stages"),
              std::string::npos)
        << e.what();
  }
}

TEST(replay, without_validation_equals_the_validating_replay_on_valid_schedules) {
  struct Case {
    ScheduleKind kind;
    int p, m, v;
  };
  const std::vector<Case> cases{{ScheduleKind::gpipe, 3, 5, 1},
                                {ScheduleKind::one_f_one_b, 4, 6, 1},
                                {ScheduleKind::interleaved, 2, 4, 3},
                                {ScheduleKind::interleaved, 4, 8, 2},
                                {ScheduleKind::zb_h1, 4, 7, 1}};
  for (const auto& k : cases) {
    const PipelineShape shape{k.p, k.m, k.v};
    const Schedule sched = make_schedule(k.kind, shape);
    // Uneven durations per stage, chunk and direction, so that the timelines differ.
    const ActionDuration d = [](int s, const Action& a) {
      return (a.kind == F ? 1.0 : a.kind == B ? 2.25 : 1.5) + 0.125 * s + 0.5 * a.chunk;
    };
    const ReplayResult a = replay_schedule(sched, shape, d);
    const ReplayResult b = replay_validated_schedule(sched, shape, d);
    EXPECT_EQ(a.makespan, b.makespan);
    EXPECT_EQ(a.busy, b.busy);
    EXPECT_EQ(a.bubble_fraction, b.bubble_fraction);
    EXPECT_EQ(a.mean_bubble_fraction, b.mean_bubble_fraction);
    EXPECT_EQ(a.peak_live, b.peak_live);
    EXPECT_EQ(a.start, b.start);
    EXPECT_EQ(a.end, b.end);
    EXPECT_GT(a.makespan, 0);
  }
}

TEST(replay, without_validation_refuses_a_deadlocked_schedule_it_cannot_finish) {
  // The same deadlock as above, given to the replay that skips validation: it cannot finish,
  // and says where it blocked and what the validator finds.
  const PipelineShape shape{2, 1, 1};
  Schedule sched = make_schedule(ScheduleKind::one_f_one_b, shape);
  move_after(sched[0], {SA, 0, 0}, {B, 0, 0});
  try {
    replay_validated_schedule(sched, shape, [](int, const Action&) { return 1.0; });
    FAIL() << "replay of a deadlocked schedule returned";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "stage 0 blocked in backward(mb 0, chunk 0)")) << e.what();
    EXPECT_TRUE(contains(e.what(), "deadlock:")) << e.what();
  }
}
