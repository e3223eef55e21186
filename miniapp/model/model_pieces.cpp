// The model's pieces: forward FLOPs per token, and the min-max cut into pipeline chunks.
#include "model/model_pieces.hpp"

#include <algorithm>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace paraxis::model {

std::vector<double> piece_costs(const ModelConfig& c) {
  const double H = c.hidden, F = c.ffn, S = c.seq_len, V = c.vocab;
  std::vector<double> cost;
  cost.push_back(0.0);  // the embedding: a lookup
  for (int l = 0; l < c.layers; ++l) {
    double f = 2.0 * 4 * H * H + 2.0 * 2 * S * H;
    f += c.is_moe_layer(l) ? 2.0 * H * c.moe.experts + c.moe.top_k * 2.0 * 2 * H * F
                           : 2.0 * 2 * H * F;
    cost.push_back(f);
  }
  cost.push_back(2.0 * H * V);
  return cost;
}

namespace {

// The layers per chunk that minimise the most expensive chunk (piece_costs: the embedding goes
// with the first chunk, the head with the last).
std::vector<int> balanced_counts(const ModelConfig& c, int chunks) {
  const int L = c.layers;
  std::vector<int> counts;
  // Minimise the most expensive chunk: best[k][l] = the smallest possible maximum over k
  // chunks holding layers [0, l), the embedding in the first and the head in the last.
  const auto cost = piece_costs(c);
  std::vector<double> prefix(L + 1, 0.0);
  for (int l = 0; l < L; ++l) prefix[l + 1] = prefix[l] + cost[l + 1];
  auto chunk_cost = [&](int a, int b) {
    double x = prefix[b] - prefix[a];
    if (a == 0) x += cost[0];
    if (b == L) x += cost[L + 1];
    return x;
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(chunks + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(chunks + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= chunks; ++k)
    for (int l = k; l <= L; ++l)
      for (int a = k - 1; a < l; ++a) {
        const double v = std::max(best[k - 1][a], chunk_cost(a, l));
        // Ties go to the later cut (earlier chunks no larger), a fixed, reproducible choice.
        if (v <= best[k][l]) {
          best[k][l] = v;
          cut[k][l] = a;
        }
      }
  counts.assign(chunks, 0);
  for (int k = chunks, l = L; k >= 1; --k) {
    counts[k - 1] = l - cut[k][l];
    l = cut[k][l];
  }
  return counts;
}

}  // namespace

std::vector<ModelChunk> split_layers(const ModelConfig& c, int chunks,
                                     const std::vector<int>& stage_layers) {
  const int L = c.layers;
  if (chunks < 1 || chunks > L) {
    std::ostringstream os;
    os << "parallel.pp * parallel.virtual_stages = " << chunks
       << " model chunks cannot hold model.layers = " << L << " (each chunk needs a layer)";
    throw std::invalid_argument(os.str());
  }
  std::vector<int> counts;
  if (!stage_layers.empty()) {
    long long sum = 0;
    for (int n : stage_layers) sum += n;
    const bool ok = static_cast<int>(stage_layers.size()) == chunks && sum == L &&
                    *std::min_element(stage_layers.begin(), stage_layers.end()) >= 1;
    if (!ok) {
      std::ostringstream os;
      os << "parallel.stage_layers needs " << chunks
         << " entries >= 1 summing to model.layers = " << L;
      throw std::invalid_argument(os.str());
    }
    counts = stage_layers;
  } else {
    counts = balanced_counts(c, chunks);
  }
  std::vector<ModelChunk> out;
  int first = 0;
  for (int k = 0; k < chunks; ++k) {
    out.push_back({first, first + counts[k], k == 0, k == chunks - 1});
    first += counts[k];
  }
  return out;
}

double forward_flops_per_token(const ModelConfig& c) {
  double total = 0;
  for (double f : piece_costs(c)) total += f;
  return total;
}

}  // namespace paraxis::model
