// The parameter layout: the builder (alignment, unit padding), the model's declaration order
// (param_layout) and ZeRO ownership (owned_range).
#include "model/param_layout.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "model/shard_layout.hpp"

namespace paraxis::model {

namespace {

constexpr double kInitStd = 0.02;  // GPT-2's initialisation of every weight

std::size_t round_up(std::size_t n, std::size_t m) {
  return (n + m - 1) / m * m;
}

}  // namespace

// ---- ParamLayout

int ParamLayout::find(const std::string& name) const {
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name) return static_cast<int>(i);
  return -1;
}

std::size_t ParamLayout::elements() const {
  std::size_t n = 0;
  for (const auto& s : tensors) n += s.size();
  return n;
}

// ---- ParamLayoutBuilder

ParamLayoutBuilder::ParamLayoutBuilder(int unit_multiple) {
  if (unit_multiple < 1)
    throw std::invalid_argument(
        "ParamLayoutBuilder: unit_multiple = " + std::to_string(unit_multiple) + ", expected >= 1");
  layout_.unit_multiple = unit_multiple;
}

void ParamLayoutBuilder::begin_unit(std::string name, bool expert) {
  if (in_unit_)
    throw std::logic_error("ParamLayoutBuilder::begin_unit inside unit " +
                           layout_.units.back().name);
  in_unit_ = true;
  UnitSpec u;
  u.name = std::move(name);
  u.begin = layout_.total;
  u.first_tensor = static_cast<int>(layout_.tensors.size());
  u.expert = expert;
  layout_.units.push_back(std::move(u));
}

void ParamLayoutBuilder::end_unit() {
  if (!in_unit_) throw std::logic_error("ParamLayoutBuilder::end_unit without begin_unit");
  in_unit_ = false;
  UnitSpec& u = layout_.units.back();
  u.aligned = layout_.total - u.begin;
  u.size = round_up(u.aligned, static_cast<std::size_t>(layout_.unit_multiple));
  layout_.total = u.begin + u.size;
  u.end_tensor = static_cast<int>(layout_.tensors.size());
}

int ParamLayoutBuilder::add(std::string name, int rows, int cols, Init init, double stddev,
                            bool decay) {
  return add_shard(std::move(name), rows, cols, rows, cols, 0, 0, init, stddev, decay);
}

int ParamLayoutBuilder::add_shard(std::string name, int rows, int cols, int logical_rows,
                                  int logical_cols, int row_offset, int col_offset, Init init,
                                  double stddev, bool decay) {
  if (!in_unit_) throw std::logic_error("ParamLayoutBuilder::add outside a unit: " + name);
  const bool vector = cols == 0;
  const bool bad = rows < 0 || cols < 0 || logical_rows < 0 || logical_cols < 0 || row_offset < 0 ||
                   col_offset < 0 || vector != (logical_cols == 0) || (vector && col_offset != 0);
  if (bad) {
    std::ostringstream os;
    os << "ParamLayoutBuilder::add_shard: tensor " << name << ": block " << rows << " x " << cols
       << " at (" << row_offset << ", " << col_offset << ") of logical " << logical_rows << " x "
       << logical_cols
       << ", expected non-negative extents and offsets (cols = logical_cols = col_offset = 0 "
          "for a vector)";
    throw std::invalid_argument(os.str());
  }
  TensorSpec s;
  s.name = std::move(name);
  s.rows = rows;
  s.cols = cols;
  s.init = init;
  s.stddev = stddev;
  s.weight_decay = decay;
  s.offset = layout_.total;
  s.unit = static_cast<int>(layout_.units.size()) - 1;
  s.logical_rows = logical_rows;
  s.logical_cols = logical_cols;
  s.row_offset = row_offset;
  s.col_offset = col_offset;
  layout_.total += round_up(s.size(), kParamAlign);
  layout_.tensors.push_back(std::move(s));
  return static_cast<int>(layout_.tensors.size()) - 1;
}

void ParamLayoutBuilder::set_tp_flags(int i, bool replicated, bool sp_partial) {
  auto& s = layout_.tensors.at(static_cast<std::size_t>(i));
  s.tp_replicated = replicated;
  s.sp_partial = sp_partial;
}

ParamLayout ParamLayoutBuilder::finish() {
  if (in_unit_)
    throw std::logic_error("ParamLayoutBuilder::finish inside unit " + layout_.units.back().name);
  return std::move(layout_);
}

// ---- the model's declaration order

namespace {

// One rank's tensor-parallel shard of each tensor, added to the builder: column-parallel
// weights and biases, row-parallel weights, and tensors every tp rank holds whole.
struct ShardAdder {
  ParamLayoutBuilder& b;
  int H;
  bool sp;
  // Column-parallel weight [H, n] (columns [off, off + nl)) and its bias.
  void column(const std::string& name, int n, int nl, int off, double sd, bool decay) {
    b.add_shard(name, H, nl, H, n, 0, off, Init::normal, sd, decay);
  }
  void column_bias(const std::string& name, int n, int nl, int off) {
    b.add_shard(name, nl, 0, n, 0, off, 0, Init::zeros, 0, false);
  }
  // Row-parallel weight [n, H] (rows [off, off + nl)).
  void row(const std::string& name, int n, int nl, int off, double sd) {
    b.add_shard(name, nl, H, n, H, off, 0, Init::normal, sd, true);
  }
  // A tensor every tensor-parallel rank holds whole (partial under sequence parallelism: its
  // gradient is a partial sum over the sequence shards).
  void whole(const std::string& name, int rows, int cols, Init init, double sd, bool decay,
             bool partial_under_sp) {
    b.set_tp_flags(b.add(name, rows, cols, init, sd, decay), true, partial_under_sp && sp);
  }
  // An MLP (or an expert) of ffn width F, sharded over tp as `ffn`.
  void mlp(const std::string& p, int F, const ShardRange& ffn, double resid_std) {
    column(p + "w1", F, ffn.size, ffn.offset, kInitStd, true);
    column_bias(p + "b1", F, ffn.size, ffn.offset);
    row(p + "w2", F, ffn.size, ffn.offset, resid_std);
    whole(p + "b2", H, 0, Init::zeros, 0, false, false);
  }
};

// This rank's tensor-parallel share of a block: the attention's columns [hoff, hoff + hl) and
// the MLP's ffn range; and the initial spread of the weights that write into the residual.
struct BlockShards {
  int hl = 0, hoff = 0;
  ShardRange ffn;
  double resid_std = 0;
};

// Layer l's tensors: its block unit, and its experts' unit when it is a MoE layer.
void add_layer(ShardAdder& a, const ModelConfig& c, const ShardLayout& lay, const BlockShards& s,
               int l) {
  const int H = c.hidden, hl = s.hl, hoff = s.hoff;
  const ShardRange& ffn = s.ffn;
  const double resid_std = s.resid_std;
  const std::string p = "layers." + std::to_string(l) + ".";
  a.b.begin_unit("layers." + std::to_string(l));
  a.whole(p + "ln1.gamma", H, 0, Init::ones, 0, false, true);
  a.whole(p + "ln1.beta", H, 0, Init::zeros, 0, false, true);
  for (const char* w : {"q", "k", "v"}) {
    a.column(p + "attn.w" + w, H, hl, hoff, kInitStd, true);
    a.column_bias(p + "attn.b" + w, H, hl, hoff);
  }
  a.row(p + "attn.wo", H, hl, hoff, resid_std);
  a.whole(p + "attn.bo", H, 0, Init::zeros, 0, false, false);
  a.whole(p + "ln2.gamma", H, 0, Init::ones, 0, false, true);
  a.whole(p + "ln2.beta", H, 0, Init::zeros, 0, false, true);
  if (!c.is_moe_layer(l)) {
    a.mlp(p + "mlp.", c.ffn, ffn, resid_std);
    a.b.end_unit();
    return;
  }
  const int E = c.moe.experts;
  a.whole(p + "moe.router", H, E, Init::normal, kInitStd, false, false);
  if (c.moe.router_skew > 0)
    a.whole(p + "moe.router_bias", E, 0, Init::zipf_logit, c.moe.router_skew, false, false);
  a.b.end_unit();
  a.b.begin_unit("layers." + std::to_string(l) + ".experts", /*expert=*/true);
  const ExpertRange mine = expert_range(c, lay.ep, lay.ep_rank);
  for (int e = mine.first; e < mine.first + mine.count; ++e)
    a.mlp(p + "moe.experts." + std::to_string(e) + ".", c.ffn, ffn, resid_std);
  a.b.end_unit();
}

}  // namespace

ParamLayout param_layout(const ModelConfig& c, const ShardLayout& lay, int unit_multiple) {
  const int H = c.hidden, V = c.vocab, S = c.seq_len;
  const int tp = lay.tp, r = lay.tp_rank, hd = c.head_dim();
  const ShardRange heads = even_shard("model.heads", c.heads, tp, r);
  BlockShards shards;
  shards.hl = heads.size * hd;
  shards.hoff = heads.offset * hd;
  shards.ffn = even_shard("model.ffn", c.ffn, tp, r);
  const ShardRange voc = vocab_shard(V, tp, r);
  shards.resid_std = kInitStd / std::sqrt(2.0 * c.layers);
  ParamLayoutBuilder b(unit_multiple);
  ShardAdder a{b, H, lay.sp()};
  for (const auto& ch : lay.chunks) {
    if (ch.first_layer < 0 || ch.end_layer > c.layers || ch.first_layer > ch.end_layer)
      throw std::invalid_argument("model chunk [" + std::to_string(ch.first_layer) + ", " +
                                  std::to_string(ch.end_layer) +
                                  ") outside model.layers = " + std::to_string(c.layers));
    if (ch.embedding) {
      b.begin_unit("embedding");
      b.add_shard("wte", voc.size, H, V, H, voc.offset, 0, Init::normal, kInitStd, true);
      a.whole("wpe", S, H, Init::normal, kInitStd, true, false);
      b.end_unit();
    }
    for (int l = ch.first_layer; l < ch.end_layer; ++l) add_layer(a, c, lay, shards, l);
    if (ch.head) {
      b.begin_unit("head");
      a.whole("lnf.gamma", H, 0, Init::ones, 0, false, true);
      a.whole("lnf.beta", H, 0, Init::zeros, 0, false, true);
      b.add_shard("head", H, voc.size, H, V, 0, voc.offset, Init::normal, kInitStd, true);
      b.end_unit();
    }
  }
  return b.finish();
}

std::vector<TensorSpec> parameter_specs(const ModelConfig& c, const ShardLayout& lay) {
  return param_layout(c, lay, 1).tensors;
}

// ---- ZeRO ownership

FlatRange owned_range(const UnitSpec& u, int zero, int group_size, int group_rank) {
  if (group_size < 1 || group_rank < 0 || group_rank >= group_size) {
    std::ostringstream os;
    os << "owned_range: unit " << u.name << ": rank " << group_rank << " of a group of "
       << group_size << ", expected 0 <= rank < size";
    throw std::invalid_argument(os.str());
  }
  if (zero < 1) return {u.begin, u.begin + u.size};
  const auto n = static_cast<std::size_t>(group_size);
  if (u.size % n != 0) {
    std::ostringstream os;
    os << "owned_range: unit " << u.name << " has " << u.size
       << " elements, not a multiple of its ZeRO group of " << group_size
       << " ranks (expected the layout's unit_multiple to be the data-parallel degree)";
    throw std::invalid_argument(os.str());
  }
  const std::size_t shard = u.size / n;
  const std::size_t begin = u.begin + static_cast<std::size_t>(group_rank) * shard;
  return {begin, begin + shard};
}

int zero_group_size(const UnitSpec& u, int dp, int ep) {
  return u.expert && ep > 1 ? dp / ep : dp;
}

std::vector<GradientBucket> gradient_buckets(const std::vector<FlatRange>& units,
                                             const std::vector<int>& group_key,
                                             std::size_t cap_elements) {
  if (group_key.size() != units.size())
    throw std::invalid_argument("gradient_buckets: " + std::to_string(units.size()) +
                                " units but " + std::to_string(group_key.size()) + " group keys");
  std::vector<GradientBucket> out;
  for (int u = static_cast<int>(units.size()) - 1; u >= 0; --u) {
    const auto uu = static_cast<std::size_t>(u);
    const bool fresh = out.empty() || out.back().end - units[uu].begin > cap_elements ||
                       group_key[uu] != group_key[static_cast<std::size_t>(out.back().first_unit)];
    if (fresh) {
      out.push_back({units[uu].begin, units[uu].end, u});
    } else {
      out.back().begin = units[uu].begin;
      out.back().first_unit = u;
    }
  }
  return out;
}

std::size_t bucket_cap_elements(double bucket_mb, int element_bytes) {
  return static_cast<std::size_t>(bucket_mb * 1024 * 1024 / element_bytes);
}

}  // namespace paraxis::model
