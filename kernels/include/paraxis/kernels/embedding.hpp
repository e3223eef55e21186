// Token + position embedding, forward and backward. The backward pass is a scatter-add made
// deterministic without atomics: a counting sort groups token positions by vocabulary row in
// token order (one thread fills the buckets: O(N + V) work, small next to the (row, column)
// sums), then one thread per (row, column) adds its positions in that order.
//
// vocab_offset supports vocabulary-parallel shards: a shard holds rows
// [vocab_offset, vocab_offset + Vl) of the full table; tokens outside contribute 0 to X and
// nothing to dwte. Only one shard should add positions: pass add_positions = false (forward)
// / accumulate_positions = false (backward) on the others; wpe / dwpe are then not read or
// written and may be empty Views.
#pragma once

#include <sstream>

#include "paraxis/kernels/common.hpp"

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
  using GP = value_t<DPV>;
  const int sl = seq_len;
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
