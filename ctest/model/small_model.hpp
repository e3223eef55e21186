// What the one-rank model tests share: a small GPT (vocabulary 29, 8 tokens, hidden 16, 2 heads,
// ffn 24; MoE: 4 experts, top 2, every second block), micro-batches of its synthetic corpus,
// and a model's gradients in the order of its parameter specs.
#pragma once

#include <cstdint>
#include <vector>

#include "model/gpt_model.hpp"
#include "model/synthetic_corpus.hpp"
#include "model/trainer.hpp"

namespace paraxis::model::test_support {

inline ModelConfig small_model(bool moe, int layers = 4) {
  ModelConfig c;
  c.vocab = 29;
  c.seq_len = 8;
  c.hidden = 16;
  c.heads = 2;
  c.layers = layers;
  c.ffn = 24;
  if (moe) {
    c.moe.experts = 4;
    c.moe.top_k = 2;
    c.moe.every = 2;
  }
  return c;
}

// Samples first .. first + micro_batch - 1 of the corpus (branching 4, seed 11).
template <class T>
void sample_data(const ModelConfig& c, int micro_batch, std::uint64_t first,
                 typename GptModel<T>::Tokens& tokens, typename GptModel<T>::Tokens& targets) {
  const int N = micro_batch * c.seq_len;
  tokens = typename GptModel<T>::Tokens("tokens", N);
  targets = typename GptModel<T>::Tokens("targets", N);
  auto th = Kokkos::create_mirror_view(tokens);
  auto gh = Kokkos::create_mirror_view(targets);
  SyntheticCorpus corpus(c.vocab, 4, 11);
  sample_micro_batch(corpus, c.seq_len, first, micro_batch, th.data(), gh.data());
  Kokkos::deep_copy(tokens, th);
  Kokkos::deep_copy(targets, gh);
}

template <class T>
std::vector<double> gradients(const GptModel<T>& m) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m.params().grad);
  std::vector<double> out;
  for (const auto& s : m.params().specs())
    for (std::size_t i = 0; i < s.size(); ++i) out.push_back(static_cast<double>(h(s.offset + i)));
  return out;
}

}  // namespace paraxis::model::test_support
