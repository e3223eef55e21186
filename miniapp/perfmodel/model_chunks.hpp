// Which chunks each pipeline stage runs (chunk c on stage c % pp) and what a chunk costs; the
// cut itself is paraxis's own (model::split_layers, model/model_pieces.hpp).
#pragma once

#include <vector>

#include "model/model_config.hpp"
#include "model/model_pieces.hpp"
#include "perfmodel/parallel_config.hpp"

namespace paraxis::perfmodel {

// A pipeline chunk's layers (model/model_pieces.hpp).
using ChunkLayers = model::ModelChunk;
using model::split_layers;

// Model chunk indices run by pipeline stage `stage` (c % pp == stage), in model order.
std::vector<int> stage_chunk_ids(const Scenario& c, int stage);

// Forward FLOPs per token of one chunk (its blocks, plus the head if it has it).
double chunk_forward_flops_per_token(const model::ModelConfig& m, const ChunkLayers& chunk);

// FLOPs per token of one chunk's weight gradients (W of a split backward, Qi et al. 2023): one
// x^T dy GEMM per linear, as costly as the linear's forward: per block 2*4*H^2 (Q, K, V,
// output projection) + 2*2*H*F (dense MLP) or 2*H*E (router) + K*2*2*H*F (top-k experts), and
// 2*H*V for the head. The chunk's forward less its attention products (2*2*S*H per block),
// which have no weights.
double chunk_weight_gradient_flops_per_token(const model::ModelConfig& m, const ChunkLayers& chunk);

// Forward FLOPs per token that c.recompute adds to one chunk's backward (the chunk's share of
// model::recompute_forward_flops_per_token): selective 2 S H per block (q k^T again); full the
// forward of each block recomputed (model::recomputes_block by its index in the chunk).
double chunk_recompute_flops_per_token(const model::ModelConfig& m, const Scenario& c,
                                       const ChunkLayers& chunk);

}  // namespace paraxis::perfmodel
