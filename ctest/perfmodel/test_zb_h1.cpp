// The zero-bubble schedule ZB-H1 (Qi et al. 2023) in the performance models: the backward's
// work split into B and W counted by hand, the replayed bubble against the paper's formula,
// zb-h1 against 1f1b, its sequence-parallel all-gathers, its memory against the formula of
// docs/perfmodel.md, and the planner listing it (never with full recomputation).
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "perfmodel/memory.hpp"
#include "perfmodel/model_chunks.hpp"
#include "perfmodel/planner.hpp"
#include "perfmodel/shard_params.hpp"
#include "perfmodel/step_time.hpp"
#include "perfmodel/step_traffic.hpp"
#include "perfmodel_test_util.hpp"
#include "schedule/pipeline_schedule.hpp"

using namespace paraxis::perfmodel;
using paraxis::model::Recompute;
using paraxis::schedule::bubble_fraction_formula;
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

Scenario pipeline(ScheduleKind kind, int pp, int micro_batches) {
  auto c = config(1, pp, 1, 1, micro_batches);
  c.schedule = kind;
  return c;
}

}  // namespace

TEST(zb_h1, weight_gradient_flops_by_hand) {
  // tiny: H = 64, F = 256, S = 32, V = 256. A dense block's linears: Q, K, V and the output
  // projection 2*4*64^2 = 32768, the MLP 2*2*64*256 = 65536: 98304 per token; the head
  // 2*64*256 = 32768. Its forward adds q k^T and P v, 2*2*32*64 = 8192, which have no weights.
  const auto m = tiny_model();
  EXPECT_DOUBLE_EQ(chunk_weight_gradient_flops_per_token(m, {0, 2, true, false}), 2 * 98304.0);
  EXPECT_DOUBLE_EQ(chunk_weight_gradient_flops_per_token(m, {2, 4, false, true}),
                   2 * 98304.0 + 32768);
  EXPECT_DOUBLE_EQ(chunk_forward_flops_per_token(m, {2, 4, false, true}) -
                       chunk_weight_gradient_flops_per_token(m, {2, 4, false, true}),
                   2 * 8192.0);
  // MoE on blocks 1 and 3 (4 experts, top-2): the router 2*64*4 = 512 and two experts'
  // MLPs 2*65536 per token: 32768 + 512 + 131072 = 164352.
  const auto moe = tiny_moe_model();
  EXPECT_DOUBLE_EQ(chunk_weight_gradient_flops_per_token(moe, {0, 4, true, true}),
                   2 * 98304.0 + 2 * 164352.0 + 32768);
}

TEST(zb_h1, modelled_w_is_the_weight_gradient_flops_and_b_the_rest) {
  // pp 2, one micro-batch, chunks of 4 blocks: stage 0 runs F0, B0, W0 and stage 1 F1, B1, W1,
  // so the span is F0 + F1 + B1 + B0 + W0 = F0 + F1 + (bwd1 - W1) + bwd0 with bwd = 2 F.
  const auto m = eight_layers();
  auto c = pipeline(ScheduleKind::zb_h1, 2, 1);
  c.stage_layers = {4, 4};
  StepTimeInputs in;
  in.flops_per_s = 1e9;
  const double N = 32;  // tokens per micro-batch
  const double f0 = chunk_forward_flops_per_token(m, {0, 4, true, false}) * N / 1e9;
  const double f1 = chunk_forward_flops_per_token(m, {4, 8, false, true}) * N / 1e9;
  const double w1 = (4 * 98304.0 + 32768) * N / 1e9;
  const auto b = predict_step_time(m, c, in);
  EXPECT_NEAR(b.pipeline_span, f0 + f1 + (2 * f1 - w1) + 2 * f0, 1e-12);
  // A measured W replaces the FLOP model's (B: the modelled backward less it); one over the
  // modelled backward is refused.
  in.forward_s = {f0, f1};
  in.backward_weight_s = {0.5 * f0, 0.25 * f1};
  EXPECT_NEAR(predict_step_time(m, c, in).pipeline_span, f0 + f1 + (2 * f1 - 0.25 * f1) + 2 * f0,
              1e-12);
  // Measured B and W (backward_s is then B's alone).
  in.backward_s = {1.5 * f0, 1.25 * f1};
  EXPECT_NEAR(predict_step_time(m, c, in).pipeline_span, f0 + f1 + 1.25 * f1 + 1.5 * f0 + 0.5 * f0,
              1e-12);
  in.backward_s.clear();
  in.backward_weight_s = {0.5 * f0, 3 * f1};
  EXPECT_THROW(predict_step_time(m, c, in), std::invalid_argument);
  in.backward_weight_s = {0.5 * f0};
  EXPECT_THROW(predict_step_time(m, c, in), std::invalid_argument);
}

TEST(zb_h1, unsplit_schedules_ignore_the_w_times) {
  const auto m = eight_layers();
  for (auto kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    const auto c = pipeline(kind, 4, 8);
    StepTimeInputs in;
    in.forward_s.assign(4, 1.0);
    in.backward_s.assign(4, 2.0);
    const auto whole = predict_step_time(m, c, in);
    in.backward_weight_s.assign(4, 0.7);
    const auto split = predict_step_time(m, c, in);
    EXPECT_EQ(split.step_time, whole.step_time);
    EXPECT_EQ(split.pipeline_span, whole.pipeline_span);
  }
}

TEST(zb_h1, replayed_bubble_equals_the_formula_on_a_uniform_deck) {
  // Every chunk alike, compute only: the replay against (p-1)(F+B-W) / (m(F+B+W) + (p-1)(F+B-W)).
  struct Case {
    int p, m;
    double tf, tb, tw;
  };
  const std::vector<Case> cases{{4, 8, 1, 1, 1},   {4, 8, 1, 1.2, 0.8}, {2, 4, 1, 1, 1},
                                {4, 4, 1, 1, 0.5}, {8, 8, 1, 1, 1},     {2, 1, 1, 2, 1}};
  for (const auto& k : cases) {
    const auto c = pipeline(ScheduleKind::zb_h1, k.p, k.m);
    StepTimeInputs in;
    in.forward_s.assign(k.p, k.tf);
    in.backward_s.assign(k.p, k.tb);  // B's alone, as a zb-h1 run measures it
    in.backward_weight_s.assign(k.p, k.tw);
    const auto b = predict_step_time(eight_layers(), c, in);
    const double formula =
        bubble_fraction_formula(ScheduleKind::zb_h1, c.pipeline_shape(), k.tf, k.tb, k.tw);
    EXPECT_NEAR(b.bubble_fraction, formula, 1e-12) << "p " << k.p << " m " << k.m;
    EXPECT_NEAR(b.bubble / b.pipeline_span, formula, 1e-12);
    EXPECT_NEAR(b.compute, k.m * (k.tf + k.tb + k.tw), 1e-12);
  }
  // At equal times, the paper's (p-1)/(3m+p-1): 3/27 for p 4, m 8, a third of 1f1b's 3/11.
  EXPECT_NEAR(bubble_fraction_formula(ScheduleKind::zb_h1, {4, 8, 1}, 1, 1, 1), 3.0 / 27, 1e-15);
}

TEST(zb_h1, faster_than_1f1b_with_pp4_and_8_micro_batches) {
  // The modelled work (FLOPs at a rate), tp 2 with sequence parallelism: the same compute, a
  // smaller bubble, two more all-gathers per block and micro-batch.
  const auto m = eight_layers();
  auto zb = config(2, 4, 1, 1, 8);
  zb.sequence_parallel = true;
  zb.schedule = ScheduleKind::zb_h1;
  auto ofob = zb;
  ofob.schedule = ScheduleKind::one_f_one_b;
  StepTimeInputs in;
  in.flops_per_s = 1e9;
  in.links.tp = {1e-6, 1e-10, 0};
  in.links.pp = {1e-6, 1e-10, 0};
  const auto a = predict_step_time(m, zb, in);
  const auto b = predict_step_time(m, ofob, in);
  EXPECT_LT(a.step_time, b.step_time);
  EXPECT_LT(a.bubble, b.bubble);
  EXPECT_NEAR(a.compute, b.compute, 1e-12 * b.compute);
  EXPECT_GT(a.tp, b.tp);
}

TEST(zb_h1, sequence_parallel_w_gathers_by_hand) {
  const auto m = tiny_model();
  auto c = config(2, 1, 1, 2);
  c.sequence_parallel = true;
  c.schedule = ScheduleKind::zb_h1;
  const double rows = 64.0 * 64 * 4;  // N*H*e
  using C = Collective;
  // Two blocks: B gathers the incoming gradients and reduce-scatters (2 + 2 per block); W
  // gathers the LayerNorm outputs and the incoming gradients again (4 per block).
  const auto blocks = tensor_parallel_chunk_traffic(m, c, {1, 3, false, false});
  EXPECT_EQ(blocks.backward.calls_of(C::all_gather), 4);
  EXPECT_EQ(blocks.backward.calls_of(C::reduce_scatter), 4);
  EXPECT_EQ(blocks.backward_weight.calls_of(C::all_gather), 8);
  EXPECT_EQ(blocks.backward_weight.calls(), 8);
  EXPECT_DOUBLE_EQ(blocks.backward_weight.bytes(), 8 * rows);
  // The embedding's gradient and the head's input are gathered in W, the head's input
  // gradient reduce-scattered in B.
  const auto ends = tensor_parallel_chunk_traffic(m, c, {0, 0, true, true});
  EXPECT_EQ(ends.backward_weight.calls_of(C::all_gather), 2);
  EXPECT_EQ(ends.backward.calls_of(C::all_gather), 0);
  EXPECT_EQ(ends.backward.calls_of(C::reduce_scatter), 1);
  // Per step: 1f1b's calls plus 2 all-gathers per block and micro-batch (4 blocks, m = 4).
  auto ofob = c;
  ofob.schedule = ScheduleKind::one_f_one_b;
  const auto zt = tensor_parallel_step_traffic(m, c, 0),
             ot = tensor_parallel_step_traffic(m, ofob, 0);
  EXPECT_EQ(zt.calls_of(C::all_gather) - ot.calls_of(C::all_gather), 2 * 4 * 4);
  EXPECT_EQ(zt.calls_of(C::reduce_scatter), ot.calls_of(C::reduce_scatter));
  EXPECT_DOUBLE_EQ(zt.bytes() - ot.bytes(), 2 * 4 * 4 * rows);
  // An MoE block's experts take their rows from the dispatch B kept: one re-gather, not two.
  // Blocks 1 (MoE) and 2 (dense): 2 x 2 LayerNorm outputs + 2 output projections + 1 MLP.
  const auto moe = tensor_parallel_chunk_traffic(tiny_moe_model(), c, {1, 3, false, false});
  EXPECT_EQ(moe.backward_weight.calls_of(C::all_gather), 7);
  EXPECT_EQ(moe.backward.calls_of(C::all_gather), 4);
  // Without sequence parallelism W makes no call.
  c.sequence_parallel = ofob.sequence_parallel = false;
  EXPECT_EQ(tensor_parallel_chunk_traffic(m, c, {0, 4, true, true}).backward_weight.calls(), 0);
  EXPECT_DOUBLE_EQ(tensor_parallel_step_traffic(m, c, 0).bytes(),
                   tensor_parallel_step_traffic(m, ofob, 0).bytes());
}

TEST(zb_h1, zero3_gathers_the_embedding_for_its_forward_only) {
  // ZeRO-3, pp 2, dp 2, m = 4: stage 0 (the embedding's) gathers its unit 4 times, not 8; W
  // reads no parameter, so nothing else changes.
  const auto m = tiny_model();
  auto zb = config(1, 2, 2, 1, 8);
  zb.zero = 3;
  zb.schedule = ScheduleKind::zb_h1;
  auto ofob = zb;
  ofob.schedule = ScheduleKind::one_f_one_b;
  const auto units = shard_units(m, zb, 0);
  ASSERT_EQ(units.front().name, "embedding");
  const double emb = static_cast<double>(units.front().padded) * 4;
  const auto z0 = data_parallel_step_traffic(m, zb, 0), o0 = data_parallel_step_traffic(m, ofob, 0);
  EXPECT_EQ(o0.calls_of(Collective::all_gather) - z0.calls_of(Collective::all_gather), 4);
  EXPECT_DOUBLE_EQ(o0.bytes() - z0.bytes(), 4 * emb);
  EXPECT_EQ(z0.calls_of(Collective::reduce_scatter), o0.calls_of(Collective::reduce_scatter));
  EXPECT_DOUBLE_EQ(data_parallel_step_traffic(m, zb, 1).bytes(),
                   data_parallel_step_traffic(m, ofob, 1).bytes());
}

TEST(zb_h1, memory_is_p_sets_with_their_layernorm_gradients) {
  // pp 4, m 8, 8 layers (2 per chunk), fp32: every stage keeps p = 4 sets until their W, each
  // with g (4 H per block + 2 H on the head's chunk) = 4 * 4 * 64 * 2 = 2048 bytes, 2560 with
  // the head. 1f1b keeps p - s sets. The formula of docs/perfmodel.md, "Zero-bubble pipeline".
  const auto m = eight_layers();
  const auto zb = pipeline(ScheduleKind::zb_h1, 4, 8);
  const auto ofob = pipeline(ScheduleKind::one_f_one_b, 4, 8);
  const auto chunks = split_layers(m, 4);
  const double Nl_H_e = 32.0 * 64 * 4;
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(peak_live_sets(zb, s), 4) << s;
    EXPECT_EQ(peak_live_sets_per_chunk(zb, s), std::vector<int>{4}) << s;
    const double ln = s == 3 ? 2560 : 2048;
    EXPECT_DOUBLE_EQ(layernorm_gradient_set_bytes(m, zb, chunks[s]), ln);
    EXPECT_DOUBLE_EQ(layernorm_gradient_set_bytes(m, ofob, chunks[s]), 0);
    EXPECT_DOUBLE_EQ(chunk_activation_bytes(m, zb, chunks[s]),
                     chunk_activation_bytes(m, ofob, chunks[s]) + ln);
    const double formula = 4 * (chunk_activation_bytes(m, ofob, chunks[s]) + ln) +
                           activation_scratch_bytes(m, zb, s) +
                           pipeline_gradient_buffers(zb, s) * Nl_H_e;
    EXPECT_DOUBLE_EQ(memory_per_rank(m, zb, s).activations, formula) << s;
  }
  // Stage 0 keeps as many sets as under 1f1b: its activations differ by the LayerNorm
  // buffers, the q, k, v gradients the scratch no longer holds (3 N Hl e = 3 * 32 * 64 * 4) and
  // any pipeline buffer the schedule's order adds.
  EXPECT_EQ(peak_live_sets(ofob, 0), 4);
  const double d = memory_per_rank(m, zb, 0).activations - memory_per_rank(m, ofob, 0).activations;
  const double buffers =
      (pipeline_gradient_buffers(zb, 0) - pipeline_gradient_buffers(ofob, 0)) * Nl_H_e;
  EXPECT_DOUBLE_EQ(activation_scratch_bytes(m, ofob, 0) - activation_scratch_bytes(m, zb, 0),
                   3 * 32 * 64 * 4.0);
  EXPECT_DOUBLE_EQ(d, 4 * 2048 + buffers - 3 * 32 * 64 * 4.0);
}

TEST(zb_h1, activation_peak_equals_the_measured_ledger) {
  // inputs/tiny.yaml (MoE block 1, fp32) with micro_batch 2, pp 2, zb-h1: each rank's
  // activation peak as summary.json's memory_per_rank measured it (2026-12-03, with the model's
  // split backward of commit 66e1c73), for m = 4 and m = 1, tp 1 and tp 2 (+ sequence
  // parallelism). With m = 4 and tp 1 stage 1 measured one [N, H] buffer (16384 B) more than
  // predicted, as under 1f1b (memory.recompute_per_stage_equals_the_measured_ledger_pp2:
  // pipeline_gradient_buffers' estimate).
  auto m = tiny_moe_model();
  m.vocab = 128;
  m.layers = 2;
  m.ffn = 128;
  struct Run {
    int tp;
    bool sp;
    int global_batch;
    double stage0, stage1, stage1_buffers;
  };
  const Run runs[] = {{1, false, 8, 777248, 1393384, 16384},
                      {1, false, 2, 529184, 943748, 0},
                      {2, false, 2, 340768, 625028, 0},
                      {2, true, 4, 440352, 843752, 0}};
  for (const auto& r : runs) {
    auto c = config(r.tp, 2, 1, 2, r.global_batch);
    c.sequence_parallel = r.sp;
    c.schedule = ScheduleKind::zb_h1;
    EXPECT_EQ(memory_per_rank(m, c, 0).activations, r.stage0) << r.tp << " " << r.global_batch;
    EXPECT_EQ(memory_per_rank(m, c, 1).activations + r.stage1_buffers, r.stage1)
        << r.tp << " " << r.global_batch;
  }
}

TEST(zb_h1, planner_ranks_it_and_never_with_full_recomputation) {
  PlanRequest r;
  r.model = tiny_model();
  r.global_batch = 8;
  r.precision = paraxis::model::Precision::fp32;
  Machine mc;
  mc.devices_per_node = 2;
  mc.nodes = 2;
  mc.peak_flops = 1e12;
  mc.memory_bytes = 1e12;
  mc.intra_node = {1e-6, 1e-10, 0};
  mc.inter_node = {5e-6, 1e-9, 0};
  const Plan p = plan(r, mc);
  int ranked = 0, refused = 0;
  for (const auto& e : p.ranked) {
    if (e.config.schedule != ScheduleKind::zb_h1) continue;
    ++ranked;
    EXPECT_GT(e.config.pp, 1);
    EXPECT_EQ(e.config.virtual_stages, 1);
    EXPECT_NE(e.config.recompute, Recompute::full) << describe(e.config);
  }
  for (const auto& rej : p.rejected)
    if (rej.config.schedule == ScheduleKind::zb_h1 && rej.config.recompute == Recompute::full) {
      ++refused;
      EXPECT_NE(rej.reason.find("zb-h1"), std::string::npos) << rej.reason;
    }
  EXPECT_GT(ranked, 0);
  EXPECT_GT(refused, 0);
  // Ranked like the others: with pp 4 and m 8 (dp 1, mb 1) zb-h1 is ahead of 1f1b.
  auto rank_of = [&](ScheduleKind kind) {
    for (std::size_t i = 0; i < p.ranked.size(); ++i) {
      const auto& c = p.ranked[i].config;
      if (c.pp == 4 && c.micro_batch == 1 && c.schedule == kind && c.recompute == Recompute::none)
        return static_cast<long>(i);
    }
    return -1L;
  };
  ASSERT_GE(rank_of(ScheduleKind::zb_h1), 0);
  EXPECT_LT(rank_of(ScheduleKind::zb_h1), rank_of(ScheduleKind::one_f_one_b));
}
