// The parameter elements one rank holds, unit by unit: model::param_layout (the one
// description of paraxis's parameter layout, model/param_layout.hpp) of the shard of a
// pipeline stage — the tensor-parallel slice of every tensor, this expert-parallel rank's
// experts, the chunks of the stage; every tensor's start aligned to 16 elements, every unit
// (the embedding, each block's dense part, each MoE block's experts, the final LayerNorm +
// head) padded to a multiple of dp under ZeRO >= 1 — with the ZeRO group of each unit. These
// sizes are what the data-parallel traffic and the model-state memory are made of.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.hpp"
#include "model/param_layout.hpp"
#include "model/shard_layout.hpp"
#include "perfmodel/parallel_config.hpp"

namespace paraxis::perfmodel {

struct ParamUnit {
  std::string name;          // "embedding", "layers.3", "layers.3.experts", "head"
  bool expert = false;       // reduced over the expert-data-parallel group (dp / ep ranks)
  std::size_t begin = 0;     // in the flat layout
  std::size_t elements = 0;  // sum of the tensors' sizes: no padding
  std::size_t aligned = 0;   // with each tensor's 16-element alignment
  std::size_t padded = 0;    // `aligned` rounded up to a multiple of dp (ZeRO >= 1)
  int group = 1;             // ranks this unit's gradients are reduced over (its ZeRO group)
  // Element ranges [begin, end) inside the unit of the tensors whose gradients are partial
  // sums over the tensor-parallel group under sequence parallelism (the LayerNorms).
  std::vector<std::pair<std::size_t, std::size_t>> sp_partial;
  // The flat range rank group_rank of the group owns (model::owned_range), and its size:
  // padded / group under ZeRO >= 1, else the whole unit.
  model::FlatRange owned_range(int zero, int group_rank) const {
    model::UnitSpec u;
    u.name = name;
    u.begin = begin;
    u.size = padded;
    return model::owned_range(u, zero, group, group_rank);
  }
  std::size_t owned(int zero) const { return owned_range(zero, 0).size(); }
};

// The shard of the rank at pipeline stage `stage` (tensor-parallel, expert-parallel rank 0).
model::ShardLayout stage_shard(const model::ModelConfig& m, const Scenario& c, int stage);

// The units of the rank at pipeline stage `stage` (every tensor-parallel, expert-parallel and
// data-parallel rank of a stage holds units of the same sizes), in flat-layout order.
// Throws std::invalid_argument when tp does not divide heads or ffn, or ep the experts.
std::vector<ParamUnit> shard_units(const model::ModelConfig& m, const Scenario& c, int stage);

// Sums over units.
std::size_t padded_elements(const std::vector<ParamUnit>& units);    // P of the flat layout
std::size_t unpadded_elements(const std::vector<ParamUnit>& units);  // tensors only
std::size_t owned_elements(const std::vector<ParamUnit>& units, int zero);

// Parameter elements of the rank at `stage` without any padding: the estimate for callers that
// do not need paraxis's exact layout (the padding is at most 15 elements per tensor plus
// dp - 1 per unit).
std::size_t estimate_rank_parameters(const model::ModelConfig& m, const Scenario& c, int stage);

// LayerNorm-gradient elements that the rank at data-parallel index dp_rank owns (the ones it
// sums over the tensor-parallel group once per step under sequence parallelism), exactly.
std::size_t owned_sp_partial_elements(const std::vector<ParamUnit>& units, int zero, int dp_rank);

// Logical parameters of the whole model (one copy, no padding): what summary.json reports.
std::size_t model_parameters(const model::ModelConfig& m);

}  // namespace paraxis::perfmodel
