// The host reference of the attention benchmarks: causal multi-head attention and its
// gradients in fp64, as docs/model.md defines it, written as plain loops one query row at a
// time (no seq x seq matrix). Arrays are [N, E] row-major, row n = b*seq + s, head h = columns
// [h*hd, (h+1)*hd), as in attention.hpp:
//   P(t, :) = softmax over j <= t of (Q_t . K_j) / sqrt(hd),  Out_t = sum_j P(t, j) V_j;
//   dP(t, j) = dOut_t . V_j,  dS(t, j) = P(t, j) (dP(t, j) - sum_j' P(t, j') dP(t, j')),
//   dQ_t = sum_j dS(t, j) K_j / sqrt(hd),  dK_j = sum_t dS(t, j) Q_t / sqrt(hd),
//   dV_j = sum_t P(t, j) dOut_t.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace paraxis::bench {

struct AttentionShape {
  int batch, seq, heads, hd;
};

struct AttentionReference {
  std::vector<double> out, dq, dk, dv;
};

namespace detail {

// Query row t of head h of sequence b: Out_t, and its terms of dQ, dK, dV.
inline void attention_reference_row(const AttentionShape& s, int b, int h, int t,
                                    const std::vector<double>& Q, const std::vector<double>& K,
                                    const std::vector<double>& V, const std::vector<double>& dO,
                                    AttentionReference& r, std::vector<double>& p,
                                    std::vector<double>& ds) {
  const std::size_t e = static_cast<std::size_t>(s.heads) * s.hd;
  auto at = [&](int row) { return (static_cast<std::size_t>(b) * s.seq + row) * e + h * s.hd; };
  auto dot = [&](const std::vector<double>& x, std::size_t i, const std::vector<double>& y,
                 std::size_t j) {
    double sum = 0;
    for (int d = 0; d < s.hd; ++d) sum += x[i + d] * y[j + d];
    return sum;
  };
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.hd));
  const std::size_t qt = at(t);
  double mx = -INFINITY, sum = 0, pdp = 0;
  for (int j = 0; j <= t; ++j) mx = std::max(mx, p[j] = scale * dot(Q, qt, K, at(j)));
  for (int j = 0; j <= t; ++j) sum += p[j] = std::exp(p[j] - mx);
  for (int j = 0; j <= t; ++j) {
    p[j] /= sum;
    ds[j] = dot(dO, qt, V, at(j));  // dP, then dS below
    pdp += p[j] * ds[j];
    for (int d = 0; d < s.hd; ++d) r.out[qt + d] += p[j] * V[at(j) + d];
  }
  for (int j = 0; j <= t; ++j) {
    ds[j] = p[j] * (ds[j] - pdp);
    const std::size_t kj = at(j);
    for (int d = 0; d < s.hd; ++d) {
      r.dq[qt + d] += scale * ds[j] * K[kj + d];
      r.dk[kj + d] += scale * ds[j] * Q[qt + d];
      r.dv[kj + d] += p[j] * dO[qt + d];
    }
  }
}

}  // namespace detail

inline AttentionReference attention_reference(const AttentionShape& s, const std::vector<double>& Q,
                                              const std::vector<double>& K,
                                              const std::vector<double>& V,
                                              const std::vector<double>& dOut) {
  AttentionReference r;
  for (auto* v : {&r.out, &r.dq, &r.dk, &r.dv}) v->assign(Q.size(), 0.0);
  std::vector<double> p(s.seq), ds(s.seq);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int t = 0; t < s.seq; ++t)
        detail::attention_reference_row(s, b, h, t, Q, K, V, dOut, r, p, ds);
  return r;
}

}  // namespace paraxis::bench
