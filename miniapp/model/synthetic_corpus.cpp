#include "synthetic_corpus.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "init_rng.hpp"

namespace paraxis::model {

SyntheticCorpus::SyntheticCorpus(int vocab, int branching, std::uint64_t seed)
    : vocab_(vocab), branching_(std::min(branching, vocab)) {
  if (vocab < 2)
    throw std::invalid_argument("corpus: vocab must be >= 2, got " + std::to_string(vocab));
  if (branching < 1)
    throw std::invalid_argument("corpus: branching must be >= 1, got " + std::to_string(branching));
  const std::uint64_t succ_key = stream_key(seed, "corpus.successors");
  const std::uint64_t weight_key = stream_key(seed, "corpus.weights");
  key_ = stream_key(seed, "corpus.samples");
  const int b = branching_;
  successor_.resize(static_cast<std::size_t>(vocab) * b);
  cumulative_.resize(successor_.size());
  for (int i = 0; i < vocab; ++i) {
    int* succ = &successor_[static_cast<std::size_t>(i) * b];
    std::uint64_t draw = static_cast<std::uint64_t>(i) << 20;
    for (int j = 0; j < b; ++j) {
      int candidate;
      do {  // distinct successors: redraw on collision (b << vocab in practice)
        candidate = static_cast<int>(uniform01(succ_key, draw++) * vocab);
      } while (std::find(succ, succ + j, candidate) != succ + j);
      succ[j] = candidate;
    }
    double* cum = &cumulative_[static_cast<std::size_t>(i) * b];
    double total = 0;
    for (int j = 0; j < b; ++j) {
      total += std::exp(1.5 * normal01(weight_key, static_cast<std::uint64_t>(i) * b + j));
      cum[j] = total;
    }
    for (int j = 0; j < b; ++j) cum[j] /= total;
    cum[b - 1] = 1.0;
  }
}

void SyntheticCorpus::sample(std::uint64_t index, int seq_len, int* out) const {
  const std::uint64_t base = index * static_cast<std::uint64_t>(seq_len + 1);
  int t = std::min(static_cast<int>(uniform01(key_, base) * vocab_), vocab_ - 1);
  out[0] = t;
  for (int s = 1; s <= seq_len; ++s) {
    const double u = uniform01(key_, base + s);
    const double* cum = &cumulative_[static_cast<std::size_t>(t) * branching_];
    int j = 0;
    while (j < branching_ - 1 && u > cum[j]) ++j;
    t = successor_[static_cast<std::size_t>(t) * branching_ + j];
    out[s] = t;
  }
}

double SyntheticCorpus::entropy_floor(int seq_len) const {
  std::vector<double> row_entropy(vocab_, 0.0);
  for (int i = 0; i < vocab_; ++i) {
    double prev = 0;
    for (int j = 0; j < branching_; ++j) {
      const double p = cumulative_[static_cast<std::size_t>(i) * branching_ + j] - prev;
      prev += p;
      if (p > 0) row_entropy[i] -= p * std::log(p);
    }
  }
  std::vector<double> dist(vocab_, 1.0 / vocab_), next(vocab_);
  double total = 0;
  for (int s = 0; s < seq_len; ++s) {
    double h = 0;
    std::fill(next.begin(), next.end(), 0.0);
    for (int i = 0; i < vocab_; ++i) {
      h += dist[i] * row_entropy[i];
      double prev = 0;
      for (int j = 0; j < branching_; ++j) {
        const std::size_t at = static_cast<std::size_t>(i) * branching_ + j;
        next[successor_[at]] += dist[i] * (cumulative_[at] - prev);
        prev = cumulative_[at];
      }
    }
    total += h;
    dist.swap(next);
  }
  return total / seq_len;
}

}  // namespace paraxis::model
