// GptModel's parameters: which tensors a shard holds (its tensor-parallel slice, its experts,
// its chunks) and in what order they are declared into the ParamStore; parameter_specs.
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/gpt_model_impl.hpp"

namespace paraxis::model {
namespace detail {

// Declares the shard's parameters into `ps`, unit by unit, in model order; with the whole
// layout this is the single-rank order every parallel run is compared against.
template <class T>
std::vector<ChunkParams> declare_parameters(ParamStore<T>& ps, const ModelConfig& c,
                                            const ShardLayout& lay) {
  const int H = c.hidden, F = c.ffn, V = c.vocab, S = c.seq_len, E = c.moe.experts;
  const int tp = lay.tp, r = lay.tp_rank, hd = c.head_dim();
  const ShardRange heads = even_shard("model.heads", c.heads, tp, r);
  const int hl = heads.size * hd, hoff = heads.offset * hd;
  const ShardRange ffn = even_shard("model.ffn", F, tp, r);
  const ShardRange voc = vocab_shard(V, tp, r);
  const double resid_std = kInitStd / std::sqrt(2.0 * c.layers);
  const bool sp = lay.sp();
  auto replicated = [&](int i, bool partial_under_sp) {
    ps.set_tp_flags(i, true, partial_under_sp && sp);
    return i;
  };
  // Column-parallel weight [H, n] (columns [off, off + nl)) and its bias.
  auto column = [&](const std::string& name, int n, int nl, int off, double sd, bool decay) {
    return ps.add_shard(name, H, nl, H, n, 0, off, Init::normal, sd, decay);
  };
  auto column_bias = [&](const std::string& name, int n, int nl, int off) {
    return ps.add_shard(name, nl, 0, n, 0, off, 0, Init::zeros, 0, false);
  };
  // Row-parallel weight [n, H] (rows [off, off + nl)).
  auto row = [&](const std::string& name, int n, int nl, int off, double sd) {
    return ps.add_shard(name, nl, H, n, H, off, 0, Init::normal, sd, true);
  };
  std::vector<ChunkParams> out;
  for (const auto& ch : lay.chunks) {
    if (ch.first_layer < 0 || ch.end_layer > c.layers || ch.first_layer > ch.end_layer)
      throw std::invalid_argument("model chunk [" + std::to_string(ch.first_layer) + ", " +
                                  std::to_string(ch.end_layer) +
                                  ") outside model.layers = " + std::to_string(c.layers));
    ChunkParams cp;
    cp.spec = ch;
    if (ch.embedding) {
      ps.begin_unit("embedding");
      cp.emb_unit = static_cast<int>(ps.units().size()) - 1;
      cp.wte = ps.add_shard("wte", voc.size, H, V, H, voc.offset, 0, Init::normal, kInitStd, true);
      cp.wpe = replicated(ps.add("wpe", S, H, Init::normal, kInitStd, true), false);
      ps.end_unit();
    }
    for (int l = ch.first_layer; l < ch.end_layer; ++l) {
      BlockParams b;
      b.layer = l;
      b.moe = c.is_moe_layer(l);
      const std::string p = "layers." + std::to_string(l) + ".";
      ps.begin_unit("layers." + std::to_string(l));
      b.unit = static_cast<int>(ps.units().size()) - 1;
      b.ln1_g = replicated(ps.add(p + "ln1.gamma", H, 0, Init::ones, 0, false), true);
      b.ln1_b = replicated(ps.add(p + "ln1.beta", H, 0, Init::zeros, 0, false), true);
      b.wq = column(p + "attn.wq", H, hl, hoff, kInitStd, true);
      b.bq = column_bias(p + "attn.bq", H, hl, hoff);
      b.wk = column(p + "attn.wk", H, hl, hoff, kInitStd, true);
      b.bk = column_bias(p + "attn.bk", H, hl, hoff);
      b.wv = column(p + "attn.wv", H, hl, hoff, kInitStd, true);
      b.bv = column_bias(p + "attn.bv", H, hl, hoff);
      b.wo = row(p + "attn.wo", H, hl, hoff, resid_std);
      b.bo = replicated(ps.add(p + "attn.bo", H, 0, Init::zeros, 0, false), false);
      b.ln2_g = replicated(ps.add(p + "ln2.gamma", H, 0, Init::ones, 0, false), true);
      b.ln2_b = replicated(ps.add(p + "ln2.beta", H, 0, Init::zeros, 0, false), true);
      if (!b.moe) {
        b.w1 = column(p + "mlp.w1", F, ffn.size, ffn.offset, kInitStd, true);
        b.b1 = column_bias(p + "mlp.b1", F, ffn.size, ffn.offset);
        b.w2 = row(p + "mlp.w2", F, ffn.size, ffn.offset, resid_std);
        b.b2 = replicated(ps.add(p + "mlp.b2", H, 0, Init::zeros, 0, false), false);
        ps.end_unit();
      } else {
        b.wr = replicated(ps.add(p + "moe.router", H, E, Init::normal, kInitStd, false), false);
        if (c.moe.router_skew > 0)
          b.br = replicated(
              ps.add(p + "moe.router_bias", E, 0, Init::zipf_logit, c.moe.router_skew, false),
              false);
        ps.end_unit();
        ps.begin_unit("layers." + std::to_string(l) + ".experts", /*expert=*/true);
        b.expert_unit = static_cast<int>(ps.units().size()) - 1;
        const ExpertRange mine = expert_range(c, lay.ep, lay.ep_rank);
        for (int e = mine.first; e < mine.first + mine.count; ++e) {
          const std::string q = p + "moe.experts." + std::to_string(e) + ".";
          b.ew1.push_back(column(q + "w1", F, ffn.size, ffn.offset, kInitStd, true));
          b.eb1.push_back(column_bias(q + "b1", F, ffn.size, ffn.offset));
          b.ew2.push_back(row(q + "w2", F, ffn.size, ffn.offset, resid_std));
          b.eb2.push_back(replicated(ps.add(q + "b2", H, 0, Init::zeros, 0, false), false));
        }
        ps.end_unit();
      }
      cp.blocks.push_back(std::move(b));
    }
    if (ch.head) {
      ps.begin_unit("head");
      cp.head_unit = static_cast<int>(ps.units().size()) - 1;
      cp.lnf_g = replicated(ps.add("lnf.gamma", H, 0, Init::ones, 0, false), true);
      cp.lnf_b = replicated(ps.add("lnf.beta", H, 0, Init::zeros, 0, false), true);
      cp.head =
          ps.add_shard("head", H, voc.size, H, V, 0, voc.offset, Init::normal, kInitStd, true);
      ps.end_unit();
    }
    out.push_back(std::move(cp));
  }
  return out;
}

void check_layout(const ShardLayout& lay, const ShardComms& comms) {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  if (lay.tp < 1 || lay.tp_rank < 0 || lay.tp_rank >= lay.tp)
    fail("tensor-parallel rank " + std::to_string(lay.tp_rank) + " of " + std::to_string(lay.tp));
  const int tp_group = comms.tp ? comms.tp->size() : 1;
  const int ep_group = comms.ep ? comms.ep->size() : 1;
  if (tp_group != lay.tp)
    fail("the tensor-parallel group has " + std::to_string(tp_group) +
         " ranks but parallel.tp = " + std::to_string(lay.tp));
  if (ep_group != lay.ep)
    fail("the expert-parallel group has " + std::to_string(ep_group) +
         " ranks but parallel.ep = " + std::to_string(lay.ep));
  if (lay.chunks.empty()) fail("a model shard needs at least one chunk");
}

template std::vector<ChunkParams> declare_parameters(ParamStore<double>&, const ModelConfig&,
                                                     const ShardLayout&);
template std::vector<ChunkParams> declare_parameters(ParamStore<float>&, const ModelConfig&,
                                                     const ShardLayout&);
template std::vector<ChunkParams> declare_parameters(ParamStore<paraxis::bf16>&, const ModelConfig&,
                                                     const ShardLayout&);

}  // namespace detail

std::vector<TensorSpec> parameter_specs(const ModelConfig& c, const ShardLayout& layout) {
  ParamStore<float> ps;
  detail::declare_parameters(ps, c, layout);
  return ps.specs();
}

}  // namespace paraxis::model
