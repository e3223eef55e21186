// Per-unit parameter counts of one rank's shard, following paraxis's declaration order.
#include "perfmodel/shard_params.hpp"

#include <algorithm>
#include <stdexcept>

#include "perfmodel/model_chunks.hpp"

namespace paraxis::perfmodel {

namespace {

constexpr std::size_t kAlign = 16;  // model/param_store.cpp: every tensor starts aligned

// Builds one unit tensor by tensor, tracking the in-unit offsets that alignment produces.
class UnitBuilder {
 public:
  UnitBuilder(std::string name, bool expert, int group) {
    unit_.name = std::move(name);
    unit_.expert = expert;
    unit_.group = group;
  }
  void add(std::size_t size, bool sp_partial = false) {
    if (sp_partial) unit_.sp_partial.emplace_back(unit_.aligned, unit_.aligned + size);
    unit_.elements += size;
    unit_.aligned += (size + kAlign - 1) / kAlign * kAlign;
  }
  ParamUnit finish(std::size_t multiple) {
    unit_.padded = (unit_.aligned + multiple - 1) / multiple * multiple;
    return std::move(unit_);
  }

 private:
  ParamUnit unit_;
};

void require_divides(const char* what, int n, const char* axis, int degree) {
  if (degree < 1 || n % degree != 0)
    throw std::invalid_argument(std::string(axis) + " = " + std::to_string(degree) +
                                " does not divide " + what + " = " + std::to_string(n));
}

}  // namespace

std::vector<ParamUnit> shard_units(const model::ModelConfig& m, const Scenario& c, int stage) {
  require_divides("heads", m.heads, "tp", c.tp);
  require_divides("ffn", m.ffn, "tp", c.tp);
  if (m.moe.experts > 0) require_divides("experts", m.moe.experts, "ep", c.ep);
  require_divides("dp", c.dp, "ep", c.ep);
  const std::size_t H = m.hidden, S = m.seq_len, E = m.moe.experts;
  const std::size_t hl = static_cast<std::size_t>(m.heads / c.tp) * m.head_dim();
  const std::size_t Fl = m.ffn / c.tp;
  const std::size_t Vl = (m.vocab + c.tp - 1) / c.tp;  // vocabulary padded to a multiple of tp
  const std::size_t El = E / c.ep;
  const bool sp = c.sp();
  const std::size_t multiple = c.effective_zero() >= 1 ? c.dp : 1;
  const int dense_group = c.dp, expert_group = c.ep > 1 ? c.dp / c.ep : c.dp;

  const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
  std::vector<ParamUnit> units;
  for (int id : stage_chunk_ids(c, stage)) {
    const ChunkLayers& ch = chunks[id];
    if (ch.embedding) {
      UnitBuilder u("embedding", false, dense_group);
      u.add(Vl * H);  // wte rows of this rank's vocabulary shard
      u.add(S * H);   // wpe
      units.push_back(u.finish(multiple));
    }
    for (int l = ch.first_layer; l < ch.end_layer; ++l) {
      const std::string name = "layers." + std::to_string(l);
      UnitBuilder u(name, false, dense_group);
      u.add(H, sp);  // ln1.gamma
      u.add(H, sp);  // ln1.beta
      for (int qkv = 0; qkv < 3; ++qkv) {
        u.add(H * hl);  // column-parallel weight
        u.add(hl);      // its bias slice
      }
      u.add(hl * H);  // attn.wo (row-parallel)
      u.add(H);       // attn.bo
      u.add(H, sp);   // ln2.gamma
      u.add(H, sp);   // ln2.beta
      if (!m.is_moe_layer(l)) {
        u.add(H * Fl);
        u.add(Fl);
        u.add(Fl * H);
        u.add(H);
        units.push_back(u.finish(multiple));
      } else {
        u.add(H * E);                         // router
        if (m.moe.router_skew > 0) u.add(E);  // router bias (benchmarking skew only)
        units.push_back(u.finish(multiple));
        UnitBuilder x(name + ".experts", true, expert_group);
        for (std::size_t e = 0; e < El; ++e) {
          x.add(H * Fl);
          x.add(Fl);
          x.add(Fl * H);
          x.add(H);
        }
        units.push_back(x.finish(multiple));
      }
    }
    if (ch.head) {
      UnitBuilder u("head", false, dense_group);
      u.add(H, sp);  // lnf.gamma
      u.add(H, sp);  // lnf.beta
      u.add(H * Vl);
      units.push_back(u.finish(multiple));
    }
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
    const std::size_t shard = u.owned(zero);
    // Expert units hold no LayerNorm; a dense unit's shard index is the data-parallel rank.
    const std::size_t begin = zero >= 1 ? static_cast<std::size_t>(dp_rank) * shard : 0;
    const std::size_t end = begin + shard;
    for (const auto& [lo, hi] : u.sp_partial) {
      const std::size_t a = std::max(lo, begin), b = std::min(hi, end);
      if (a < b) n += b - a;
    }
  }
  return n;
}

std::size_t model_parameters(const model::ModelConfig& m) {
  const std::size_t H = m.hidden, F = m.ffn, V = m.vocab, S = m.seq_len, E = m.moe.experts;
  std::size_t n = V * H + S * H + 2 * H + H * V;  // wte, wpe, lnf, head
  for (int l = 0; l < m.layers; ++l) {
    n += 4 * H + 4 * (H * H + H);  // LayerNorms; Q, K, V, output projection with biases
    const std::size_t mlp = H * F + F + F * H + H;
    n += m.is_moe_layer(l) ? H * E + (m.moe.router_skew > 0 ? E : 0) + E * mlp : mlp;
  }
  return n;
}

}  // namespace paraxis::perfmodel
