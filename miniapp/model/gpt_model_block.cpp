// GptModel's transformer block, forward and backward: LayerNorm, attention and its output
// projection, LayerNorm, then the GELU MLP (or the MoE layer, gpt_model_moe.cpp), with the
// residual adds; each linear is a column- or row-parallel layer of tensor_parallel.hpp (with its
// tensor/sequence-parallel exchanges). The attention core is the unfused kernel or, with
// model.attention: fused, the fused one (which keeps no probabilities). With recompute
// selective (unfused only), the attention probabilities are computed again before the
// attention backward.
#include <cmath>

#include "model/gpt_model_impl.hpp"
#include "paraxis/kernels/layernorm.hpp"

namespace paraxis::model {

using namespace detail;

template <class T>
void GptModel<T>::Impl::block_forward(const BlockParams& b, LayerActs& A, const V2& x,
                                      const V2& out, MicroBatchResult& res) {
  const Space space;
  const TpGroup g = tpg();
  auto& ps = m.params_;
  k::layernorm_forward(space, x, ps.w1(b.ln1_g), ps.w1(b.ln1_b), kLayerNormEps, A.h1, A.ln1_mean,
                       A.ln1_rstd);
  const V2 h1 = tp_gather_tokens(space, g, A.h1, full);
  column_parallel_forward(space, h1, ps.w2(b.wq), ps.w1(b.bq), q);
  column_parallel_forward(space, h1, ps.w2(b.wk), ps.w1(b.bk), kk);
  column_parallel_forward(space, h1, ps.w2(b.wv), ps.w1(b.bv), vv);
  if (A.fattn)
    k::fused_attention_forward(space, q, kk, vv, *A.fattn, A.a);
  else
    k::attention_forward(space, q, kk, vv, *A.attn, A.a);
  row_parallel_forward(space, g, A.a, ps.w2(b.wo), ps.w1(b.bo), tp_partial_target(g, A.x_mid, part),
                       A.x_mid);
  k::add_inplace(space, A.x_mid, x);
  k::layernorm_forward(space, A.x_mid, ps.w1(b.ln2_g), ps.w1(b.ln2_b), kLayerNormEps, A.h2,
                       A.ln2_mean, A.ln2_rstd);
  const V2 h2 = tp_gather_tokens(space, g, A.h2, full);
  const V2 t = tp_partial_target(g, out, part);
  if (!b.moe) {
    column_parallel_forward(space, h2, ps.w2(b.w1), ps.w1(b.b1), A.u);
    k::gelu_forward(space, A.u, A.g);
    row_parallel_forward(space, g, A.g, ps.w2(b.w2), ps.w1(b.b2), t, out);
  } else {
    // The experts' outputs are partial sums over the group, reduced like a row-parallel output.
    res.moe.push_back(moe_forward(b, A.moe, h2, t));
    res.aux_sum += res.moe.back().aux_loss;
    tp_reduce_partial(space, g, t, out);
  }
  k::add_inplace(space, out, A.x_mid);
}

// dx_a: in, the gradient of the block's output; out, the gradient of its input x.
template <class T>
void GptModel<T>::Impl::block_backward(const BlockParams& b, LayerActs& A, const V2& x,
                                       double aux_scale) {
  const Space space;
  const TpGroup g = tpg();
  auto& ps = m.params_;
  // MLP / MoE branch: out = x_mid + f(ln2(x_mid)) (+ b2).
  {
    const V2 dy = tp_gather_tokens(space, g, dx_a, dfull);
    const V2 dp = tp_partial_target(g, dtmp, part);
    if (!b.moe) {
      row_parallel_backward(space, dy, A.g, ps.w2(b.w2), dff, 0.0, ps.g2(b.w2), ps.g1(b.b2));
      k::gelu_backward(space, A.u, dff, dff);
      const V2 h2 = tp_gather_tokens(space, g, A.h2, full);
      column_parallel_backward(space, g, dff, h2, ps.w2(b.w1), dp, 0.0, dtmp, ps.g2(b.w1),
                               ps.g1(b.b1));
    } else {
      const V2 h2 = tp_gather_tokens(space, g, A.h2, full);
      moe_backward(b, A.moe, h2, dy, dp, aux_scale);
      tp_reduce_partial(space, g, dp, dtmp);
    }
  }
  k::layernorm_backward(space, dtmp, A.x_mid, ps.w1(b.ln2_g), A.ln2_mean, A.ln2_rstd, dx_b,
                        ps.g1(b.ln2_g), ps.g1(b.ln2_b));
  k::add_inplace(space, dx_b, dx_a);  // dx_b: gradient w.r.t. x_mid
  // Attention branch: x_mid = x + Wo attn(ln1(x)) + bo.
  {
    const V2 dy = tp_gather_tokens(space, g, dx_b, dfull);
    row_parallel_backward(space, dy, A.a, ps.w2(b.wo), da, 0.0, ps.g2(b.wo), ps.g1(b.bo));
    if (A.fattn) {
      k::fused_attention_backward(space, da, A.a, *A.fattn, dq, dk, dv);
    } else {
      if (m.recompute_ == Recompute::selective) recompute_attention_probs(*A.attn);
      k::attention_backward(space, da, *A.attn, dq, dk, dv);
    }
    const V2 h1 = tp_gather_tokens(space, g, A.h1, full);
    // Q, K and V share their input: their input gradients are summed, then reduced once.
    const V2 dp = tp_partial_target(g, dtmp, part);
    column_parallel_backward(space, g, dq, h1, ps.w2(b.wq), dp, 0.0, dtmp, ps.g2(b.wq), ps.g1(b.bq),
                             TpReduce::deferred);
    column_parallel_backward(space, g, dk, h1, ps.w2(b.wk), dp, 1.0, dtmp, ps.g2(b.wk), ps.g1(b.bk),
                             TpReduce::deferred);
    column_parallel_backward(space, g, dv, h1, ps.w2(b.wv), dp, 1.0, dtmp, ps.g2(b.wv),
                             ps.g1(b.bv));
  }
  k::layernorm_backward(space, dtmp, x, ps.w1(b.ln1_g), A.ln1_mean, A.ln1_rstd, dx_a,
                        ps.g1(b.ln1_g), ps.g1(b.ln1_b));
  k::add_inplace(space, dx_a, dx_b);  // dx_a: gradient w.r.t. the block's input
}

// B of a split backward: block_backward's input-gradient path, operation for operation, with
// no weight gradient. The LayerNorm parameter gradients go to ln (their kernel adds its sums
// to zeros: the values it would have added to the gradients), and what W needs stays in
// buffers nothing reads again: the MLP's output gradient in `out` (the block's output, which
// the next block's B has read), its GELU input gradient in u, wo's output gradient in x_mid
// (read last by LN2's backward) and the gradients of q, k and v in the block's q, k and v.
// These are this rank's tokens: with sequence parallelism W gathers them again.
template <class T>
void GptModel<T>::Impl::block_backward_input(const BlockParams& b, LayerActs& A, const V2& x,
                                             const V2& out, const A1& ln, double aux_scale) {
  const Space space;
  const TpGroup g = tpg();
  auto& ps = m.params_;
  const int H = cfg.hidden;
  auto part_of = [&](int k) { return Kokkos::subview(ln, std::make_pair(k * H, (k + 1) * H)); };
  {
    const V2 dy = tp_gather_tokens(space, g, dx_a, dfull);
    const V2 dp = tp_partial_target(g, dtmp, part);
    if (!b.moe) {
      Kokkos::deep_copy(out, dx_a);
      row_parallel_backward_input(space, dy, ps.w2(b.w2), dff, 0.0);
      k::gelu_backward(space, A.u, dff, A.u);
      column_parallel_backward_input(space, g, A.u, ps.w2(b.w1), dp, 0.0, dtmp);
    } else {
      moe_backward_input(b, A.moe, dy, dp, aux_scale);
      tp_reduce_partial(space, g, dp, dtmp);
    }
  }
  k::layernorm_backward(space, dtmp, A.x_mid, ps.w1(b.ln2_g), A.ln2_mean, A.ln2_rstd, dx_b,
                        part_of(2), part_of(3));
  k::add_inplace(space, dx_b, dx_a);
  Kokkos::deep_copy(A.x_mid, dx_b);
  {
    const V2 dy = tp_gather_tokens(space, g, dx_b, dfull);
    row_parallel_backward_input(space, dy, ps.w2(b.wo), da, 0.0);
    const V2 dq_w = attention_grad(A, 0), dk_w = attention_grad(A, 1), dv_w = attention_grad(A, 2);
    if (A.fattn) {
      // A.a, the forward's output, is intact: W reads it later, nothing writes it before.
      k::fused_attention_backward(space, da, A.a, *A.fattn, dq_w, dk_w, dv_w);
    } else {
      if (m.recompute_ == Recompute::selective) recompute_attention_probs(*A.attn);
      k::attention_backward(space, da, *A.attn, dq_w, dk_w, dv_w);
    }
    const V2 dp = tp_partial_target(g, dtmp, part);
    column_parallel_backward_input(space, g, dq_w, ps.w2(b.wq), dp, 0.0, dtmp, TpReduce::deferred);
    column_parallel_backward_input(space, g, dk_w, ps.w2(b.wk), dp, 1.0, dtmp, TpReduce::deferred);
    column_parallel_backward_input(space, g, dv_w, ps.w2(b.wv), dp, 1.0, dtmp);
  }
  k::layernorm_backward(space, dtmp, x, ps.w1(b.ln1_g), A.ln1_mean, A.ln1_rstd, dx_a, part_of(0),
                        part_of(1));
  k::add_inplace(space, dx_a, dx_b);
}

// W of a split backward: every weight gradient of the block from what its B kept, the
// GEMMs block_backward runs with the same operands (gathered again from this rank's tokens
// with sequence parallelism), then B's LayerNorm sums added to the gradients.
template <class T>
void GptModel<T>::Impl::block_backward_weight(const BlockParams& b, LayerActs& A, const V2& out,
                                              const A1& ln) {
  const Space space;
  const TpGroup g = tpg();
  auto& ps = m.params_;
  const int H = cfg.hidden;
  auto part_of = [&](int k) { return Kokkos::subview(ln, std::make_pair(k * H, (k + 1) * H)); };
  {
    const V2 h2 = tp_gather_tokens(space, g, A.h2, full);
    if (!b.moe) {
      column_parallel_backward_weight(space, A.u, h2, ps.g2(b.w1), ps.g1(b.b1));
      const V2 dy = tp_gather_tokens(space, g, out, dfull);
      row_parallel_backward_weight(space, dy, A.g, ps.g2(b.w2), ps.g1(b.b2));
    } else {
      moe_backward_weight(b, A.moe, h2);
    }
  }
  k::add_inplace(space, ps.g1(b.ln2_g), part_of(2));
  k::add_inplace(space, ps.g1(b.ln2_b), part_of(3));
  {
    const V2 dy = tp_gather_tokens(space, g, A.x_mid, dfull);
    row_parallel_backward_weight(space, dy, A.a, ps.g2(b.wo), ps.g1(b.bo));
    const V2 h1 = tp_gather_tokens(space, g, A.h1, full);
    column_parallel_backward_weight(space, attention_grad(A, 0), h1, ps.g2(b.wq), ps.g1(b.bq));
    column_parallel_backward_weight(space, attention_grad(A, 1), h1, ps.g2(b.wk), ps.g1(b.bk));
    column_parallel_backward_weight(space, attention_grad(A, 2), h1, ps.g2(b.wv), ps.g1(b.bv));
  }
  k::add_inplace(space, ps.g1(b.ln1_g), part_of(0));
  k::add_inplace(space, ps.g1(b.ln1_b), part_of(1));
}

// The probabilities as attention_forward computes them (kernels/attention.hpp): unscaled
// scores q k^T into the dprobs scratch, then the scaled causal softmax. Same kernels, same
// inputs, same order: the same bits.
template <class T>
void GptModel<T>::Impl::recompute_attention_probs(k::AttentionWorkspace<T, Space>& ws) {
  const Space space;
  Kokkos::Profiling::pushRegion("paraxis::recompute_attention_probs");
  const double scale = 1.0 / std::sqrt(static_cast<double>(ws.head_dim));
  k::gemm_batched(space, Trans::N, Trans::T, 1.0, ws.q, ws.k, 0.0, ws.dprobs);
  k::causal_softmax_forward(space, ws.dprobs, scale, ws.probs);
  Kokkos::Profiling::popRegion();
}

#define PARAXIS_GPT_MODEL_BLOCK(T)                                                                 \
  template void GptModel<T>::Impl::block_forward(const BlockParams&, LayerActs&, const V2&,        \
                                                 const V2&, MicroBatchResult&);                    \
  template void GptModel<T>::Impl::block_backward(const BlockParams&, LayerActs&, const V2&,       \
                                                  double);                                         \
  template void GptModel<T>::Impl::block_backward_input(const BlockParams&, LayerActs&, const V2&, \
                                                        const V2&, const A1&, double);             \
  template void GptModel<T>::Impl::block_backward_weight(const BlockParams&, LayerActs&,           \
                                                         const V2&, const A1&);                    \
  template void GptModel<T>::Impl::recompute_attention_probs(                                      \
      k::AttentionWorkspace<T, Kokkos::DefaultExecutionSpace>&);
PARAXIS_GPT_MODEL_BLOCK(double)
PARAXIS_GPT_MODEL_BLOCK(float)
PARAXIS_GPT_MODEL_BLOCK(paraxis::bf16)
#undef PARAXIS_GPT_MODEL_BLOCK

}  // namespace paraxis::model
