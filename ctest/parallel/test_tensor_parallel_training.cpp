// Tensor parallelism (with and without sequence parallelism) in the training step, on 2 or 4
// ranks: tp = the world size, and (4 ranks) tp = 2 with dp = 2 at every ZeRO stage, reproduce
// the single-rank run of inputs/tiny.yaml (a dense block and an MoE block): loss of every
// step and final parameters within 1e-9 (fp64) / 1e-4 (fp32); reruns bitwise identical; the
// tensor-parallel collectives per step are exactly Megatron-LM's (Shoeybi et al. 2019), and
// their sequence-parallel equivalents (Korthikanti et al. 2022) with the LayerNorm outputs
// re-gathered in backward; sequence parallelism lowers the activation memory.
#include <string>

#include "training_run.hpp"

using namespace ptest;

namespace {

std::vector<std::string> base(const std::string& precision, int tp, int dp, bool sp) {
  return {"train.steps=3",
          "train.precision=" + precision,
          "train.global_batch=8",
          "train.micro_batch=2",
          "parallel.tp=" + std::to_string(tp),
          "parallel.dp=" + std::to_string(dp),
          std::string("parallel.sequence_parallel=") + (sp ? "true" : "false")};
}

// Megatron's tensor-parallel collectives of one step on one rank, counted from the model:
// calls and bytes (nccl-tests S) per micro-batch, plus the per-step reductions.
struct Expected {
  long calls = 0;
  std::size_t bytes = 0;
};
Expected tp_traffic(const driver::RunConfig& c) {
  const auto& m = c.model;
  const std::size_t N = static_cast<std::size_t>(c.train.micro_batch) * m.seq_len;
  const std::size_t H = m.hidden, K = m.moe.top_k;
  const bool fp64 = c.train.precision == model::Precision::fp64;
  const std::size_t e = fp64 ? 8 : c.train.precision == model::Precision::bf16 ? 2 : 4;
  const std::size_t acc = fp64 ? 8 : 4, grad = acc;
  const std::size_t act = N * H * e;  // every activation collective moves one [N, H] tensor
  const long micro = c.train.global_batch / (c.parallel.dp * c.train.micro_batch);
  Expected per_mb;
  auto add = [&](long calls, std::size_t bytes) {
    per_mb.calls += calls;
    per_mb.bytes += static_cast<std::size_t>(calls) * bytes;
  };
  const bool sp = c.parallel.sequence_parallel;
  // Embedding: all-reduce (sp: reduce-scatter forward, all-gather of the gradient backward).
  add(sp ? 2 : 1, act);
  for (int l = 0; l < m.layers; ++l) {
    // Attention and MLP: all-reduce after each row-parallel linear, forward and backward
    // (sp: forward all-gather + reduce-scatter each; backward all-gather of the gradient,
    // all-gather re-collecting the kept LayerNorm shard, reduce-scatter).
    add(sp ? 10 : 4, act);
    if (m.is_moe_layer(l)) add(1, N * K * e);  // the gate gradient (partial expert outputs)
  }
  // Head: the loss's max and sum all-reduces; the input gradient (sp: gather forward, gather
  // again and reduce-scatter backward).
  add(1, N * acc);
  add(1, 2 * N * acc);
  add(sp ? 3 : 1, act);
  Expected step{per_mb.calls * micro, per_mb.bytes * static_cast<std::size_t>(micro)};
  step.calls += 1;  // the gradient norm
  step.bytes += 8;
  if (sp) {  // the LayerNorms' partial gradients, summed once per step (ZeRO 0: all of them)
    step.calls += 1;
    step.bytes += (4 * H * m.layers + 2 * H) * grad;
  }
  return step;
}

}  // namespace

TEST(tensor_parallel_training, tp_matches_single_rank_fp64_dense_and_moe_with_and_without_sp) {
  const int tp = world_size();
  for (bool moe : {false, true})
    for (bool sp : {false, true}) {
      auto o = base("fp64", tp, 1, sp);
      if (!moe) o.push_back("model.moe.experts=0");
      const auto c = tiny(o);
      const std::string what =
          "tp " + std::to_string(tp) + (moe ? " moe" : " dense") + (sp ? " sp" : "");
      expect_matches(run_parallel(c), run_reference(c), what);
    }
}

// model.attention: fused (docs/model.md): each rank's heads (tp, with sequence parallelism) or
// blocks (pp = 2, dp = the rest) through the fused kernel reproduce the fused single-rank run and
// the unfused one, within the same tolerance.
TEST(tensor_parallel_training, fused_attention_matches_single_rank_under_tp_and_pp) {
  const int n = world_size();
  for (bool pp : {false, true}) {
    auto o = base("fp64", pp ? 1 : n, pp ? n / 2 : 1, !pp);
    if (pp) o.push_back("parallel.pp=2");
    const auto unfused = run_reference(tiny(o));
    o.push_back("model.attention=fused");
    const auto c = tiny(o);
    const auto par = run_parallel(c);
    expect_matches(par, run_reference(c), pp ? "fused, pp" : "fused, tp with sp");
    expect_matches(par, unfused, pp ? "fused pp against unfused" : "fused tp against unfused");
  }
}

TEST(tensor_parallel_training, tp_matches_single_rank_fp32_with_sp) {
  const auto c = tiny(base("fp32", world_size(), 1, true));
  expect_matches(run_parallel(c), run_reference(c), "fp32 sp");
}

TEST(tensor_parallel_training, tp2_with_dp2_matches_at_every_zero_stage) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks (tp = 2, dp = 2)";
  for (bool sp : {false, true}) {
    const auto ref = run_reference(tiny(base("fp64", 2, 2, sp)));
    for (int zero = 0; zero <= 3; ++zero) {
      auto o = base("fp64", 2, 2, sp);
      o.push_back("parallel.zero=" + std::to_string(zero));
      expect_matches(run_parallel(tiny(o)), ref,
                     "tp 2 dp 2 zero " + std::to_string(zero) + (sp ? " sp" : ""));
    }
  }
}

TEST(tensor_parallel_training, reruns_are_bitwise_identical) {
  const int tp = world_size() >= 4 ? 2 : world_size();
  auto o = base("fp32", tp, world_size() / tp, true);
  o.push_back("parallel.zero=3");
  expect_bitwise_rerun(tiny(o), "sp zero 3");
}

TEST(tensor_parallel_training, collectives_per_step_are_megatrons) {
  const int tp = world_size();
  for (const char* precision : {"fp64", "bf16"})
    for (bool sp : {false, true}) {
      const auto c = tiny(base(precision, tp, 1, sp));
      const Expected want = tp_traffic(c);
      const auto run = run_parallel(c);
      for (const auto& step : run.comm) {
        EXPECT_EQ(step.at("tp").calls, want.calls) << precision << (sp ? " sp" : "");
        EXPECT_EQ(step.at("tp").bytes, want.bytes) << precision << (sp ? " sp" : "");
        EXPECT_EQ(step.at("dp").calls, 0);
        EXPECT_EQ(step.at("pp").calls, 0);
      }
    }
}

TEST(tensor_parallel_training, sequence_parallelism_splits_the_residual_stream_activations) {
  const int tp = world_size();
  auto with = [&](bool sp) {
    auto o = base("fp32", tp, 1, sp);
    o.push_back("train.steps=1");
    o.push_back("train.warmup_steps=0");
    return static_cast<long long>(run_parallel(tiny(o)).memory.activations_peak_bytes);
  };
  const long long plain = with(false), sp = with(true);
  // What sequence parallelism shards (one micro-batch in flight): per block its input, both
  // LayerNorm outputs and x_mid, the chunk's output and the final LayerNorm's output
  // (4 * layers + 2 [N, H] tensors) and three [N, H] gradient buffers, with their LayerNorm
  // statistics (4 per block + 2, of N accumulators); what it adds: three [N, H] buffers for
  // the gathered and partial tensors. Everything else (attention, MLP, logits) is the same.
  const long long N = 2 * 32, H = 64, L = 2, e = 4, acc = 4;
  const long long sharded = (4 * L + 2 + 3) * N * H * e + (4 * L + 2) * N * acc;
  EXPECT_EQ(plain - sp, sharded - sharded / tp - 3 * N * H * e) << "tp " << tp;
  EXPECT_LT(sp, plain);
}
