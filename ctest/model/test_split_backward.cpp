// The split backward of zero-bubble schedules on one rank (docs/model.md, "Split backward"): B
// then W gives every gradient the bits of the whole backward, in fp64, fp32 and bf16, dense and
// MoE, one chunk or several, with recompute none or selective, with W deferred behind other
// micro-batches' forwards and B's (as ZB-H1 runs them); the pair's activations live until W;
// the state errors and recompute full are refused; the activation bytes of a set are those of
// the whole backward's, plus the LayerNorm gradients B keeps, less the scratch it no longer
// needs.
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
using paraxis::model::test_support::sample_data;

namespace {

ModelConfig config(bool moe) {
  ModelConfig c = test_support::small_model(moe);
  if (moe) c.moe.router_skew = 0.5;  // the router bias: its gradient comes in W as well
  return c;
}

constexpr int kMicro = 3;

// Three micro-batches through every chunk of the shard, handing chunk outputs and input
// gradients over in memory. Whole: F0 F1 F2 then the backwards in micro-batch order. Split: the
// forwards, then B0 B1 W0 B2 W1 W2 per chunk (W behind other B's, each chunk's W in micro-batch
// order, as ZB-H1 runs them), which keeps up to three sets alive per chunk until their W.
template <class T>
std::vector<double> run(const ModelConfig& c, const ShardLayout& lay, Recompute rc, bool split,
                        int* peak_sets = nullptr) {
  using Act = typename GptModel<T>::Act;
  GptModel<T> m(c, 2, lay);
  m.set_recompute(rc);
  m.set_split_backward(split);
  m.initialize(5);
  m.params().zero_grads();
  const int C = m.chunks();
  std::vector<typename GptModel<T>::Tokens> tok(kMicro), tgt(kMicro);
  for (int mb = 0; mb < kMicro; ++mb) sample_data<T>(c, 2, 2 * mb, tok[mb], tgt[mb]);
  for (int mb = 0; mb < kMicro; ++mb)
    for (int ch = 0; ch < C; ++ch) {
      if (ch > 0) Kokkos::deep_copy(m.chunk_input(ch, mb), m.chunk_output(ch - 1, mb));
      m.forward_chunk(ch, mb, tok[mb], tgt[mb]);
    }
  const int N = m.local_tokens();
  std::vector<Act> grad(C + 1);
  for (int ch = 1; ch < C; ++ch) grad[ch] = Act("grad", N, c.hidden);
  // Per chunk (last to first) the order of its actions: B is +mb + 1, W is -(mb + 1).
  const std::vector<int> order =
      split ? std::vector<int>{1, 2, -1, 3, -2, -3} : std::vector<int>{1, 2, 3};
  // A micro-batch's input gradient of chunk ch is made by chunk ch's B, consumed by chunk
  // ch - 1's B: run every chunk's actions for one micro-batch before the next (chunk hand-over
  // buffers are one per chunk).
  for (int a : order) {
    if (a < 0) {
      for (int ch = C - 1; ch >= 0; --ch) m.backward_weight_chunk(ch, -a - 1);
      continue;
    }
    for (int ch = C - 1; ch >= 0; --ch) {
      const Act out = ch + 1 < C ? grad[ch + 1] : Act();
      const Act in = ch > 0 ? grad[ch] : Act();
      if (split)
        m.backward_input_chunk(ch, a - 1, out, in, 0.01, 0.1);
      else
        m.backward_chunk(ch, a - 1, out, in, 0.01, 0.1);
    }
  }
  EXPECT_EQ(m.live_activation_sets(), 0);
  if (peak_sets) *peak_sets = m.peak_activation_sets();
  return test_support::gradients(m);
}

template <class T>
void bitwise(const char* precision) {
  for (bool moe : {false, true})
    for (Recompute rc : {Recompute::none, Recompute::selective}) {
      const ModelConfig c = config(moe);
      ShardLayout chunked;
      chunked.chunks = split_layers(c, 3, {1, 2, 1});
      for (const ShardLayout& lay : {ShardLayout::whole(c), chunked}) {
        const std::string what = std::string(precision) + (moe ? " moe" : " dense") + ", " +
                                 to_string(rc) + ", " + std::to_string(lay.chunks.size()) +
                                 " chunk(s)";
        const auto whole = run<T>(c, lay, rc, false);
        ASSERT_FALSE(whole.empty());
        int peak = 0;
        const auto split = run<T>(c, lay, rc, true, &peak);
        EXPECT_EQ(split, whole) << what;  // bitwise
        // Every micro-batch of every chunk was alive at once (the forwards ran first).
        EXPECT_EQ(peak, kMicro * static_cast<int>(lay.chunks.size())) << what;
      }
    }
}

}  // namespace

TEST(split_backward, b_then_w_gives_the_whole_backwards_gradients_fp64) {
  bitwise<double>("fp64");
}
TEST(split_backward, b_then_w_gives_the_whole_backwards_gradients_fp32) {
  bitwise<float>("fp32");
}
TEST(split_backward, b_then_w_gives_the_whole_backwards_gradients_bf16) {
  bitwise<paraxis::bf16>("bf16");
}

// The split moves work, not results: W must actually compute the weight gradients (B alone
// leaves every gradient zero) and B must compute the input gradient (W alone is refused).
TEST(split_backward, b_writes_no_parameter_gradient_and_w_writes_them) {
  const ModelConfig c = config(true);
  GptModel<double> m(c, 2);
  m.set_split_backward(true);
  m.initialize(5);
  m.params().zero_grads();
  typename GptModel<double>::Tokens tok, tgt;
  sample_data<double>(c, 2, 0, tok, tgt);
  m.forward_chunk(0, 0, tok, tgt);
  m.backward_input_chunk(0, 0, {}, {}, 0.01, 0.1);
  for (double g : test_support::gradients(m)) ASSERT_EQ(g, 0.0);
  EXPECT_EQ(m.live_activation_sets(), 1);  // alive until W
  m.backward_weight_chunk(0, 0);
  EXPECT_EQ(m.live_activation_sets(), 0);
  std::size_t nonzero = 0;
  for (double g : test_support::gradients(m)) nonzero += g != 0.0;
  EXPECT_GT(nonzero, test_support::gradients(m).size() / 2);
}

TEST(split_backward, misuse_is_refused) {
  const ModelConfig c = config(false);
  typename GptModel<double>::Tokens tok, tgt;
  sample_data<double>(c, 2, 0, tok, tgt);
  {
    GptModel<double> m(c, 2);
    m.initialize(5);
    m.forward_chunk(0, 0, tok, tgt);
    EXPECT_THROW(m.backward_input_chunk(0, 0, {}, {}, 0.01, 0.1), std::logic_error);  // not split
    EXPECT_THROW(m.set_split_backward(true), std::logic_error);  // a set exists
  }
  {
    GptModel<double> m(c, 2);
    m.set_split_backward(true);
    m.initialize(5);
    m.forward_chunk(0, 0, tok, tgt);
    EXPECT_THROW(m.backward_chunk(0, 0, {}, {}, 0.01, 0.1), std::logic_error);
    EXPECT_THROW(m.backward_weight_chunk(0, 0), std::logic_error);  // W before B
    m.backward_input_chunk(0, 0, {}, {}, 0.01, 0.1);
    EXPECT_THROW(m.backward_input_chunk(0, 0, {}, {}, 0.01, 0.1), std::logic_error);  // B twice
    m.backward_weight_chunk(0, 0);
    EXPECT_THROW(m.backward_weight_chunk(0, 0), std::logic_error);  // freed: no forward
  }
  {
    GptModel<double> m(c, 2);
    m.set_recompute(Recompute::full);
    EXPECT_THROW(m.set_split_backward(true), std::invalid_argument);
    m.set_recompute(Recompute::none);
    m.set_split_backward(true);
    EXPECT_THROW(m.set_recompute(Recompute::full), std::invalid_argument);
  }
}

// Activation bytes: a split model holds, per set, the whole backward's bytes plus the
// LayerNorm gradients B keeps (4 h per block, 2 h on the chunk with the head, of the gradient
// type), and drops the whole backward's three [N, h/tp] gradients of q, k and v.
TEST(split_backward, activation_bytes_are_the_whole_backwards_plus_the_layernorm_gradients) {
  const ModelConfig c = config(false);
  auto bytes_after = [&](bool split, int sets) {
    GptModel<double> m(c, 2);
    m.set_split_backward(split);
    m.initialize(5);
    typename GptModel<double>::Tokens tok, tgt;
    sample_data<double>(c, 2, 0, tok, tgt);
    for (int mb = 0; mb < sets; ++mb) m.forward_chunk(0, mb, tok, tgt);
    if (split)
      for (int mb = 0; mb < sets; ++mb) m.backward_input_chunk(0, mb, {}, {}, 0.01, 0.1);
    return m.ledger().current(MemCategory::activations);
  };
  const std::size_t N = 2 * c.seq_len, ln = (4 * c.layers + 2) * c.hidden * sizeof(double);
  const std::size_t qkv = 3 * N * c.hidden * sizeof(double);
  for (int sets : {1, 3})
    EXPECT_EQ(bytes_after(true, sets) + qkv, bytes_after(false, sets) + sets * ln) << sets;
}
