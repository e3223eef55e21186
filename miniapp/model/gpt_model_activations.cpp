// GptModel's activation memory: the scratch sized once for the shard (Impl's constructor) and
// the pool of activation sets, one per (chunk, micro-batch) in flight, reused and never shrunk,
// shaped by the recomputation mode (what a block keeps; the working set of full recomputation).
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "model/gpt_model_impl.hpp"

namespace paraxis::model {

using namespace detail;

template <class T>
GptModel<T>::Impl::Impl(GptModel& model, ShardComms shard_comms, bool allocate_store)
    : m(model), cfg(model.cfg_), lay(model.layout_), comms(shard_comms) {
  const ModelConfig& c = cfg;
  check_layout(lay, comms);
  N = m.micro_batch_ * c.seq_len;
  sp = lay.sp();
  if (sp && N % lay.tp != 0)
    throw std::invalid_argument(
        "parallel.sequence_parallel: micro_batch * seq_len = " + std::to_string(N) +
        " tokens not divisible by parallel.tp = " + std::to_string(lay.tp));
  Nl = sp ? N / lay.tp : N;
  chunk_params = declare_parameters(m.params_, c, lay);
  Hl = even_shard("model.heads", c.heads, lay.tp, lay.tp_rank).size * c.head_dim();
  Fl = even_shard("model.ffn", c.ffn, lay.tp, lay.tp_rank).size;
  const ShardRange voc = vocab_shard(c.vocab, lay.tp, lay.tp_rank);
  Vl = voc.size;
  voff = voc.offset;
  if (allocate_store) m.params_.allocate(m.ledger_);
  pool.resize(lay.chunks.size());
  allocate_work_buffers();
  allocate_attention_scratch();
  allocate_router_buffers();
}

// The buffers every layer of the shard shares: attention's q, k, v and their gradients, the
// residual's gradients, sequence parallelism's gathered copies, the MLP's gradient, and the
// head's logits gradient (and vocabulary-parallel cross-entropy) when the shard holds the head.
template <class T>
void GptModel<T>::Impl::allocate_work_buffers() {
  const int H = cfg.hidden;
  q = mat("paraxis::q", N, Hl);
  kk = mat("paraxis::k", N, Hl);
  vv = mat("paraxis::v", N, Hl);
  dq = mat("paraxis::dq", N, Hl);
  dk = mat("paraxis::dk", N, Hl);
  dv = mat("paraxis::dv", N, Hl);
  da = mat("paraxis::dattn", N, Hl);
  dx_a = mat("paraxis::dx_a", Nl, H);
  dx_b = mat("paraxis::dx_b", Nl, H);
  dtmp = mat("paraxis::dtmp", Nl, H);
  if (sp) {
    full = mat("paraxis::gathered", N, H);
    dfull = mat("paraxis::dgathered", N, H);
    part = mat("paraxis::partial", N, H);
  }
  dff = mat("paraxis::dff", N, Fl);
  bool has_head = false;
  for (const auto& ch : lay.chunks) has_head = has_head || ch.head;
  if (has_head) {
    dlogits = mat("paraxis::dlogits", N, Vl);
    if (lay.tp > 1) {
      vpce = std::make_unique<VocabParallelCrossEntropy<G, Space>>(N);
      m.ledger_.add(MemCategory::activations, 3 * static_cast<std::size_t>(N) * sizeof(G));
    }
  }
}

// The attention kernels' workspace, fused or not (model.attention), for the shard's heads.
template <class T>
void GptModel<T>::Impl::allocate_attention_scratch() {
  const ModelConfig& c = cfg;
  attn_scratch = std::make_unique<AttentionScratch>();
  const int local_heads = c.heads / lay.tp;
  if (c.attention == Attention::fused) {
    attn_scratch->fused = std::make_unique<k::FusedAttentionWorkspace<T, Space>>(
        m.micro_batch_, c.seq_len, local_heads, c.head_dim());
    m.ledger_.add(MemCategory::activations, attn_scratch->fused->scratch_bytes());
  } else {
    attn_scratch->unfused = std::make_unique<k::AttentionWorkspace<T, Space>>(
        m.micro_batch_, c.seq_len, local_heads, c.head_dim());
    attn_scratch->probs = attn_scratch->unfused->probs;
    m.ledger_.add(MemCategory::activations, attn_scratch->unfused->scratch_bytes());
  }
}

// The router's gradients and statistics, and (ep > 1) the expert-count exchange's buffers.
template <class T>
void GptModel<T>::Impl::allocate_router_buffers() {
  const int E = cfg.moe.experts, K = E > 0 ? cfg.moe.top_k : 0;
  if (E > 0) {
    dgate = mat("paraxis::moe_dgate", N, K);
    dprobs = mat("paraxis::moe_dprobs", N, E);
    drouter = mat("paraxis::moe_drouter", N, E);
    router_requested =
        m.ledger_.track(MemCategory::activations, I1("paraxis::router_requested", E));
    router_prob_sum = vec("paraxis::router_prob_sum", E);
    if (lay.ep > 1) {
      count_send = m.ledger_.track(MemCategory::activations, I1("paraxis::moe_count_send", E));
      count_recv = m.ledger_.track(MemCategory::activations, I1("paraxis::moe_count_recv", E));
    }
  }
}

template <class T>
typename GptModel<T>::Impl::ActSet& GptModel<T>::Impl::acquire(int chunk, int mb) {
  const auto key = std::make_pair(chunk, mb);
  auto it = live.find(key);
  if (it != live.end()) return *it->second;
  ActSet* set = nullptr;
  for (auto& s : pool[chunk])
    if (!s->in_use) {
      set = s.get();
      break;
    }
  if (!set) {
    pool[chunk].push_back(allocate_set(chunk));
    set = pool[chunk].back().get();
  }
  set->in_use = true;
  live[key] = set;
  m.peak_sets_ = std::max(m.peak_sets_, static_cast<int>(live.size()));
  return *set;
}

template <class T>
typename GptModel<T>::Impl::ActSet& GptModel<T>::Impl::find(int chunk, int mb) {
  auto it = live.find({chunk, mb});
  if (it == live.end())
    throw std::logic_error("GptModel: no activations for chunk " + std::to_string(chunk) +
                           ", micro-batch " + std::to_string(mb) + " (forward not run)");
  return *it->second;
}

template <class T>
void GptModel<T>::Impl::release(int chunk, int mb) {
  auto it = live.find({chunk, mb});
  if (it == live.end()) return;
  it->second->in_use = false;
  it->second->input_grad_done = false;
  live.erase(it);
}

template <class T>
void GptModel<T>::Impl::allocate_layer(LayerActs& a, bool moe) {
  const int H = cfg.hidden, E = cfg.moe.experts, K = E > 0 ? cfg.moe.top_k : 0;
  a.h1 = mat("paraxis::h1", Nl, H);
  a.a = mat("paraxis::attn_out", N, Hl);
  a.x_mid = mat("paraxis::x_mid", Nl, H);
  a.h2 = mat("paraxis::h2", Nl, H);
  a.ln1_mean = vec("paraxis::ln1_mean", Nl);
  a.ln1_rstd = vec("paraxis::ln1_rstd", Nl);
  a.ln2_mean = vec("paraxis::ln2_mean", Nl);
  a.ln2_rstd = vec("paraxis::ln2_rstd", Nl);
  if (cfg.attention == Attention::fused) {
    // config_rules.cpp refuses this pair first; a model built without the deck checks here.
    if (m.recompute_ == Recompute::selective)
      throw std::invalid_argument(
          "train.recompute: selective with model.attention: fused: the fused attention keeps no "
          "probabilities to recompute (expected recompute none or full)");
    a.fattn = std::make_unique<k::FusedAttentionWorkspace<T, Space>>(*attn_scratch->fused, true);
    m.ledger_.add(MemCategory::activations, a.fattn->saved_bytes());
  } else if (m.recompute_ != Recompute::selective) {
    a.attn = std::make_unique<k::AttentionWorkspace<T, Space>>(*attn_scratch->unfused, true);
    m.ledger_.add(MemCategory::activations, a.attn->saved_bytes());
  } else {
    // A copy shares every buffer of the scratch workspace (probabilities included); q, k and
    // v, which the recomputation reads, are the block's own.
    const auto& ws = *attn_scratch->unfused;
    a.attn = std::make_unique<k::AttentionWorkspace<T, Space>>(ws);
    auto own = [&](const char* label) {
      return m.ledger_.track(
          MemCategory::activations,
          k::View3<T, Space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)),
                             ws.q.extent(0), ws.q.extent(1), ws.q.extent(2)));
    };
    a.attn->q = own("paraxis::attention_q");
    a.attn->k = own("paraxis::attention_k");
    a.attn->v = own("paraxis::attention_v");
  }
  if (!moe) {
    a.u = mat("paraxis::mlp_u", N, Fl);
    a.g = mat("paraxis::mlp_g", N, Fl);
  } else {
    MoeActs& mo = a.moe;
    mo.probs = mat("paraxis::router_probs", N, E);
    mo.gate = mat("paraxis::gate", N, K);
    mo.expert_idx = m.ledger_.track(MemCategory::activations, I2("paraxis::expert_idx", N, K));
    mo.routing = std::make_unique<k::MoeRouting<Space>>(N, E, K);
    const auto& r = *mo.routing;
    m.ledger_.add(
        MemCategory::activations,
        (r.counts.span() + r.requested.span() + r.dropped.span() + r.offsets.span() +
         r.slot_token.span() + r.slot_k.span() + r.token_slot.span() + r.block_counts.span()) *
            sizeof(int));
  }
}

template <class T>
typename GptModel<T>::Impl::LayerActs& GptModel<T>::Impl::acts_of(ActSet& S, int i) {
  if (!m.recomputed_in_full(i)) return S.layers[i];
  const bool moe = chunk_params[S.chunk].blocks[i].moe;
  auto& w = moe ? working_moe : working_dense;
  if (!w) {
    w = std::make_unique<LayerActs>();
    allocate_layer(*w, moe);
  }
  return *w;
}

template <class T>
std::unique_ptr<typename GptModel<T>::Impl::ActSet> GptModel<T>::Impl::allocate_set(int chunk) {
  const ModelConfig& c = cfg;
  const ChunkParams& cp = chunk_params[chunk];
  const int H = c.hidden;
  auto s = std::make_unique<ActSet>();
  s->chunk = chunk;
  const int nl = cp.spec.layers();
  for (int l = 0; l <= nl; ++l) s->xs.push_back(mat("paraxis::x", Nl, H));
  s->layers.resize(nl);
  s->replay_at.assign(nl, nullptr);
  for (int l = 0; l < nl; ++l)
    if (!m.recomputed_in_full(l)) allocate_layer(s->layers[l], cp.blocks[l].moe);
  if (cp.spec.embedding)
    s->tokens = m.ledger_.track(MemCategory::activations, Tokens("paraxis::tokens_saved", N));
  if (cp.spec.head) {
    s->targets = m.ledger_.track(MemCategory::activations, Tokens("paraxis::targets_saved", N));
    s->xf = mat("paraxis::xf", Nl, H);
    s->logits = mat("paraxis::logits", N, Vl);
    s->lnf_mean = vec("paraxis::lnf_mean", Nl);
    s->lnf_rstd = vec("paraxis::lnf_rstd", Nl);
    s->lse = vec("paraxis::lse", N);
  }
  return s;
}

#define PARAXIS_GPT_MODEL_ACTIVATIONS(T)                                                    \
  template GptModel<T>::Impl::Impl(GptModel<T>&, ShardComms, bool);                         \
  template GptModel<T>::Impl::ActSet& GptModel<T>::Impl::acquire(int, int);                 \
  template GptModel<T>::Impl::ActSet& GptModel<T>::Impl::find(int, int);                    \
  template void GptModel<T>::Impl::release(int, int);                                       \
  template std::unique_ptr<GptModel<T>::Impl::ActSet> GptModel<T>::Impl::allocate_set(int); \
  template void GptModel<T>::Impl::allocate_layer(LayerActs&, bool);                        \
  template GptModel<T>::Impl::LayerActs& GptModel<T>::Impl::acts_of(ActSet&, int);
PARAXIS_GPT_MODEL_ACTIVATIONS(double)
PARAXIS_GPT_MODEL_ACTIVATIONS(float)
PARAXIS_GPT_MODEL_ACTIVATIONS(paraxis::bf16)
#undef PARAXIS_GPT_MODEL_ACTIVATIONS

}  // namespace paraxis::model
