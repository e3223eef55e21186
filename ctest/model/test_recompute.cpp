// Activation recomputation on one rank (docs/model.md, "Activation recomputation"): selective
// and full (every block, or the first blocks of each chunk) give bitwise the gradients, losses
// and routing of recompute none in fp64, fp32 and bf16, dense and MoE, with micro-batches in
// flight and with replayed routing; the activation bytes the ledger measures per block are the
// documented formula's, byte for byte, in each mode; the extra forward FLOPs are the
// documented ones; a wrong setting is refused with its key.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "model/gpt_model.hpp"
#include "model/model_pieces.hpp"
#include "model/synthetic_corpus.hpp"
#include "model/trainer.hpp"
#include "small_model.hpp"

using namespace paraxis::model;
using paraxis::model::test_support::gradients;
using paraxis::model::test_support::sample_data;

namespace {

struct Mode {
  Recompute mode;
  int layers;
  std::string name;
};
const std::vector<Mode>& modes() {
  static const std::vector<Mode> m{{Recompute::none, 0, "none"},
                                   {Recompute::selective, 0, "selective"},
                                   {Recompute::full, 0, "full"},
                                   {Recompute::full, 1, "full, 1 block per chunk"}};
  return m;
}

// What one training step's worth of work leaves: losses, MoE statistics and gradients of two
// micro-batches, both forwards before either backward (gpipe's order: two sets in flight share
// the working set of full recomputation), then a third micro-batch forward_backward.
struct Outcome {
  std::vector<double> ce, aux, grads;
  std::vector<std::vector<int>> tokens_per_expert, routing;
};

template <class T>
Outcome run(const ModelConfig& c, const ShardLayout& lay, const Mode& mode,
            const std::vector<int>* replay = nullptr) {
  GptModel<T> m(c, 2, lay);
  m.set_recompute(mode.mode, mode.layers);
  m.initialize(5);
  m.set_record_routing(true);
  typename GptModel<T>::Tokens t0, g0, t1, g1, t2, g2;
  sample_data<T>(c, 2, 0, t0, g0);
  sample_data<T>(c, 2, 2, t1, g1);
  sample_data<T>(c, 2, 4, t2, g2);
  m.params().zero_grads();
  Outcome o;
  auto keep = [&](const MicroBatchResult& r) {
    o.ce.push_back(r.ce_sum);
    o.aux.push_back(r.aux_sum);
    for (const auto& s : r.moe) {
      o.tokens_per_expert.push_back(s.tokens_per_expert);
      o.routing.push_back(s.routing);
    }
  };
  if (lay.chunks.size() == 1) {
    keep(m.forward_chunk(0, 0, t0, g0));
    keep(m.forward_chunk(0, 1, t1, g1));
    m.backward_chunk(0, 0, {}, {}, 0.01, 0.1);
    m.backward_chunk(0, 1, {}, {}, 0.01, 0.1);
  }
  if (replay) m.set_replay_routing(replay->data());
  keep(m.forward_backward(t2, g2, 0.01, 0.1));
  m.set_replay_routing(nullptr);
  EXPECT_EQ(m.live_activation_sets(), 0);
  o.grads = gradients(m);
  return o;
}

template <class T>
void expect_all_modes_bitwise(const ModelConfig& c, const ShardLayout& lay, const std::string& what,
                              const std::vector<int>* replay = nullptr) {
  const Outcome ref = run<T>(c, lay, modes()[0], replay);
  ASSERT_FALSE(ref.grads.empty());
  for (std::size_t k = 1; k < modes().size(); ++k) {
    const Outcome o = run<T>(c, lay, modes()[k], replay);
    const std::string w = what + ", " + modes()[k].name;
    EXPECT_EQ(o.ce, ref.ce) << w;
    EXPECT_EQ(o.aux, ref.aux) << w;
    EXPECT_EQ(o.tokens_per_expert, ref.tokens_per_expert) << w;
    EXPECT_EQ(o.routing, ref.routing) << w;  // recorded once per forward, never by a recompute
    EXPECT_EQ(o.grads, ref.grads) << w;      // bitwise
  }
}

template <class T>
void bitwise_in_every_mode(const char* precision) {
  for (bool moe : {false, true}) {
    const ModelConfig c = test_support::small_model(moe);
    const std::string what = std::string(precision) + (moe ? " moe" : " dense");
    expect_all_modes_bitwise<T>(c, ShardLayout::whole(c), what);
    ShardLayout chunked;  // three chunks on one rank: recompute_layers counts per chunk
    chunked.chunks = split_layers(c, 3, {1, 2, 1});
    expect_all_modes_bitwise<T>(c, chunked, what + ", 3 chunks");
  }
}

}  // namespace

TEST(recompute, gradients_are_bitwise_those_of_none_fp64) {
  bitwise_in_every_mode<double>("fp64");
}
TEST(recompute, gradients_are_bitwise_those_of_none_fp32) {
  bitwise_in_every_mode<float>("fp32");
}
TEST(recompute, gradients_are_bitwise_those_of_none_bf16) {
  bitwise_in_every_mode<paraxis::bf16>("bf16");
}

// A recomputed MoE block must replay the choices its forward replayed: the caller's buffer is
// followed by other choices (every token to experts 0 and 1), which a recomputed forward
// reading past its own choices would take.
TEST(recompute, a_recomputed_forward_replays_the_same_routing) {
  const ModelConfig c = test_support::small_model(true);
  const int N = 2 * c.seq_len, K = c.moe.top_k, moe_layers = c.moe_layer_count();
  std::vector<int> replay;
  for (int l = 0; l < moe_layers; ++l)
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k) replay.push_back((n + 3 * l + k) % c.moe.experts);
  for (int i = 0; i < N * K * moe_layers; ++i) replay.push_back(i % K);
  expect_all_modes_bitwise<double>(c, ShardLayout::whole(c), "replayed", &replay);
}

// ---- activation memory: the ledger against docs/model.md's per-block formula
namespace {

struct Sizes {
  std::size_t none, selective, full;  // bytes one block keeps per micro-batch in flight
  std::size_t probs;                  // one block's attention probabilities
};

// docs/model.md, tp = 1: e [4 s b h + 4 s b h + a s^2 b + 2 s b f] + 4 s b e_acc (LayerNorm
// statistics); selective drops the a s^2 b probabilities; full keeps the block input, e s b h.
template <class T>
Sizes documented(const ModelConfig& c, int b) {
  const std::size_t e = sizeof(T), ea = sizeof(paraxis::kernels::acc_t<T>);
  const std::size_t s = c.seq_len, h = c.hidden, a = c.heads, f = c.ffn, sb = s * b;
  Sizes z;
  z.probs = e * a * s * s * b;
  z.none = e * (4 * sb * h + 4 * sb * h + 2 * sb * f) + z.probs + 4 * sb * ea;
  z.selective = z.none - z.probs;
  z.full = e * sb * h;
  return z;
}

// Activation bytes the ledger holds after one micro-batch's forward (its set allocated).
template <class T>
std::size_t after_forward(const ModelConfig& c, int b, Recompute mode) {
  GptModel<T> m(c, b);
  m.set_recompute(mode);
  m.initialize(1);
  typename GptModel<T>::Tokens tok, tgt;
  sample_data<T>(c, b, 0, tok, tgt);
  m.forward_chunk(0, 0, tok, tgt);
  return m.ledger().current(MemCategory::activations);
}

template <class T>
void ledger_matches_formula(const char* precision) {
  const int b = 2;
  const ModelConfig c2 = test_support::small_model(false, 2),
                    c3 = test_support::small_model(false, 3);
  const Sizes z = documented<T>(c2, b);
  const std::size_t none2 = after_forward<T>(c2, b, Recompute::none),
                    none3 = after_forward<T>(c3, b, Recompute::none);
  const std::size_t sel2 = after_forward<T>(c2, b, Recompute::selective),
                    sel3 = after_forward<T>(c3, b, Recompute::selective);
  const std::size_t full2 = after_forward<T>(c2, b, Recompute::full),
                    full3 = after_forward<T>(c3, b, Recompute::full);
  // Per block: one more block adds exactly the formula's bytes.
  EXPECT_EQ(none3 - none2, z.none) << precision;
  EXPECT_EQ(sel3 - sel2, z.selective) << precision;
  EXPECT_EQ(full3 - full2, z.full) << precision;
  // Once per shard: selective's probabilities buffer; full's working block (what a block keeps
  // with none, less its input, which stays in the activation set).
  EXPECT_EQ(sel3, none3 - 3 * z.probs + z.probs) << precision;
  EXPECT_EQ(full3, none3 - 3 * z.none + 3 * z.full + (z.none - z.full)) << precision;
}

}  // namespace

TEST(recompute, ledger_bytes_per_block_are_the_documented_formula_fp64) {
  ledger_matches_formula<double>("fp64");
}
TEST(recompute, ledger_bytes_per_block_are_the_documented_formula_fp32) {
  ledger_matches_formula<float>("fp32");
}
TEST(recompute, ledger_bytes_per_block_are_the_documented_formula_bf16) {
  ledger_matches_formula<paraxis::bf16>("bf16");
}

// With recompute_layers, only the first blocks of each chunk drop their activations.
TEST(recompute, recompute_layers_counts_blocks_per_chunk) {
  const ModelConfig c = test_support::small_model(false, 4);
  ShardLayout chunked;
  chunked.chunks = split_layers(c, 2, {2, 2});
  const Sizes z = documented<double>(c, 1);
  auto bytes = [&](Recompute mode, int layers) {
    GptModel<double> m(c, 1, chunked);
    m.set_recompute(mode, layers);
    EXPECT_EQ(m.recomputed_in_full(0), mode == Recompute::full);
    EXPECT_EQ(m.recomputed_in_full(1), mode == Recompute::full && layers != 1);
    m.initialize(1);
    GptModel<double>::Tokens tok, tgt;
    sample_data<double>(c, 1, 0, tok, tgt);
    m.forward_chunk(0, 0, tok, tgt);
    Kokkos::deep_copy(m.chunk_input(1, 0), m.chunk_output(0, 0));
    m.forward_chunk(1, 0, tok, tgt);
    return m.ledger().current(MemCategory::activations);
  };
  const std::size_t none = bytes(Recompute::none, 0);
  // One block of each of the two chunks recomputed, plus the working block.
  EXPECT_EQ(bytes(Recompute::full, 1), none - 2 * z.none + 2 * z.full + (z.none - z.full));
  EXPECT_EQ(bytes(Recompute::full, 0), none - 4 * z.none + 4 * z.full + (z.none - z.full));
}

// ---- the FLOPs recomputation adds, and the settings refused
TEST(recompute, extra_forward_flops_are_the_recomputed_matmuls) {
  const ModelConfig c =
      test_support::small_model(false, 4);  // a block: 8 h^2 + 4 s h + 4 h f = 4096 FLOPs/token
  TrainConfig t;
  const auto one_chunk = split_layers(c, 1);
  const auto three = split_layers(c, 3, {1, 2, 1});
  EXPECT_EQ(recompute_forward_flops_per_token(c, t, one_chunk), 0.0);
  t.recompute = Recompute::selective;  // q k^T: 2 s h = 256 per block
  EXPECT_EQ(recompute_forward_flops_per_token(c, t, one_chunk), 4 * 256.0);
  t.recompute = Recompute::full;
  EXPECT_EQ(recompute_forward_flops_per_token(c, t, one_chunk), 4 * 4096.0);
  t.recompute_layers = 1;  // the first block of each of three chunks
  EXPECT_EQ(recompute_forward_flops_per_token(c, t, three), 3 * 4096.0);
  EXPECT_EQ(recompute_forward_flops_per_token(c, t, one_chunk), 4096.0);
}

TEST(recompute, names_round_trip_and_wrong_settings_are_refused) {
  ASSERT_EQ(recompute_names(), (std::vector<std::string>{"none", "selective", "full"}));
  EXPECT_EQ(TrainConfig().recompute, Recompute::none);
  const ModelConfig c = test_support::small_model(false, 2);
  GptModel<double> m(c, 1);
  EXPECT_THROW(m.set_recompute(Recompute::selective, 1), std::invalid_argument);
  EXPECT_THROW(m.set_recompute(Recompute::full, -1), std::invalid_argument);
  m.set_recompute(Recompute::full, 1);
  m.initialize(1);
  GptModel<double>::Tokens tok, tgt;
  sample_data<double>(c, 1, 0, tok, tgt);
  m.forward_chunk(0, 0, tok, tgt);
  try {
    m.set_recompute(Recompute::none);
    FAIL() << "changing the mode with activations allocated must be refused";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("before the first forward"), std::string::npos);
  }
}
