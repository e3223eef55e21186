// Which layers each pipeline chunk holds and which chunks each stage runs, as paraxis cuts them
// (model/shard_layout.cpp's split_layers: contiguous chunks minimising the most expensive one,
// by modelled forward FLOPs, embedding on chunk 0 and head on the last; chunk c on stage
// c % pp). Re-implemented here because shard_layout lives in a library that needs Kokkos;
// a test links both and checks that the cuts are identical.
#pragma once

#include <vector>

#include "model/model_config.hpp"
#include "perfmodel/parallel_config.hpp"

namespace paraxis::perfmodel {

struct ChunkLayers {
  int first_layer = 0, end_layer = 0;  // blocks [first_layer, end_layer)
  bool embedding = false, head = false;
  int layers() const { return end_layer - first_layer; }
};

// `chunks` contiguous chunks, each with at least one layer. stage_layers empty: the cut that
// minimises the most expensive chunk (ties go to the later cut, as in paraxis); else the given
// layer counts. Throws std::invalid_argument naming the values when impossible.
std::vector<ChunkLayers> split_layers(const model::ModelConfig& m, int chunks,
                                      const std::vector<int>& stage_layers = {});

// Model chunk indices run by pipeline stage `stage` (c % pp == stage), in model order.
std::vector<int> stage_chunk_ids(const ParallelConfig& c, int stage);

// Forward FLOPs per token of one chunk (its blocks, plus the head if it has it).
double chunk_forward_flops_per_token(const model::ModelConfig& m, const ChunkLayers& chunk);

}  // namespace paraxis::perfmodel
