// The model as pieces — the embedding, each block, the final LayerNorm + head — with the
// forward FLOPs per token of each (derived from the kernels paraxis runs), and their contiguous
// cuts into pipeline chunks. Plain C++ on the model's configuration (no Kokkos): the model
// shards, the driver and the performance models all use this one definition.
#pragma once

#include <vector>

#include "model/model_config.hpp"

namespace paraxis::model {

struct ModelChunk {
  int first_layer = 0, end_layer = 0;  // blocks [first_layer, end_layer)
  bool embedding = false, head = false;
  int layers() const { return end_layer - first_layer; }
};

// Forward FLOPs per token of each piece (matmuls only, 2 FLOPs per multiply-add, full S x S
// attention products as computed): [0] the embedding (0: a lookup), [1 .. layers] the blocks,
// [layers + 1] the head.
std::vector<double> piece_costs(const ModelConfig& c);

// Their sum: the model FLOPs of one forward pass per token. A training step costs 3x the
// forward (backward = 2x forward).
double forward_flops_per_token(const ModelConfig& cfg);

// Cuts the layers into `chunks` contiguous chunks (each with at least one layer). With
// stage_layers empty, the cut minimises the most expensive chunk (piece_costs; the
// embedding's cost goes to chunk 0, the head's to the last; ties to the later cut); else
// stage_layers gives each chunk's layer count. Throws std::invalid_argument naming the values
// when impossible.
std::vector<ModelChunk> split_layers(const ModelConfig& c, int chunks,
                                     const std::vector<int>& stage_layers = {});

}  // namespace paraxis::model
