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

ParamLayout param_layout(const ModelConfig& c, const ShardLayout& lay, int unit_multiple) {
  const int H = c.hidden, F = c.ffn, V = c.vocab, S = c.seq_len, E = c.moe.experts;
  const int tp = lay.tp, r = lay.tp_rank, hd = c.head_dim();
  const ShardRange heads = even_shard("model.heads", c.heads, tp, r);
  const int hl = heads.size * hd, hoff = heads.offset * hd;
  const ShardRange ffn = even_shard("model.ffn", F, tp, r);
  const ShardRange voc = vocab_shard(V, tp, r);
  const double resid_std = kInitStd / std::sqrt(2.0 * c.layers);
  const bool sp = lay.sp();
  ParamLayoutBuilder b(unit_multiple);
  auto replicated = [&](int i, bool partial_under_sp) {
    b.set_tp_flags(i, true, partial_under_sp && sp);
  };
  // Column-parallel weight [H, n] (columns [off, off + nl)) and its bias.
  auto column = [&](const std::string& name, int n, int nl, int off, double sd, bool decay) {
    b.add_shard(name, H, nl, H, n, 0, off, Init::normal, sd, decay);
  };
  auto column_bias = [&](const std::string& name, int n, int nl, int off) {
    b.add_shard(name, nl, 0, n, 0, off, 0, Init::zeros, 0, false);
  };
  // Row-parallel weight [n, H] (rows [off, off + nl)).
  auto row = [&](const std::string& name, int n, int nl, int off, double sd) {
    b.add_shard(name, nl, H, n, H, off, 0, Init::normal, sd, true);
  };
  // A tensor every tensor-parallel rank holds whole.
  auto whole = [&](const std::string& name, int rows, int cols, Init init, double sd, bool decay,
                   bool partial_under_sp) {
    replicated(b.add(name, rows, cols, init, sd, decay), partial_under_sp);
  };
  for (const auto& ch : lay.chunks) {
    if (ch.first_layer < 0 || ch.end_layer > c.layers || ch.first_layer > ch.end_layer)
      throw std::invalid_argument("model chunk [" + std::to_string(ch.first_layer) + ", " +
                                  std::to_string(ch.end_layer) +
                                  ") outside model.layers = " + std::to_string(c.layers));
    if (ch.embedding) {
      b.begin_unit("embedding");
      b.add_shard("wte", voc.size, H, V, H, voc.offset, 0, Init::normal, kInitStd, true);
      whole("wpe", S, H, Init::normal, kInitStd, true, false);
      b.end_unit();
    }
    for (int l = ch.first_layer; l < ch.end_layer; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      b.begin_unit("layers." + std::to_string(l));
      whole(p + "ln1.gamma", H, 0, Init::ones, 0, false, true);
      whole(p + "ln1.beta", H, 0, Init::zeros, 0, false, true);
      column(p + "attn.wq", H, hl, hoff, kInitStd, true);
      column_bias(p + "attn.bq", H, hl, hoff);
      column(p + "attn.wk", H, hl, hoff, kInitStd, true);
      column_bias(p + "attn.bk", H, hl, hoff);
      column(p + "attn.wv", H, hl, hoff, kInitStd, true);
      column_bias(p + "attn.bv", H, hl, hoff);
      row(p + "attn.wo", H, hl, hoff, resid_std);
      whole(p + "attn.bo", H, 0, Init::zeros, 0, false, false);
      whole(p + "ln2.gamma", H, 0, Init::ones, 0, false, true);
      whole(p + "ln2.beta", H, 0, Init::zeros, 0, false, true);
      if (!c.is_moe_layer(l)) {
        column(p + "mlp.w1", F, ffn.size, ffn.offset, kInitStd, true);
        column_bias(p + "mlp.b1", F, ffn.size, ffn.offset);
        row(p + "mlp.w2", F, ffn.size, ffn.offset, resid_std);
        whole(p + "mlp.b2", H, 0, Init::zeros, 0, false, false);
        b.end_unit();
      } else {
        whole(p + "moe.router", H, E, Init::normal, kInitStd, false, false);
        if (c.moe.router_skew > 0)
          whole(p + "moe.router_bias", E, 0, Init::zipf_logit, c.moe.router_skew, false, false);
        b.end_unit();
        b.begin_unit("layers." + std::to_string(l) + ".experts", /*expert=*/true);
        const ExpertRange mine = expert_range(c, lay.ep, lay.ep_rank);
        for (int e = mine.first; e < mine.first + mine.count; ++e) {
          const std::string q = p + "moe.experts." + std::to_string(e) + ".";
          column(q + "w1", F, ffn.size, ffn.offset, kInitStd, true);
          column_bias(q + "b1", F, ffn.size, ffn.offset);
          row(q + "w2", F, ffn.size, ffn.offset, resid_std);
          whole(q + "b2", H, 0, Init::zeros, 0, false, false);
        }
        b.end_unit();
      }
    }
    if (ch.head) {
      b.begin_unit("head");
      whole("lnf.gamma", H, 0, Init::ones, 0, false, true);
      whole("lnf.beta", H, 0, Init::zeros, 0, false, true);
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

}  // namespace paraxis::model
