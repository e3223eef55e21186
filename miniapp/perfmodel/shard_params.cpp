// Per-unit parameter counts of one rank's shard: model::param_layout's units, with their ZeRO
// groups.
#include "perfmodel/shard_params.hpp"

#include <algorithm>
#include <stdexcept>

#include "perfmodel/model_chunks.hpp"

namespace paraxis::perfmodel {

namespace {

void require_divides(const char* what, int n, const char* axis, int degree) {
  if (degree < 1 || n % degree != 0)
    throw std::invalid_argument(std::string(axis) + " = " + std::to_string(degree) +
                                " does not divide " + what + " = " + std::to_string(n));
}

}  // namespace

model::ShardLayout stage_shard(const model::ModelConfig& m, const Scenario& c, int stage) {
  model::ShardLayout lay;
  lay.tp = c.tp;
  lay.sequence_parallel = c.sequence_parallel;
  lay.ep = c.ep;
  const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
  for (int id : stage_chunk_ids(c, stage)) lay.chunks.push_back(chunks[id]);
  return lay;
}

std::vector<ParamUnit> shard_units(const model::ModelConfig& m, const Scenario& c, int stage) {
  require_divides("heads", m.heads, "tp", c.tp);
  require_divides("ffn", m.ffn, "tp", c.tp);
  if (m.moe.experts > 0) require_divides("experts", m.moe.experts, "ep", c.ep);
  require_divides("dp", c.dp, "ep", c.ep);
  const int multiple = c.effective_zero() >= 1 ? c.dp : 1;
  const model::ParamLayout layout = model::param_layout(m, stage_shard(m, c, stage), multiple);
  std::vector<ParamUnit> units;
  for (const auto& U : layout.units) {
    ParamUnit u;
    u.name = U.name;
    u.expert = U.expert;
    u.group = model::zero_group_size(U, c.dp, c.ep);
    u.begin = U.begin;
    u.aligned = U.aligned;
    u.padded = U.size;
    for (int i = U.first_tensor; i < U.end_tensor; ++i) {
      const auto& s = layout.tensors[static_cast<std::size_t>(i)];
      u.elements += s.size();
      if (s.sp_partial)
        u.sp_partial.emplace_back(s.offset - U.begin, s.offset - U.begin + s.size());
    }
    units.push_back(std::move(u));
  }
  return units;
}

std::size_t padded_elements(const std::vector<ParamUnit>& units) {
  std::size_t n = 0;
  for (const auto& u : units) n += u.padded;
  return n;
}

std::size_t unpadded_elements(const std::vector<ParamUnit>& units) {
  std::size_t n = 0;
  for (const auto& u : units) n += u.elements;
  return n;
}

std::size_t owned_elements(const std::vector<ParamUnit>& units, int zero) {
  std::size_t n = 0;
  for (const auto& u : units) n += u.owned(zero);
  return n;
}

std::size_t estimate_rank_parameters(const model::ModelConfig& m, const Scenario& c, int stage) {
  return unpadded_elements(shard_units(m, c, stage));
}

std::size_t owned_sp_partial_elements(const std::vector<ParamUnit>& units, int zero, int dp_rank) {
  std::size_t n = 0;
  for (const auto& u : units) {
    // Expert units hold no LayerNorm; a dense unit's ZeRO group is the data-parallel group.
    if (u.sp_partial.empty()) continue;
    const model::FlatRange own = u.owned_range(zero, dp_rank);
    const std::size_t begin = own.begin - u.begin, end = own.end - u.begin;
    for (const auto& [lo, hi] : u.sp_partial) {
      const std::size_t a = std::max(lo, begin), b = std::min(hi, end);
      if (a < b) n += b - a;
    }
  }
  return n;
}

std::size_t model_parameters(const model::ModelConfig& m) {
  std::size_t n = 0;
  for (const auto& t : model::parameter_specs(m, model::ShardLayout::whole(m)))
    n += t.logical_size();
  return n;
}

}  // namespace paraxis::perfmodel
