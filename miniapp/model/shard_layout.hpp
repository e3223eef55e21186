// Which part of the model one rank holds: its tensor-parallel slice (heads, ffn columns,
// vocabulary rows), its experts, and its model chunks (contiguous runs of blocks, the
// embedding on the first chunk, the final LayerNorm + head + loss on the last). The model
// builds exactly these parameters; the single-rank model is the layout `whole`.
// Chunks come from split_layers (model_pieces.hpp).
#pragma once

#include <string>
#include <vector>

#include "model/model_config.hpp"
#include "model/model_pieces.hpp"
#include "model/param_store.hpp"

namespace paraxis::model {

struct ShardLayout {
  int tp = 1, tp_rank = 0;
  bool sequence_parallel = false;  // takes effect only with tp > 1
  int ep = 1, ep_rank = 0;
  std::vector<ModelChunk> chunks;  // this rank's chunks, in model order

  // One chunk with everything, on one rank.
  static ShardLayout whole(const ModelConfig& c);
  bool sp() const { return sequence_parallel && tp > 1; }
};

// Expert range [first, first + count) held by expert-parallel rank ep_rank of ep.
struct ExpertRange {
  int first = 0, count = 0;
};
ExpertRange expert_range(const ModelConfig& c, int ep, int ep_rank);

// Every tensor of the shard, in the order the model declares them (the single-rank order for
// `whole`), without allocating anything.
std::vector<TensorSpec> parameter_specs(const ModelConfig& c, const ShardLayout& layout);

}  // namespace paraxis::model
