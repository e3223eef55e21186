// GptModel's parameters: the shard's ParamStore laid out by param_layout (which tensors, in
// what order, in which units) and the layers bound to its tensors; the layout/groups check.
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "model/gpt_model_impl.hpp"

namespace paraxis::model {
namespace detail {

namespace {

// The layout's tensors and units by name (names are unique: indexed once, the MoE layers hold
// thousands of tensors); a name the layout lacks is a logic error naming it.
class LayoutIndex {
 public:
  explicit LayoutIndex(const ParamLayout& L) {
    for (std::size_t i = 0; i < L.tensors.size(); ++i)
      tensor_.emplace(L.tensors[i].name, static_cast<int>(i));
    for (std::size_t u = 0; u < L.units.size(); ++u)
      unit_.emplace(L.units[u].name, static_cast<int>(u));
  }
  int t(const std::string& name) const { return find(tensor_, name, "tensor"); }
  int u(const std::string& name) const { return find(unit_, name, "unit"); }

 private:
  static int find(const std::unordered_map<std::string, int>& in, const std::string& name,
                  const char* what) {
    const auto it = in.find(name);
    if (it == in.end())
      throw std::logic_error(std::string("declare_parameters: the parameter layout has no ") +
                             what + " " + name);
    return it->second;
  }
  std::unordered_map<std::string, int> tensor_, unit_;
};

// Layer l's tensor indices (param_layout.cpp names them).
BlockParams block_params(const LayoutIndex& x, const ModelConfig& c, const ShardLayout& lay,
                         int l) {
  BlockParams b;
  b.layer = l;
  b.moe = c.is_moe_layer(l);
  const std::string p = "layers." + std::to_string(l) + ".";
  b.unit = x.u("layers." + std::to_string(l));
  b.ln1_g = x.t(p + "ln1.gamma");
  b.ln1_b = x.t(p + "ln1.beta");
  b.wq = x.t(p + "attn.wq");
  b.bq = x.t(p + "attn.bq");
  b.wk = x.t(p + "attn.wk");
  b.bk = x.t(p + "attn.bk");
  b.wv = x.t(p + "attn.wv");
  b.bv = x.t(p + "attn.bv");
  b.wo = x.t(p + "attn.wo");
  b.bo = x.t(p + "attn.bo");
  b.ln2_g = x.t(p + "ln2.gamma");
  b.ln2_b = x.t(p + "ln2.beta");
  if (!b.moe) {
    b.w1 = x.t(p + "mlp.w1");
    b.b1 = x.t(p + "mlp.b1");
    b.w2 = x.t(p + "mlp.w2");
    b.b2 = x.t(p + "mlp.b2");
    return b;
  }
  b.wr = x.t(p + "moe.router");
  if (c.moe.router_skew > 0) b.br = x.t(p + "moe.router_bias");
  b.expert_unit = x.u("layers." + std::to_string(l) + ".experts");
  const ExpertRange mine = expert_range(c, lay.ep, lay.ep_rank);
  for (int e = mine.first; e < mine.first + mine.count; ++e) {
    const std::string q = p + "moe.experts." + std::to_string(e) + ".";
    b.ew1.push_back(x.t(q + "w1"));
    b.eb1.push_back(x.t(q + "b1"));
    b.ew2.push_back(x.t(q + "w2"));
    b.eb2.push_back(x.t(q + "b2"));
  }
  return b;
}

}  // namespace

// Lays `ps` out as param_layout (param_layout.cpp: the one description of the shard's
// parameters, their order and units) and binds the layers' tensors and units to it by name.
template <typename T>
std::vector<ChunkParams> declare_parameters(ParamStore<T>& ps, const ModelConfig& c,
                                            const ShardLayout& lay) {
  ps.set_layout(param_layout(c, lay, ps.unit_multiple()));
  const LayoutIndex x(ps.layout());
  std::vector<ChunkParams> out;
  for (const auto& ch : lay.chunks) {
    ChunkParams cp;
    cp.spec = ch;
    if (ch.embedding) {
      cp.emb_unit = x.u("embedding");
      cp.wte = x.t("wte");
      cp.wpe = x.t("wpe");
    }
    for (int l = ch.first_layer; l < ch.end_layer; ++l)
      cp.blocks.push_back(block_params(x, c, lay, l));
    if (ch.head) {
      cp.head_unit = x.u("head");
      cp.lnf_g = x.t("lnf.gamma");
      cp.lnf_b = x.t("lnf.beta");
      cp.head = x.t("head");
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

}  // namespace paraxis::model
