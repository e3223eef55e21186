// A model cut into pipeline chunks on one rank (forward_backward hands each chunk's output to
// the next and the gradients back) computes exactly what the whole model computes: the same
// loss and bitwise the same gradients, for a dense and an MoE model. And the chunk API keeps
// activations per micro-batch: two micro-batches in flight give what they give one at a time.
#include <gtest/gtest.h>

#include <vector>

#include "model/gpt_model.hpp"
#include "model/synthetic_corpus.hpp"
#include "model/trainer.hpp"
#include "small_model.hpp"

using namespace paraxis::model;

namespace {

using Model = GptModel<double>;

}  // namespace

TEST(chunked_model, three_chunks_on_one_rank_equal_the_whole_model_bitwise) {
  for (bool moe : {false, true}) {
    const ModelConfig c = test_support::small_model(moe);
    ShardLayout chunked;
    chunked.chunks = split_layers(c, 3, {1, 2, 1});
    Model whole(c, 2), cut(c, 2, chunked);
    whole.initialize(5);
    cut.initialize(5);
    Model::Tokens tok, tgt;
    test_support::sample_data<double>(c, 2, 0, tok, tgt);
    whole.params().zero_grads();
    cut.params().zero_grads();
    const auto a = whole.forward_backward(tok, tgt, 0.01, 0.1);
    const auto b = cut.forward_backward(tok, tgt, 0.01, 0.1);
    EXPECT_EQ(a.ce_sum, b.ce_sum) << (moe ? "moe" : "dense");
    EXPECT_EQ(a.aux_sum, b.aux_sum);
    EXPECT_EQ(test_support::gradients(whole), test_support::gradients(cut))
        << (moe ? "moe" : "dense");
    EXPECT_EQ(cut.live_activation_sets(), 0);  // backward frees every chunk's activations
  }
}

TEST(chunked_model, micro_batches_in_flight_keep_their_own_activations) {
  const ModelConfig c = test_support::small_model(true);
  Model m(c, 1), ref(c, 1);
  m.initialize(3);
  ref.initialize(3);
  Model::Tokens t0, g0, t1, g1;
  test_support::sample_data<double>(c, 1, 0, t0, g0);
  test_support::sample_data<double>(c, 1, 1, t1, g1);
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
  EXPECT_EQ(test_support::gradients(m),
            test_support::gradients(ref));  // the same accumulation order: bitwise
}
