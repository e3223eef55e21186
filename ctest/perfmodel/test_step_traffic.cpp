// Bytes and calls per step and axis against counts worked by hand from what paraxis's model,
// engine and ZeRO optimizer call (docs/parallel.md, miniapp/model/gpt_model*.cpp), on the
// tiny model (H = 64, V = 256, S = 32, 4 layers, ffn 256, fp32 unless said).
#include <gtest/gtest.h>

#include <tuple>

#include "perfmodel/shard_params.hpp"
#include "perfmodel/step_traffic.hpp"
#include "perfmodel_test_util.hpp"

using namespace paraxis::perfmodel;
using paraxis::model::Precision;
using paraxis::schedule::ScheduleKind;
using perfmodel_test::config;
using perfmodel_test::tiny_model;
using perfmodel_test::tiny_moe_model;

TEST(step_traffic, tensor_parallel_without_sequence_parallelism_by_hand) {
  // tp = 2, micro_batch 2 (N = 64 tokens), global batch 8, dp 1: m = 4 micro-batches.
  const auto c = config(2, 1, 1, 2);
  const AxisTraffic t = tensor_parallel_step_traffic(tiny_model(), c, 0);
  const double rows = 64.0 * 64 * 4;  // N*H*e = 16384
  // Per micro-batch: embedding 1 + 4 blocks x 2 forward, 4 x 2 backward, head 1 backward:
  // 18 all-reduces of N*H*e; the loss: N*a (max) and 2*N*a (sums).
  EXPECT_EQ(t.calls_of(Collective::all_reduce), 4 * 20 + 1);  // + the norm
  EXPECT_DOUBLE_EQ(t.bytes(), 4 * (18 * rows + 64 * 4 + 128 * 4) + 8);
  EXPECT_EQ(t.calls_of(Collective::all_gather), 0);
  EXPECT_EQ(t.calls(), 81);
}

TEST(step_traffic, tensor_parallel_with_sequence_parallelism_by_hand) {
  auto c = config(2, 1, 1, 2);
  c.sequence_parallel = true;
  const AxisTraffic t = tensor_parallel_step_traffic(tiny_model(), c, 0);
  const double rows = 64.0 * 64 * 4;
  // Per micro-batch: all-gathers forward 4x2 blocks + 1 head, backward 1 embedding + 4x4
  // blocks + 1 head = 27; reduce-scatters forward 1 + 4x2, backward 4x2 + 1 = 18.
  EXPECT_EQ(t.calls_of(Collective::all_gather), 4 * 27);
  EXPECT_EQ(t.calls_of(Collective::reduce_scatter), 4 * 18);
  EXPECT_DOUBLE_EQ(t.bytes_of(Collective::all_gather), 4 * 27 * rows);
  EXPECT_DOUBLE_EQ(t.bytes_of(Collective::reduce_scatter), 4 * 18 * rows);
  // All-reduces: the two loss reductions per micro-batch, the LayerNorm gradients once
  // (ZeRO 0: every one of 4 blocks x 4H + 2H = 1152 elements, 4 bytes) and the norm.
  EXPECT_EQ(t.calls_of(Collective::all_reduce), 4 * 2 + 2);
  EXPECT_DOUBLE_EQ(t.bytes_of(Collective::all_reduce), 4 * (64 * 4 + 128 * 4) + 1152 * 4 + 8);
}

TEST(step_traffic, sequence_parallelism_moves_the_same_bus_bytes_plus_the_regathers) {
  // Korthikanti et al. 2022: an all-gather + reduce-scatter pair moves what one all-reduce
  // does. Per block: 4 all-reduces (8 units of (p-1)/p S on the bus) become 6 all-gathers +
  // 4 reduce-scatters (10 units): the 2 extra are the LayerNorm outputs gathered again in
  // backward, which paraxis keeps sharded.
  const auto m = tiny_model();
  auto c = config(4, 1, 1, 1);
  ChunkLayers block{0, 1, false, false};
  const auto plain = tensor_parallel_chunk_traffic(m, c, block);
  c.sequence_parallel = true;
  const auto sp = tensor_parallel_chunk_traffic(m, c, block);
  const double S = 32.0 * 64 * 4, unit = 0.75 * S;
  EXPECT_DOUBLE_EQ(bus_bytes(plain.forward, 4) + bus_bytes(plain.backward, 4), 8 * unit);
  EXPECT_DOUBLE_EQ(bus_bytes(sp.forward, 4), bus_bytes(plain.forward, 4));
  EXPECT_DOUBLE_EQ(bus_bytes(sp.backward, 4), bus_bytes(plain.backward, 4) + 2 * unit);
}

TEST(step_traffic, moe_blocks_reduce_the_gate_gradient_over_tp) {
  const auto m = tiny_moe_model();
  const auto c = config(2, 1, 1, 1);  // N = 32, K = 2
  const ChunkLayers moe_block{1, 2, false, false}, dense_block{0, 1, false, false};
  const auto moe = tensor_parallel_chunk_traffic(m, c, moe_block);
  const auto dense = tensor_parallel_chunk_traffic(m, c, dense_block);
  EXPECT_EQ(moe.backward.calls(), dense.backward.calls() + 1);
  EXPECT_DOUBLE_EQ(moe.backward.bytes() - dense.backward.bytes(), 32.0 * 2 * 4);
  EXPECT_EQ(moe.forward.calls(), dense.forward.calls());
}

TEST(step_traffic, sequence_parallel_layernorm_shares_cover_each_element_once) {
  // ZeRO >= 1: each data-parallel rank sums only the LayerNorm gradients it owns; over the
  // group every one of the 1152 elements is owned exactly once.
  const auto m = tiny_model();
  for (int zero : {1, 3}) {
    auto c = config(2, 1, 3, 1, 6);
    c.sequence_parallel = true;
    c.zero = zero;
    const auto units = shard_units(m, c, 0);
    std::size_t total = 0;
    for (int r = 0; r < 3; ++r) total += owned_sp_partial_elements(units, zero, r);
    EXPECT_EQ(total, 1152u) << "zero " << zero;
    EXPECT_EQ(owned_sp_partial_elements(units, 0, 0), 1152u);
  }
}

TEST(step_traffic, pipeline_messages_by_hand) {
  // pp = 2, 1f1b, micro_batch 1 (N = 32), m = 8: one message N*H*e = 8192 B per forward of
  // chunk 0 and per backward of chunk 1; receives are calls without bytes.
  auto c = config(1, 2, 1, 1);
  for (int stage = 0; stage < 2; ++stage) {
    const AxisTraffic t = pipeline_step_traffic(tiny_model(), c, stage);
    EXPECT_EQ(t.calls_of(Collective::point_to_point), 8) << stage;
    EXPECT_EQ(t.receives, 8) << stage;
    EXPECT_DOUBLE_EQ(t.bytes(), 8 * 8192.0 + 8) << stage;
    EXPECT_EQ(t.calls(), 8 + 8 + 1) << stage;
  }
  // Interleaved, v = 2: stage 0 holds chunks 0 (a successor) and 2 (both): 3 sends per
  // micro-batch; stage 1 holds 1 (both) and 3 (a predecessor): 3 as well.
  c.schedule = ScheduleKind::interleaved;
  c.virtual_stages = 2;
  for (int stage = 0; stage < 2; ++stage)
    EXPECT_EQ(pipeline_step_traffic(tiny_model(), c, stage).calls_of(Collective::point_to_point),
              3 * 8);
  // Sequence parallelism sends a tp-th of the tokens.
  auto s = config(2, 2, 1, 1);
  s.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(pipeline_step_traffic(tiny_model(), s, 0).bytes(), 8 * 4096.0 + 8);
  EXPECT_EQ(pipeline_step_traffic(tiny_model(), config(1, 1, 1), 0).calls(), 0);
}

TEST(step_traffic, parameter_counts_by_hand) {
  // tp = 1: embedding 256*64 + 32*64 = 18432; block 4*64 (LayerNorms) + 4*(64*64 + 64)
  // (Q, K, V, output) + 64*256 + 256 + 256*64 + 64 (MLP) = 49984; head 2*64 + 64*256 = 16512.
  const auto m = tiny_model();
  const auto c = config(1, 1, 1);
  EXPECT_EQ(estimate_rank_parameters(m, c, 0), 18432u + 4 * 49984u + 16512u);
  EXPECT_EQ(model_parameters(m), 18432u + 4 * 49984u + 16512u);
  // ZeRO >= 1 on dp = 3 pads each unit to a multiple of 3: 49984 -> 49986, the others divide.
  auto z = config(1, 1, 3, 1, 6);
  z.zero = 1;
  EXPECT_EQ(padded_elements(shard_units(m, z, 0)), 18432u + 4 * 49986u + 16512u);
  // An odd head dimension: H = 40, 4 heads, tp = 2 gives 20-element bias slices, each aligned
  // to 32 in the flat layout; the unpadded count is unaffected.
  auto odd = m;
  odd.hidden = 40;
  odd.ffn = 160;
  const auto units = shard_units(odd, config(2, 1, 1), 0);
  EXPECT_EQ(units[1].elements,
            4 * 40u + 3 * (40 * 20u + 20) + 20 * 40u + 40 + 40 * 80u + 80 + 80 * 40u + 40);
  EXPECT_EQ(units[1].aligned, 4 * 48u + 3 * (800u + 32) + 800u + 48 + 3200u + 80 + 3200u + 48);
}

TEST(step_traffic, zero_stages_move_what_the_table_says) {
  const auto m = tiny_model();
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    const int g = 4, t = p == Precision::bf16 ? 2 : 4;
    auto c = config(1, 1, 2, 1);  // m = 4
    c.precision = p;
    for (int zero = 0; zero <= 3; ++zero) {
      c.zero = zero;
      const double P = static_cast<double>(padded_elements(shard_units(m, c, 0)));
      const double expected[4] = {P * g, P * g + P * t + 8, 4 * P * g + P * t + 8,
                                  4 * (2 * P * t + P * g) + 8};
      EXPECT_DOUBLE_EQ(data_parallel_step_traffic(m, c, 0).bytes(), expected[zero])
          << paraxis::model::to_string(p) << " zero " << zero;
    }
  }
}

TEST(step_traffic, zero3_is_1_5x_for_one_micro_batch_and_zero2_3_grow_with_m) {
  // Rajbhandari et al. 2020: plain data parallelism and ZeRO-1/2 move 2 Psi per step, ZeRO-3
  // 3 Psi (1.5x), counting bus volume with fp16 parameters and gradients (t = g). That holds
  // for m = 1; paraxis reduce-scatters after every micro-batch at stages 2-3 and re-gathers
  // parameters per micro-batch at stage 3, so those grow with m.
  const double P = 1e6;
  const int p = 64;
  auto bus = [&](int zero, int m) {
    const ZeroVolume v = zero_volume(zero, P, m, 2, 2);
    // Stage 0 reduces with an all-reduce (bus factor 2(p-1)/p), the others reduce-scatter.
    const double reduce_factor = zero == 0 ? busbw_factor(Collective::all_reduce, p)
                                           : busbw_factor(Collective::reduce_scatter, p);
    return v.reduce_bytes * reduce_factor +
           v.gather_bytes * busbw_factor(Collective::all_gather, p);
  };
  for (int zero = 1; zero <= 2; ++zero) EXPECT_DOUBLE_EQ(bus(zero, 1), bus(0, 1));
  EXPECT_DOUBLE_EQ(bus(3, 1) / bus(0, 1), 1.5);
  // In S units (nccl-tests sizes): stage 3 moves 3 P t, stages 1-2 2 P t for m = 1.
  EXPECT_DOUBLE_EQ(zero_volume(3, P, 1, 2, 2).total() / zero_volume(1, P, 1, 2, 2).total(), 1.5);
  for (int zero = 0; zero <= 3; ++zero) {
    const double one = zero_volume(zero, P, 1, 4, 2).total();
    const double four = zero_volume(zero, P, 4, 4, 2).total();
    if (zero < 2)
      EXPECT_DOUBLE_EQ(four, one) << zero;
    else
      EXPECT_GT(four, 2 * one) << zero;
  }
  EXPECT_DOUBLE_EQ(zero_volume(2, P, 4, 4, 2).total(), 4 * P * 4 + P * 2);
  EXPECT_DOUBLE_EQ(zero_volume(3, P, 4, 4, 2).total(), 4 * (2 * P * 2 + P * 4));
  EXPECT_THROW(zero_volume(4, P, 1, 4, 4), std::invalid_argument);
}

TEST(step_traffic, zero0_buckets_follow_bucket_mb) {
  // fp32 units of 18432, 4 x 49984 and 16512 elements; buckets are filled from the last unit.
  const auto m = tiny_model();
  auto c = config(1, 1, 2, 1);
  const double P = 18432.0 + 4 * 49984 + 16512;
  c.bucket_mb = 25;  // everything in one bucket
  EXPECT_EQ(data_parallel_step_traffic(m, c, 0).calls(), 1);
  c.bucket_mb = 0.1;  // cap 26214 elements: one bucket per unit
  EXPECT_EQ(data_parallel_step_traffic(m, c, 0).calls(), 6);
  c.bucket_mb = 0.3;  // cap 78643: {head, block 3}, {2}, {1}, {block 0, embedding}
  const AxisTraffic t = data_parallel_step_traffic(m, c, 0);
  EXPECT_EQ(t.calls(), 4);
  EXPECT_DOUBLE_EQ(t.bytes(), P * 4);
  // No data parallelism, nothing logged.
  EXPECT_EQ(data_parallel_step_traffic(m, config(1, 1, 1), 0).calls(), 0);
}

TEST(step_traffic, expert_all_to_alls_by_hand) {
  // ep = dp = 2, micro_batch 1 (N = 32), m = 4, K = 2, E = 4, 2 MoE layers: per layer and
  // micro-batch 1 all-to-all of E*4 = 16 B of counts and 4 of N*K*H*e = 16384 B of rows.
  const auto m = tiny_moe_model();
  auto c = config(1, 1, 2, 1);
  c.ep = 2;
  const AxisTraffic t = expert_step_traffic(m, c, 0);
  EXPECT_EQ(t.calls(), 2 * 4 * 5);
  EXPECT_DOUBLE_EQ(t.bytes(), 2 * 4 * (16 + 4 * 16384.0));
  // Capacity factor 0.5: ceil(0.5 * 32 * 2 / 4) = 8 per expert, 32 rows kept of 64.
  auto capped = m;
  capped.moe.capacity_factor = 0.5;
  EXPECT_EQ(paraxis::model::expert_capacity(capped, 32), 8);
  EXPECT_DOUBLE_EQ(expected_kept_rows(capped, 32), 32.0);
  EXPECT_DOUBLE_EQ(expert_step_traffic(capped, c, 0).bytes(), 2 * 4 * (16 + 4 * 8192.0));
  // Measured routing replaces the expectation.
  EXPECT_DOUBLE_EQ(expert_step_traffic(m, c, 0, {10, 20}).bytes(),
                   2 * 4 * (16 + 2 * (10 + 20) * 256.0));
  // With ep = dp the expert-data-parallel group has one rank: expert gradients are not
  // reduced at all, and ZeRO 0 reduces the dense units plus the norm.
  std::size_t dense = 0;
  for (const auto& u : shard_units(m, c, 0))
    if (!u.expert) dense += u.padded;
  const AxisTraffic d = data_parallel_step_traffic(m, c, 0);
  EXPECT_DOUBLE_EQ(d.bytes(), dense * 4.0 + 8);
}

TEST(step_traffic, step_traffic_gathers_every_axis) {
  auto c = config(2, 2, 2, 1, 16);
  c.zero = 1;
  const auto m = tiny_moe_model();
  c.ep = 2;
  const StepTraffic s = step_traffic(m, c, 1);
  EXPECT_DOUBLE_EQ(s.tp.bytes(), tensor_parallel_step_traffic(m, c, 1).bytes());
  EXPECT_DOUBLE_EQ(s.pp.bytes(), pipeline_step_traffic(m, c, 1).bytes());
  EXPECT_DOUBLE_EQ(s.dp.bytes(), data_parallel_step_traffic(m, c, 1).bytes());
  EXPECT_DOUBLE_EQ(s.ep.bytes(), expert_step_traffic(m, c, 1).bytes());
  EXPECT_GT(s.ep.calls(), 0);
  EXPECT_THROW(step_traffic(m, c, 2), std::invalid_argument);
}

TEST(step_traffic, full_recompute_issues_the_block_forwards_again) {
  // docs/model.md, "Collectives issued again": per recomputed block and micro-batch, 2
  // all-reduces of N*H*e (tp, no sp) or 2 all-gathers + 2 reduce-scatters (sp), the MoE
  // block's 3 all-to-alls (ep); selective issues none. tp = 2, micro_batch 2, m = 4.
  using paraxis::model::Recompute;
  const auto m = tiny_model();
  auto c = config(2, 1, 1, 2);
  const double rows = 64.0 * 64 * 4;
  const AxisTraffic none = tensor_parallel_step_traffic(m, c, 0);
  c.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(tensor_parallel_step_traffic(m, c, 0).bytes(), none.bytes());
  c.recompute = Recompute::full;
  AxisTraffic t = tensor_parallel_step_traffic(m, c, 0);
  EXPECT_EQ(t.calls_of(Collective::all_reduce), 81 + 4 * 4 * 2);
  EXPECT_DOUBLE_EQ(t.bytes(), none.bytes() + 4 * 4 * 2 * rows);
  // recompute_layers 3 of the one 4-block chunk: 3 blocks again.
  c.recompute_layers = 3;
  t = tensor_parallel_step_traffic(m, c, 0);
  EXPECT_EQ(t.calls_of(Collective::all_reduce), 81 + 4 * 3 * 2);
  // Sequence parallelism: 27 + 8 all-gathers and 18 + 8 reduce-scatters per micro-batch.
  c.recompute_layers = 0;
  c.sequence_parallel = true;
  t = tensor_parallel_step_traffic(m, c, 0);
  EXPECT_EQ(t.calls_of(Collective::all_gather), 4 * (27 + 8));
  EXPECT_EQ(t.calls_of(Collective::reduce_scatter), 4 * (18 + 8));
  EXPECT_DOUBLE_EQ(t.bytes_of(Collective::reduce_scatter), 4 * (18 + 8) * rows);
  // The forward alone is unchanged: the extra calls are in the backward.
  const ChunkLayers whole{0, 4, true, true};
  auto plain = c;
  plain.recompute = Recompute::none;
  EXPECT_DOUBLE_EQ(tensor_parallel_chunk_traffic(m, c, whole).forward.bytes(),
                   tensor_parallel_chunk_traffic(m, plain, whole).forward.bytes());
  // Expert parallelism (as expert_all_to_alls_by_hand): 5 + 3 calls per MoE layer and
  // micro-batch, the counts and both row exchanges once more.
  const auto moe = tiny_moe_model();
  auto e = config(1, 1, 2, 1);
  e.ep = 2;
  e.recompute = Recompute::full;
  const AxisTraffic ep = expert_step_traffic(moe, e, 0);
  EXPECT_EQ(ep.calls(), 2 * 4 * 8);
  EXPECT_DOUBLE_EQ(ep.bytes(), 2 * 4 * (2 * 16 + 6 * 16384.0));
  EXPECT_EQ(step_traffic(moe, e, 0).pp.calls(), 0);
}

TEST(step_traffic, recompute_traffic_equals_a_measured_run) {
  // inputs/tiny.yaml (2 blocks, MoE block 1, fp32), micro_batch 2, 3 steps on 2 ranks: the
  // per-step bytes summary.json logged (paraxis report's bytes.tp / bytes.ep, measured ==
  // predicted) per train.recompute. tp 2 with sequence parallelism; dp = ep = 2.
  using paraxis::model::Recompute;
  auto m = tiny_moe_model();
  m.vocab = 128;
  m.layers = 2;
  m.ffn = 128;
  auto tp = config(2, 1, 1, 2, 8);
  tp.sequence_parallel = true;
  auto ep = config(1, 1, 2, 2, 8);
  ep.ep = 2;
  const std::tuple<Recompute, double, double> measured[] = {{Recompute::none, 1646088, 262176},
                                                            {Recompute::selective, 1646088, 262176},
                                                            {Recompute::full, 2170376, 393280}};
  for (auto [mode, tp_bytes, ep_bytes] : measured) {
    tp.recompute = ep.recompute = mode;
    EXPECT_EQ(tensor_parallel_step_traffic(m, tp, 0).bytes(), tp_bytes)
        << paraxis::model::to_string(mode);
    EXPECT_EQ(expert_step_traffic(m, ep, 0).bytes(), ep_bytes) << paraxis::model::to_string(mode);
  }
}

TEST(step_traffic, from_prebuilt_units_equals_from_the_model) {
  auto m = tiny_model();
  for (int zero = 0; zero <= 3; ++zero)
    for (bool sp : {false, true}) {
      auto c = config(2, 2, 4);
      c.zero = zero;
      c.sequence_parallel = sp;
      SCOPED_TRACE(describe(c));
      for (int s = 0; s < c.pp; ++s) {
        const auto units = shard_units(m, c, s);
        for (int dp_rank = 0; dp_rank < c.dp; ++dp_rank) {
          const AxisTraffic a = tensor_parallel_step_extras(m, c, s, dp_rank);
          const AxisTraffic b = tensor_parallel_step_extras(c, units, dp_rank);
          ASSERT_EQ(a.ops.size(), b.ops.size());
          for (std::size_t i = 0; i < a.ops.size(); ++i) {
            EXPECT_EQ(a.ops[i].op, b.ops[i].op);
            EXPECT_EQ(a.ops[i].bytes, b.ops[i].bytes);
            EXPECT_EQ(a.ops[i].count, b.ops[i].count);
          }
        }
        const AxisTraffic a = data_parallel_step_traffic(m, c, s);
        const AxisTraffic b = data_parallel_step_traffic(c, units);
        ASSERT_EQ(a.ops.size(), b.ops.size());
        EXPECT_FALSE(a.ops.empty());
        for (std::size_t i = 0; i < a.ops.size(); ++i) {
          EXPECT_EQ(a.ops[i].op, b.ops[i].op);
          EXPECT_EQ(a.ops[i].bytes, b.ops[i].bytes);
          EXPECT_EQ(a.ops[i].count, b.ops[i].count);
          EXPECT_EQ(a.ops[i].group, b.ops[i].group);
        }
      }
    }
}
