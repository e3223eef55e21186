// paraxis's model FLOP count (derived from the matmuls it runs) against Narayanan et al. 2021,
// section 5.1, without recomputation: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) per step.
#include <gtest/gtest.h>

#include <array>

#include "model/gpt_model.hpp"

using namespace paraxis::model;

TEST(flops, dense_count_matches_narayanan_without_recomputation) {
  for (auto [h, l, s, v] :
       {std::array<int, 4>{64, 4, 32, 256}, {512, 24, 2048, 50304}, {5120, 40, 2048, 50304}}) {
    ModelConfig c;
    c.hidden = h;
    c.heads = 8;
    c.layers = l;
    c.seq_len = s;
    c.vocab = v;
    c.ffn = 4 * h;
    const double H = h, L = l, S = s, V = v;
    const double per_token_step = 72.0 * L * H * H * (1 + S / (6 * H) + V / (12 * L * H));
    EXPECT_NEAR(3.0 * forward_flops_per_token(c), per_token_step, 1e-9 * per_token_step) << h;
  }
}

TEST(flops, moe_layers_count_router_and_top_k_experts) {
  ModelConfig dense;
  dense.hidden = 64;
  dense.ffn = 256;
  dense.layers = 2;
  ModelConfig moe = dense;
  moe.moe.experts = 8;
  moe.moe.top_k = 2;
  moe.moe.every = 2;  // layer 1 is MoE
  // The MoE layer replaces one MLP (4 h f) by a router (2 h E) and top_k MLPs.
  const double diff = forward_flops_per_token(moe) - forward_flops_per_token(dense);
  EXPECT_DOUBLE_EQ(diff, 2.0 * 64 * 8 + (2 - 1) * 4.0 * 64 * 256);
}
