// The chunks of a pipeline stage and the FLOPs of a chunk.
#include "perfmodel/model_chunks.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

#include "perfmodel/flops.hpp"

namespace paraxis::perfmodel {

std::vector<int> stage_chunk_ids(const Scenario& c, int stage) {
  if (stage < 0 || stage >= c.pp)
    throw std::invalid_argument("pipeline stage " + std::to_string(stage) +
                                " outside pp = " + std::to_string(c.pp));
  std::vector<int> ids;
  for (int k = stage; k < c.chunks(); k += c.pp) ids.push_back(k);
  return ids;
}

double chunk_forward_flops_per_token(const model::ModelConfig& m, const ChunkLayers& chunk) {
  const auto cost = model::piece_costs(m);
  double f = chunk.embedding ? cost[0] : 0.0;
  for (int l = chunk.first_layer; l < chunk.end_layer; ++l) f += cost[l + 1];
  if (chunk.head) f += cost[m.layers + 1];
  return f;
}

double chunk_weight_gradient_flops_per_token(const model::ModelConfig& m,
                                             const ChunkLayers& chunk) {
  const double H = m.hidden, F = m.ffn;
  double f = 0;
  for (int l = chunk.first_layer; l < chunk.end_layer; ++l) {
    f += 2.0 * 4 * H * H;
    f += m.is_moe_layer(l) ? 2.0 * H * m.moe.experts + m.moe.top_k * 2.0 * 2 * H * F
                           : 2.0 * 2 * H * F;
  }
  if (chunk.head) f += 2.0 * H * m.vocab;
  return f;
}

double chunk_recompute_flops_per_token(const model::ModelConfig& m, const Scenario& c,
                                       const ChunkLayers& chunk) {
  if (c.recompute == model::Recompute::selective)
    return chunk.layers() * 2.0 * m.seq_len * m.hidden;
  // Full (or none: 0): the model's own count over this one chunk.
  return model::recompute_forward_flops_per_token(m, c.train(), {chunk});
}

}  // namespace paraxis::perfmodel
