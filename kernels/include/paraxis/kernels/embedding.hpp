// Token + position embedding, forward and backward. The backward pass is a scatter-add made
// deterministic without atomics: a counting sort groups token positions by vocabulary row in
// token order (one thread fills the buckets: O(N + V) work, small next to the (row, column)
// sums), then one thread per (row, column) adds its positions in that order. On a host space
// (row_lanes.hpp) one iteration owns a whole row instead (a vocabulary row, a position row, a
// token's output row) and walks it contiguously, in chunks of kEmbChunk columns held in
// registers; every element is summed in the same order as on the device path.
//
// vocab_offset supports vocabulary-parallel shards: a shard holds rows
// [vocab_offset, vocab_offset + Vl) of the full table; tokens outside contribute 0 to X and
// nothing to dwte. Only one shard should add positions: pass add_positions = false (forward)
// / accumulate_positions = false (backward) on the others; wpe / dwpe are then not read or
// written and may be empty Views.
#pragma once

#include <sstream>

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/row_lanes.hpp"

namespace paraxis::kernels {

namespace detail {
template <class PV>
void check_positions(const char* kernel, const char* arg, const PV& wpe, std::size_t H,
                     int seq_len) {
  if (seq_len < 1 || wpe.extent(0) < static_cast<std::size_t>(seq_len) || wpe.extent(1) != H) {
    std::ostringstream os;
    os << kernel << ": " << arg << " has shape " << shape_string(wpe) << ", expected [P," << H
       << "] with P >= seq_len = " << seq_len;
    throw std::invalid_argument(os.str());
  }
}

// Columns per chunk of the host backward pass: the chunk's sums stay in registers/L1.
inline constexpr int kEmbChunk = 128;

// Rows ahead whose vocabulary row is prefetched (row_lanes.hpp, prefetch_row).
inline constexpr int kEmbPrefetch = 8;

// x = (w ? w : 0) + (p ? p : 0), in A, as the device path computes it (0 + p, not p: -0).
template <class A, class TW, class TP, class TX>
inline void embedding_forward_row(int h, const TW* KOKKOS_RESTRICT w, const TP* KOKKOS_RESTRICT p,
                                  TX* KOKKOS_RESTRICT x) {
  if (w && p)
    store_row(x, h, [&](int j) { return static_cast<A>(w[j]) + static_cast<A>(p[j]); });
  else if (w)
    for (int j = 0; j < h; ++j) x[j] = static_cast<TX>(static_cast<A>(w[j]));
  else if (p)
    store_row(x, h, [&](int j) { return A(0) + static_cast<A>(p[j]); });
  else
    for (int j = 0; j < h; ++j) x[j] = static_cast<TX>(A(0));
}

// One chunk of columns [j0, j0 + w): acc = sum of src rows (row_of(q) for q in [b, e)), in that
// order, starting from 0; then out += acc. The element order of the device path.
template <class G, class DXV, class RowOf>
inline void embedding_sum_rows(const DXV& dX, int j0, int w, int b, int e, const RowOf& row_of,
                               G* KOKKOS_RESTRICT out) {
  G acc[kEmbChunk] = {};
  for (int q = b; q < e; ++q) {
    const auto* KOKKOS_RESTRICT d = row_ptr(dX, row_of(q)) + j0;
    for (int l = 0; l < w; ++l) acc[l] += static_cast<G>(d[l]);
  }
  for (int l = 0; l < w; ++l) out[l] += acc[l];
}

// out += the sum of the src rows row_of(q), q in [b, e), from 0 in that order: chunk by
// chunk, or for a single row in one pass over it (the same 0 + x, then out += it; a pass per
// chunk cost the one-token vocabulary rows 7-25 %, docs/perf-log/2026-12-05-kernels-round5.md).
template <class G, class DXV, class RowOf>
inline void embedding_add_rows(const DXV& dX, int h, int b, int e, const RowOf& row_of,
                               G* KOKKOS_RESTRICT out) {
  if (e - b == 1) {
    const auto* KOKKOS_RESTRICT d = row_ptr(dX, row_of(b));
    for (int j = 0; j < h; ++j) out[j] += G(0) + static_cast<G>(d[j]);
    return;
  }
  for (int j0 = 0; j0 < h; j0 += kEmbChunk)
    embedding_sum_rows<G>(dX, j0, h - j0 < kEmbChunk ? h - j0 : kEmbChunk, b, e, row_of, out + j0);
}
}  // namespace detail

// X(n, :) = (tok in [off, off + Vl) ? wte(tok - off, :) : 0) + wpe(n % seq_len, :)
// (the wpe term only when add_positions). X written.
template <class ExecSpace, class TV, class WV, class PV, class XV>
void embedding_forward(const ExecSpace& space, const TV& tokens, const WV& wte, const PV& wpe,
                       int seq_len, int vocab_offset, const XV& X, bool add_positions = true) {
  static_assert(TV::rank == 1 && WV::rank == 2 && PV::rank == 2 && XV::rank == 2,
                "embedding_forward: tokens[N], wte[Vl,H], wpe[P,H], X[N,H]");
  static_assert(std::is_same_v<value_t<TV>, int>, "embedding_forward: int tokens");
  assert_accessible<ExecSpace, TV, WV, PV, XV>();
  const char* k = "paraxis::embedding_forward";
  const std::size_t N = tokens.extent(0), H = wte.extent(1);
  require_shape(k, "X", X, {N, H});
  if (add_positions) detail::check_positions(k, "wpe", wpe, H, seq_len);
  using A = acc_t<value_t<WV>>;
  using TX = value_t<XV>;
  const int vl = static_cast<int>(wte.extent(0)), off = vocab_offset, sl = seq_len;
  const bool pos = add_positions;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(wte, X) && (!pos || detail::rows_contiguous(wpe))) {
      const int h = static_cast<int>(H), n_tok = static_cast<int>(N);
      const std::size_t row_bytes = H * sizeof(value_t<WV>);
      Kokkos::parallel_for(
          "paraxis::embedding_fwd_host",
          Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<int>(N)), [=](const int n) {
            if (n + detail::kEmbPrefetch < n_tok) {
              const int ahead = tokens(n + detail::kEmbPrefetch) - off;
              if (ahead >= 0 && ahead < vl)
                detail::prefetch_row(detail::row_ptr(wte, ahead), row_bytes);
            }
            const int row = tokens(n) - off;
            detail::embedding_forward_row<A>(
                h, row >= 0 && row < vl ? detail::row_ptr(wte, row) : nullptr,
                pos ? detail::row_ptr(wpe, n % sl) : nullptr, detail::row_ptr(X, n));
          });
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::embedding_fwd",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0},
                                                        {static_cast<int>(N), static_cast<int>(H)}),
      KOKKOS_LAMBDA(const int n, const int j) {
        const int row = tokens(n) - off;
        A x = (row >= 0 && row < vl) ? static_cast<A>(wte(row, j)) : A(0);
        if (pos) x += static_cast<A>(wpe(n % sl, j));
        X(n, j) = static_cast<TX>(x);
      });
}

// dwte(tok - off, :) += sum of dX(n, :) over the positions n holding tok (in token order);
// dwpe(s, :) += sum of dX(n, :) over n with n % seq_len == s (in order), when
// accumulate_positions. Rows of dwpe at or beyond seq_len are untouched.
template <class ExecSpace, class TV, class DXV, class DWV, class DPV>
void embedding_backward(const ExecSpace& space, const TV& tokens, const DXV& dX, int seq_len,
                        int vocab_offset, const DWV& dwte, const DPV& dwpe,
                        bool accumulate_positions = true) {
  static_assert(TV::rank == 1 && DXV::rank == 2 && DWV::rank == 2 && DPV::rank == 2,
                "embedding_backward: tokens[N], dX[N,H], dwte[Vl,H], dwpe[P,H]");
  static_assert(std::is_same_v<value_t<TV>, int>, "embedding_backward: int tokens");
  assert_accessible<ExecSpace, TV, DXV, DWV, DPV>();
  const char* k = "paraxis::embedding_backward";
  const std::size_t N = tokens.extent(0), H = dwte.extent(1);
  require_shape(k, "dX", dX, {N, H});
  if (accumulate_positions) detail::check_positions(k, "dwpe", dwpe, H, seq_len);
  using Mem = typename ExecSpace::memory_space;
  const int n_tok = static_cast<int>(N), vl = static_cast<int>(dwte.extent(0)), off = vocab_offset,
            h = static_cast<int>(H);

  // Counting sort of positions by vocabulary row; start(v)..start(v+1) is row v's bucket.
  // Zeroed on the caller's instance, so the bucket kernel is ordered after it.
  Kokkos::View<int*, Mem> start(
      Kokkos::view_alloc(space, std::string("paraxis::embedding_bucket_start")), vl + 1);
  Kokkos::View<int*, Mem> cursor(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "paraxis::embedding_bucket_cursor"), vl);
  Kokkos::View<int*, Mem> order(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "paraxis::embedding_bucket_order"),
      n_tok > 0 ? n_tok : 1);
  Kokkos::parallel_for(
      "paraxis::embedding_bwd_bucket", Kokkos::RangePolicy<ExecSpace>(space, 0, 1),
      KOKKOS_LAMBDA(const int) {
        for (int n = 0; n < n_tok; ++n) {
          const int row = tokens(n) - off;
          if (row >= 0 && row < vl) ++start(row + 1);
        }
        for (int v = 0; v < vl; ++v) {
          start(v + 1) += start(v);
          cursor(v) = start(v);
        }
        for (int n = 0; n < n_tok; ++n) {
          const int row = tokens(n) - off;
          if (row >= 0 && row < vl) order(cursor(row)++) = n;
        }
      });
  using GW = value_t<DWV>;
  using GP = value_t<DPV>;
  const int sl = seq_len;
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(dX, dwte) &&
        (!accumulate_positions || detail::rows_contiguous(dwpe))) {
      Kokkos::parallel_for("paraxis::embedding_bwd_wte_host",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, vl), [=](const int v) {
                             const int b = start(v), e = start(v + 1);
                             if (b == e) return;
                             detail::embedding_add_rows<GW>(
                                 dX, h, b, e, [&](int q) { return order(q); },
                                 detail::row_ptr(dwte, v));
                           });
      if (!accumulate_positions) return;
      // Position s sums tokens s, s + sl, ...: q-th term is row s + q * sl.
      const int rows = sl < n_tok ? sl : n_tok;
      Kokkos::parallel_for("paraxis::embedding_bwd_wpe_host",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, rows), [=](const int s) {
                             const int terms = (n_tok - s + sl - 1) / sl;
                             detail::embedding_add_rows<GP>(
                                 dX, h, 0, terms, [&](int q) { return s + q * sl; },
                                 detail::row_ptr(dwpe, s));
                           });
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::embedding_bwd_wte",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {vl, h}),
      KOKKOS_LAMBDA(const int v, const int j) {
        const int b = start(v), e = start(v + 1);
        if (b == e) return;
        GW s = 0;
        for (int p = b; p < e; ++p) s += static_cast<GW>(dX(order(p), j));
        dwte(v, j) += s;
      });
  if (!accumulate_positions) return;
  Kokkos::parallel_for(
      "paraxis::embedding_bwd_wpe",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {sl, h}),
      KOKKOS_LAMBDA(const int s, const int j) {
        if (s >= n_tok) return;
        GP acc = 0;
        for (int n = s; n < n_tok; n += sl) acc += static_cast<GP>(dX(n, j));
        dwpe(s, j) += acc;
      });
}

}  // namespace paraxis::kernels
