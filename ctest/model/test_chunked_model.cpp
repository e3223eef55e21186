// A model cut into pipeline chunks on one rank (forward_backward hands each chunk's output to
// the next and the gradients back) computes exactly what the whole model computes: the same
// loss and bitwise the same gradients, for a dense and an MoE model. And the chunk API keeps
// activations per micro-batch: two micro-batches in flight give what they give one at a time.
#include <gtest/gtest.h>

#include <vector>

#include "model/gpt_model.hpp"
#include "model/synthetic_corpus.hpp"
#include "model/trainer.hpp"

using namespace paraxis::model;

namespace {

using Model = GptModel<double>;

ModelConfig config(bool moe) {
  ModelConfig c;
  c.vocab = 29;
  c.seq_len = 8;
  c.hidden = 16;
  c.heads = 2;
  c.layers = 4;
  c.ffn = 24;
  if (moe) {
    c.moe.experts = 4;
    c.moe.top_k = 2;
    c.moe.every = 2;
  }
  return c;
}

void data(const ModelConfig& c, int micro_batch, std::uint64_t first, Model::Tokens& tokens,
          Model::Tokens& targets) {
  const int N = micro_batch * c.seq_len;
  tokens = Model::Tokens("tokens", N);
  targets = Model::Tokens("targets", N);
  auto th = Kokkos::create_mirror_view(tokens);
  auto gh = Kokkos::create_mirror_view(targets);
  SyntheticCorpus corpus(c.vocab, 4, 11);
  sample_micro_batch(corpus, c.seq_len, first, micro_batch, th.data(), gh.data());
  Kokkos::deep_copy(tokens, th);
  Kokkos::deep_copy(targets, gh);
}

std::vector<double> grads(const Model& m) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m.params().grad);
  std::vector<double> out;
  for (const auto& s : m.params().specs())
    for (std::size_t i = 0; i < s.size(); ++i) out.push_back(h(s.offset + i));
  return out;
}

}  // namespace

TEST(chunked_model, three_chunks_on_one_rank_equal_the_whole_model_bitwise) {
  for (bool moe : {false, true}) {
    const ModelConfig c = config(moe);
    ShardLayout chunked;
    chunked.chunks = split_layers(c, 3, {1, 2, 1});
    Model whole(c, 2), cut(c, 2, chunked);
    whole.initialize(5);
    cut.initialize(5);
    Model::Tokens tok, tgt;
    data(c, 2, 0, tok, tgt);
    whole.params().zero_grads();
    cut.params().zero_grads();
    const auto a = whole.forward_backward(tok, tgt, 0.01, 0.1);
    const auto b = cut.forward_backward(tok, tgt, 0.01, 0.1);
    EXPECT_EQ(a.ce_sum, b.ce_sum) << (moe ? "moe" : "dense");
    EXPECT_EQ(a.aux_sum, b.aux_sum);
    EXPECT_EQ(grads(whole), grads(cut)) << (moe ? "moe" : "dense");
    EXPECT_EQ(cut.live_activation_sets(), 0);  // backward frees every chunk's activations
  }
}

TEST(chunked_model, micro_batches_in_flight_keep_their_own_activations) {
  const ModelConfig c = config(true);
  Model m(c, 1), ref(c, 1);
  m.initialize(3);
  ref.initialize(3);
  Model::Tokens t0, g0, t1, g1;
  data(c, 1, 0, t0, g0);
  data(c, 1, 1, t1, g1);
  // One at a time...
  ref.params().zero_grads();
  const double ce0 = ref.forward_backward(t0, g0, 0.1, 0.0).ce_sum;
  const double ce1 = ref.forward_backward(t1, g1, 0.1, 0.0).ce_sum;
  // ...and both forwards before either backward (gpipe's order on one chunk).
  m.params().zero_grads();
  EXPECT_EQ(m.forward_chunk(0, 0, t0, g0).ce_sum, ce0);
  EXPECT_EQ(m.forward_chunk(0, 1, t1, g1).ce_sum, ce1);
  EXPECT_EQ(m.live_activation_sets(), 2);
  m.backward_chunk(0, 0, {}, {}, 0.1, 0.0);
  m.backward_chunk(0, 1, {}, {}, 0.1, 0.0);
  EXPECT_EQ(m.live_activation_sets(), 0);
  EXPECT_EQ(m.peak_activation_sets(), 2);
  EXPECT_EQ(grads(m), grads(ref));  // the same accumulation order: bitwise
}
