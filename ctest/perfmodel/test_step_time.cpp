// Step-time predictions: the replayed bubble equals the textbook formula for paraxis's own
// schedules with unit action times, the terms add up, and each axis adds the time of its
// traffic under the collective models.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "perfmodel/flops.hpp"
#include "perfmodel/step_time.hpp"
#include "perfmodel_test_util.hpp"
#include "schedule/pipeline_schedule.hpp"

using namespace paraxis::perfmodel;
using paraxis::schedule::ideal_bubble_fraction;
using paraxis::schedule::ScheduleKind;
using perfmodel_test::config;
using perfmodel_test::tiny_model;
using perfmodel_test::tiny_moe_model;

namespace {

paraxis::model::ModelConfig eight_layers() {
  auto m = tiny_model();
  m.layers = 8;
  return m;
}

double sum_of_terms(const StepTimeBreakdown& b) {
  return b.compute + b.bubble + b.tp + b.pp + b.dp + b.ep;
}

}  // namespace

TEST(step_time, unit_action_times_give_the_ideal_bubble) {
  // Huang et al. 2019 / Narayanan et al. 2021: (p-1)/(m+p-1), interleaved (p-1)/(v m+p-1).
  struct Case {
    ScheduleKind kind;
    int p, m, v;
  };
  const std::vector<Case> cases{
      {ScheduleKind::gpipe, 4, 8, 1},       {ScheduleKind::gpipe, 2, 3, 1},
      {ScheduleKind::one_f_one_b, 4, 8, 1}, {ScheduleKind::one_f_one_b, 4, 2, 1},
      {ScheduleKind::interleaved, 2, 4, 2}, {ScheduleKind::interleaved, 4, 8, 2}};
  for (const auto& k : cases) {
    auto c = config(1, k.p, 1, 1, k.m);
    c.schedule = k.kind;
    c.virtual_stages = k.v;
    StepTimeInputs in;
    in.forward_s.assign(k.p * k.v, 1.0);
    in.backward_s.assign(k.p * k.v, 1.0);
    const auto b = predict_step_time(eight_layers(), c, in);
    const double ideal = ideal_bubble_fraction(k.kind, c.pipeline_shape());
    EXPECT_NEAR(b.bubble_fraction, ideal, 1e-12)
        << paraxis::schedule::to_string(k.kind) << " p " << k.p << " m " << k.m;
    EXPECT_NEAR(b.bubble / b.pipeline_span, ideal, 1e-12);
    EXPECT_NEAR(b.step_time, sum_of_terms(b), 1e-12 * b.step_time);
  }
}

TEST(step_time, gpipe_and_1f1b_bubbles_hold_with_backward_twice_forward) {
  for (auto kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    auto c = config(1, 4, 1, 1, 8);
    c.schedule = kind;
    StepTimeInputs in;
    in.forward_s.assign(4, 1.0);  // backward = 2 x forward by default
    const auto b = predict_step_time(eight_layers(), c, in);
    EXPECT_NEAR(b.bubble_fraction, 3.0 / 11, 1e-12);
    // Makespan (m + p - 1)(F + B) = 11 * 3; busy m (F + B) = 24.
    EXPECT_NEAR(b.pipeline_span, 33.0, 1e-12);
    EXPECT_NEAR(b.compute, 24.0, 1e-12);
  }
}

TEST(step_time, one_rank_is_the_model_flops_over_the_rate) {
  const auto m = tiny_model();
  const auto c = config(1, 1, 1, 2, 8);
  StepTimeInputs in;
  in.flops_per_s = 1e9;
  const auto b = predict_step_time(m, c, in);
  EXPECT_NEAR(b.step_time, step_flops(m, 8) / 1e9, 1e-12 * b.step_time);
  EXPECT_NEAR(b.compute, b.step_time, 1e-12 * b.step_time);
  EXPECT_EQ(b.bubble, 0.0);
  EXPECT_EQ(b.tp + b.pp + b.dp + b.ep, 0.0);
}

TEST(step_time, tensor_parallel_time_is_its_traffic_under_the_ring_model) {
  const auto m = tiny_model();
  const auto c = config(2, 1, 1, 1, 4);
  StepTimeInputs in;
  in.flops_per_s = 1e12;
  in.links.tp = {1e-5, 1e-9, 0};
  const auto b = predict_step_time(m, c, in);
  const double expected = traffic_time(tensor_parallel_step_traffic(m, c, 0), 2, in.links.tp);
  EXPECT_NEAR(b.tp, expected, 1e-12 * expected);
  // By hand: 4 micro-batches x (18 all-reduces of 8192 B + 128 B + 256 B) + the 8 B norm, each
  // ring all-reduce on 2 ranks 2 a + S b.
  const double ar = 2 * 1e-5;  // the latency part
  const double by_hand = 4 * (18 * (ar + 8192e-9) + (ar + 128e-9) + (ar + 256e-9)) + ar + 8e-9;
  EXPECT_NEAR(b.tp, by_hand, 1e-15);
  EXPECT_NEAR(b.step_time, sum_of_terms(b), 1e-12 * b.step_time);
}

// ... as far as the library progresses them (StepTimeInputs::dp_overlap).
TEST(step_time, overlap_hides_data_parallel_reductions_behind_backward) {
  const auto m = tiny_model();
  auto c = config(1, 1, 2, 1, 8);
  StepTimeInputs in;
  in.flops_per_s = 1e9;
  in.links.dp = {1e-6, 1e-10, 0};
  for (int zero = 0; zero <= 3; ++zero) {
    c.zero = zero;
    c.overlap = false;
    const auto plain = predict_step_time(m, c, in);
    const double all = traffic_time(data_parallel_step_traffic(m, c, 0), 2, in.links.dp);
    EXPECT_NEAR(plain.dp, all, 1e-12 * all) << zero;
    c.overlap = true;
    const auto hidden = predict_step_time(m, c, in);
    EXPECT_LT(hidden.dp, plain.dp) << zero;
    // The backward is far longer than the reductions: only the gathers and the norm remain.
    AxisTraffic rest;
    for (const auto& o : data_parallel_step_traffic(m, c, 0).ops)
      if (o.op == Collective::all_gather || o.bytes == 8) rest.add(o.op, o.bytes, o.count);
    EXPECT_NEAR(hidden.dp, traffic_time(rest, 2, in.links.dp), 1e-15) << zero;
    // An MPI that advances a request only inside MPI calls hides nothing (dp_overlap 0, as the
    // calibration measures MPICH's shared-memory path); half the progress hides half.
    in.dp_overlap = 0.0;
    EXPECT_NEAR(predict_step_time(m, c, in).dp, plain.dp, 1e-15) << zero;
    in.dp_overlap = 0.5;
    EXPECT_NEAR(predict_step_time(m, c, in).dp, 0.5 * (plain.dp + hidden.dp), 1e-15) << zero;
    in.dp_overlap = 1.0;
  }
}

TEST(step_time, pipeline_transfers_pay_the_fill_and_drain) {
  const auto m = eight_layers();
  auto c = config(1, 4, 1, 1, 8);
  StepTimeInputs in;
  in.flops_per_s = 1e9;
  in.links.pp = {1e-5, 1e-9, 0};
  const auto b = predict_step_time(m, c, in);
  // 2 (p - 1) messages of N*H*e = 8192 B, and the norm's ring all-reduce over 4 stages.
  const double expected = 6 * (1e-5 + 8192e-9) + (6 * 1e-5 + 2 * 8 * 0.75 * 1e-9);
  EXPECT_NEAR(b.pp, expected, 1e-15);
}

TEST(step_time, pipeline_transfers_occupy_both_ends_as_bubble) {
  // 1F1B, p = 2, m = 8, F = B = 1 s, every transfer t = 0.1 s (alpha; no bytes term). Each
  // action sends or receives one message, so every action lasts 1 + t in the replay:
  // makespan (m + p - 1) 2 (1 + t), busy 2 m (1 + t) per stage, of which 2 m t is transfers,
  // counted as bubble: bubble = 2 (1 + t) + 2 m t on each stage, compute 2 m.
  const auto m = eight_layers();
  auto c = config(1, 2, 1, 1, 8);
  c.schedule = ScheduleKind::one_f_one_b;
  StepTimeInputs in;
  in.forward_s.assign(2, 1.0);
  in.backward_s.assign(2, 1.0);
  const double t = 0.1;
  in.links.pp = {t, 0, 0};
  in.pipeline_transfer_occupancy = 1.0;  // paraxis's MPI transfers (the report's costs)
  const auto b = predict_step_time(m, c, in);
  EXPECT_NEAR(b.pipeline_span, 9 * 2 * (1 + t), 1e-12);
  EXPECT_NEAR(b.compute, 16.0, 1e-12);
  EXPECT_NEAR(b.bubble, 2 * (1 + t) + 16 * t, 1e-12);
  EXPECT_NEAR(b.bubble_fraction, b.bubble / b.pipeline_span, 1e-12);
  // The fill and drain's two flights and the norm's all-reduce (2 (p - 1) messages on 2 ranks).
  EXPECT_NEAR(b.pp, 2 * t + 2 * t, 1e-12);
  EXPECT_NEAR(b.step_time, sum_of_terms(b), 1e-12 * b.step_time);
  // Transfers on their own engines (occupancy 0, the default: a planner's machine) leave the
  // textbook bubble (p - 1)(F + B) and the fill and drain's flights.
  in.pipeline_transfer_occupancy = 0.0;
  const auto nccl = predict_step_time(m, c, in);
  EXPECT_NEAR(nccl.bubble, 2.0, 1e-12);
  EXPECT_NEAR(nccl.pp, 4 * t, 1e-12);
  // transfer_time: the end chunks have one neighbour, the middle ones two.
  EXPECT_EQ(transfer_time(4, 0, t), t);
  EXPECT_EQ(transfer_time(4, 2, t), 2 * t);
  EXPECT_EQ(transfer_time(4, 3, t), t);
  EXPECT_EQ(transfer_time(1, 0, t), 0.0);
}

TEST(step_time, blocking_pipeline_transfers_wait_inside_each_action) {
  // A pipeline engine that waits on its transfers (DeepSpeed's) runs as one that does not with
  // every forward and backward longer by its receive and send: none at the pipeline's ends.
  const auto m = eight_layers();
  for (auto kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    auto c = config(1, 4, 1, 1, 8);
    c.schedule = kind;
    StepTimeInputs in;
    in.forward_s.assign(4, 1.0);
    in.links.pp = {0.25, 0, 0};  // one transfer: 0.25 s
    const auto overlapped = predict_step_time(m, c, in);
    const double norm = overlapped.pp - 6 * 0.25;  // less the fill and drain's 2 (p - 1)
    in.blocking_pipeline_transfers = true;
    const auto blocking = predict_step_time(m, c, in);
    const std::vector<double> waits{0.25, 0.5, 0.5, 0.25};  // per action of each stage
    StepTimeInputs by_hand;
    for (int s = 0; s < 4; ++s) {
      by_hand.forward_s.push_back(1.0 + waits[s]);
      by_hand.backward_s.push_back(2.0 + waits[s]);
    }
    const auto expected = predict_step_time(m, c, by_hand);  // no pp link: no pp term
    EXPECT_NEAR(blocking.pipeline_span, expected.pipeline_span, 1e-12);
    EXPECT_NEAR(blocking.step_time, expected.step_time + norm, 1e-12);
    EXPECT_NEAR(blocking.pp, 8 * 2 * waits[blocking.stage] + norm, 1e-12);
    EXPECT_NEAR(blocking.step_time, sum_of_terms(blocking), 1e-12 * blocking.step_time);
    EXPECT_GT(blocking.step_time, overlapped.step_time);
  }
}

TEST(step_time, blocking_transfers_are_partitioned_over_tensor_parallel_ranks) {
  // DeepSpeed's engine with tp > 1: a rank sends 1/tp of the message (P), the receiver
  // all-gathers it over tp (G), and a backward all-gathers its own forward output again first.
  const auto m = eight_layers();
  auto c = config(2, 4, 1, 1, 8);
  c.schedule = ScheduleKind::one_f_one_b;
  const double bytes = pipeline_message_bytes(m, c);
  StepTimeInputs in;
  in.forward_s.assign(4, 1.0);
  in.links.pp = {0, 1e-6, 0};
  in.links.tp = {0, 3e-6, 0};
  in.blocking_pipeline_transfers = true;
  const auto blocking = predict_step_time(m, c, in);
  const double P = bytes / 2 * 1e-6, G = bytes / 2 * 3e-6;  // ring all-gather of 2: n/2 b
  // Stage 0 sends only, stage 3 receives only; every receipt is gathered.
  const std::vector<double> wf{P, 2 * P + G, 2 * P + G, P + G};
  const std::vector<double> wb{P + 2 * G, 2 * P + 2 * G, 2 * P + 2 * G, P};
  StepTimeInputs by_hand;
  by_hand.links.tp = in.links.tp;
  for (int s = 0; s < 4; ++s) {
    by_hand.forward_s.push_back(1.0 + wf[s]);
    by_hand.backward_s.push_back(2.0 + wb[s]);
  }
  const auto expected = predict_step_time(m, c, by_hand);  // no pp link: no pp term
  const double norm = 2.0 * 3 / 4 * 8 * 1e-6;  // the norm's 8-byte ring all-reduce over pp
  EXPECT_NEAR(blocking.pipeline_span, expected.pipeline_span, 1e-12);
  EXPECT_NEAR(blocking.step_time, expected.step_time + norm, 1e-12);
  EXPECT_NEAR(blocking.pp, 8 * (wf[blocking.stage] + wb[blocking.stage]) + norm, 1e-12);
  EXPECT_NEAR(blocking.step_time, sum_of_terms(blocking), 1e-12 * blocking.step_time);
  // With sequence parallelism the message is the rank's shard already: sent whole (its bytes
  // are a tp-th of the activation), nothing gathered.
  c.sequence_parallel = true;
  const auto sp = predict_step_time(m, c, in);
  const double Q = pipeline_message_bytes(m, c) * 1e-6;
  EXPECT_DOUBLE_EQ(pipeline_message_bytes(m, c), bytes / 2);
  const double per_microbatch = (sp.stage == 0 || sp.stage == 3) ? 2 * Q : 4 * Q;
  EXPECT_NEAR(sp.pp, 8 * per_microbatch + norm, 1e-12);
}

TEST(step_time, refuses_what_it_cannot_model) {
  const auto m = tiny_model();
  StepTimeInputs in;
  EXPECT_THROW(predict_step_time(m, config(1, 1, 1), in), std::invalid_argument);  // no rate
  in.forward_s = {1.0, 1.0};
  EXPECT_THROW(predict_step_time(m, config(1, 1, 1), in), std::invalid_argument);  // 1 chunk
  in.forward_s.clear();
  in.flops_per_s = 1e9;
  EXPECT_THROW(predict_step_time(m, config(1, 8, 1), in), std::invalid_argument);  // 8 > layers
}

TEST(step_time, recomputation_adds_its_forward_work_to_the_backward) {
  // One rank: full recomputation of every block runs the blocks' forward again, so the step is
  // (3 forward + blocks' forward) / rate = hardware_step_flops / rate; selective adds q k^T,
  // 2 S H per block and token, and its softmax pass 2 B heads S^2 e per block and micro-batch
  // at the memory bandwidth.
  using paraxis::model::Recompute;
  const auto m = tiny_model();
  auto c = config(1, 1, 1, 2, 8);
  StepTimeInputs in;
  in.flops_per_s = 1e9;
  const double none = predict_step_time(m, c, in).step_time;
  c.recompute = Recompute::full;
  const auto full = predict_step_time(m, c, in);
  const double block = paraxis::model::piece_costs(m)[1];  // every block costs the same
  EXPECT_NEAR(full.step_time, none + 4 * block * 8 * 32 / 1e9, 1e-12 * none);
  EXPECT_NEAR(full.step_time, hardware_step_flops(m, c) / 1e9, 1e-12 * none);
  EXPECT_NEAR(full.compute, full.step_time, 1e-12 * none);
  c.recompute = Recompute::selective;
  EXPECT_NEAR(predict_step_time(m, c, in).step_time, none + 4 * 2.0 * 32 * 64 * 8 * 32 / 1e9,
              1e-12 * none);
  in.memory_bytes_per_s = 1e8;
  const double softmax = 4 * 4 * (2.0 * 2 * 4 * 32 * 32 * 4) / 1e8;  // 4 micro-batches
  EXPECT_NEAR(predict_step_time(m, c, in).step_time,
              none + 4 * 2.0 * 32 * 64 * 8 * 32 / 1e9 + softmax, 1e-12 * none);
  // Measured forward times scale the recomputation by its share of the chunk's FLOPs; a
  // measured backward has it already.
  c.recompute = Recompute::full;
  in.forward_s = {1.0};
  const double share = 4 * block / chunk_forward_flops_per_token(m, {0, 4, true, true});
  EXPECT_NEAR(predict_step_time(m, c, in).compute, 4 * (1 + 2 + share), 1e-12);
  in.backward_s = {5.0};
  EXPECT_NEAR(predict_step_time(m, c, in).compute, 4 * (1 + 5.0), 1e-12);
}

TEST(step_time, full_recomputation_pays_the_tensor_parallel_calls_again) {
  const auto m = tiny_model();
  auto c = config(2, 1, 1, 1, 4);
  c.recompute = paraxis::model::Recompute::full;
  StepTimeInputs in;
  in.flops_per_s = 1e12;
  in.links.tp = {1e-5, 1e-9, 0};
  const auto b = predict_step_time(m, c, in);
  // 4 micro-batches x 4 blocks x 2 all-reduces of 8192 B more than without (18 + 8 in all).
  const double ar = 2 * 1e-5;
  const double by_hand = 4 * (26 * (ar + 8192e-9) + (ar + 128e-9) + (ar + 256e-9)) + ar + 8e-9;
  EXPECT_NEAR(b.tp, by_hand, 1e-15);
}

TEST(step_time, a_prebuilt_schedule_cut_and_shards_give_the_same_prediction) {
  using paraxis::model::Recompute;
  struct Case {
    ScheduleKind kind;
    int tp, pp, dp, v, zero;
    bool sp, overlap;
    Recompute recompute;
  };
  const std::vector<Case> cases{
      {ScheduleKind::one_f_one_b, 2, 2, 2, 1, 0, false, false, Recompute::none},
      {ScheduleKind::gpipe, 1, 4, 2, 1, 2, false, true, Recompute::full},
      {ScheduleKind::interleaved, 2, 2, 2, 2, 1, true, true, Recompute::selective},
      {ScheduleKind::one_f_one_b, 2, 4, 1, 1, 3, true, false, Recompute::none},
  };
  const auto m = eight_layers();
  for (const auto& k : cases) {
    auto c = config(k.tp, k.pp, k.dp, 1, 16);
    c.schedule = k.kind;
    c.virtual_stages = k.v;
    c.zero = k.zero;
    c.sequence_parallel = k.sp;
    c.overlap = k.overlap;
    c.recompute = k.recompute;
    SCOPED_TRACE(describe(c));
    StepTimeInputs in;
    in.flops_per_s = 1e12;
    in.links = {{1e-6, 1e-10}, {2e-6, 2e-10}, {5e-6, 1e-9}, {3e-6, 3e-10}};
    const StepTimeBreakdown a = predict_step_time(m, c, in);
    const auto sched = paraxis::schedule::make_schedule(c.schedule, c.pipeline_shape());
    const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
    std::vector<std::vector<ParamUnit>> units;
    for (int s = 0; s < c.pp; ++s) units.push_back(shard_units(m, c, s));
    in.schedule = &sched;
    in.chunks = &chunks;
    in.stage_units = &units;
    const StepTimeBreakdown b = predict_step_time(m, c, in);
    // Bitwise: the same terms summed in the same order.
    EXPECT_EQ(a.compute, b.compute);
    EXPECT_EQ(a.bubble, b.bubble);
    EXPECT_EQ(a.tp, b.tp);
    EXPECT_EQ(a.pp, b.pp);
    EXPECT_EQ(a.dp, b.dp);
    EXPECT_EQ(a.ep, b.ep);
    EXPECT_EQ(a.step_time, b.step_time);
    EXPECT_EQ(a.pipeline_span, b.pipeline_span);
    EXPECT_EQ(a.bubble_fraction, b.bubble_fraction);
    EXPECT_EQ(a.stage, b.stage);
    EXPECT_GT(a.tp + a.dp, 0);  // the cases exercise the shard-dependent terms
  }
}

// The data-parallel calls timed as the step issues them (StepTimeInputs::dp_sequence,
// data_parallel_call_sequence): where the stage's calls are the sequence's, the dp term is the sum
// of its calibrated times (each call its position's); a sequence timed for another bucket size
// is not these calls, and each call then takes its curve's time.
TEST(step_time, dp_term_is_the_sum_of_the_calibrated_sequence) {
  const auto m = tiny_model();
  auto c = config(1, 1, 2, 1, 8);
  c.bucket_mb = 1e-3;  // 262 fp32 elements: a bucket per unit
  StepTimeInputs in;
  in.flops_per_s = 1e9;
  in.links.dp = {1e-6, 1e-10, 0};
  for (int zero : {0, 1, 2, 3}) {
    c.zero = zero;
    const auto units = shard_units(m, c, 0);
    CallSequence seq = data_parallel_call_sequence(m, c, 0);
    ASSERT_GE(seq.size(), 3u) << zero;
    EXPECT_TRUE(seq.front().after_compute);
    EXPECT_TRUE(same_calls(traffic_of(seq), data_parallel_step_traffic(c, units))) << zero;
    double sum = 0;
    for (std::size_t k = 0; k < seq.size(); ++k) sum += seq[k].seconds = 1e-3 * double(k + 1);
    const double curves = predict_step_time(m, c, in).dp;
    EXPECT_GT(std::abs(curves - sum), 1e-3) << zero;
    in.dp_sequence = seq;
    EXPECT_NEAR(predict_step_time(m, c, in).dp, sum, 1e-12) << zero;
    EXPECT_NEAR(traffic_time(data_parallel_step_traffic(c, units), 2, in.links.dp,
                             AllReduceAlgorithm::ring, nullptr, &seq),
                sum, 1e-12);
    in.dp_sequence.clear();
  }
  // ZeRO 2: per micro-batch the units' reduce-scatters, the last unit first, the group's first
  // after compute; then the norm and the all-gathers (the first after the optimizer).
  c.zero = 2;
  const auto units2 = shard_units(m, c, 0);
  const auto z2 = data_parallel_call_sequence(c, units2);
  const std::size_t n = units2.size(), mb = static_cast<std::size_t>(c.micro_batches());
  ASSERT_GT(mb, 1u);
  ASSERT_EQ(z2.size(), mb * n + 1 + n);
  for (std::size_t g = 0; g < mb; ++g)
    for (std::size_t k = 0; k < n; ++k) {
      const auto& q = z2[g * n + k];
      EXPECT_EQ(q.op, Collective::reduce_scatter);
      EXPECT_EQ(q.bytes, units2[n - 1 - k].padded * 4.0) << g << ' ' << k;
      EXPECT_EQ(q.after_compute, k == 0) << g << ' ' << k;
    }
  EXPECT_EQ(z2[mb * n].bytes, 8.0);
  EXPECT_TRUE(z2[mb * n + 1].after_compute);
  EXPECT_EQ(z2.back().op, Collective::all_gather);
  EXPECT_EQ(data_parallel_call_sequence(m, c, 0).size(), z2.size());
  c.zero = 3;
  EXPECT_THROW(data_parallel_call_sequence(c, shard_units(m, c, 0)), std::invalid_argument);
  // ZeRO 0: the buckets, the last unit's first; a sequence of 1e-3 MiB buckets is not a step of
  // 1 MiB buckets (one bucket), which keeps its curve time.
  c.zero = 0;
  const auto small = data_parallel_call_sequence(c, shard_units(m, c, 0));
  EXPECT_EQ(small.back().bytes, shard_units(m, c, 0).front().padded * 4.0);
  auto big = c;
  big.bucket_mb = 1.0;
  EXPECT_EQ(data_parallel_call_sequence(big, shard_units(m, big, 0)).size(), 1u);
  const double curves = predict_step_time(m, big, in).dp;
  in.dp_sequence = small;
  for (auto& q : in.dp_sequence) q.seconds = 1.0;
  EXPECT_EQ(predict_step_time(m, big, in).dp, curves);
}

// ZeRO 3 (1f1b on one stage: each micro-batch's forward, then its backward): per micro-batch every
// unit gathered before its piece's forward (a MoE block's dense unit, then its experts'), then from
// the head down each piece's units gathered, its backward, its units reduce-scattered (experts
// first); the norm last. The compute between calls adds up to the step's (the embedding's is 0):
// m micro-batches' forward and backward; the first call follows the optimizer (share 0).
TEST(step_time, zero3_sequence_follows_the_units_and_the_schedule) {
  const auto m = tiny_moe_model();
  auto c = config(1, 1, 2, 1, 8);
  c.zero = 3;
  const auto units = shard_units(m, c, 0);
  const auto seq = data_parallel_call_sequence(m, c, 0);
  const std::size_t n = units.size(), mb = static_cast<std::size_t>(c.micro_batches());
  ASSERT_EQ(n,
            8u);  // embedding, layers.0, layers.1 (+ experts), layers.2, layers.3 (+ experts), head
  ASSERT_EQ(seq.size(), mb * 3 * n + 1);
  EXPECT_TRUE(same_calls(traffic_of(seq), data_parallel_step_traffic(c, units)));
  using K = Collective;
  const std::vector<std::pair<Collective, std::size_t>> want = {
      {K::all_gather, 7},    {K::reduce_scatter, 7}, {K::all_gather, 5},
      {K::all_gather, 6},    {K::reduce_scatter, 6}, {K::reduce_scatter, 5},
      {K::all_gather, 4},    {K::reduce_scatter, 4}, {K::all_gather, 2},
      {K::all_gather, 3},    {K::reduce_scatter, 3}, {K::reduce_scatter, 2},
      {K::all_gather, 1},    {K::reduce_scatter, 1}, {K::all_gather, 0},
      {K::reduce_scatter, 0}};
  double shares = 0;
  for (std::size_t g = 0; g < mb; ++g) {
    const std::size_t at = g * 3 * n;
    for (std::size_t k = 0; k < n; ++k) {
      EXPECT_EQ(seq[at + k].op, Collective::all_gather) << g << ' ' << k;
      EXPECT_EQ(seq[at + k].bytes, units[k].padded * 4.0) << g << ' ' << k;
    }
    ASSERT_EQ(want.size(), 2 * n);
    for (std::size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(seq[at + n + k].op, want[k].first) << g << ' ' << k;
      EXPECT_EQ(seq[at + n + k].bytes, units[want[k].second].padded * 4.0) << g << ' ' << k;
    }
    // The embedding's backward computes no FLOPs: its reduce-scatter follows its gather.
    EXPECT_FALSE(seq[at + 3 * n - 1].after_compute) << g;
    for (std::size_t k = 0; k < 3 * n; ++k) {
      const auto& q = seq[at + k];
      EXPECT_EQ(q.after_compute, (g == 0 && k == 0) || q.compute_share > 0) << g << ' ' << k;
      shares += q.compute_share;
    }
  }
  EXPECT_TRUE(seq.front().after_compute);
  EXPECT_EQ(seq.front().compute_share, 0.0);
  EXPECT_NEAR(shares, double(mb), 1e-12);
  EXPECT_EQ(seq.back().bytes, 8.0);
  EXPECT_FALSE(seq.back().after_compute);
  // Recomputation in full: each block's backward runs its forward again, so the blocks' reduce-
  // scatters come after more compute; the calls stay the same.
  auto r = c;
  r.recompute = paraxis::model::Recompute::full;
  const auto rseq = data_parallel_call_sequence(m, r, 0);
  ASSERT_EQ(rseq.size(), seq.size());
  EXPECT_GT(rseq[n + 4].compute_share, seq[n + 4].compute_share);  // layers.3's experts' RS
}
