// Which part of the model one rank holds: its tensor-parallel slice (heads, ffn columns,
// vocabulary rows), its experts, and its model chunks (contiguous runs of blocks, the
// embedding on the first chunk, the final LayerNorm + head + loss on the last). The model
// builds exactly these parameters; the single-rank model is the layout `whole`.
//
// Splitting the layers into pipeline chunks is a model question (what a layer costs), so it
// lives here too: balanced by modelled forward FLOPs per token, embedding and head included.
#pragma once

#include <string>
#include <vector>

#include "model/model_config.hpp"
#include "model/param_store.hpp"

namespace paraxis::model {

struct ModelChunk {
  int first_layer = 0, end_layer = 0;  // blocks [first_layer, end_layer)
  bool embedding = false, head = false;
  int layers() const { return end_layer - first_layer; }
};

struct ShardLayout {
  int tp = 1, tp_rank = 0;
  bool sequence_parallel = false;  // takes effect only with tp > 1
  int ep = 1, ep_rank = 0;
  std::vector<ModelChunk> chunks;  // this rank's chunks, in model order

  // One chunk with everything, on one rank.
  static ShardLayout whole(const ModelConfig& c);
  bool sp() const { return sequence_parallel && tp > 1; }
};

// Modelled forward FLOPs per token of each piece, for balancing: [0] the embedding (0: a
// lookup), [1 .. layers] the blocks, [layers + 1] the final LayerNorm + head.
std::vector<double> piece_costs(const ModelConfig& c);

// Cuts the layers into `chunks` contiguous chunks (each with at least one layer). With
// stage_layers empty, the cut minimises the most expensive chunk (piece_costs; the
// embedding's cost goes to chunk 0, the head's to the last); else stage_layers gives each
// chunk's layer count. Throws std::invalid_argument naming the values when impossible.
std::vector<ModelChunk> split_layers(const ModelConfig& c, int chunks,
                                     const std::vector<int>& stage_layers = {});

// Expert range [first, first + count) held by expert-parallel rank ep_rank of ep.
struct ExpertRange {
  int first = 0, count = 0;
};
ExpertRange expert_range(const ModelConfig& c, int ep, int ep_rank);

// Every tensor of the shard, in the order the model declares them (the single-rank order for
// `whole`), without allocating anything.
std::vector<TensorSpec> parameter_specs(const ModelConfig& c, const ShardLayout& layout);

}  // namespace paraxis::model
