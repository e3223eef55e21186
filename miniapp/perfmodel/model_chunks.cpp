// The min-max cut of the layers into pipeline chunks, and the chunks of a stage.
#include "perfmodel/model_chunks.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

#include "perfmodel/flops.hpp"

namespace paraxis::perfmodel {

namespace {

// Layer counts per chunk minimising the largest chunk cost; the embedding's cost counts in
// the first chunk and the head's in the last.
std::vector<int> balanced_counts(const model::ModelConfig& m, int chunks) {
  const int L = m.layers;
  const auto cost = piece_forward_flops_per_token(m);
  std::vector<double> prefix(static_cast<std::size_t>(L) + 1, 0.0);
  for (int l = 0; l < L; ++l) prefix[l + 1] = prefix[l] + cost[l + 1];
  auto range_cost = [&](int a, int b) {
    return prefix[b] - prefix[a] + (a == 0 ? cost[0] : 0.0) + (b == L ? cost[L + 1] : 0.0);
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][l]: the smallest achievable maximum for k chunks over layers [0, l).
  std::vector<std::vector<double>> best(chunks + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(chunks + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= chunks; ++k)
    for (int l = k; l <= L; ++l)
      for (int a = k - 1; a < l; ++a) {
        const double worst = std::max(best[k - 1][a], range_cost(a, l));
        // `<=`: on a tie the later cut wins, exactly paraxis's choice (the cuts must agree
        // for the traffic and memory of each stage to be the measured ones).
        if (worst <= best[k][l]) {
          best[k][l] = worst;
          cut[k][l] = a;
        }
      }
  std::vector<int> counts(chunks, 0);
  for (int k = chunks, l = L; k >= 1; --k) {
    counts[k - 1] = l - cut[k][l];
    l = cut[k][l];
  }
  return counts;
}

// The cut is O(chunks * layers^2) and every per-stage model asks for it; the planner asks
// thousands of times for a handful of distinct cuts, so the last ones are remembered.
std::vector<int> balanced_counts_cached(const model::ModelConfig& m, int chunks) {
  using Key = std::array<int, 9>;
  thread_local std::map<Key, std::vector<int>> cache;
  const Key key{m.layers,      m.hidden,    m.ffn,       m.seq_len, m.vocab,
                m.moe.experts, m.moe.top_k, m.moe.every, chunks};
  const auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() > 256) cache.clear();
  return cache[key] = balanced_counts(m, chunks);
}

}  // namespace

std::vector<ChunkLayers> split_layers(const model::ModelConfig& m, int chunks,
                                      const std::vector<int>& stage_layers) {
  if (chunks < 1 || chunks > m.layers) {
    std::ostringstream os;
    os << "pp * virtual_stages = " << chunks << " model chunks cannot hold layers = " << m.layers
       << " (each chunk needs a layer)";
    throw std::invalid_argument(os.str());
  }
  std::vector<int> counts = stage_layers;
  if (counts.empty()) {
    counts = balanced_counts_cached(m, chunks);
  } else {
    long long sum = 0;
    for (int n : counts) sum += n;
    if (static_cast<int>(counts.size()) != chunks || sum != m.layers ||
        *std::min_element(counts.begin(), counts.end()) < 1) {
      std::ostringstream os;
      os << "stage_layers needs " << chunks << " entries >= 1 summing to layers = " << m.layers;
      throw std::invalid_argument(os.str());
    }
  }
  std::vector<ChunkLayers> out;
  int first = 0;
  for (int k = 0; k < chunks; ++k) {
    out.push_back({first, first + counts[k], k == 0, k == chunks - 1});
    first += counts[k];
  }
  return out;
}

std::vector<int> stage_chunk_ids(const ParallelConfig& c, int stage) {
  if (stage < 0 || stage >= c.pp)
    throw std::invalid_argument("pipeline stage " + std::to_string(stage) +
                                " outside pp = " + std::to_string(c.pp));
  std::vector<int> ids;
  for (int k = stage; k < c.chunks(); k += c.pp) ids.push_back(k);
  return ids;
}

double chunk_forward_flops_per_token(const model::ModelConfig& m, const ChunkLayers& chunk) {
  const auto cost = piece_forward_flops_per_token(m);
  double f = chunk.embedding ? cost[0] : 0.0;
  for (int l = chunk.first_layer; l < chunk.end_layer; ++l) f += cost[l + 1];
  if (chunk.head) f += cost[m.layers + 1];
  return f;
}

}  // namespace paraxis::perfmodel
