// GptModel: parameters, activations and the forward/backward of one micro-batch.
#include "gpt_model.hpp"

#include <chrono>
#include <cmath>
#include <string>

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
  FencedTimer(const char* name, double& sink, std::vector<Span>& spans)
      : name_(name), sink_(sink), spans_(spans) {
    Kokkos::fence();
    begin_ = steady_seconds();
  }
  ~FencedTimer() {
    Kokkos::fence();
    const double end = steady_seconds();
    sink_ += end - begin_;
    spans_.push_back({name_, begin_, end});
  }

 private:
  const char* name_;
  double& sink_;
  std::vector<Span>& spans_;
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
}  // namespace

template <class T>
struct GptModel<T>::Impl {
  using V1 = k::View1<T, Space>;
  using V2 = k::View2<T, Space>;
  using A1 = k::View1<G, Space>;
  using I1 = k::View1<int, Space>;
  using I2 = k::View2<int, Space>;

  struct Layer {
    bool moe = false;
    int ln1_g, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_g, ln2_b;
    int w1 = -1, b1 = -1, w2 = -1, b2 = -1;  // dense MLP
    int wr = -1;                             // MoE router
    std::vector<int> ew1, eb1, ew2, eb2;     // MoE experts
    // Saved activations (this micro-batch).
    V2 x_mid, h1, a, h2, u, g;
    A1 ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;
    std::unique_ptr<k::AttentionWorkspace<T, Space>> attn;
    V2 probs, gate, xe, ue, ge, ye;
    I2 expert_idx;
    std::unique_ptr<k::MoeRouting<Space>> routing;
  };

  const ModelConfig& cfg;
  int N;  // tokens per micro-batch
  int wte, wpe, lnf_g, lnf_b, head;
  std::vector<Layer> layers;
  std::vector<V2> xs;  // residual stream: input of each block, and the last block's output
  V2 xf, logits;
  A1 lnf_mean, lnf_rstd, lse;
  // Scratch (not kept across micro-batches).
  V2 q, kk, vv, dq, dk, dv, dx_a, dx_b, dtmp, dff, dlogits;
  V2 dye, dge, due, dxe, dgate, dprobs, drouter;
  I1 router_requested;
  A1 router_prob_sum;

  Impl(const ModelConfig& c, int micro_batch, ParamStore<T>& ps, MemoryLedger& led,
       bool allocate_store)
      : cfg(c), N(micro_batch * c.seq_len) {
    const int H = c.hidden, F = c.ffn, V = c.vocab, L = c.layers, E = c.moe.experts;
    const double resid_std = kInitStd / std::sqrt(2.0 * L);
    ps.begin_unit("embedding");
    wte = ps.add("wte", V, H, Init::normal, kInitStd, true);
    wpe = ps.add("wpe", c.seq_len, H, Init::normal, kInitStd, true);
    ps.end_unit();
    layers.resize(L);
    for (int l = 0; l < L; ++l) {
      Layer& ly = layers[l];
      const std::string p = "layers." + std::to_string(l) + ".";
      ps.begin_unit("layers." + std::to_string(l));
      ly.moe = c.is_moe_layer(l);
      ly.ln1_g = ps.add(p + "ln1.gamma", H, 0, Init::ones, 0, false);
      ly.ln1_b = ps.add(p + "ln1.beta", H, 0, Init::zeros, 0, false);
      ly.wq = ps.add(p + "attn.wq", H, H, Init::normal, kInitStd, true);
      ly.bq = ps.add(p + "attn.bq", H, 0, Init::zeros, 0, false);
      ly.wk = ps.add(p + "attn.wk", H, H, Init::normal, kInitStd, true);
      ly.bk = ps.add(p + "attn.bk", H, 0, Init::zeros, 0, false);
      ly.wv = ps.add(p + "attn.wv", H, H, Init::normal, kInitStd, true);
      ly.bv = ps.add(p + "attn.bv", H, 0, Init::zeros, 0, false);
      ly.wo = ps.add(p + "attn.wo", H, H, Init::normal, resid_std, true);
      ly.bo = ps.add(p + "attn.bo", H, 0, Init::zeros, 0, false);
      ly.ln2_g = ps.add(p + "ln2.gamma", H, 0, Init::ones, 0, false);
      ly.ln2_b = ps.add(p + "ln2.beta", H, 0, Init::zeros, 0, false);
      if (!ly.moe) {
        ly.w1 = ps.add(p + "mlp.w1", H, F, Init::normal, kInitStd, true);
        ly.b1 = ps.add(p + "mlp.b1", F, 0, Init::zeros, 0, false);
        ly.w2 = ps.add(p + "mlp.w2", F, H, Init::normal, resid_std, true);
        ly.b2 = ps.add(p + "mlp.b2", H, 0, Init::zeros, 0, false);
      } else {
        ly.wr = ps.add(p + "moe.router", H, E, Init::normal, kInitStd, false);
        for (int e = 0; e < E; ++e) {
          const std::string q = p + "moe.experts." + std::to_string(e) + ".";
          ly.ew1.push_back(ps.add(q + "w1", H, F, Init::normal, kInitStd, true));
          ly.eb1.push_back(ps.add(q + "b1", F, 0, Init::zeros, 0, false));
          ly.ew2.push_back(ps.add(q + "w2", F, H, Init::normal, resid_std, true));
          ly.eb2.push_back(ps.add(q + "b2", H, 0, Init::zeros, 0, false));
        }
      }
      ps.end_unit();
    }
    ps.begin_unit("head");
    lnf_g = ps.add("lnf.gamma", H, 0, Init::ones, 0, false);
    lnf_b = ps.add("lnf.beta", H, 0, Init::zeros, 0, false);
    head = ps.add("head", H, V, Init::normal, kInitStd, true);
    ps.end_unit();
    if (allocate_store) ps.allocate(led);

    const auto act = MemCategory::activations;
    auto mat = [&](const char* label, int r, int cols) {
      return led.track(act, V2(std::string(label), r, cols));
    };
    auto vec = [&](const char* label, int n) { return led.track(act, A1(std::string(label), n)); };
    for (int l = 0; l <= L; ++l) xs.push_back(mat("paraxis::x", N, H));
    const int K = E > 0 ? c.moe.top_k : 0;
    for (auto& ly : layers) {
      ly.x_mid = mat("paraxis::x_mid", N, H);
      ly.h1 = mat("paraxis::h1", N, H);
      ly.a = mat("paraxis::attn_out", N, H);
      ly.h2 = mat("paraxis::h2", N, H);
      ly.ln1_mean = vec("paraxis::ln1_mean", N);
      ly.ln1_rstd = vec("paraxis::ln1_rstd", N);
      ly.ln2_mean = vec("paraxis::ln2_mean", N);
      ly.ln2_rstd = vec("paraxis::ln2_rstd", N);
      ly.attn = std::make_unique<k::AttentionWorkspace<T, Space>>(micro_batch, c.seq_len, c.heads,
                                                                  c.head_dim());
      led.add(act, ly.attn->bytes());
      if (!ly.moe) {
        ly.u = mat("paraxis::mlp_u", N, F);
        ly.g = mat("paraxis::mlp_g", N, F);
      } else {
        ly.probs = mat("paraxis::router_probs", N, E);
        ly.gate = mat("paraxis::gate", N, K);
        ly.expert_idx = led.track(act, I2("paraxis::expert_idx", N, K));
        ly.routing = std::make_unique<k::MoeRouting<Space>>(N, E, K);
        ly.xe = mat("paraxis::moe_xe", N * K, H);
        ly.ue = mat("paraxis::moe_ue", N * K, F);
        ly.ge = mat("paraxis::moe_ge", N * K, F);
        ly.ye = mat("paraxis::moe_ye", N * K, H);
      }
    }
    xf = mat("paraxis::xf", N, H);
    logits = mat("paraxis::logits", N, V);
    lnf_mean = vec("paraxis::lnf_mean", N);
    lnf_rstd = vec("paraxis::lnf_rstd", N);
    lse = vec("paraxis::lse", N);
    q = mat("paraxis::q", N, H);
    kk = mat("paraxis::k", N, H);
    vv = mat("paraxis::v", N, H);
    dq = mat("paraxis::dq", N, H);
    dk = mat("paraxis::dk", N, H);
    dv = mat("paraxis::dv", N, H);
    dx_a = mat("paraxis::dx_a", N, H);
    dx_b = mat("paraxis::dx_b", N, H);
    dtmp = mat("paraxis::dtmp", N, H);
    dff = mat("paraxis::dff", N, F);
    dlogits = mat("paraxis::dlogits", N, V);
    if (E > 0) {
      dye = mat("paraxis::moe_dye", N * K, H);
      dge = mat("paraxis::moe_dge", N * K, F);
      due = mat("paraxis::moe_due", N * K, F);
      dxe = mat("paraxis::moe_dxe", N * K, H);
      dgate = mat("paraxis::moe_dgate", N, K);
      dprobs = mat("paraxis::moe_dprobs", N, E);
      drouter = mat("paraxis::moe_drouter", N, E);
      router_requested = led.track(act, I1("paraxis::router_requested", E));
      router_prob_sum = vec("paraxis::router_prob_sum", E);
    }
  }

  static auto rows(const V2& x, int begin, int end) {
    return Kokkos::subview(x, std::make_pair(begin, end), Kokkos::ALL);
  }

  MoeLayerStats moe_forward(ParamStore<T>& ps, Layer& ly, const V2& out) {
    const Space space;
    const int E = cfg.moe.experts, K = cfg.moe.top_k;
    // Router: logits = h2 Wr (kept in `probs`, then softmaxed in place via scratch).
    k::gemm(space, Trans::N, Trans::N, 1.0, ly.h2, ps.w2(ly.wr), 0.0, drouter);
    k::softmax_forward(space, drouter, ly.probs);
    k::topk_forward(space, ly.probs, K, ly.expert_idx, ly.gate);
    auto& r = *ly.routing;
    k::moe_build_routing(space, ly.expert_idx, expert_capacity(cfg, N), r);
    k::moe_gather(space, ly.h2, r, ly.xe);
    for (int e = 0; e < E; ++e) {
      const int b = r.offsets_host(e), c = r.offsets_host(e + 1);
      if (b == c) continue;
      auto xe = rows(ly.xe, b, c);
      auto ue = rows(ly.ue, b, c);
      auto ge = rows(ly.ge, b, c);
      auto ye = rows(ly.ye, b, c);
      linear_forward(xe, ps.w2(ly.ew1[e]), ps.w1(ly.eb1[e]), ue);
      k::gelu_forward(space, ue, ge);
      linear_forward(ge, ps.w2(ly.ew2[e]), ps.w1(ly.eb2[e]), ye);
    }
    k::moe_combine_forward(space, ly.ye, ly.gate, r, out);
    k::moe_router_stats(space, ly.probs, ly.expert_idx, router_requested, router_prob_sum);
    auto req_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), router_requested);
    auto sum_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), router_prob_sum);
    std::vector<double> psum(E);
    for (int e = 0; e < E; ++e) psum[e] = static_cast<double>(sum_h(e));
    MoeLayerStats st;
    st.aux_loss = k::moe_aux_loss_value(req_h.data(), psum.data(), N, K, E);
    st.tokens_per_expert.assign(r.counts_host.data(), r.counts_host.data() + E);
    st.dropped_per_expert.assign(r.dropped_host.data(), r.dropped_host.data() + E);
    if (record_routing) {
      auto idx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ly.expert_idx);
      st.routing.assign(idx.data(), idx.data() + idx.size());
    }
    return st;
  }

  // dout: gradient w.r.t. the MoE output; writes dh2 (gradient w.r.t. the layer's input h2).
  void moe_backward(ParamStore<T>& ps, Layer& ly, const V2& dout, const V2& dh2, double aux_scale) {
    const Space space;
    const int E = cfg.moe.experts, K = cfg.moe.top_k;
    auto& r = *ly.routing;
    k::moe_combine_backward(space, dout, ly.ye, ly.gate, r, dye, dgate);
    for (int e = 0; e < E; ++e) {
      const int b = r.offsets_host(e), c = r.offsets_host(e + 1);
      if (b == c) continue;
      auto dge_e = rows(dge, b, c);
      auto due_e = rows(due, b, c);
      linear_backward(rows(dye, b, c), rows(ly.ge, b, c), ps.w2(ly.ew2[e]), dge_e, 0.0,
                      ps.g2(ly.ew2[e]), ps.g1(ly.eb2[e]));
      k::gelu_backward(space, rows(ly.ue, b, c), dge_e, due_e);
      linear_backward(due_e, rows(ly.xe, b, c), ps.w2(ly.ew1[e]), rows(dxe, b, c), 0.0,
                      ps.g2(ly.ew1[e]), ps.g1(ly.eb1[e]));
    }
    Kokkos::deep_copy(dh2, T(0));
    k::moe_gather_backward(space, dxe, r, dh2);
    k::topk_backward(space, dgate, ly.expert_idx, dprobs);
    if (aux_scale != 0) {
      // The router statistics of this micro-batch were computed in forward; recompute the
      // requested counts (cheap) since the scratch is shared between layers.
      k::moe_router_stats(space, ly.probs, ly.expert_idx, router_requested, router_prob_sum);
      k::moe_aux_loss_backward(space, router_requested, static_cast<long>(N), K, aux_scale, dprobs);
    }
    k::softmax_backward(space, ly.probs, dprobs, drouter);
    linear_backward(drouter, ly.h2, ps.w2(ly.wr), dh2, 1.0, ps.g2(ly.wr), A1());
  }

  UnitHooks* hooks = nullptr;
  bool record_routing = false;
  UnitHooks no_hooks;
  UnitHooks& h() { return hooks ? *hooks : no_hooks; }

  MicroBatchResult forward(ParamStore<T>& ps, const Tokens& tokens, const Tokens& targets) {
    const Space space;
    MicroBatchResult res;
    const int L = static_cast<int>(layers.size());
    h().before_forward(0);
    k::embedding_forward(space, tokens, ps.w2(wte), ps.w2(wpe), cfg.seq_len, 0, xs[0]);
    h().after_forward(0);
    for (int l = 0; l < L; ++l) {
      h().before_forward(l + 1);
      Layer& ly = layers[l];
      const V2& x = xs[l];
      k::layernorm_forward(space, x, ps.w1(ly.ln1_g), ps.w1(ly.ln1_b), kLayerNormEps, ly.h1,
                           ly.ln1_mean, ly.ln1_rstd);
      linear_forward(ly.h1, ps.w2(ly.wq), ps.w1(ly.bq), q);
      linear_forward(ly.h1, ps.w2(ly.wk), ps.w1(ly.bk), kk);
      linear_forward(ly.h1, ps.w2(ly.wv), ps.w1(ly.bv), vv);
      k::attention_forward(space, q, kk, vv, *ly.attn, ly.a);
      linear_forward(ly.a, ps.w2(ly.wo), ps.w1(ly.bo), ly.x_mid);
      k::add_inplace(space, ly.x_mid, x);
      k::layernorm_forward(space, ly.x_mid, ps.w1(ly.ln2_g), ps.w1(ly.ln2_b), kLayerNormEps, ly.h2,
                           ly.ln2_mean, ly.ln2_rstd);
      const V2& out = xs[l + 1];
      if (!ly.moe) {
        linear_forward(ly.h2, ps.w2(ly.w1), ps.w1(ly.b1), ly.u);
        k::gelu_forward(space, ly.u, ly.g);
        linear_forward(ly.g, ps.w2(ly.w2), ps.w1(ly.b2), out);
      } else {
        res.moe.push_back(moe_forward(ps, ly, out));
        res.aux_sum += res.moe.back().aux_loss;
      }
      k::add_inplace(space, out, ly.x_mid);
      h().after_forward(l + 1);
    }
    h().before_forward(L + 1);
    k::layernorm_forward(space, xs.back(), ps.w1(lnf_g), ps.w1(lnf_b), kLayerNormEps, xf, lnf_mean,
                         lnf_rstd);
    k::gemm(space, Trans::N, Trans::N, 1.0, xf, ps.w2(head), 0.0, logits);
    res.ce_sum =
        static_cast<double>(k::cross_entropy_forward(space, logits, targets, cfg.vocab, lse));
    h().after_forward(L + 1);
    return res;
  }

  void backward(ParamStore<T>& ps, const Tokens& tokens, const Tokens& targets, double ce_scale,
                double aux_scale) {
    const Space space;
    const int L = static_cast<int>(layers.size());
    h().before_backward(L + 1);
    k::cross_entropy_backward(space, logits, targets, lse, cfg.vocab, ce_scale, dlogits);
    linear_backward(dlogits, xf, ps.w2(head), dtmp, 0.0, ps.g2(head), A1());
    // dx_a holds the gradient w.r.t. the residual stream after the current block.
    k::layernorm_backward(space, dtmp, xs.back(), ps.w1(lnf_g), lnf_mean, lnf_rstd, dx_a,
                          ps.g1(lnf_g), ps.g1(lnf_b));
    h().after_backward(L + 1);
    for (int l = L - 1; l >= 0; --l) {
      h().before_backward(l + 1);
      Layer& ly = layers[l];
      // MLP / MoE branch: out = x_mid + f(ln2(x_mid)).
      if (!ly.moe) {
        linear_backward(dx_a, ly.g, ps.w2(ly.w2), dff, 0.0, ps.g2(ly.w2), ps.g1(ly.b2));
        k::gelu_backward(space, ly.u, dff, dff);
        linear_backward(dff, ly.h2, ps.w2(ly.w1), dtmp, 0.0, ps.g2(ly.w1), ps.g1(ly.b1));
      } else {
        moe_backward(ps, ly, dx_a, dtmp, aux_scale);
      }
      k::layernorm_backward(space, dtmp, ly.x_mid, ps.w1(ly.ln2_g), ly.ln2_mean, ly.ln2_rstd, dx_b,
                            ps.g1(ly.ln2_g), ps.g1(ly.ln2_b));
      k::add_inplace(space, dx_b, dx_a);  // dx_b: gradient w.r.t. x_mid
      // Attention branch: x_mid = x + Wo attn(ln1(x)).
      linear_backward(dx_b, ly.a, ps.w2(ly.wo), dtmp, 0.0, ps.g2(ly.wo), ps.g1(ly.bo));
      k::attention_backward(space, dtmp, *ly.attn, dq, dk, dv);
      linear_backward(dq, ly.h1, ps.w2(ly.wq), dtmp, 0.0, ps.g2(ly.wq), ps.g1(ly.bq));
      linear_backward(dk, ly.h1, ps.w2(ly.wk), dtmp, 1.0, ps.g2(ly.wk), ps.g1(ly.bk));
      linear_backward(dv, ly.h1, ps.w2(ly.wv), dtmp, 1.0, ps.g2(ly.wv), ps.g1(ly.bv));
      k::layernorm_backward(space, dtmp, xs[l], ps.w1(ly.ln1_g), ly.ln1_mean, ly.ln1_rstd, dx_a,
                            ps.g1(ly.ln1_g), ps.g1(ly.ln1_b));
      k::add_inplace(space, dx_a, dx_b);  // dx_a: gradient w.r.t. the block's input
      h().after_backward(l + 1);
    }
    h().before_backward(0);
    k::embedding_backward(space, tokens, dx_a, cfg.seq_len, 0, ps.g2(wte), ps.g2(wpe));
    h().after_backward(0);
  }
};

template <class T>
GptModel<T>::GptModel(const ModelConfig& cfg, int micro_batch, int unit_multiple,
                      bool allocate_store)
    : cfg_(cfg), micro_batch_(micro_batch), params_(unit_multiple) {
  impl_ = std::make_unique<Impl>(cfg_, micro_batch_, params_, ledger_, allocate_store);
}

template <class T>
GptModel<T>::~GptModel() = default;

template <class T>
void GptModel<T>::initialize(std::uint64_t seed) {
  params_.initialize(seed);
}

template <class T>
MicroBatchResult GptModel<T>::forward(const Tokens& tokens, const Tokens& targets) {
  Kokkos::Profiling::pushRegion("paraxis::forward");
  MicroBatchResult r;
  {
    FencedTimer t("forward", fwd_s_, spans_);
    impl_->hooks = hooks_;
    impl_->record_routing = record_routing_;
    r = impl_->forward(params_, tokens, targets);
  }
  Kokkos::Profiling::popRegion();
  return r;
}

template <class T>
MicroBatchResult GptModel<T>::forward_backward(const Tokens& tokens, const Tokens& targets,
                                               double ce_scale, double aux_scale) {
  MicroBatchResult r = forward(tokens, targets);
  Kokkos::Profiling::pushRegion("paraxis::backward");
  {
    FencedTimer t("backward", bwd_s_, spans_);
    impl_->hooks = hooks_;
    impl_->backward(params_, tokens, targets, ce_scale, aux_scale);
  }
  Kokkos::Profiling::popRegion();
  return r;
}

double steady_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double forward_flops_per_token(const ModelConfig& c) {
  const double H = c.hidden, F = c.ffn, V = c.vocab, S = c.seq_len;
  const double attn = 2.0 * 4 * H * H + 2.0 * 2 * S * H;  // QKV + out proj; QK^T and PV
  const double mlp = 2.0 * 2 * H * F;
  double total = 0;
  for (int l = 0; l < c.layers; ++l) {
    total += attn;
    total += c.is_moe_layer(l) ? 2.0 * H * c.moe.experts + c.moe.top_k * mlp : mlp;
  }
  return total + 2.0 * H * V;
}

template class GptModel<double>;
template class GptModel<float>;
template class GptModel<paraxis::bf16>;

}  // namespace paraxis::model
