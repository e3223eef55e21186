// Models shared by the performance-model tests: the CI-sized GPT of inputs/tiny.yaml and an
// MoE variant of it.
#pragma once

#include "model/model_config.hpp"
#include "perfmodel/parallel_config.hpp"

namespace perfmodel_test {

// vocab 256, seq_len 32, hidden 64, heads 4, layers 4, ffn 256 (every tensor a multiple of 16
// elements, so the flat layout has no alignment padding).
inline paraxis::model::ModelConfig tiny_model() {
  paraxis::model::ModelConfig m;
  m.vocab = 256;
  m.seq_len = 32;
  m.hidden = 64;
  m.heads = 4;
  m.layers = 4;
  m.ffn = 256;
  return m;
}

// The same with 4 experts, top-2, MoE on blocks 1 and 3.
inline paraxis::model::ModelConfig tiny_moe_model() {
  auto m = tiny_model();
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.every = 2;
  return m;
}

inline paraxis::perfmodel::Scenario config(int tp, int pp, int dp, int micro_batch = 1,
                                           int global_batch = 8) {
  paraxis::perfmodel::Scenario c;
  c.tp = tp;
  c.pp = pp;
  c.dp = dp;
  c.micro_batch = micro_batch;
  c.global_batch = global_batch;
  return c;
}

}  // namespace perfmodel_test
