// The work-dependent compute model (perfmodel/compute_efficiency.hpp): GEMM times by hand on
// and off the tile, the roofline's crossover, a small layer's memory-bound bytes counted by
// hand, recomputation's additions, and the GEMM-only limit against paraxis's FLOP count.
#include <gtest/gtest.h>

#include <stdexcept>

#include "perfmodel/compute_efficiency.hpp"
#include "perfmodel/model_chunks.hpp"
#include "perfmodel/planner.hpp"
#include "perfmodel/shard_params.hpp"

namespace {

using namespace paraxis::perfmodel;

// 100 TFLOP/s at half efficiency (50 TFLOP/s achieved), 1 TB/s fully used, 128 x 128 tiles.
ComputeEfficiency machine() {
  ComputeEfficiency e;
  e.peak_flops = 100e12;
  e.gemm_efficiency = 0.5;
  e.memory_bytes_per_s = 1e12;
  e.memory_efficiency = 1.0;
  e.tile_m = e.tile_n = 128;
  return e;
}

TEST(compute_efficiency, gemm_on_the_tile_is_flops_over_achieved_peak) {
  // 2 * 256 * 256 * 1024 = 134,217,728 FLOPs / 50e12 = 2.68435456 us; the bytes,
  // (256*1024 + 1024*256 + 256*256) * 2 = 1,179,648 B, take 1.18 us: compute-bound.
  EXPECT_NEAR(gemm_time(machine(), 256, 256, 1024, 2), 2.68435456e-6, 1e-15);
  // A batch of 3 costs three.
  EXPECT_NEAR(gemm_time(machine(), 256, 256, 1024, 2, 3), 3 * 2.68435456e-6, 1e-15);
}

TEST(compute_efficiency, gemm_off_the_tile_pays_whole_tiles) {
  // m = 257 runs 3 row tiles (384 rows): 2 * 384 * 256 * 1024 / 50e12 = 4.02653184 us, not the
  // 2.695 us of its own FLOPs; n = 129 costs what n = 256 does, 2 * 256 * 256 * 1024 / 50e12,
  // and n = 128 half that.
  EXPECT_NEAR(gemm_time(machine(), 257, 256, 1024, 2), 4.02653184e-6, 1e-15);
  EXPECT_NEAR(gemm_time(machine(), 256, 129, 1024, 2), 2.68435456e-6, 1e-15);
  EXPECT_NEAR(gemm_time(machine(), 256, 128, 1024, 2), 1.34217728e-6, 1e-15);
  // k is not padded: 2 * 256 * 256 * 1000 / 50e12.
  EXPECT_NEAR(gemm_time(machine(), 256, 256, 1000, 2), 2.62144e-6, 1e-15);
  // 256 x 128 tiles: m = 300 -> 512 rows, n = 100 -> 128 columns: 2*512*128*64 / 50e12.
  ComputeEfficiency wide = machine();
  wide.tile_m = 256;
  EXPECT_NEAR(gemm_time(wide, 300, 100, 64, 2), 1.6777216e-7, 1e-16);
}

TEST(compute_efficiency, roofline_crosses_over_from_memory_to_compute) {
  // m = n = 1024, e = 2: FLOPs time 4.194304e-8 k s, bytes time (4096 k + 2,097,152) / 1e12 s;
  // they cross at k = 2,097,152e-12 / (4.194304e-8 - 4.096e-9) = 55.4.
  const ComputeEfficiency e = machine();
  EXPECT_NEAR(gemm_time(e, 1024, 1024, 32, 2), (4096.0 * 32 + 2097152) / 1e12, 1e-15);
  EXPECT_NEAR(gemm_time(e, 1024, 1024, 55, 2), (4096.0 * 55 + 2097152) / 1e12, 1e-15);
  EXPECT_NEAR(gemm_time(e, 1024, 1024, 56, 2), 4.194304e-8 * 56, 1e-15);
  EXPECT_NEAR(gemm_time(e, 1024, 1024, 128, 2), 4.194304e-8 * 128, 1e-15);
  // A memory pass: bytes over the bandwidth actually reached.
  ComputeEfficiency half = e;
  half.memory_efficiency = 0.5;
  EXPECT_NEAR(memory_time(half, 1e6), 2e-6, 1e-18);
}

TEST(compute_efficiency, gemm_backward_is_its_two_gradient_gemms) {
  // C = A B with (m, n, k) = (256, 512, 128): dA (256, 128, 512) and dB (128, 512, 256),
  // both on whole tiles and compute-bound: 2 * 256 * 128 * 512 = 33,554,432 FLOPs each.
  EXPECT_NEAR(gemm_backward_time(machine(), 256, 512, 128, 2), 2 * 33554432.0 / 50e12, 1e-15);
}

LayerShape small_layer(bool sp) {
  LayerShape s;
  s.tp = 2;
  s.sp = sp;
  s.micro_batch = 1;
  s.seq = 4;
  s.hidden = 8;
  s.ffn = 32;
  s.heads = 4;
  s.element_bytes = 2;
  return s;
}

TEST(compute_efficiency, layer_memory_bytes_by_hand) {
  // N = 4 tokens, h = 8, f / tp = 16, heads / tp = 2, scores 2 * 16 = 32, e = 2.
  // Forward: LN1 4*8*2*2 = 128, bias+residual 3*64 = 192, LN2 128, bias+residual 192 (640 in
  // the h-wide passes), softmax 2*32*2 = 128, bias+GeLU 2*4*16*2 = 256: 1,024 B.
  const LayerBytes b = dense_layer_bytes(small_layer(false));
  EXPECT_DOUBLE_EQ(b.forward, 1024);
  // Backward: LN 3*64 x2, residual sums 3*64 x2, bias gradients 64 x2 (896), softmax 3*64 =
  // 192, GeLU 3*128 = 384: 1,472 B.
  EXPECT_DOUBLE_EQ(b.backward, 1472);
  EXPECT_DOUBLE_EQ(b.softmax, 128);
  // Sequence parallelism halves the h-wide passes only: 320 + 128 + 256, 448 + 192 + 384.
  const LayerBytes p = dense_layer_bytes(small_layer(true));
  EXPECT_DOUBLE_EQ(p.forward, 704);
  EXPECT_DOUBLE_EQ(p.backward, 1024);
}

TEST(compute_efficiency, attention_dropout_adds_its_pass_over_the_unfused_scores) {
  // 32 scores, e = 2: read P, write it dropped and a 1-byte mask, (2*2 + 1) * 32 = 160 B each
  // way and in selective recomputation's pass again; a fused kernel drops out on its tiles.
  LayerShape s = small_layer(false);
  s.attention_dropout = true;
  const LayerBytes b = dense_layer_bytes(s);
  EXPECT_DOUBLE_EQ(b.forward, 1024 + 160);
  EXPECT_DOUBLE_EQ(b.backward, 1472 + 160);
  EXPECT_DOUBLE_EQ(b.softmax, 128 + 160);
  s.fused_attention = true;
  const LayerBytes f = dense_layer_bytes(s);
  EXPECT_DOUBLE_EQ(f.forward, 1024 - 128);
  EXPECT_DOUBLE_EQ(f.softmax, 0);
}

// A GPT whose chunk has blocks only (no embedding, no head).
paraxis::model::ModelConfig gpt() {
  paraxis::model::ModelConfig m;
  m.vocab = 512;
  m.seq_len = 256;
  m.hidden = 512;
  m.heads = 4;
  m.layers = 4;
  m.ffn = 2048;
  return m;
}

Scenario scenario(paraxis::model::Recompute r) {
  Scenario c;
  c.tp = 2;
  c.micro_batch = 2;
  c.precision = paraxis::model::Precision::bf16;
  c.recompute = r;
  return c;
}

TEST(compute_efficiency, recomputation_adds_the_forward_or_the_scores_and_softmax) {
  const auto m = gpt();
  const ChunkLayers blocks{0, 4, false, false};
  const ComputeEfficiency e = machine();
  const auto none = chunk_times(e, m, scenario(paraxis::model::Recompute::none), blocks);
  EXPECT_EQ(none.recompute, 0);
  const auto full = chunk_times(e, m, scenario(paraxis::model::Recompute::full), blocks);
  EXPECT_DOUBLE_EQ(full.recompute, none.forward);
  EXPECT_DOUBLE_EQ(full.forward, none.forward);
  EXPECT_DOUBLE_EQ(full.backward, none.backward);
  // Full over the first block of the chunk only: a quarter.
  Scenario one = scenario(paraxis::model::Recompute::full);
  one.recompute_layers = 1;
  EXPECT_DOUBLE_EQ(chunk_times(e, m, one, blocks).recompute, none.forward / 4);
  // Selective, per block: q k^T for 2 * 2 heads of (256 x 256 x 128): 2*4*256*256*128 / 50e12
  // = 1.34217728 us (its bytes, 4 * (2 * 256*128 + 65536) * 2 = 1 MB, take 1.05 us); the
  // softmax pass 2 * 4 * 65536 * 2 B = 1,048,576 B at 1 TB/s = 1.048576 us.
  const auto sel = chunk_times(e, m, scenario(paraxis::model::Recompute::selective), blocks);
  EXPECT_NEAR(sel.recompute, 4 * (1.34217728e-6 + 1.048576e-6), 1e-15);
}

TEST(compute_efficiency, fused_attention_keeps_no_scores_and_skips_the_masked_half) {
  // FlashAttention-style (model.attention fused): no softmax bytes, half of q k^T and P v's
  // tiles (the causal upper triangle skipped), and q k^T once more in the backward.
  LayerShape s = small_layer(false);
  s.fused_attention = true;
  const LayerBytes b = dense_layer_bytes(s);
  EXPECT_DOUBLE_EQ(b.forward, 1024 - 128);  // layer_memory_bytes_by_hand less the softmax
  EXPECT_DOUBLE_EQ(b.backward, 1472 - 192);
  EXPECT_DOUBLE_EQ(b.softmax, 0);
  // Per block of gpt() at tp 2, micro-batch 2: q k^T is 2 * 2 heads of (256 x 256 x 128),
  // 1.34217728 us (compute-bound, above); P v (256 x 128 x 256) the same FLOPs. Fused: half of
  // each forward (-1.34217728 us of the two), the backward's four score GEMMs halved
  // (-2 x 1.34217728 us) plus q k^T's half again (+0.67108864 us); the softmax passes go:
  // forward 2 x 4 x 65536 x 2 B, backward 3 x ..., at 1 TB/s: 1.048576 and 1.572864 us.
  const auto m = gpt();
  auto f = m;
  f.attention = paraxis::model::Attention::fused;
  const ChunkLayers block{0, 1, false, false};
  ComputeEfficiency e = machine();
  const Scenario c = scenario(paraxis::model::Recompute::none);
  const auto un = chunk_times(e, m, c, block);
  const auto fu = chunk_times(e, f, c, block);
  const double q = 1.34217728e-6;
  EXPECT_NEAR(un.forward - fu.forward, q + 1.048576e-6, 1e-15);
  EXPECT_NEAR(un.backward - fu.backward, 2 * q - q / 2 + 1.572864e-6, 1e-15);
}

TEST(compute_efficiency, moe_block_pays_the_token_permutation_each_way) {
  // Megatron-Core's all-to-all dispatcher: N = 512 tokens of h = 512, top-2, bf16. Dispatch
  // gather 2 N k h e, combine N k h e + N h e; 2 local experts: sorted after the dispatch and
  // back, 2 N k h e each. N k h e = 1,048,576 B, N h e = 524,288 B.
  EXPECT_DOUBLE_EQ(moe_permutation_bytes(512, 512, 2, 1, 2), 3 * 1048576.0 + 524288);
  EXPECT_DOUBLE_EQ(moe_permutation_bytes(512, 512, 2, 2, 2), 7 * 1048576.0 + 524288);
  // In a chunk: an MoE block's forward and backward are its GEMMs (compute-bound here) plus the
  // dense block's passes plus the permutation, each way.
  auto m = gpt();
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.every = 1;
  Scenario c = scenario(paraxis::model::Recompute::none);
  c.ep = 2;
  const ChunkLayers block{1, 2, false, false};
  ComputeEfficiency gemms_only = machine();
  gemms_only.memory_bytes_per_s = 1e30;
  const auto with = chunk_times(machine(), m, c, block);
  const auto without = chunk_times(gemms_only, m, c, block);
  LayerShape s;
  s.tp = 2;
  s.micro_batch = 2;
  s.seq = 256;
  s.hidden = 512;
  s.ffn = 2048;
  s.heads = 4;
  s.element_bytes = 2;
  const double permutation = 7 * 1048576.0 + 524288;
  const LayerBytes dense = dense_layer_bytes(s);
  EXPECT_NEAR(with.forward - without.forward, (dense.forward + permutation) / 1e12, 1e-15);
  // The router's input gradient (N x h from N x E, k = E = 4) is memory-bound: its share.
  const double router = gemm_backward_time(machine(), 512, 4, 512, 2) -
                        gemm_backward_time(gemms_only, 512, 4, 512, 2);
  EXPECT_NEAR(with.backward - without.backward, (dense.backward + permutation) / 1e12 + router,
              1e-15);
}

TEST(compute_efficiency, gemm_only_limit_is_paraxis_flop_count) {
  // 1 x 1 tiles and a bandwidth no pass notices: every GEMM costs its FLOPs at peak x
  // efficiency, so a chunk's forward is chunk_forward_flops_per_token * tokens / tp / rate
  // and its backward twice that; the head too (paraxis counts its logits GEMM).
  const auto m = gpt();
  ComputeEfficiency e = machine();
  e.tile_m = e.tile_n = 1;
  e.memory_bytes_per_s = 1e30;
  const Scenario c = scenario(paraxis::model::Recompute::none);
  for (const ChunkLayers chunk :
       {ChunkLayers{0, 4, false, false}, ChunkLayers{2, 4, false, true}}) {
    const double flat =
        chunk_forward_flops_per_token(m, chunk) * c.micro_batch * m.seq_len / c.tp / 50e12;
    const auto t = chunk_times(e, m, c, chunk);
    EXPECT_NEAR(t.forward, flat, flat * 1e-9);
    EXPECT_NEAR(t.backward, 2 * flat, flat * 1e-9);
    // W, a split backward's weight gradients: one A^T dC GEMM per linear.
    const double w =
        chunk_weight_gradient_flops_per_token(m, chunk) * c.micro_batch * m.seq_len / c.tp / 50e12;
    EXPECT_NEAR(t.backward_weight, w, w * 1e-9);
  }
}

TEST(compute_efficiency, optimizer_sweeps_its_state_and_bad_values_are_named) {
  // bf16: read parameter 2, gradient 4, moments 8, master 4; write 2 + 8 + 4: 32 B each.
  EXPECT_DOUBLE_EQ(optimizer_bytes_per_parameter(paraxis::model::Precision::bf16), 32);
  // fp32: no master: read 4 + 4 + 8, write 4 + 8: 28 B.
  EXPECT_DOUBLE_EQ(optimizer_bytes_per_parameter(paraxis::model::Precision::fp32), 28);
  EXPECT_NEAR(optimizer_time(machine(), 1e9, 32), 0.032, 1e-15);
  EXPECT_NO_THROW(validate(machine()));
  ComputeEfficiency bad = machine();
  bad.gemm_efficiency = 1.5;
  try {
    validate(bad);
    FAIL() << "gemm_efficiency 1.5 accepted";
  } catch (const std::invalid_argument& x) {
    EXPECT_NE(std::string(x.what()).find("gemm_efficiency = 1.5"), std::string::npos) << x.what();
  }
}

TEST(compute_efficiency, planner_inputs_per_chunk_with_recompute_and_the_optimizer_shard) {
  const auto m = gpt();
  Scenario c = scenario(paraxis::model::Recompute::full);
  c.pp = 2;
  c.dp = 2;
  c.global_batch = 8;
  StepTimeInputs in;
  set_compute_times(machine(), m, c, in);
  const auto chunks = split_layers(m, 2);
  ASSERT_EQ(in.forward_s.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    const auto t = chunk_times(machine(), m, c, chunks[k]);
    EXPECT_DOUBLE_EQ(in.forward_s[k], t.forward);
    // Full: the blocks' forward again (not the embedding's or the head's).
    const ChunkLayers blocks{chunks[k].first_layer, chunks[k].end_layer, false, false};
    EXPECT_DOUBLE_EQ(in.backward_s[k], t.backward + chunk_times(machine(), m, c, blocks).forward);
  }
  // The optimizer: the larger stage's parameters, 32 B each (bf16 Adam) at 1 TB/s.
  const double p =
      std::max(owned_elements(shard_units(m, c, 0), 0), owned_elements(shard_units(m, c, 1), 0));
  EXPECT_NEAR(in.optimizer_s, p * 32 / 1e12, 1e-18);
  // ZeRO 1 updates the rank's shard only: about half with dp 2.
  c.zero = 1;
  StepTimeInputs z;
  set_compute_times(machine(), m, c, z);
  EXPECT_LT(z.optimizer_s, 0.51 * in.optimizer_s);
  EXPECT_GT(z.optimizer_s, 0.49 * in.optimizer_s);
  // zb-h1 (selective: full is refused) splits the backward: B's time and W's, summing to it.
  EXPECT_TRUE(in.backward_weight_s.empty());
  c.recompute = paraxis::model::Recompute::selective;
  c.schedule = paraxis::schedule::ScheduleKind::zb_h1;
  StepTimeInputs zb;
  set_compute_times(machine(), m, c, zb);
  ASSERT_EQ(zb.backward_weight_s.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    const auto t = chunk_times(machine(), m, c, chunks[k]);
    EXPECT_GT(t.backward_weight, 0);
    EXPECT_DOUBLE_EQ(zb.backward_weight_s[k], t.backward_weight);
    EXPECT_DOUBLE_EQ(zb.backward_s[k], t.backward + t.recompute - t.backward_weight);
  }
}

TEST(compute_efficiency, gradient_accumulation_pass_adds_each_stages_parameters_per_micro_batch) {
  const auto m = gpt();
  Scenario c = scenario(paraxis::model::Recompute::none);
  c.pp = 2;
  c.dp = 2;
  c.global_batch = 8;
  StepTimeInputs off;
  set_compute_times(machine(), m, c, off);
  ComputeEfficiency e = machine();
  e.gradient_accumulation_bytes = 10;
  StepTimeInputs on;
  set_compute_times(e, m, c, on);
  // One chunk per stage: its backward gains the stage's parameters x 10 B at 1 TB/s, whatever
  // the ZeRO stage; the forward does not change.
  for (int k = 0; k < 2; ++k) {
    const double pass = static_cast<double>(unpadded_elements(shard_units(m, c, k))) * 10 / 1e12;
    EXPECT_GT(pass, 0);
    EXPECT_DOUBLE_EQ(on.forward_s[k], off.forward_s[k]);
    EXPECT_NEAR(on.backward_s[k], off.backward_s[k] + pass, 1e-15);
  }
  // Interleaved (v 2): a stage's two chunks share its pass by their weight gradients; together
  // they gain it once.
  c.schedule = paraxis::schedule::ScheduleKind::interleaved;
  c.virtual_stages = 2;
  StepTimeInputs voff, von;
  set_compute_times(machine(), m, c, voff);
  set_compute_times(e, m, c, von);
  ASSERT_EQ(von.backward_s.size(), 4u);
  for (int s = 0; s < 2; ++s) {
    double gained = 0;
    for (int k : stage_chunk_ids(c, s)) gained += von.backward_s[k] - voff.backward_s[k];
    EXPECT_NEAR(gained, static_cast<double>(unpadded_elements(shard_units(m, c, s))) * 10 / 1e12,
                1e-15);
  }
  // zb-h1: W makes the gradients, so W gains the pass and B does not.
  c.schedule = paraxis::schedule::ScheduleKind::zb_h1;
  c.virtual_stages = 1;
  StepTimeInputs zoff, zon;
  set_compute_times(machine(), m, c, zoff);
  set_compute_times(e, m, c, zon);
  for (int k = 0; k < 2; ++k) {
    EXPECT_DOUBLE_EQ(zon.backward_s[k], zoff.backward_s[k]);
    EXPECT_GT(zon.backward_weight_s[k], zoff.backward_weight_s[k]);
  }
  e.gradient_accumulation_bytes = -1;
  EXPECT_THROW(validate(e), std::invalid_argument);
}

TEST(compute_efficiency, planner_uses_the_model_only_when_the_machine_gives_a_bandwidth) {
  Machine mc;
  mc.devices_per_node = 4;
  mc.nodes = 1;
  mc.peak_flops = 100e12;
  mc.memory_bytes = 80e9;
  mc.intra_node = {3e-6, 1 / 300e9, 0};
  mc.inter_node = {8e-6, 1 / 25e9, 0};
  PlanRequest r;
  r.model = gpt();
  r.global_batch = 8;
  Scenario c = scenario(paraxis::model::Recompute::selective);
  c.dp = 2;
  c.global_batch = 8;
  // Without a bandwidth: the flat model, FLOPs at peak x achievable_fraction, no optimizer.
  const auto flat = evaluate(r, mc, c);
  ASSERT_TRUE(flat.violations.empty());
  StepTimeInputs in;
  in.links = axis_links(c, mc);
  in.flops_per_s = mc.peak_flops * mc.achievable_fraction;
  EXPECT_DOUBLE_EQ(flat.entry.time.step_time, predict_step_time(r.model, c, in).step_time);
  EXPECT_EQ(flat.entry.time.optimizer, 0);
  // With one: every chunk's times from compute_efficiency at the machine's own peak (the
  // model's peak_flops is not read) and the optimizer's sweep.
  mc.compute = machine();
  mc.compute.peak_flops = 1;
  const auto work = evaluate(r, mc, c);
  StepTimeInputs w;
  w.links = axis_links(c, mc);
  set_compute_times(machine(), r.model, c, w);
  const auto expected = predict_step_time(r.model, c, w);
  EXPECT_DOUBLE_EQ(work.entry.time.step_time, expected.step_time);
  EXPECT_DOUBLE_EQ(work.entry.time.compute, expected.compute);
  EXPECT_GT(work.entry.time.optimizer, 0);
  EXPECT_NE(work.entry.time.step_time, flat.entry.time.step_time);
}

}  // namespace
