// Fused causal multi-head self-attention (flash-attention style): the function of attention.hpp
// (Out = causal_softmax(Q K^T / sqrt(hd)) V per sequence and head, on [N, E] views, row
// n = b*seq + s, head h = columns [h*hd, (h+1)*hd)) without a seq x seq matrix. The forward pass
// walks the key tiles of each query tile with an online softmax (a running max and sum that
// rescale the partial output, Milakov & Gimelshein 2018) and keeps only q, k, v and each row's
// log-sum-exp; the backward pass recomputes the probabilities tile by tile from them: first
// delta = rowsum(dOut * Out), then dK and dV (one team per key tile, over the query tiles at or
// after it), then dQ (one team per query tile, over the key tiles at or before it). Two passes
// instead of one with atomic dQ updates: every output element is written by one thread, its sums
// run in a fixed order, so the result is deterministic (workspace: fused_attention_workspace.hpp).
//
// Portability: one team per (sequence, head, tile) with its Q/K/V tiles in team scratch; team
// threads take rows, vector lanes the contiguous dimension. Each inner loop is an axpy along a
// contiguous scratch row (K, V, Q and dOut are also kept transposed where the loop would
// otherwise be a reduction), so it vectorizes on a CPU and coalesces on a GPU. A lane writes only
// the elements of its own index; what other lanes read comes after a team barrier.
#pragma once

#include <cmath>

#include "paraxis/kernels/fused_attention_workspace.hpp"
#include "paraxis/kernels/row_reduce.hpp"

namespace paraxis::kernels {

namespace detail {

// Geometry of one launch: league rank -> (sequence b, head h, tile index).
struct FusedGeom {
  int seq, heads, hd, tile, tiles;
  double scale;
};

// Out and lse from the workspace's q, k, v.
template <class ExecSpace, class T, class Space, class OV>
void fused_forward_pass(const ExecSpace& space, const FusedAttentionWorkspace<T, Space>& ws,
                        const OV& Out) {
  using A = acc_t<T>;
  using TO = value_t<OV>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using Scratch = FusedScratch<ExecSpace, A>;
  const FusedLaunch l = fused_launch<ExecSpace, A>(FusedPass::forward, ws.head_dim, ws.tile);
  const int t = l.tile, D = ws.head_dim, S = ws.seq, H = ws.heads, level = l.level;
  const int nt = (S + t - 1) / t;
  const std::size_t elems = l.scratch_elems;
  const A sc = static_cast<A>(1.0 / std::sqrt(static_cast<double>(D)));
  const auto q = ws.q, k = ws.k, v = ws.v;
  const auto lse = ws.lse;
  Kokkos::parallel_for(
      "paraxis::fused_attention_fwd", fused_policy<ExecSpace, A>(space, l, ws.batch * H * nt),
      KOKKOS_LAMBDA(const Member& team) {
        const int it = team.league_rank() % nt, bh = team.league_rank() / nt;
        const int b = bh / H, c0 = (bh % H) * D, i0 = it * t;
        const int ni = S - i0 < t ? S - i0 : t;
        Scratch buf(team.team_scratch(level), elems);
        A* const Qs = buf.data();  // [t][D], scaled
        A* const Os = Qs + t * D;  // [t][D], unnormalized output
        A* const Kt = Os + t * D;  // [D][t]
        A* const Vs = Kt + t * D;  // [t][D]
        A* const Ps = Vs + t * D;  // [t][t]
        A* const mx = Ps + t * t;  // running max, sum, and this tile's rescale factor
        A* const sum = mx + t;
        A* const alpha = sum + t;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni), [&](const int r) {
          const int n = b * S + i0 + r;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D), [&](const int d) {
            Qs[r * D + d] = sc * static_cast<A>(q(n, c0 + d));
            Os[r * D + d] = 0;
          });
        });
        for (int jt = 0; jt <= it; ++jt) {
          const int j0 = jt * t;
          const int nj = S - j0 < t ? S - j0 : t;
          team.team_barrier();  // the previous tile's rows are done with Kt, Vs
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj), [&](const int j) {
            const int n = b * S + j0 + j;
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D), [&](const int d) {
              Kt[d * t + j] = static_cast<A>(k(n, c0 + d));
              Vs[j * D + d] = static_cast<A>(v(n, c0 + d));
            });
          });
          team.team_barrier();
          // Scores, the new running max and the tile's exponentials, lanes over keys.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni), [&](const int r) {
            const int jn = jt < it ? nj : r + 1;  // causal: keys up to the row's own position
            A* const s = Ps + r * t;
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, jn),
                                 [&](const int j) { s[j] = 0; });
            for (int d = 0; d < D; ++d) {
              const A qd = Qs[r * D + d];
              const A* const kd = Kt + d * t;
              Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, jn),
                                   [&](const int j) { s[j] += qd * kd[j]; });
            }
            const auto lanes = Kokkos::ThreadVectorRange(team, jn);
            auto sj = [&](const int j) { return s[j]; };
            const A tmax = detail::range_max<A>(lanes, sj);
            const A m_new = jt == 0 ? tmax : math::fmax(mx[r], tmax);
            const A a = jt == 0 ? A(0) : math::vexp_bounded(mx[r] - m_new);
            const A tsum = detail::range_sum_exp<A>(lanes, m_new, sj,
                                                    [&](const int j, const A p) { s[j] = p; });
            Kokkos::single(Kokkos::PerThread(team), [&]() {
              mx[r] = m_new;
              sum[r] = a * sum[r] + tsum;
              alpha[r] = a;
            });
          });
          team.team_barrier();
          // O = alpha O + P V, lanes over the head dimension.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni), [&](const int r) {
            const int jn = jt < it ? nj : r + 1;
            A* const o = Os + r * D;
            const A a = alpha[r];
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D),
                                 [&](const int d) { o[d] *= a; });
            for (int j = 0; j < jn; ++j) {
              const A p = Ps[r * t + j];
              const A* const vj = Vs + j * D;
              Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D),
                                   [&](const int d) { o[d] += p * vj[d]; });
            }
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni), [&](const int r) {
          const int n = b * S + i0 + r;
          const A inv = A(1) / sum[r];
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D), [&](const int d) {
            Out(n, c0 + d) = static_cast<TO>(Os[r * D + d] * inv);
          });
          Kokkos::single(Kokkos::PerThread(team),
                         [&]() { lse(bh, i0 + r) = mx[r] + math::log(sum[r]); });
        });
      });
}

// delta(bh, s) = sum over the head's columns of dOut * Out (the softmax backward's row dot
// product sum_j P dP, without P).
template <class ExecSpace, class T, class Space, class DOV, class OV>
void fused_delta_pass(const ExecSpace& space, const FusedAttentionWorkspace<T, Space>& ws,
                      const DOV& dOut, const OV& Out) {
  using A = acc_t<T>;
  const int S = ws.seq, H = ws.heads, D = ws.head_dim;
  const auto delta = ws.delta;
  Kokkos::parallel_for(
      "paraxis::fused_attention_delta",
      Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<long long>(ws.batch) * H * S),
      KOKKOS_LAMBDA(const long long x) {
        const int bh = static_cast<int>(x / S), s = static_cast<int>(x % S);
        const int n = (bh / H) * S + s, c0 = (bh % H) * D;
        A acc = 0;
        for (int d = 0; d < D; ++d)
          acc += static_cast<A>(dOut(n, c0 + d)) * static_cast<A>(Out(n, c0 + d));
        delta(bh, s) = acc;
      });
}

// dK, dV (into ws.dk, ws.dv) of each key tile, over the query tiles at or after it.
template <class ExecSpace, class T, class Space, class DOV>
void fused_dkv_pass(const ExecSpace& space, const FusedAttentionWorkspace<T, Space>& ws,
                    const DOV& dOut) {
  using A = acc_t<T>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using Scratch = FusedScratch<ExecSpace, A>;
  const FusedLaunch l = fused_launch<ExecSpace, A>(FusedPass::dkv, ws.head_dim, ws.tile);
  const int t = l.tile, D = ws.head_dim, S = ws.seq, H = ws.heads, level = l.level;
  const int nt = (S + t - 1) / t;
  const std::size_t elems = l.scratch_elems;
  const A sc = static_cast<A>(1.0 / std::sqrt(static_cast<double>(D)));
  const auto q = ws.q, k = ws.k, v = ws.v, dk = ws.dk, dv = ws.dv;
  const auto lse = ws.lse, delta = ws.delta;
  Kokkos::parallel_for(
      "paraxis::fused_attention_bwd_dkv", fused_policy<ExecSpace, A>(space, l, ws.batch * H * nt),
      KOKKOS_LAMBDA(const Member& team) {
        const int jt = team.league_rank() % nt, bh = team.league_rank() / nt;
        const int b = bh / H, c0 = (bh % H) * D, j0 = jt * t;
        const int nj = S - j0 < t ? S - j0 : t;
        Scratch buf(team.team_scratch(level), elems);
        A* const Ks = buf.data();    // [t][D] this team's keys
        A* const Vs = Ks + t * D;    // [t][D]
        A* const dKs = Vs + t * D;   // [t][D] accumulators
        A* const dVs = dKs + t * D;  // [t][D]
        A* const Qt = dVs + t * D;   // [D][t] scaled queries of the current query tile
        A* const Qs = Qt + t * D;    // [t][D]
        A* const dOt = Qs + t * D;   // [D][t]
        A* const dOs = dOt + t * D;  // [t][D]
        A* const Pt = dOs + t * D;   // [t][t] P^T: key row, query column
        A* const dSt = Pt + t * t;   // [t][t] dS^T
        A* const L = dSt + t * t;    // lse of the query tile's rows
        A* const Dl = L + t;         // delta of the query tile's rows
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj), [&](const int c) {
          const int n = b * S + j0 + c;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D), [&](const int d) {
            Ks[c * D + d] = static_cast<A>(k(n, c0 + d));
            Vs[c * D + d] = static_cast<A>(v(n, c0 + d));
            dKs[c * D + d] = 0;
            dVs[c * D + d] = 0;
          });
        });
        for (int it = jt; it < nt; ++it) {
          const int i0 = it * t;
          const int ni = S - i0 < t ? S - i0 : t;
          team.team_barrier();  // the previous query tile is done with
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni), [&](const int r) {
            const int n = b * S + i0 + r;
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D), [&](const int d) {
              const A qv = sc * static_cast<A>(q(n, c0 + d));
              const A gv = static_cast<A>(dOut(n, c0 + d));
              Qt[d * t + r] = qv;
              Qs[r * D + d] = qv;
              dOt[d * t + r] = gv;
              dOs[r * D + d] = gv;
            });
            Kokkos::single(Kokkos::PerThread(team), [&]() {
              L[r] = lse(bh, i0 + r);
              Dl[r] = delta(bh, i0 + r);
            });
          });
          team.team_barrier();
          // P^T and dS^T of the key row, lanes over the query rows (causal: queries at or
          // after the key; on the diagonal tile, rows r >= c).
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj), [&](const int c) {
            const int r0 = it == jt ? c : 0;
            A* const p = Pt + c * t;
            A* const g = dSt + c * t;
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, ni), [&](const int r) {
              p[r] = 0;
              g[r] = 0;
            });
            for (int d = 0; d < D; ++d) {
              const A kd = Ks[c * D + d], vd = Vs[c * D + d];
              const A* const qd = Qt + d * t;
              const A* const od = dOt + d * t;
              Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, ni), [&](const int r) {
                p[r] += kd * qd[r];
                g[r] += vd * od[r];
              });
            }
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, ni), [&](const int r) {
              const A pr = r >= r0 ? math::vexp_bounded(p[r] - L[r]) : A(0);
              p[r] = pr;
              g[r] = pr * (g[r] - Dl[r]);
            });
          });
          team.team_barrier();
          // dV += P^T dOut, dK += dS^T (scale q), lanes over the head dimension.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj), [&](const int c) {
            A* const dkc = dKs + c * D;
            A* const dvc = dVs + c * D;
            for (int r = it == jt ? c : 0; r < ni; ++r) {
              const A pr = Pt[c * t + r], gr = dSt[c * t + r];
              const A* const qr = Qs + r * D;
              const A* const orow = dOs + r * D;
              Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D), [&](const int d) {
                dvc[d] += pr * orow[d];
                dkc[d] += gr * qr[d];
              });
            }
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj), [&](const int c) {
          const int n = b * S + j0 + c;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D), [&](const int d) {
            dk(n, c0 + d) = static_cast<T>(dKs[c * D + d]);
            dv(n, c0 + d) = static_cast<T>(dVs[c * D + d]);
          });
        });
      });
}

// dQ of each query tile, over the key tiles at or before it. A team reads only its own rows
// of q (before it writes dQ), so dQ may be ws.q itself.
template <class ExecSpace, class T, class Space, class DOV, class DQV>
void fused_dq_pass(const ExecSpace& space, const FusedAttentionWorkspace<T, Space>& ws,
                   const DOV& dOut, const DQV& dQ) {
  using A = acc_t<T>;
  using TQ = value_t<DQV>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using Scratch = FusedScratch<ExecSpace, A>;
  const FusedLaunch l = fused_launch<ExecSpace, A>(FusedPass::dq, ws.head_dim, ws.tile);
  const int t = l.tile, D = ws.head_dim, S = ws.seq, H = ws.heads, level = l.level;
  const int nt = (S + t - 1) / t;
  const std::size_t elems = l.scratch_elems;
  const A sc = static_cast<A>(1.0 / std::sqrt(static_cast<double>(D)));
  const auto q = ws.q, k = ws.k, v = ws.v;
  const auto lse = ws.lse, delta = ws.delta;
  Kokkos::parallel_for(
      "paraxis::fused_attention_bwd_dq", fused_policy<ExecSpace, A>(space, l, ws.batch * H * nt),
      KOKKOS_LAMBDA(const Member& team) {
        const int it = team.league_rank() % nt, bh = team.league_rank() / nt;
        const int b = bh / H, c0 = (bh % H) * D, i0 = it * t;
        const int ni = S - i0 < t ? S - i0 : t;
        Scratch buf(team.team_scratch(level), elems);
        A* const Qs = buf.data();    // [t][D] scaled
        A* const dOs = Qs + t * D;   // [t][D]
        A* const dQs = dOs + t * D;  // [t][D] accumulators
        A* const Kt = dQs + t * D;   // [D][t]
        A* const Ks = Kt + t * D;    // [t][D]
        A* const Vt = Ks + t * D;    // [D][t]
        A* const P = Vt + t * D;     // [t][t] scores
        A* const dS = P + t * t;     // [t][t]
        A* const L = dS + t * t;
        A* const Dl = L + t;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni), [&](const int r) {
          const int n = b * S + i0 + r;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D), [&](const int d) {
            Qs[r * D + d] = sc * static_cast<A>(q(n, c0 + d));
            dOs[r * D + d] = static_cast<A>(dOut(n, c0 + d));
            dQs[r * D + d] = 0;
          });
          Kokkos::single(Kokkos::PerThread(team), [&]() {
            L[r] = lse(bh, i0 + r);
            Dl[r] = delta(bh, i0 + r);
          });
        });
        for (int jt = 0; jt <= it; ++jt) {
          const int j0 = jt * t;
          const int nj = S - j0 < t ? S - j0 : t;
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj), [&](const int j) {
            const int n = b * S + j0 + j;
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D), [&](const int d) {
              const A kv = static_cast<A>(k(n, c0 + d));
              Kt[d * t + j] = kv;
              Ks[j * D + d] = kv;
              Vt[d * t + j] = static_cast<A>(v(n, c0 + d));
            });
          });
          team.team_barrier();
          // dS = P (dP - delta) of the query row, lanes over the keys.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni), [&](const int r) {
            const int jn = jt < it ? nj : r + 1;
            A* const p = P + r * t;
            A* const g = dS + r * t;
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, jn), [&](const int j) {
              p[j] = 0;
              g[j] = 0;
            });
            for (int d = 0; d < D; ++d) {
              const A qd = Qs[r * D + d], od = dOs[r * D + d];
              const A* const kd = Kt + d * t;
              const A* const vd = Vt + d * t;
              Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, jn), [&](const int j) {
                p[j] += qd * kd[j];
                g[j] += od * vd[j];
              });
            }
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, jn), [&](const int j) {
              g[j] = math::vexp_bounded(p[j] - L[r]) * (g[j] - Dl[r]);
            });
          });
          team.team_barrier();
          // dQ += dS K, lanes over the head dimension.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni), [&](const int r) {
            const int jn = jt < it ? nj : r + 1;
            A* const dq = dQs + r * D;
            for (int j = 0; j < jn; ++j) {
              const A gj = dS[r * t + j];
              const A* const kj = Ks + j * D;
              Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D),
                                   [&](const int d) { dq[d] += gj * kj[d]; });
            }
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni), [&](const int r) {
          const int n = b * S + i0 + r;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, D), [&](const int d) {
            dQ(n, c0 + d) = static_cast<TQ>(sc * dQs[r * D + d]);
          });
        });
      });
}

}  // namespace detail

// Out = causal_softmax(Q K^T / sqrt(head_dim)) V per (sequence, head), as attention_forward.
// Out written; ws keeps q, k, v and the rows' log-sum-exp for fused_attention_backward. Q, K, V
// may be ws.q, ws.k, ws.v themselves (then nothing is copied).
template <class ExecSpace, class QV, class KV, class VV, class T, class Space, class OV>
void fused_attention_forward(const ExecSpace& space, const QV& Q, const KV& K, const VV& V,
                             FusedAttentionWorkspace<T, Space>& ws, const OV& Out) {
  static_assert(QV::rank == 2 && KV::rank == 2 && VV::rank == 2 && OV::rank == 2,
                "fused_attention_forward: Q, K, V, Out are [N,E]");
  assert_accessible<ExecSpace, QV, KV, VV, OV, View2<T, Space>>();
  const char* k = "paraxis::fused_attention_forward";
  detail::check_fused_arg(k, "Q", ws, Q);
  detail::check_fused_arg(k, "K", ws, K);
  detail::check_fused_arg(k, "V", ws, V);
  detail::check_fused_arg(k, "Out", ws, Out);
  Kokkos::Profiling::pushRegion("paraxis::fused_attention_forward");
  auto keep = [&](const auto& X, const View2<T, Space>& Y) {
    if (static_cast<const void*>(X.data()) != static_cast<const void*>(Y.data()))
      detail::fused_copy(space, X, Y);
  };
  keep(Q, ws.q);
  keep(K, ws.k);
  keep(V, ws.v);
  detail::fused_forward_pass(space, ws, Out);
  Kokkos::Profiling::popRegion();
}

// dQ, dK, dV (written) from dOut, the forward's output Out (unchanged since) and what
// fused_attention_forward kept in ws. dQ may be ws.q and dK, dV any of ws.q, ws.k, ws.v (a
// split backward keeps the gradients there); dQ must not be ws.k or ws.v, which the dQ pass
// still reads.
template <class ExecSpace, class DOV, class OV, class T, class Space, class DQV, class DKV,
          class DVV>
void fused_attention_backward(const ExecSpace& space, const DOV& dOut, const OV& Out,
                              FusedAttentionWorkspace<T, Space>& ws, const DQV& dQ, const DKV& dK,
                              const DVV& dV) {
  static_assert(
      DOV::rank == 2 && OV::rank == 2 && DQV::rank == 2 && DKV::rank == 2 && DVV::rank == 2,
      "fused_attention_backward: dOut, Out, dQ, dK, dV are [N,E]");
  assert_accessible<ExecSpace, DOV, OV, DQV, DKV, DVV, View2<T, Space>>();
  const char* k = "paraxis::fused_attention_backward";
  detail::check_fused_arg(k, "dOut", ws, dOut);
  detail::check_fused_arg(k, "Out", ws, Out);
  detail::check_fused_arg(k, "dQ", ws, dQ);
  detail::check_fused_arg(k, "dK", ws, dK);
  detail::check_fused_arg(k, "dV", ws, dV);
  const void* dq = dQ.data();
  if (dq == static_cast<const void*>(ws.k.data()) || dq == static_cast<const void*>(ws.v.data()))
    throw std::invalid_argument(
        "paraxis::fused_attention_backward: dQ is the workspace's k or v, which the dQ pass "
        "reads; expected another buffer (ws.q is allowed)");
  Kokkos::Profiling::pushRegion("paraxis::fused_attention_backward");
  detail::fused_delta_pass(space, ws, dOut, Out);
  detail::fused_dkv_pass(space, ws, dOut);
  detail::fused_dq_pass(space, ws, dOut, dQ);
  detail::fused_copy(space, ws.dk, dK);
  detail::fused_copy(space, ws.dv, dV);
  Kokkos::Profiling::popRegion();
}

}  // namespace paraxis::kernels
