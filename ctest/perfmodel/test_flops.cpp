// Model FLOPs against Narayanan et al. 2021's closed form, the MoE accounting, and MFU.
#include <gtest/gtest.h>

#include <stdexcept>

#include "perfmodel/flops.hpp"
#include "perfmodel/model_chunks.hpp"
#include "perfmodel_test_util.hpp"

using namespace paraxis::perfmodel;
using perfmodel_test::tiny_model;
using perfmodel_test::tiny_moe_model;

TEST(flops, dense_step_equals_narayanan_without_recomputation) {
  // Narayanan et al. 2021, section 5.1, without recomputation (forward once, backward twice):
  // 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) for F = 4H, exactly paraxis's count.
  for (int h : {64, 128, 1024}) {
    auto m = tiny_model();
    m.hidden = h;
    m.ffn = 4 * h;
    m.heads = 8;
    m.seq_len = 512;
    m.vocab = 50257;
    m.layers = 12;
    const double B = 16;
    const double ours = step_flops(m, B);
    const double paper = narayanan_step_flops(B, m.seq_len, m.layers, h, m.vocab);
    EXPECT_NEAR(ours, paper, 1e-12 * paper) << h;
  }
  // The recomputation figure is 4/3 of it on the transformer part (96 vs 72).
  EXPECT_NEAR(narayanan_step_flops_recompute(1, 1024, 1, 4096, 0) /
                  narayanan_step_flops(1, 1024, 1, 4096, 0),
              4.0 / 3, 1e-12);
}

TEST(flops, tiny_model_by_hand) {
  // Per token: block 2*4*64^2 + 2*2*32*64 + 2*2*64*256 = 32768 + 8192 + 65536 = 106496;
  // 4 blocks + head 2*64*256 = 32768: 458752. A step of 8 sequences: 3 * 458752 * 256 tokens.
  EXPECT_DOUBLE_EQ(forward_flops_per_token(tiny_model()), 458752.0);
  EXPECT_DOUBLE_EQ(step_flops(tiny_model(), 8), 3 * 458752.0 * 256);
  const auto pieces = paraxis::model::piece_costs(tiny_model());
  ASSERT_EQ(pieces.size(), 6u);
  EXPECT_EQ(pieces.front(), 0.0);
  EXPECT_EQ(pieces.back(), 32768.0);
}

TEST(flops, moe_layers_cost_the_router_and_k_experts) {
  // Each MoE block adds the router 2*H*E and runs K experts instead of one MLP.
  const auto dense = tiny_model();
  const auto moe = tiny_moe_model();  // 2 MoE blocks, E = 4, K = 2
  const double H = 64, F = 256;
  EXPECT_DOUBLE_EQ(forward_flops_per_token(moe) - forward_flops_per_token(dense),
                   2 * (2 * H * 4 + (2 - 1) * 4 * H * F));
}

TEST(flops, chunk_costs_sum_to_the_model) {
  const auto m = tiny_moe_model();
  const auto chunks = split_layers(m, 3);
  double sum = 0;
  for (const auto& ch : chunks) sum += chunk_forward_flops_per_token(m, ch);
  EXPECT_DOUBLE_EQ(sum, forward_flops_per_token(m));
}

TEST(flops, mfu_against_the_dense_peak) {
  // 400 TFLOP/s of model FLOPs on 8 H100s at the dense bf16 peak of 989 TFLOP/s each.
  EXPECT_DOUBLE_EQ(mfu(400e12 * 8, 989e12, 8), 400.0 / 989);
  EXPECT_THROW(mfu(1, 0, 8), std::invalid_argument);
  EXPECT_THROW(mfu(1, 1e12, 0), std::invalid_argument);
}

TEST(flops, split_layers_balances_and_refuses_the_impossible) {
  auto m = tiny_model();
  m.layers = 8;
  // The head (32768 per token, under a third of a block) shares the last chunk; with 4 chunks
  // of 2 layers the largest chunk is the last.
  const auto chunks = split_layers(m, 4);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_TRUE(chunks.front().embedding);
  EXPECT_TRUE(chunks.back().head);
  int layers = 0;
  for (const auto& ch : chunks) {
    EXPECT_GE(ch.layers(), 1);
    layers += ch.layers();
  }
  EXPECT_EQ(layers, 8);
  EXPECT_THROW(split_layers(m, 9), std::invalid_argument);
  EXPECT_THROW(split_layers(m, 2, {3, 4}), std::invalid_argument);
  EXPECT_EQ(split_layers(m, 2, {3, 5})[1].first_layer, 3);
}

TEST(flops, hardware_flops_with_full_recomputation_equal_narayanan) {
  // Narayanan et al. 2021's 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) counts the recomputed
  // forward: paraxis's hardware FLOPs with recompute full over every block, F = 4H; the model
  // FLOPs stay the 72 figure. Per chunk, the recomputed FLOPs add up to the model's count.
  auto m = tiny_model();
  m.hidden = 1024;
  m.ffn = 4096;
  m.heads = 8;
  m.seq_len = 512;
  m.vocab = 50257;
  m.layers = 12;
  paraxis::perfmodel::Scenario c;
  c.global_batch = 16;
  c.micro_batch = 1;
  c.recompute = paraxis::model::Recompute::full;
  const double paper = narayanan_step_flops_recompute(16, 512, 12, 1024, 50257);
  EXPECT_NEAR(hardware_step_flops(m, c), paper, 1e-12 * paper);
  for (auto mode : {paraxis::model::Recompute::none, paraxis::model::Recompute::selective,
                    paraxis::model::Recompute::full})
    for (int layers : {0, 2}) {
      if (layers && mode != paraxis::model::Recompute::full) continue;
      c.recompute = mode;
      c.recompute_layers = layers;
      c.pp = 2;
      c.virtual_stages = 2;
      c.schedule = paraxis::schedule::ScheduleKind::interleaved;
      const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
      double sum = 0;
      for (const auto& ch : chunks) sum += chunk_recompute_flops_per_token(m, c, ch);
      EXPECT_NEAR(sum, paraxis::model::recompute_forward_flops_per_token(m, c.train(), chunks),
                  1e-9 * sum + 1e-9);
      EXPECT_NEAR(hardware_step_flops(m, c) - step_flops(m, 16), sum * 16 * 512, 1e-6 * paper);
    }
  c.recompute = paraxis::model::Recompute::none;
  EXPECT_NEAR(hardware_step_flops(m, c), narayanan_step_flops(16, 512, 12, 1024, 50257),
              1e-12 * paper);
}
