// Memory per rank: model-state bytes per parameter for each precision and ZeRO stage, the
// activation model against Korthikanti et al. 2022, per recomputation mode against the bytes the
// model's ledger measured (docs/model.md), and the activation sets in flight against the
// replayed schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "perfmodel/memory.hpp"
#include "perfmodel_test_util.hpp"
#include "schedule/pipeline_schedule.hpp"

using namespace paraxis::perfmodel;
using paraxis::model::Precision;
using paraxis::schedule::ScheduleKind;
using perfmodel_test::config;
using perfmodel_test::tiny_model;
using perfmodel_test::tiny_moe_model;

TEST(memory, bytes_per_parameter_at_stage_0) {
  // bf16: 2 (parameters) + 4 (fp32 gradients) + 12 (fp32 m, v, master) = 18, as Megatron-LM's
  // distributed optimizer; the ZeRO paper's 16 = 2 + 2 + 12 assumes fp16 gradients.
  const double P = 1e6;
  EXPECT_DOUBLE_EQ(model_state_bytes(0, P, 1, Precision::bf16).total() / P, 18.0);
  EXPECT_DOUBLE_EQ(model_state_bytes(0, P, 1, Precision::bf16).params / P, 2.0);
  EXPECT_DOUBLE_EQ(model_state_bytes(0, P, 1, Precision::bf16).grads / P, 4.0);
  EXPECT_DOUBLE_EQ(model_state_bytes(0, P, 1, Precision::bf16).optimizer / P, 12.0);
  // fp32: 4 + 4 + 8 (the parameters are the master copy); fp64 twice that.
  EXPECT_DOUBLE_EQ(model_state_bytes(0, P, 1, Precision::fp32).total() / P, 16.0);
  EXPECT_DOUBLE_EQ(model_state_bytes(0, P, 1, Precision::fp64).total() / P, 32.0);
}

TEST(memory, zero_stages_shard_what_they_should) {
  const double P = 8e6;
  const int N = 8;
  const auto s = [&](int zero) { return model_state_bytes(zero, P, N, Precision::bf16); };
  // Stage 1: optimizer / N; paraxis keeps the full gradient buffer and the shard it receives.
  EXPECT_DOUBLE_EQ(s(1).params, 2 * P);
  EXPECT_DOUBLE_EQ(s(1).grads, 4 * P + 4 * P / N);
  EXPECT_DOUBLE_EQ(s(1).optimizer, 12 * P / N);
  // Stage 2: 2 + 16/N bytes per parameter (the paper's 2 + 14/N with fp16 gradients).
  EXPECT_DOUBLE_EQ(s(2).total(), (2 + 16.0 / N) * P);
  // Stage 3: everything divided by N.
  EXPECT_DOUBLE_EQ(s(3).total(), s(0).total() / N);
  EXPECT_DOUBLE_EQ(s(3).params, s(0).params / N);
  EXPECT_DOUBLE_EQ(s(3).grads, s(0).grads / N);
  EXPECT_DOUBLE_EQ(s(3).optimizer, s(0).optimizer / N);
}

TEST(memory, exact_layout_stage3_divides_everything_by_dp) {
  const auto m = tiny_model();
  auto c = config(1, 1, 4, 1, 8);
  c.precision = Precision::bf16;
  c.zero = 0;
  const auto zero0 = memory_per_rank(m, c, 0);
  c.zero = 3;
  const auto zero3 = memory_per_rank(m, c, 0);
  // The tiny model's units are multiples of 4 (no padding): exactly 1/4.
  EXPECT_DOUBLE_EQ(zero3.params, zero0.params / 4);
  EXPECT_DOUBLE_EQ(zero3.grads, zero0.grads / 4);
  EXPECT_DOUBLE_EQ(zero3.optimizer, zero0.optimizer / 4);
  EXPECT_DOUBLE_EQ(zero0.params + zero0.grads + zero0.optimizer, 18.0 * 234880);
  // Stage 3 gathers the largest unit (a block: 49984 elements) and its gradients per step.
  EXPECT_DOUBLE_EQ(zero3.step_buffers, 49984.0 * (2 + 4) + 4.0 * 49984 / 4);
  EXPECT_EQ(zero0.step_buffers, 0.0);
  EXPECT_DOUBLE_EQ(zero3.activations, zero0.activations);
}

TEST(memory, korthikanti_table2_relations) {
  // Korthikanti et al. 2022, Table 2: tensor + sequence parallel is the no-parallelism figure
  // divided by t, attention term included; tensor parallel alone leaves 10 s b h undivided.
  const double s = 2048, b = 1, h = 12288, a = 96;
  for (double t : {2.0, 4.0, 8.0}) {
    const double none =
        korthikanti_layer_activation_bytes(KorthikantiCase::no_parallelism, s, b, h, a);
    const double tp =
        korthikanti_layer_activation_bytes(KorthikantiCase::tensor_parallel, s, b, h, a, t);
    const double tsp = korthikanti_layer_activation_bytes(KorthikantiCase::tensor_sequence_parallel,
                                                          s, b, h, a, t);
    EXPECT_NEAR(tsp, none / t, 1e-9 * none);
    EXPECT_NEAR(tp - tsp, s * b * h * 10 * (1 - 1 / t), 1e-9 * none);
  }
  // GPT-3 175B layer (s = 2048, h = 12288, a = 96): 34 + 5*96*2048/12288 = 114 bytes per s b h.
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(KorthikantiCase::no_parallelism, s, b, h, a),
                   s * b * h * 114);
}

TEST(memory, paraxis_block_activations_against_korthikanti) {
  // bf16, F = 4H, no dropout: paraxis keeps e*(4 s b h residual-stream tensors + s b h
  // attention output + 3 s b h q, k, v + a s^2 b probabilities + 8 s b h MLP) + 4 * 4 s b
  // LayerNorm statistics = s b h (32 + 2 a s / h) + 16 s b, below the paper's
  // s b h (34 + 5 a s / h): no dropout masks, and the attention keeps only the probabilities.
  auto m = tiny_model();
  m.ffn = 4 * m.hidden;
  auto c = config(1, 1, 1, 2);
  c.precision = Precision::bf16;
  const double s = m.seq_len, b = 2, h = m.hidden, a = m.heads;
  const double ours = block_activation_bytes(m, c, 0, 0);
  EXPECT_DOUBLE_EQ(ours, s * b * h * (32 + 2 * a * s / h) + 16 * s * b);
  EXPECT_LT(ours, korthikanti_layer_activation_bytes(KorthikantiCase::no_parallelism, s, b, h, a));
  // Tensor + sequence parallel: every term (statistics included) divided by t, as the paper.
  for (int t : {2, 4}) {
    auto sp = c;
    sp.tp = t;
    sp.sequence_parallel = true;
    EXPECT_DOUBLE_EQ(block_activation_bytes(m, sp, 0, 0), ours / t) << t;
    // Tensor parallel alone: the 4 residual-stream tensors and the statistics stay whole.
    auto tp = c;
    tp.tp = t;
    const double whole = 4 * s * b * h * 2 + 16 * s * b;
    EXPECT_DOUBLE_EQ(block_activation_bytes(m, tp, 0, 0), whole + (ours - whole) / t) << t;
  }
}

TEST(memory, moe_block_activations_by_hand) {
  // MoE block 1 of the tiny MoE model, fp32, N = 32, E = 4, K = 2, dropless R = 64, ep = 1:
  // the dense part without the MLP, + e*(N*E + N*K) + 4*N*K + 4*(3*N*K + 4*E + 1 + E*1)
  // + e*(2*R*H + 2*R*F).
  const auto m = tiny_moe_model();
  const auto c = config(1, 1, 1, 1);
  const double N = 32, H = 64, F = 256, E = 4, K = 2, R = 64, S = 32, a = 4;
  const double attention = 4 * N * H + N * H + 3 * N * H + 1 * a * S * S;
  const double expected = 4 * (attention + N * E + N * K + 2 * R * H + 2 * R * F) + 4 * 4 * N +
                          4 * N * K + 4 * (3 * N * K + 4 * E + 1 + E);
  EXPECT_DOUBLE_EQ(block_activation_bytes(m, c, 1, 1), expected);
  EXPECT_DOUBLE_EQ(block_activation_bytes(m, c, 0, 0), 4 * (attention + 2 * N * F) + 4 * 4 * N);
}

TEST(memory, chunk_sets_add_output_tokens_and_head) {
  const auto m = tiny_model();
  const auto c = config(1, 1, 1, 1);  // N = 32, fp32
  const ChunkLayers whole{0, 4, true, true};
  double blocks = 0;
  for (int l = 0; l < 4; ++l) blocks += block_activation_bytes(m, c, l, l);
  // + output N*H*e + tokens 4N + targets 4N + final LN out N*H*e + logits N*V*e + 3N*a.
  EXPECT_DOUBLE_EQ(
      chunk_activation_bytes(m, c, whole),
      blocks + 32 * 64 * 4 + 4 * 32 + 4 * 32 + 32 * 64 * 4 + 32 * 256 * 4 + 3 * 32 * 4);
}

TEST(memory, live_sets_match_the_replayed_schedules) {
  // gpipe keeps every micro-batch (m), 1f1b min(p - s, m), as replay_schedule's peak_live.
  for (auto kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b})
    for (int m : {2, 4, 8}) {
      auto c = config(1, 4, 1, 1, m);
      c.schedule = kind;
      const auto shape = c.pipeline_shape();
      const auto replay = paraxis::schedule::replay_schedule(
          paraxis::schedule::make_schedule(kind, shape), shape,
          [](int, const paraxis::schedule::Action&) { return 1.0; });
      for (int s = 0; s < 4; ++s) {
        const int formula = kind == ScheduleKind::gpipe ? m : std::min(4 - s, m);
        EXPECT_EQ(peak_live_sets(c, s), formula) << m << " stage " << s;
        EXPECT_EQ(replay.peak_live[s], formula) << m << " stage " << s;
        EXPECT_EQ(peak_live_sets_per_chunk(c, s), std::vector<int>{formula}) << m << " " << s;
      }
    }
  // Interleaved: per-chunk pools hold at least the stage's peak between them.
  auto c = config(1, 2, 1, 1, 8);
  c.schedule = ScheduleKind::interleaved;
  c.virtual_stages = 2;
  for (int s = 0; s < 2; ++s) {
    const auto per_chunk = peak_live_sets_per_chunk(c, s);
    ASSERT_EQ(per_chunk.size(), 2u);
    EXPECT_GE(per_chunk[0] + per_chunk[1], peak_live_sets(c, s));
    EXPECT_LE(peak_live_sets(c, s), 2 * 8);
  }
}

TEST(memory, gpipe_keeps_more_activations_than_1f1b) {
  const auto m = tiny_model();
  auto c = config(1, 2, 1, 1, 8);
  c.schedule = ScheduleKind::gpipe;
  const auto gpipe = memory_per_rank(m, c, 0);
  c.schedule = ScheduleKind::one_f_one_b;
  const auto one = memory_per_rank(m, c, 0);
  EXPECT_GT(gpipe.activations, one.activations);
  EXPECT_DOUBLE_EQ(gpipe.params, one.params);
  EXPECT_GE(pipeline_gradient_buffers(c, 0), 1);
  EXPECT_EQ(pipeline_gradient_buffers(config(1, 1, 1), 0), 0);
  int stage = -1;
  const auto largest = largest_rank_memory(m, c, {}, &stage);
  EXPECT_GE(largest.peak, memory_per_rank(m, c, 0).peak);
  EXPECT_GE(largest.peak, memory_per_rank(m, c, 1).peak);
  EXPECT_TRUE(stage == 0 || stage == 1);
}

TEST(memory, korthikanti_recomputation_against_the_paper) {
  // Korthikanti et al. 2022, section 5: selective recomputation keeps 34 s b h / t per layer
  // under tensor + sequence parallelism, "70%" less than without it for GPT-3 175B
  // (a = 96, h = 12288) and "65%" for MT-NLG 530B (a = 128, h = 20480), s = 2048; full
  // recomputation keeps the layer's input, 2 s b h.
  const double s = 2048, b = 1, t = 8;
  const auto K = KorthikantiCase::tensor_sequence_parallel;
  using paraxis::model::Recompute;
  for (auto [h, a, saved] : {std::tuple{12288.0, 96.0, 0.70}, std::tuple{20480.0, 128.0, 0.65}}) {
    const double none = korthikanti_layer_activation_bytes(K, s, b, h, a, t);
    const double sel = korthikanti_layer_activation_bytes(K, s, b, h, a, t, Recompute::selective);
    EXPECT_DOUBLE_EQ(sel, s * b * h * 34 / t);
    EXPECT_NEAR(1 - sel / none, saved, 0.005) << h;
    EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(KorthikantiCase::no_parallelism, s, b, h, a,
                                                        1, Recompute::full),
                     2 * s * b * h);
    EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(K, s, b, h, a, t, Recompute::full),
                     2 * s * b * h / t);
  }
  // paraxis, bf16, F = 4H, tensor + sequence parallel: selective s b h 32 / t + 16 s b / t
  // (the paper's 34 less its dropout masks), full exactly the paper's 2 s b h / t.
  auto m = tiny_model();
  m.ffn = 4 * m.hidden;
  auto c = config(2, 1, 1, 2);
  c.sequence_parallel = true;
  c.precision = Precision::bf16;
  const double ps = m.seq_len, pb = 2, ph = m.hidden, pa = m.heads;
  c.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(block_activation_bytes(m, c, 0, 0), (ps * pb * ph * 32 + 16 * ps * pb) / 2);
  c.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(block_activation_bytes(m, c, 0, 0),
                   korthikanti_layer_activation_bytes(K, ps, pb, ph, pa, 2, Recompute::full));
}

// inputs/small.yaml (fp32, b = 4, s = 128, h = 512, 8 heads, f = 2048, 4 blocks, V = 4096) on one
// rank: the activation peak paraxis's MemoryLedger measured per mode (docs/model.md,
// "Activation recomputation"; summary.json's memory.activations_peak_bytes).
TEST(memory, recompute_activation_peak_equals_the_measured_ledger) {
  paraxis::model::ModelConfig m;
  m.vocab = 4096;
  m.seq_len = 128;
  m.hidden = 512;
  m.heads = 8;
  m.layers = 4;
  m.ffn = 2048;
  auto c = config(1, 1, 1, 4, 8);
  using paraxis::model::Recompute;
  const std::pair<Recompute, double> measured[] = {
      {Recompute::none, 116434944}, {Recompute::selective, 110143488}, {Recompute::full, 62932992}};
  for (auto [mode, bytes] : measured) {
    c.recompute = mode;
    EXPECT_EQ(memory_per_rank(m, c, 0).activations, bytes) << paraxis::model::to_string(mode);
  }
  // The documented differences: (L - 1) probabilities, (L - 1) (stored block - its input).
  const double probs = 4.0 * 4 * 8 * 128 * 128;
  EXPECT_EQ(measured[0].second - measured[1].second, 3 * probs);
  c.recompute = Recompute::none;
  const double stored = block_activation_bytes(m, c, 0, 0);
  EXPECT_EQ(measured[0].second - measured[2].second, 3 * (stored - 4.0 * 512 * 512));
}

TEST(memory, recompute_layers_count_blocks_per_chunk) {
  // pp 2 x 2 virtual stages on 8 layers: chunks of 2 blocks; recompute_layers 1 takes block 0
  // of each chunk, so a chunk keeps one stored block and one input; 5 (> 2) takes all.
  using paraxis::model::Recompute;
  auto m = tiny_model();
  m.layers = 8;
  auto c = config(1, 2, 1, 1, 8);
  c.schedule = ScheduleKind::interleaved;
  c.virtual_stages = 2;
  const ChunkLayers chunk{2, 4, false, false};
  const double stored = block_activation_bytes(m, c, 2, 0);
  const double input = 32.0 * 64 * 4, out = input;
  c.recompute = Recompute::full;
  c.recompute_layers = 1;
  EXPECT_DOUBLE_EQ(block_activation_bytes(m, c, 3, 1), stored);
  EXPECT_DOUBLE_EQ(chunk_activation_bytes(m, c, chunk), out + input + stored);
  c.recompute_layers = 5;
  EXPECT_DOUBLE_EQ(chunk_activation_bytes(m, c, chunk), out + 2 * input);
  // The working set is counted once per rank, whatever the number of recomputed blocks.
  auto none = c;
  none.recompute = Recompute::none;
  none.recompute_layers = 0;
  EXPECT_DOUBLE_EQ(activation_scratch_bytes(m, c, 0) - activation_scratch_bytes(m, none, 0),
                   stored - input);
}

TEST(memory, full_recompute_keeps_one_working_set_per_kind_of_block) {
  // The MoE model recomputed in full: one dense and one MoE working set (a block's stored
  // bytes less its input); selective: one probabilities buffer.
  using paraxis::model::Recompute;
  const auto m = tiny_moe_model();
  auto c = config(1, 1, 1, 1);
  const double none = activation_scratch_bytes(m, c, 0);
  const double dense = block_activation_bytes(m, c, 0, 0), moe = block_activation_bytes(m, c, 1, 1);
  const double input = 32.0 * 64 * 4;
  c.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(activation_scratch_bytes(m, c, 0) - none, dense - input + moe - input);
  c.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(activation_scratch_bytes(m, c, 0) - none, 4.0 * 4 * 32 * 32);
  EXPECT_DOUBLE_EQ(block_activation_bytes(m, c, 1, 1), moe - 4.0 * 4 * 32 * 32);
}

TEST(memory, recompute_per_stage_equals_the_measured_ledger_pp2) {
  // inputs/tiny.yaml (MoE block 1, fp32) with micro_batch 2, pp 2, 1f1b, two ranks: each rank's
  // activation peak as summary.json's memory_per_rank measured it per mode. Stage 1 keeps one
  // set, so its peak is the same in every mode (the probabilities or the working block move
  // from the set to the rank's scratch).
  paraxis::model::ModelConfig m = tiny_moe_model();
  m.vocab = 128;
  m.layers = 2;
  m.ffn = 128;
  auto c = config(1, 2, 1, 2, 8);
  using paraxis::model::Recompute;
  const std::tuple<Recompute, double, double> measured[] = {{Recompute::none, 824352, 1007748},
                                                            {Recompute::selective, 791584, 1007748},
                                                            {Recompute::full, 610336, 1007748}};
  // Stage 1 measured one more [N, H] buffer (16384 B) than predicted in every mode, none
  // included: pipeline_gradient_buffers' estimate (a lower bound), not recomputation's terms,
  // so there the test holds the differences between modes.
  const double none1 = memory_per_rank(m, c, 1).activations;
  for (auto [mode, stage0, stage1] : measured) {
    c.recompute = mode;
    EXPECT_EQ(memory_per_rank(m, c, 0).activations, stage0) << paraxis::model::to_string(mode);
    EXPECT_EQ(memory_per_rank(m, c, 1).activations - none1, stage1 - std::get<2>(measured[0]))
        << paraxis::model::to_string(mode);
  }
}

TEST(memory, recompute_activation_peak_equals_the_measured_ledger_tp2_sp) {
  // The same deck, micro_batch 2, tp 2 with sequence parallelism on 2 ranks: summary.json's
  // activation peak per mode (paraxis report: memory.activations measured == predicted).
  paraxis::model::ModelConfig m = tiny_moe_model();
  m.vocab = 128;
  m.layers = 2;
  m.ffn = 128;
  auto c = config(2, 1, 1, 2, 8);
  c.sequence_parallel = true;
  using paraxis::model::Recompute;
  const std::pair<Recompute, double> measured[] = {
      {Recompute::none, 721796}, {Recompute::selective, 705412}, {Recompute::full, 721796}};
  for (auto [mode, bytes] : measured) {
    c.recompute = mode;
    EXPECT_EQ(memory_per_rank(m, c, 0).activations, bytes) << paraxis::model::to_string(mode);
  }
}

namespace {

// Configurations for the prebuilt-parts entry points: every schedule kind, ZeRO stage,
// sequence parallelism, recomputation and expert parallelism.
std::vector<std::pair<paraxis::model::ModelConfig, Scenario>> prebuilt_cases() {
  using paraxis::model::Recompute;
  std::vector<std::pair<paraxis::model::ModelConfig, Scenario>> out;
  auto c = config(2, 2, 2);
  out.push_back({tiny_model(), c});
  c = config(1, 4, 1);
  c.schedule = ScheduleKind::gpipe;
  out.push_back({tiny_model(), c});
  c = config(2, 2, 2);
  c.schedule = ScheduleKind::interleaved;
  c.virtual_stages = 2;
  c.zero = 1;
  c.sequence_parallel = true;
  c.recompute = Recompute::selective;
  out.push_back({tiny_model(), c});
  c = config(1, 2, 4, 2, 16);
  c.zero = 3;
  c.recompute = Recompute::full;
  c.overlap = true;
  out.push_back({tiny_model(), c});
  c = config(1, 2, 4);
  c.ep = 2;
  c.zero = 2;
  c.precision = Precision::bf16;
  out.push_back({tiny_moe_model(), c});
  return out;
}

}  // namespace

TEST(memory, prebuilt_parts_give_the_same_figures) {
  for (const auto& [m, c] : prebuilt_cases()) {
    SCOPED_TRACE(describe(c));
    const auto sched = paraxis::schedule::make_schedule(c.schedule, c.pipeline_shape());
    const ScheduleWalk walk = walk_schedule(c, sched);
    ASSERT_EQ(static_cast<int>(walk.live.size()), c.pp);
    for (int s = 0; s < c.pp; ++s) {
      EXPECT_EQ(walk.live[s], peak_live_sets_per_chunk(c, s));
      EXPECT_EQ(walk.gradient_buffers[s], pipeline_gradient_buffers(c, s));
    }
    const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
    std::vector<std::vector<ParamUnit>> units;
    for (int s = 0; s < c.pp; ++s) units.push_back(shard_units(m, c, s));
    int at_old = -1, at_new = -2;
    const MemoryEstimate a = largest_rank_memory(m, c, {}, &at_old);
    const MemoryEstimate b =
        largest_rank_memory(m, c, PrebuiltStages{&walk, &chunks, &units}, {}, &at_new);
    EXPECT_EQ(at_old, at_new);
    // Bitwise: the same sums in the same order.
    EXPECT_EQ(a.params, b.params);
    EXPECT_EQ(a.grads, b.grads);
    EXPECT_EQ(a.optimizer, b.optimizer);
    EXPECT_EQ(a.step_buffers, b.step_buffers);
    EXPECT_EQ(a.activations, b.activations);
    EXPECT_EQ(a.peak, b.peak);
    EXPECT_EQ(b.peak, memory_per_rank(m, c, at_new).peak);
  }
}

TEST(memory, prebuilt_parts_missing_or_of_another_shape_are_refused) {
  const auto m = tiny_model();
  const auto c = config(1, 2, 4);
  const auto walk =
      walk_schedule(c, paraxis::schedule::make_schedule(c.schedule, c.pipeline_shape()));
  const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
  std::vector<std::vector<ParamUnit>> units{shard_units(m, c, 0), shard_units(m, c, 1)};
  EXPECT_THROW(largest_rank_memory(m, c, PrebuiltStages{&walk, &chunks, nullptr}),
               std::invalid_argument);
  units.pop_back();
  EXPECT_THROW(largest_rank_memory(m, c, PrebuiltStages{&walk, &chunks, &units}),
               std::invalid_argument);
  // A walk of a schedule with another stage count.
  const auto other = config(1, 4, 2);
  EXPECT_THROW(
      walk_schedule(c, paraxis::schedule::make_schedule(other.schedule, other.pipeline_shape())),
      std::invalid_argument);
}

TEST(memory, prebuilt_walk_is_read_for_each_stage) {
  // A stage whose walk says it holds far more (activation sets, then gradient buffers) becomes
  // the largest, by exactly what those sets and buffers weigh.
  const auto m = tiny_model();
  auto c = config(1, 4, 1);
  const auto sched = paraxis::schedule::make_schedule(c.schedule, c.pipeline_shape());
  const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
  std::vector<std::vector<ParamUnit>> units;
  for (int s = 0; s < c.pp; ++s) units.push_back(shard_units(m, c, s));
  const double set = chunk_activation_bytes(m, c, chunks[1]);
  const double buffer = static_cast<double>(c.micro_batch) * m.seq_len * m.hidden *
                        element_bytes(c.precision).activation;
  for (int s = 0; s < c.pp; ++s) {
    const double base = memory_per_rank(m, c, s).peak;
    ScheduleWalk walk = walk_schedule(c, sched);
    walk.live[s][0] += 1000;
    int at = -1;
    const MemoryEstimate e =
        largest_rank_memory(m, c, PrebuiltStages{&walk, &chunks, &units}, {}, &at);
    EXPECT_EQ(at, s);
    EXPECT_NEAR(e.peak, base + 1000 * chunk_activation_bytes(m, c, chunks[s]), 1e-6 * e.peak);
    walk = walk_schedule(c, sched);
    walk.gradient_buffers[s] += 1000;
    const MemoryEstimate g =
        largest_rank_memory(m, c, PrebuiltStages{&walk, &chunks, &units}, {}, &at);
    EXPECT_EQ(at, s);
    EXPECT_NEAR(g.peak, base + 1000 * buffer, 1e-6 * g.peak);
  }
  EXPECT_GT(set, 0);
}
