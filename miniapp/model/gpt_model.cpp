// GptModel: the parameters of a shard, activations per (chunk, micro-batch) in flight, and the
// forward/backward of a chunk with its tensor-parallel and expert-parallel exchanges.
//
// Tensor parallelism (Shoeybi et al. 2019): Q, K, V and the MLP's first linear are
// column-parallel (this rank's heads / ffn columns), the attention output projection and the
// MLP's second linear row-parallel, so each block does one reduction after attention and one
// after the MLP, forward and backward. Embedding and head are vocabulary-parallel (padded to a
// multiple of tp); the loss never needs the full logits.
// Sequence parallelism (Korthikanti et al. 2022): the residual stream, LayerNorms and dropout-
// free residual adds hold 1/tp of the tokens; each reduction becomes a reduce-scatter and the
// input of each column-parallel linear is all-gathered. Only the sequence shard of a LayerNorm
// output is kept: backward gathers it again (the extra all-gather of Korthikanti et al.), so
// every activation of a block is divided by tp. Biases after a reduction get their gradient
// from the gathered output gradient (the same on every rank); the LayerNorms' gradients are
// partial sums (TensorSpec::sp_partial) the trainer sums over the group once per step.
// MoE with tp > 1: every tensor-parallel rank routes the same (gathered) tokens and computes
// its slice of each expert; expert outputs are partial sums, so the combined output is
// reduced like an MLP's and the gate gradient (a dot product with the partial outputs) is
// summed over the group. Expert parallelism: experts are split over the ep group; tokens go
// to the rank of their expert by all-to-all and the outputs come back the same way.
#include "model/gpt_model.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "model/tensor_parallel.hpp"
#include "paraxis/kernels/attention.hpp"
#include "paraxis/kernels/cross_entropy.hpp"
#include "paraxis/kernels/elementwise.hpp"
#include "paraxis/kernels/embedding.hpp"
#include "paraxis/kernels/gemm.hpp"
#include "paraxis/kernels/layernorm.hpp"
#include "paraxis/kernels/moe.hpp"
#include "paraxis/kernels/softmax.hpp"

namespace paraxis::model {

namespace k = paraxis::kernels;
using k::Trans;

namespace {
constexpr double kLayerNormEps = 1e-5;
constexpr double kInitStd = 0.02;

// Fences before starting and before stopping: never times asynchronous work.
class FencedTimer {
 public:
  FencedTimer(const char* name, double& sink, std::vector<Span>& spans, int mb, int chunk)
      : name_(name), sink_(sink), spans_(spans), mb_(mb), chunk_(chunk) {
    Kokkos::fence();
    begin_ = steady_seconds();
  }
  ~FencedTimer() {
    Kokkos::fence();
    const double end = steady_seconds();
    sink_ += end - begin_;
    spans_.push_back({name_, begin_, end, mb_, chunk_});
  }

 private:
  const char* name_;
  double& sink_;
  std::vector<Span>& spans_;
  int mb_, chunk_;
  double begin_;
};

// y = x w (+ b)
template <class X, class W, class B, class Y>
void linear_forward(const X& x, const W& w, const B& b, const Y& y) {
  k::gemm(Kokkos::DefaultExecutionSpace(), Trans::N, Trans::N, 1.0, x, w, 0.0, y);
  if (b.data()) k::bias_add(Kokkos::DefaultExecutionSpace(), y, b);
}

// dx (= or +=, by dx_beta) dy w^T;  dw += x^T dy;  db += colsum(dy)
template <class DY, class X, class W, class DX, class DW, class DB>
void linear_backward(const DY& dy, const X& x, const W& w, const DX& dx, double dx_beta,
                     const DW& dw, const DB& db) {
  const Kokkos::DefaultExecutionSpace space;
  if (dx.data()) k::gemm(space, Trans::N, Trans::T, 1.0, dy, w, dx_beta, dx);
  k::gemm(space, Trans::T, Trans::N, 1.0, x, dy, 1.0, dw);
  if (db.data()) k::bias_grad_accumulate(space, dy, db);
}

// Parameter indices of one block in the ParamStore (-1: not held / not present).
struct BlockParams {
  int layer = 0;
  bool moe = false;
  int unit = -1, expert_unit = -1;
  int ln1_g, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_g, ln2_b;
  int w1 = -1, b1 = -1, w2 = -1, b2 = -1;  // dense MLP
  int wr = -1, br = -1;                    // MoE router (bias only with router_skew)
  std::vector<int> ew1, eb1, ew2, eb2;     // this rank's experts
};

struct ChunkParams {
  ModelChunk spec;
  int emb_unit = -1, head_unit = -1;
  int wte = -1, wpe = -1, lnf_g = -1, lnf_b = -1, head = -1;
  std::vector<BlockParams> blocks;
};

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

}  // namespace

std::vector<TensorSpec> parameter_specs(const ModelConfig& c, const ShardLayout& layout) {
  ParamStore<float> ps;
  declare_parameters(ps, c, layout);
  return ps.specs();
}

template <class T>
struct GptModel<T>::Impl {
  using V1 = k::View1<T, Space>;
  using V2 = k::View2<T, Space>;
  using A1 = k::View1<G, Space>;
  using I1 = k::View1<int, Space>;
  using I2 = k::View2<int, Space>;

  // Saved by one MoE layer's forward for its backward.
  struct MoeActs {
    V2 probs, gate;
    I2 expert_idx;
    std::unique_ptr<k::MoeRouting<Space>> routing;
    V2 xe, ue, ge;  // expert side: the rows this rank's experts computed, expert-major
    V2 ye;          // source side: expert outputs of this rank's kept rows, expert-major
    V2 ye_local;    // ep > 1: the expert side's outputs, before they travel back
    // ep > 1: rows to / from each rank, rows per (source rank, local expert), and the
    // permutations between the received (source-major) and expert-major orders.
    std::vector<int> send_rows, recv_rows, recv_counts, expert_offsets;
    I1 to_expert_order, to_source_order;
    int local_rows = 0;
  };
  struct LayerActs {
    V2 h1, a, x_mid, h2, u, g;
    A1 ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;
    std::unique_ptr<k::AttentionWorkspace<T, Space>> attn;
    MoeActs moe;
  };
  // Everything one (chunk, micro-batch) pair keeps from its forward to its backward.
  struct ActSet {
    int chunk = -1;
    bool in_use = false;
    std::vector<V2> xs;  // residual stream: input of each block, then the last block's output
    std::vector<LayerActs> layers;
    Tokens tokens, targets;
    V2 xf, logits;
    A1 lnf_mean, lnf_rstd, lse;
  };

  GptModel& m;
  const ModelConfig& cfg;
  const ShardLayout& lay;
  ShardComms comms;
  int N, Nl, Hl, Fl, Vl, voff;  // tokens, local tokens, local hidden/ffn/vocab, vocab offset
  bool sp;
  std::vector<ChunkParams> chunk_params;
  // Scratch (not kept across micro-batches).
  V2 q, kk, vv, dq, dk, dv, da, dx_a, dx_b, dtmp, full, dfull, part, dff, dlogits;
  V2 dgate, dprobs, drouter;
  V2 s_stage, s_recv, s_dy, s_dx, e_dy, e_dh, e_du, e_dx;  // MoE, grown on demand
  I1 router_requested, count_send, count_recv;
  I2 replay;  // routing replay: the forced choices of one layer
  A1 router_prob_sum;
  std::unique_ptr<k::AttentionWorkspace<T, Space>> attn_scratch;
  std::unique_ptr<VocabParallelCrossEntropy<G, Space>> vpce;
  // forward_backward across several chunks of one rank. A vector, not an array of Views
  // (docs/portability.md: arrays of default-constructed Views crash on a Kokkos 4 snapshot).
  std::vector<V2> chain_grad;
  // Activation sets: a pool per chunk (reused, never shrunk: what is allocated is the peak
  // in flight) and the pairs in flight.
  std::vector<std::vector<std::unique_ptr<ActSet>>> pool;
  std::map<std::pair<int, int>, ActSet*> live;

  Impl(GptModel& model, ShardComms shard_comms, bool allocate_store)
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

    const int H = c.hidden, E = c.moe.experts, K = E > 0 ? c.moe.top_k : 0;
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
    attn_scratch = std::make_unique<k::AttentionWorkspace<T, Space>>(
        m.micro_batch_, c.seq_len, c.heads / lay.tp, c.head_dim());
    m.ledger_.add(MemCategory::activations, attn_scratch->scratch_bytes());
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

  V2 mat(const char* label, int r, int cols) {
    return m.ledger_.track(
        MemCategory::activations,
        V2(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), r, cols));
  }
  A1 vec(const char* label, int n) {
    return m.ledger_.track(MemCategory::activations, A1(std::string(label), n));
  }
  // Grow-only buffers (MoE rows depend on the routing): at least `rows` rows.
  void grow(V2& v, const char* label, int rows, int cols) {
    if (v.data() && v.extent(0) >= static_cast<std::size_t>(rows)) return;
    if (v.data()) m.ledger_.release(MemCategory::activations, v.span() * sizeof(T));
    v = mat(label, std::max(rows, 1), cols);
  }
  void grow(I1& v, const char* label, int n) {
    if (v.data() && v.extent(0) >= static_cast<std::size_t>(n)) return;
    if (v.data()) m.ledger_.release(MemCategory::activations, v.span() * sizeof(int));
    v = m.ledger_.track(MemCategory::activations, I1(std::string(label), std::max(n, 1)));
  }

  int tp_size() const { return lay.tp; }
  CommGroup& tp() { return *comms.tp; }
  // Reduction of a row-parallel product: `partial` [N, H] holds this rank's sum; `out` [Nl, H]
  // receives the total (reduce-scatter with sequence parallelism; else in place, out ==
  // partial).
  void finish_rows(const V2& partial, const V2& out) {
    const Space space;
    if (sp) {
      tp_reduce_scatter(space, tp(), partial, out);
    } else if (tp_size() > 1) {
      tp_all_reduce(space, tp(), out);
    }
  }
  // The full-token View of a sequence-sharded activation (gathered into `into`), or the
  // activation itself without sequence parallelism.
  V2 gathered(const V2& shard, const V2& into) {
    if (!sp) return shard;
    tp_all_gather(Space(), tp(), shard, into);
    return into;
  }
  // Where a row-parallel product is written before finish_rows.
  V2 partial_target(const V2& out) { return sp ? part : out; }

  ActSet& acquire(int chunk, int mb) {
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
  ActSet& find(int chunk, int mb) {
    auto it = live.find({chunk, mb});
    if (it == live.end())
      throw std::logic_error("GptModel: no activations for chunk " + std::to_string(chunk) +
                             ", micro-batch " + std::to_string(mb) + " (forward not run)");
    return *it->second;
  }
  void release(int chunk, int mb) {
    auto it = live.find({chunk, mb});
    if (it == live.end()) return;
    it->second->in_use = false;
    live.erase(it);
  }

  std::unique_ptr<ActSet> allocate_set(int chunk) {
    const ModelConfig& c = cfg;
    const ChunkParams& cp = chunk_params[chunk];
    const int H = c.hidden, E = c.moe.experts, K = E > 0 ? c.moe.top_k : 0;
    auto s = std::make_unique<ActSet>();
    s->chunk = chunk;
    const int nl = cp.spec.layers();
    for (int l = 0; l <= nl; ++l) s->xs.push_back(mat("paraxis::x", Nl, H));
    s->layers.resize(nl);
    for (int l = 0; l < nl; ++l) {
      LayerActs& a = s->layers[l];
      a.h1 = mat("paraxis::h1", Nl, H);
      a.a = mat("paraxis::attn_out", N, Hl);
      a.x_mid = mat("paraxis::x_mid", Nl, H);
      a.h2 = mat("paraxis::h2", Nl, H);
      a.ln1_mean = vec("paraxis::ln1_mean", Nl);
      a.ln1_rstd = vec("paraxis::ln1_rstd", Nl);
      a.ln2_mean = vec("paraxis::ln2_mean", Nl);
      a.ln2_rstd = vec("paraxis::ln2_rstd", Nl);
      a.attn = std::make_unique<k::AttentionWorkspace<T, Space>>(*attn_scratch, true);
      m.ledger_.add(MemCategory::activations, a.attn->saved_bytes());
      if (!cp.blocks[l].moe) {
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

  UnitHooks no_hooks;
  UnitHooks& h() { return m.hooks_ ? *m.hooks_ : no_hooks; }
  void open_units(const BlockParams& b, bool forward) {
    for (int u : {b.unit, b.expert_unit})
      if (u >= 0) forward ? h().before_forward(u) : h().before_backward(u);
  }
  void close_units(const BlockParams& b, bool forward) {
    for (int u : {b.expert_unit, b.unit})
      if (u >= 0) forward ? h().after_forward(u) : h().after_backward(u);
  }

  // ---- MoE
  // Runs this rank's experts on `rows` rows of xe (expert-major, offsets per local expert):
  // ye = gelu(xe W1 + b1) W2 (+ b2 on tensor-parallel rank 0: the outputs are partial sums).
  void experts_forward(const BlockParams& b, MoeActs& mo, const std::vector<int>& offsets,
                       const V2& ye) {
    const Space space;
    auto& ps = m.params_;
    for (std::size_t e = 0; e < b.ew1.size(); ++e) {
      const int lo = offsets[e], hi = offsets[e + 1];
      if (lo == hi) continue;
      auto rows = std::make_pair(lo, hi);
      auto xe = Kokkos::subview(mo.xe, rows, Kokkos::ALL);
      auto ue = Kokkos::subview(mo.ue, rows, Kokkos::ALL);
      auto ge = Kokkos::subview(mo.ge, rows, Kokkos::ALL);
      auto y = Kokkos::subview(ye, rows, Kokkos::ALL);
      linear_forward(xe, ps.w2(b.ew1[e]), ps.w1(b.eb1[e]), ue);
      k::gelu_forward(space, ue, ge);
      linear_forward(
          ge, ps.w2(b.ew2[e]),
          lay.tp_rank == 0 ? ps.w1(b.eb2[e]) : typename ParamStore<T>::template UView1<T>(), y);
    }
  }
  void experts_backward(const BlockParams& b, MoeActs& mo, const std::vector<int>& offsets,
                        const V2& dye, const V2& dxe) {
    const Space space;
    auto& ps = m.params_;
    for (std::size_t e = 0; e < b.ew1.size(); ++e) {
      const int lo = offsets[e], hi = offsets[e + 1];
      if (lo == hi) continue;
      auto rows = std::make_pair(lo, hi);
      auto dge = Kokkos::subview(e_dh, rows, Kokkos::ALL);
      auto due = Kokkos::subview(e_du, rows, Kokkos::ALL);
      linear_backward(Kokkos::subview(dye, rows, Kokkos::ALL),
                      Kokkos::subview(mo.ge, rows, Kokkos::ALL), ps.w2(b.ew2[e]), dge, 0.0,
                      ps.g2(b.ew2[e]), ps.g1(b.eb2[e]));
      k::gelu_backward(space, Kokkos::subview(mo.ue, rows, Kokkos::ALL), dge, due);
      linear_backward(due, Kokkos::subview(mo.xe, rows, Kokkos::ALL), ps.w2(b.ew1[e]),
                      Kokkos::subview(dxe, rows, Kokkos::ALL), 0.0, ps.g2(b.ew1[e]),
                      ps.g1(b.eb1[e]));
    }
  }

  // Sends rows between source order (this rank's kept rows, expert-major over all experts)
  // and the expert ranks: `rows_to[d]` rows to rank d, `rows_from[s]` from rank s.
  void exchange_rows(const V2& send, const std::vector<int>& rows_to, const V2& recv,
                     const std::vector<int>& rows_from) {
    const int ep = lay.ep, H = cfg.hidden;
    std::vector<int> sc(ep), sd(ep), rc(ep), rd(ep);
    long so = 0, ro = 0;
    for (int d = 0; d < ep; ++d) {
      sc[d] = rows_to[d] * H;
      rc[d] = rows_from[d] * H;
      sd[d] = static_cast<int>(so);
      rd[d] = static_cast<int>(ro);
      so += sc[d];
      ro += rc[d];
    }
    if (so > INT32_MAX || ro > INT32_MAX)
      throw std::overflow_error("expert all-to-all: more than 2^31 elements in one exchange");
    Kokkos::fence();
    comms.ep->all_to_all_v(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(),
                           dtype_of<T>());
  }

  // out [N, H]: the layer's output before the tensor-parallel reduction (partial sums when
  // tp > 1). h2 [N, H]: the MoE input, every token of the micro-batch.
  MoeLayerStats moe_forward(const BlockParams& b, MoeActs& mo, const V2& h2, const V2& out) {
    const Space space;
    auto& ps = m.params_;
    const int E = cfg.moe.experts, K = cfg.moe.top_k, H = cfg.hidden, ep = lay.ep;
    k::gemm(space, Trans::N, Trans::N, 1.0, h2, ps.w2(b.wr), 0.0, drouter);
    if (b.br >= 0) k::bias_add(space, drouter, ps.w1(b.br));
    k::softmax_forward(space, drouter, mo.probs);
    k::topk_forward(space, mo.probs, K, mo.expert_idx, mo.gate);
    long flips = 0;
    if (m.replay_routing_) {
      if (!replay.data())
        replay = m.ledger_.track(MemCategory::activations, I2("paraxis::moe_replayed", N, K));
      Kokkos::deep_copy(replay, Kokkos::View<const int**, Kokkos::LayoutRight, Kokkos::HostSpace,
                                             Kokkos::MemoryUnmanaged>(m.replay_routing_, N, K));
      m.replay_routing_ += static_cast<std::size_t>(N) * K;
      flips = k::topk_replay(space, mo.probs, replay, mo.expert_idx, mo.gate);
    }
    auto& r = *mo.routing;
    k::moe_build_routing(space, mo.expert_idx, expert_capacity(cfg, N), r);
    const int P = r.rows;
    const int El = E / ep;
    grow(mo.ye, "paraxis::moe_ye", P, H);
    if (ep == 1) {
      grow(mo.xe, "paraxis::moe_xe", P, H);
      grow(mo.ue, "paraxis::moe_ue", P, Fl);
      grow(mo.ge, "paraxis::moe_ge", P, Fl);
      k::moe_gather(space, h2, r, mo.xe);
      mo.expert_offsets.assign(r.offsets_host.data(), r.offsets_host.data() + E + 1);
      mo.local_rows = P;
      experts_forward(b, mo, mo.expert_offsets, mo.ye);
    } else {
      // Rows per (destination rank, its local expert), exchanged so that each expert rank
      // knows how many rows of each of its experts every source sends.
      // (In the memory space the collectives read: device memory with NCCL or a GPU-aware MPI.)
      std::vector<int> counts(r.counts_host.data(), r.counts_host.data() + E);
      mo.recv_counts.assign(E, 0);
      {
        std::vector<int> c1(ep, El), d1(ep);
        for (int d = 0; d < ep; ++d) d1[d] = d * El;
        Kokkos::deep_copy(count_send, r.counts);
        Kokkos::fence();
        comms.ep->all_to_all_v(count_send.data(), c1.data(), d1.data(), count_recv.data(),
                               c1.data(), d1.data(), DType::i32);
        Kokkos::View<int*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> got(mo.recv_counts.data(),
                                                                           E);
        Kokkos::deep_copy(got, count_recv);
      }
      mo.send_rows.assign(ep, 0);
      mo.recv_rows.assign(ep, 0);
      for (int d = 0; d < ep; ++d)
        for (int e = 0; e < El; ++e) {
          mo.send_rows[d] += counts[d * El + e];
          mo.recv_rows[d] += mo.recv_counts[d * El + e];
        }
      int R = 0;
      for (int s = 0; s < ep; ++s) R += mo.recv_rows[s];
      mo.local_rows = R;
      // Received rows are source-major (then expert); experts want expert-major (then
      // source, i.e. token order of source 0, then source 1, ...).
      std::vector<int> src_first(ep + 1, 0);
      for (int s = 0; s < ep; ++s) src_first[s + 1] = src_first[s] + mo.recv_rows[s];
      std::vector<int> to_expert(R), to_source(R);
      mo.expert_offsets.assign(El + 1, 0);
      int i = 0;
      for (int e = 0; e < El; ++e) {
        for (int s = 0; s < ep; ++s) {
          int first = src_first[s];
          for (int e2 = 0; e2 < e; ++e2) first += mo.recv_counts[s * El + e2];
          for (int j = 0; j < mo.recv_counts[s * El + e]; ++j) {
            to_expert[i] = first + j;
            to_source[first + j] = i;
            ++i;
          }
        }
        mo.expert_offsets[e + 1] = i;
      }
      grow(mo.to_expert_order, "paraxis::moe_to_expert_order", R);
      grow(mo.to_source_order, "paraxis::moe_to_source_order", R);
      auto copy_index = [&](const std::vector<int>& host, const I1& dev) {
        if (host.empty()) return;
        Kokkos::View<const int*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> hv(host.data(),
                                                                                host.size());
        Kokkos::deep_copy(Kokkos::subview(dev, std::make_pair(std::size_t(0), host.size())), hv);
      };
      copy_index(to_expert, mo.to_expert_order);
      copy_index(to_source, mo.to_source_order);
      grow(s_stage, "paraxis::moe_send", std::max(P, R), H);
      grow(s_recv, "paraxis::moe_recv", std::max(P, R), H);
      grow(mo.xe, "paraxis::moe_xe", R, H);
      grow(mo.ue, "paraxis::moe_ue", R, Fl);
      grow(mo.ge, "paraxis::moe_ge", R, Fl);
      grow(mo.ye_local, "paraxis::moe_ye_local", R, H);
      k::moe_gather(space, h2, r, s_stage);
      exchange_rows(s_stage, mo.send_rows, s_recv, mo.recv_rows);
      k::gather_rows(space, s_recv, mo.to_expert_order, R, mo.xe);
      experts_forward(b, mo, mo.expert_offsets, mo.ye_local);
      k::gather_rows(space, mo.ye_local, mo.to_source_order, R, s_stage);
      exchange_rows(s_stage, mo.recv_rows, mo.ye, mo.send_rows);
    }
    k::moe_combine_forward(space, mo.ye, mo.gate, r, out);
    k::moe_router_stats(space, mo.probs, mo.expert_idx, router_requested, router_prob_sum);
    auto req_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), router_requested);
    auto sum_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), router_prob_sum);
    std::vector<double> psum(E);
    for (int e = 0; e < E; ++e) psum[e] = static_cast<double>(sum_h(e));
    MoeLayerStats st;
    st.layer = b.layer;
    st.aux_loss = k::moe_aux_loss_value(req_h.data(), psum.data(), N, K, E);
    st.tokens_per_expert.assign(r.counts_host.data(), r.counts_host.data() + E);
    st.dropped_per_expert.assign(r.dropped_host.data(), r.dropped_host.data() + E);
    st.routing_flips = flips;
    if (m.record_routing_) {
      auto idx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), mo.expert_idx);
      st.routing.assign(idx.data(), idx.data() + idx.size());
    }
    return st;
  }

  // dout [N, H]: gradient of the MoE output (every token); dh2 [N, H]: receives this rank's
  // partial gradient of the MoE input (summed over the tensor-parallel group by the caller).
  void moe_backward(const BlockParams& b, MoeActs& mo, const V2& h2, const V2& dout, const V2& dh2,
                    double aux_scale) {
    const Space space;
    auto& ps = m.params_;
    const int K = cfg.moe.top_k, H = cfg.hidden;
    auto& r = *mo.routing;
    const int P = r.rows, R = mo.local_rows;
    grow(s_dy, "paraxis::moe_dye", P, H);
    grow(s_dx, "paraxis::moe_dxe", P, H);
    k::moe_combine_backward(space, dout, mo.ye, mo.gate, r, s_dy, dgate);
    // Expert outputs are partial over the tensor-parallel group, so is the gate's gradient.
    if (tp_size() > 1) tp_all_reduce(space, tp(), dgate);
    grow(e_dh, "paraxis::moe_dge", R, Fl);
    grow(e_du, "paraxis::moe_due", R, Fl);
    if (lay.ep == 1) {
      experts_backward(b, mo, mo.expert_offsets, s_dy, s_dx);
    } else {
      grow(e_dy, "paraxis::moe_dye_local", R, H);
      grow(e_dx, "paraxis::moe_dxe_local", R, H);
      exchange_rows(s_dy, mo.send_rows, s_recv, mo.recv_rows);
      k::gather_rows(space, s_recv, mo.to_expert_order, R, e_dy);
      experts_backward(b, mo, mo.expert_offsets, e_dy, e_dx);
      k::gather_rows(space, e_dx, mo.to_source_order, R, s_stage);
      exchange_rows(s_stage, mo.recv_rows, s_dx, mo.send_rows);
    }
    Kokkos::deep_copy(dh2, T(0));
    k::moe_gather_backward(space, s_dx, r, dh2);
    k::topk_backward(space, dgate, mo.expert_idx, dprobs);
    if (aux_scale != 0) {
      // The statistics of this micro-batch were computed in forward; recompute the requested
      // counts (cheap) since the scratch is shared between layers.
      k::moe_router_stats(space, mo.probs, mo.expert_idx, router_requested, router_prob_sum);
      k::moe_aux_loss_backward(space, router_requested, static_cast<long>(N), K, aux_scale, dprobs);
    }
    k::softmax_backward(space, mo.probs, dprobs, drouter);
    k::gemm(space, Trans::T, Trans::N, 1.0, h2, drouter, 1.0, ps.g2(b.wr));
    if (b.br >= 0) k::bias_grad_accumulate(space, drouter, ps.g1(b.br));
    // The router's input gradient is whole on every tensor-parallel rank: add it once.
    if (lay.tp_rank == 0) k::gemm(space, Trans::N, Trans::T, 1.0, drouter, ps.w2(b.wr), 1.0, dh2);
  }

  // ---- one block
  void block_forward(const BlockParams& b, LayerActs& A, const V2& x, const V2& out,
                     MicroBatchResult& res) {
    const Space space;
    auto& ps = m.params_;
    k::layernorm_forward(space, x, ps.w1(b.ln1_g), ps.w1(b.ln1_b), kLayerNormEps, A.h1, A.ln1_mean,
                         A.ln1_rstd);
    const V2 h1 = gathered(A.h1, full);
    linear_forward(h1, ps.w2(b.wq), ps.w1(b.bq), q);
    linear_forward(h1, ps.w2(b.wk), ps.w1(b.bk), kk);
    linear_forward(h1, ps.w2(b.wv), ps.w1(b.bv), vv);
    k::attention_forward(space, q, kk, vv, *A.attn, A.a);
    {
      const V2 t = partial_target(A.x_mid);
      k::gemm(space, Trans::N, Trans::N, 1.0, A.a, ps.w2(b.wo), 0.0, t);
      finish_rows(t, A.x_mid);
    }
    k::bias_add(space, A.x_mid, ps.w1(b.bo));
    k::add_inplace(space, A.x_mid, x);
    k::layernorm_forward(space, A.x_mid, ps.w1(b.ln2_g), ps.w1(b.ln2_b), kLayerNormEps, A.h2,
                         A.ln2_mean, A.ln2_rstd);
    const V2 h2 = gathered(A.h2, full);
    const V2 t = partial_target(out);
    if (!b.moe) {
      linear_forward(h2, ps.w2(b.w1), ps.w1(b.b1), A.u);
      k::gelu_forward(space, A.u, A.g);
      k::gemm(space, Trans::N, Trans::N, 1.0, A.g, ps.w2(b.w2), 0.0, t);
      finish_rows(t, out);
      k::bias_add(space, out, ps.w1(b.b2));
    } else {
      res.moe.push_back(moe_forward(b, A.moe, h2, t));
      res.aux_sum += res.moe.back().aux_loss;
      finish_rows(t, out);
    }
    k::add_inplace(space, out, A.x_mid);
  }

  // dx_a: in, the gradient of the block's output; out, the gradient of its input x.
  void block_backward(const BlockParams& b, LayerActs& A, const V2& x, double aux_scale) {
    const Space space;
    auto& ps = m.params_;
    // MLP / MoE branch: out = x_mid + f(ln2(x_mid)) (+ b2).
    {
      const V2 dy = gathered(dx_a, dfull);
      const V2 dp = partial_target(dtmp);
      if (!b.moe) {
        linear_backward(dy, A.g, ps.w2(b.w2), dff, 0.0, ps.g2(b.w2), ps.g1(b.b2));
        k::gelu_backward(space, A.u, dff, dff);
        const V2 h2 = gathered(A.h2, full);
        linear_backward(dff, h2, ps.w2(b.w1), dp, 0.0, ps.g2(b.w1), ps.g1(b.b1));
      } else {
        const V2 h2 = gathered(A.h2, full);
        moe_backward(b, A.moe, h2, dy, dp, aux_scale);
      }
      finish_rows(dp, dtmp);
    }
    k::layernorm_backward(space, dtmp, A.x_mid, ps.w1(b.ln2_g), A.ln2_mean, A.ln2_rstd, dx_b,
                          ps.g1(b.ln2_g), ps.g1(b.ln2_b));
    k::add_inplace(space, dx_b, dx_a);  // dx_b: gradient w.r.t. x_mid
    // Attention branch: x_mid = x + Wo attn(ln1(x)) + bo.
    {
      const V2 dy = gathered(dx_b, dfull);
      linear_backward(dy, A.a, ps.w2(b.wo), da, 0.0, ps.g2(b.wo), ps.g1(b.bo));
      k::attention_backward(space, da, *A.attn, dq, dk, dv);
      const V2 h1 = gathered(A.h1, full);
      const V2 dp = partial_target(dtmp);
      linear_backward(dq, h1, ps.w2(b.wq), dp, 0.0, ps.g2(b.wq), ps.g1(b.bq));
      linear_backward(dk, h1, ps.w2(b.wk), dp, 1.0, ps.g2(b.wk), ps.g1(b.bk));
      linear_backward(dv, h1, ps.w2(b.wv), dp, 1.0, ps.g2(b.wv), ps.g1(b.bv));
      finish_rows(dp, dtmp);
    }
    k::layernorm_backward(space, dtmp, x, ps.w1(b.ln1_g), A.ln1_mean, A.ln1_rstd, dx_a,
                          ps.g1(b.ln1_g), ps.g1(b.ln1_b));
    k::add_inplace(space, dx_a, dx_b);  // dx_a: gradient w.r.t. the block's input
  }

  // ---- chunks
  MicroBatchResult forward_chunk(int chunk, ActSet& S, const Tokens& tokens,
                                 const Tokens& targets) {
    const Space space;
    auto& ps = m.params_;
    const ChunkParams& cp = chunk_params[chunk];
    MicroBatchResult res;
    if (cp.spec.embedding) {
      h().before_forward(cp.emb_unit);
      Kokkos::deep_copy(S.tokens, tokens);
      const V2 x0 = S.xs[0];
      if (tp_size() == 1) {
        k::embedding_forward(space, tokens, ps.w2(cp.wte), ps.w2(cp.wpe), cfg.seq_len, 0, x0);
      } else {
        // Tokens outside this rank's vocabulary rows give 0; rank 0 adds the positions.
        const V2 t = partial_target(x0);
        k::embedding_forward(space, tokens, ps.w2(cp.wte), ps.w2(cp.wpe), cfg.seq_len, voff, t,
                             lay.tp_rank == 0);
        finish_rows(t, x0);
      }
      h().after_forward(cp.emb_unit);
    }
    for (std::size_t i = 0; i < cp.blocks.size(); ++i) {
      open_units(cp.blocks[i], true);
      block_forward(cp.blocks[i], S.layers[i], S.xs[i], S.xs[i + 1], res);
      close_units(cp.blocks[i], true);
    }
    if (cp.spec.head) {
      h().before_forward(cp.head_unit);
      Kokkos::deep_copy(S.targets, targets);
      k::layernorm_forward(space, S.xs.back(), ps.w1(cp.lnf_g), ps.w1(cp.lnf_b), kLayerNormEps,
                           S.xf, S.lnf_mean, S.lnf_rstd);
      const V2 xf = gathered(S.xf, full);
      k::gemm(space, Trans::N, Trans::N, 1.0, xf, ps.w2(cp.head), 0.0, S.logits);
      if (tp_size() == 1) {
        res.ce_sum = static_cast<double>(
            k::cross_entropy_forward(space, S.logits, targets, cfg.vocab, S.lse));
      } else {
        res.ce_sum = static_cast<double>(
            vpce->forward(space, tp(), S.logits, targets, voff, cfg.vocab, S.lse));
      }
      h().after_forward(cp.head_unit);
    }
    return res;
  }

  void backward_chunk(int chunk, ActSet& S, const Act& grad_output, const Act& grad_input,
                      double ce_scale, double aux_scale) {
    const Space space;
    auto& ps = m.params_;
    const ChunkParams& cp = chunk_params[chunk];
    if (cp.spec.head) {
      h().before_backward(cp.head_unit);
      if (tp_size() == 1) {
        k::cross_entropy_backward(space, S.logits, S.targets, S.lse, cfg.vocab, ce_scale, dlogits);
      } else {
        vpce->backward(space, S.logits, S.targets, S.lse, voff, cfg.vocab, ce_scale, dlogits);
      }
      const V2 xf = gathered(S.xf, full);
      const V2 dp = partial_target(dtmp);
      linear_backward(dlogits, xf, ps.w2(cp.head), dp, 0.0, ps.g2(cp.head), A1());
      finish_rows(dp, dtmp);
      k::layernorm_backward(space, dtmp, S.xs.back(), ps.w1(cp.lnf_g), S.lnf_mean, S.lnf_rstd, dx_a,
                            ps.g1(cp.lnf_g), ps.g1(cp.lnf_b));
      h().after_backward(cp.head_unit);
    } else {
      require_rows("grad_output", grad_output);
      Kokkos::deep_copy(dx_a, grad_output);
    }
    for (int i = static_cast<int>(cp.blocks.size()) - 1; i >= 0; --i) {
      open_units(cp.blocks[i], false);
      block_backward(cp.blocks[i], S.layers[i], S.xs[i], aux_scale);
      close_units(cp.blocks[i], false);
    }
    if (cp.spec.embedding) {
      h().before_backward(cp.emb_unit);
      const V2 dX = gathered(dx_a, dfull);
      k::embedding_backward(space, S.tokens, dX, cfg.seq_len, voff, ps.g2(cp.wte), ps.g2(cp.wpe));
      h().after_backward(cp.emb_unit);
    } else {
      require_rows("grad_input", grad_input);
      Kokkos::deep_copy(grad_input, dx_a);
    }
  }

  void require_rows(const char* what, const Act& v) const {
    if (v.extent(0) != static_cast<std::size_t>(Nl) ||
        v.extent(1) != static_cast<std::size_t>(cfg.hidden))
      throw std::invalid_argument(std::string("GptModel::backward_chunk: ") + what + " is " +
                                  k::shape_string(v) + ", expected [" + std::to_string(Nl) + "," +
                                  std::to_string(cfg.hidden) + "]");
  }
};

template <class T>
GptModel<T>::GptModel(const ModelConfig& cfg, int micro_batch, const ShardLayout& layout,
                      ShardComms comms, int unit_multiple, bool allocate_store)
    : cfg_(cfg), micro_batch_(micro_batch), layout_(layout), params_(unit_multiple) {
  impl_ = std::make_unique<Impl>(*this, comms, allocate_store);
}

template <class T>
GptModel<T>::~GptModel() = default;

template <class T>
void GptModel<T>::initialize(std::uint64_t seed) {
  params_.initialize(seed);
}

template <class T>
int GptModel<T>::local_tokens() const {
  return impl_->Nl;
}

template <class T>
typename GptModel<T>::Act GptModel<T>::chunk_input(int chunk, int mb) {
  return impl_->acquire(chunk, mb).xs.front();
}

template <class T>
typename GptModel<T>::Act GptModel<T>::chunk_output(int chunk, int mb) {
  return impl_->find(chunk, mb).xs.back();
}

template <class T>
MicroBatchResult GptModel<T>::forward_chunk(int chunk, int mb, const Tokens& tokens,
                                            const Tokens& targets) {
  Kokkos::Profiling::pushRegion("paraxis::forward");
  MicroBatchResult r;
  {
    FencedTimer t("forward", fwd_s_, spans_, mb, chunk);
    r = impl_->forward_chunk(chunk, impl_->acquire(chunk, mb), tokens, targets);
  }
  Kokkos::Profiling::popRegion();
  return r;
}

template <class T>
void GptModel<T>::backward_chunk(int chunk, int mb, const Act& grad_output, const Act& grad_input,
                                 double ce_scale, double aux_scale) {
  Kokkos::Profiling::pushRegion("paraxis::backward");
  {
    FencedTimer t("backward", bwd_s_, spans_, mb, chunk);
    impl_->backward_chunk(chunk, impl_->find(chunk, mb), grad_output, grad_input, ce_scale,
                          aux_scale);
  }
  impl_->release(chunk, mb);
  Kokkos::Profiling::popRegion();
}

template <class T>
void GptModel<T>::discard(int chunk, int mb) {
  impl_->release(chunk, mb);
}

template <class T>
int GptModel<T>::live_activation_sets() const {
  return static_cast<int>(impl_->live.size());
}

namespace {
void require_whole_chain(const ShardLayout& lay) {
  for (std::size_t c = 0; c < lay.chunks.size(); ++c) {
    const auto& ch = lay.chunks[c];
    const bool ok = (c == 0) == ch.embedding && (c + 1 == lay.chunks.size()) == ch.head &&
                    (c == 0 || lay.chunks[c - 1].end_layer == ch.first_layer);
    if (!ok)
      throw std::logic_error(
          "GptModel::forward_backward needs the shard's chunks to be the whole model in order");
  }
}
}  // namespace

template <class T>
MicroBatchResult GptModel<T>::forward_all(int key, const Tokens& tokens, const Tokens& targets) {
  require_whole_chain(layout_);
  MicroBatchResult all;
  for (int c = 0; c < chunks(); ++c) {
    if (c > 0) Kokkos::deep_copy(chunk_input(c, key), chunk_output(c - 1, key));
    auto r = forward_chunk(c, key, tokens, targets);
    all.ce_sum += r.ce_sum;
    all.aux_sum += r.aux_sum;
    for (auto& s : r.moe) all.moe.push_back(std::move(s));
  }
  return all;
}

template <class T>
MicroBatchResult GptModel<T>::forward(const Tokens& tokens, const Tokens& targets) {
  constexpr int key = -1;
  MicroBatchResult all = forward_all(key, tokens, targets);
  for (int c = 0; c < chunks(); ++c) discard(c, key);
  return all;
}

template <class T>
MicroBatchResult GptModel<T>::forward_backward(const Tokens& tokens, const Tokens& targets,
                                               double ce_scale, double aux_scale) {
  constexpr int key = -1;
  MicroBatchResult all = forward_all(key, tokens, targets);
  auto& grads = impl_->chain_grad;
  if (chunks() > 1 && grads.empty())
    for (int k = 0; k < 2; ++k)
      grads.push_back(impl_->mat("paraxis::chunk_grad", impl_->Nl, cfg_.hidden));
  for (int c = chunks() - 1; c >= 0; --c) {
    const Act out = c + 1 < chunks() ? grads[(c + 1) % 2] : Act();
    const Act in = c > 0 ? grads[c % 2] : Act();
    backward_chunk(c, key, out, in, ce_scale, aux_scale);
  }
  return all;
}

double steady_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

template class GptModel<double>;
template class GptModel<float>;
template class GptModel<paraxis::bf16>;

}  // namespace paraxis::model
