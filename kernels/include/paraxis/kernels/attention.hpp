// Causal multi-head self-attention, unfused: heads are split out of the [N, E] projections
// into [batch*heads, seq, head_dim] (row n = b*seq + s, head h = columns [h*hd, (h+1)*hd)),
// scores come from gemm_batched, the masked scaled softmax from softmax.hpp, and the context
// is merged back into [N, E]. Every step is deterministic, so the whole pass is.
//
// Memory: the workspace holds what the backward pass needs (q, k, v, probs: saved_bytes())
// plus scratch (bytes()). The forward pass uses dprobs as its score buffer; the backward pass
// computes the softmax gradient in place in dprobs.
#pragma once

#include <cmath>

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/gemm.hpp"
#include "paraxis/kernels/softmax.hpp"

namespace paraxis::kernels {

template <class T, class Space>
struct AttentionWorkspace {
  AttentionWorkspace(int batch_, int seq_, int heads_, int head_dim_)
      : batch(batch_),
        seq(seq_),
        heads(heads_),
        head_dim(head_dim_),
        q(alloc("paraxis::attention_q", head_dim_)),
        k(alloc("paraxis::attention_k", head_dim_)),
        v(alloc("paraxis::attention_v", head_dim_)),
        probs(alloc("paraxis::attention_probs", seq_)),
        ctx(alloc("paraxis::attention_ctx", head_dim_)),
        dctx(alloc("paraxis::attention_dctx", head_dim_)),
        dprobs(alloc("paraxis::attention_dprobs", seq_)),
        dq(alloc("paraxis::attention_dq", head_dim_)),
        dk(alloc("paraxis::attention_dk", head_dim_)),
        dv(alloc("paraxis::attention_dv", head_dim_)) {}

  // Saved buffers of its own, scratch shared with `other` (the same shape): the workspaces of
  // several layers or micro-batches in flight each need only their saved q, k, v, probs.
  AttentionWorkspace(const AttentionWorkspace& other, bool share_scratch)
      : batch(other.batch),
        seq(other.seq),
        heads(other.heads),
        head_dim(other.head_dim),
        q(alloc("paraxis::attention_q", other.head_dim)),
        k(alloc("paraxis::attention_k", other.head_dim)),
        v(alloc("paraxis::attention_v", other.head_dim)),
        probs(alloc("paraxis::attention_probs", other.seq)) {
    if (share_scratch) {
      ctx = other.ctx;
      dctx = other.dctx;
      dprobs = other.dprobs;
      dq = other.dq;
      dk = other.dk;
      dv = other.dv;
    } else {
      ctx = alloc("paraxis::attention_ctx", head_dim);
      dctx = alloc("paraxis::attention_dctx", head_dim);
      dprobs = alloc("paraxis::attention_dprobs", seq);
      dq = alloc("paraxis::attention_dq", head_dim);
      dk = alloc("paraxis::attention_dk", head_dim);
      dv = alloc("paraxis::attention_dv", head_dim);
    }
  }

  int batch, seq, heads, head_dim;
  // Saved by attention_forward for attention_backward.
  View3<T, Space> q, k, v, probs;
  // Scratch.
  View3<T, Space> ctx, dctx, dprobs, dq, dk, dv;

  // Bytes that must live from forward to backward (activation memory of this layer).
  std::size_t saved_bytes() const {
    return (q.span() + k.span() + v.span() + probs.span()) * sizeof(T);
  }
  std::size_t scratch_bytes() const {
    return (ctx.span() + dctx.span() + dprobs.span() + dq.span() + dk.span() + dv.span()) *
           sizeof(T);
  }
  // Everything the workspace refers to (scratch included, even when shared).
  std::size_t bytes() const { return saved_bytes() + scratch_bytes(); }

 private:
  View3<T, Space> alloc(const char* label, int last) const {
    if (batch < 1 || seq < 1 || heads < 1 || head_dim < 1) {
      std::ostringstream os;
      os << "paraxis::AttentionWorkspace: batch = " << batch << ", seq = " << seq
         << ", heads = " << heads << ", head_dim = " << head_dim << ", expected all >= 1";
      throw std::invalid_argument(os.str());
    }
    return View3<T, Space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)),
                           static_cast<std::size_t>(batch) * heads, seq, last);
  }
};

namespace detail {

// Y(b*heads + h, s, d) = X(b*seq + s, h*hd + d).
template <class ExecSpace, class XV, class YV>
void split_heads(const ExecSpace& space, const XV& X, int seq, int heads, int hd, const YV& Y) {
  using A = acc_t<value_t<XV>>;
  using TY = value_t<YV>;
  Kokkos::parallel_for(
      "paraxis::attention_split_heads",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(
          space, {0, 0}, {static_cast<int>(X.extent(0)), static_cast<int>(X.extent(1))}),
      KOKKOS_LAMBDA(const int n, const int e) {
        const int b = n / seq, s = n % seq, h = e / hd, d = e % hd;
        Y(b * heads + h, s, d) = static_cast<TY>(static_cast<A>(X(n, e)));
      });
}

// X(b*seq + s, h*hd + d) = Y(b*heads + h, s, d).
template <class ExecSpace, class YV, class XV>
void merge_heads(const ExecSpace& space, const YV& Y, int seq, int heads, int hd, const XV& X) {
  using A = acc_t<value_t<YV>>;
  using TX = value_t<XV>;
  Kokkos::parallel_for(
      "paraxis::attention_merge_heads",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(
          space, {0, 0}, {static_cast<int>(X.extent(0)), static_cast<int>(X.extent(1))}),
      KOKKOS_LAMBDA(const int n, const int e) {
        const int b = n / seq, s = n % seq, h = e / hd, d = e % hd;
        X(n, e) = static_cast<TX>(static_cast<A>(Y(b * heads + h, s, d)));
      });
}

template <class WS, class V>
void check_attention_arg(const char* kernel, const char* arg, const WS& ws, const V& X) {
  static_assert(V::rank == 2, "attention: [N,E] Views");
  require_shape(kernel, arg, X,
                {static_cast<std::size_t>(ws.batch) * ws.seq,
                 static_cast<std::size_t>(ws.heads) * ws.head_dim});
}

}  // namespace detail

// Out = causal_softmax(Q K^T / sqrt(head_dim)) V per (sequence, head). Out written; ws keeps
// q, k, v, probs for attention_backward.
template <class ExecSpace, class QV, class KV, class VV, class T, class Space, class OV>
void attention_forward(const ExecSpace& space, const QV& Q, const KV& K, const VV& V,
                       AttentionWorkspace<T, Space>& ws, const OV& Out) {
  static_assert(QV::rank == 2 && KV::rank == 2 && VV::rank == 2 && OV::rank == 2,
                "attention_forward: Q, K, V, Out are [N,E]");
  assert_accessible<ExecSpace, QV, KV, VV, OV, View3<T, Space>>();
  const char* k = "paraxis::attention_forward";
  detail::check_attention_arg(k, "Q", ws, Q);
  detail::check_attention_arg(k, "K", ws, K);
  detail::check_attention_arg(k, "V", ws, V);
  detail::check_attention_arg(k, "Out", ws, Out);
  Kokkos::Profiling::pushRegion("paraxis::attention_forward");
  const double scale = 1.0 / std::sqrt(static_cast<double>(ws.head_dim));
  detail::split_heads(space, Q, ws.seq, ws.heads, ws.head_dim, ws.q);
  detail::split_heads(space, K, ws.seq, ws.heads, ws.head_dim, ws.k);
  detail::split_heads(space, V, ws.seq, ws.heads, ws.head_dim, ws.v);
  // Scores (unscaled; the scale is applied inside the softmax) into the dprobs scratch.
  gemm_batched(space, Trans::N, Trans::T, 1.0, ws.q, ws.k, 0.0, ws.dprobs);
  causal_softmax_forward(space, ws.dprobs, scale, ws.probs);
  gemm_batched(space, Trans::N, Trans::N, 1.0, ws.probs, ws.v, 0.0, ws.ctx);
  detail::merge_heads(space, ws.ctx, ws.seq, ws.heads, ws.head_dim, Out);
  Kokkos::Profiling::popRegion();
}

// dQ, dK, dV (written) from dOut and what attention_forward saved in ws.
template <class ExecSpace, class DOV, class T, class Space, class DQV, class DKV, class DVV>
void attention_backward(const ExecSpace& space, const DOV& dOut, AttentionWorkspace<T, Space>& ws,
                        const DQV& dQ, const DKV& dK, const DVV& dV) {
  static_assert(DOV::rank == 2 && DQV::rank == 2 && DKV::rank == 2 && DVV::rank == 2,
                "attention_backward: dOut, dQ, dK, dV are [N,E]");
  assert_accessible<ExecSpace, DOV, DQV, DKV, DVV, View3<T, Space>>();
  const char* k = "paraxis::attention_backward";
  detail::check_attention_arg(k, "dOut", ws, dOut);
  detail::check_attention_arg(k, "dQ", ws, dQ);
  detail::check_attention_arg(k, "dK", ws, dK);
  detail::check_attention_arg(k, "dV", ws, dV);
  Kokkos::Profiling::pushRegion("paraxis::attention_backward");
  const double scale = 1.0 / std::sqrt(static_cast<double>(ws.head_dim));
  detail::split_heads(space, dOut, ws.seq, ws.heads, ws.head_dim, ws.dctx);
  // ctx = P v: dP = dctx v^T, dv = P^T dctx.
  gemm_batched(space, Trans::N, Trans::T, 1.0, ws.dctx, ws.v, 0.0, ws.dprobs);
  gemm_batched(space, Trans::T, Trans::N, 1.0, ws.probs, ws.dctx, 0.0, ws.dv);
  // dS (gradient of the unscaled scores, scale included), in place.
  causal_softmax_backward(space, ws.probs, ws.dprobs, scale, ws.dprobs);
  // S = q k^T: dq = dS k, dk = dS^T q.
  gemm_batched(space, Trans::N, Trans::N, 1.0, ws.dprobs, ws.k, 0.0, ws.dq);
  gemm_batched(space, Trans::T, Trans::N, 1.0, ws.dprobs, ws.q, 0.0, ws.dk);
  detail::merge_heads(space, ws.dq, ws.seq, ws.heads, ws.head_dim, dQ);
  detail::merge_heads(space, ws.dk, ws.seq, ws.heads, ws.head_dim, dK);
  detail::merge_heads(space, ws.dv, ws.seq, ws.heads, ws.head_dim, dV);
  Kokkos::Profiling::popRegion();
}

}  // namespace paraxis::kernels
