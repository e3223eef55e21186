// A learnable synthetic corpus: a fixed random Markov chain over the vocabulary, built from
// the seed. Each token has `branching` successors with log-normal weights, so a model that
// learns the bigram statistics approaches the chain's conditional entropy, which is reported
// as the corpus's entropy floor. Sample s (a sequence of seq_len + 1 tokens: inputs and
// shifted targets) depends only on (seed, s), so any data-parallel rank generates exactly its
// share of a global batch.
#pragma once

#include <cstdint>
#include <vector>

namespace paraxis::model {

class SyntheticCorpus {
 public:
  SyntheticCorpus(int vocab, int branching, std::uint64_t seed);

  int vocab() const { return vocab_; }
  int branching() const { return branching_; }

  // Writes seq_len + 1 tokens of sample `index` to out.
  void sample(std::uint64_t index, int seq_len, int* out) const;

  // Minimum achievable mean cross-entropy (nats) when predicting tokens 1..seq_len from
  // their prefixes: the chain's conditional entropy averaged over positions, with the
  // first token uniform. Exact (distribution propagation), not sampled.
  double entropy_floor(int seq_len) const;

 private:
  int vocab_;
  int branching_;
  std::uint64_t key_;
  std::vector<int> successor_;      // [vocab * branching]
  std::vector<double> cumulative_;  // [vocab * branching], last of each row is 1
};

}  // namespace paraxis::model
