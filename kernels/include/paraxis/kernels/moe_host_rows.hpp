// Row loops of the MoE gather/combine on host execution spaces (see row_lanes.hpp for why the
// host path exists). Each function owns one output row and walks it contiguously; sums over a
// token's slots are kept in A, chunk by chunk (kMoeChunk columns in registers), in slot order,
// so the element order is the device path's. Only dgate's dot product over the hidden index
// is summed in lanes (row_lanes.hpp) instead of h ascending.
#pragma once

#include "paraxis/kernels/row_lanes.hpp"

namespace paraxis::kernels::detail {

inline constexpr int kMoeChunk = 256;

// Rows ahead whose source rows are prefetched: rows are gathered by index (prefetch_row).
inline constexpr int kMoePrefetch = 4;

// dst = src, converted through A (a plain copy when both have one type: the same values, a
// bf16 signalling NaN kept as it is rather than quietened by a round trip through float).
template <class A, class S, class D>
inline void moe_copy_row(int h, const S* KOKKOS_RESTRICT src, D* KOKKOS_RESTRICT dst) {
  if constexpr (std::is_same_v<S, D>) {
    for (int j = 0; j < h; ++j) dst[j] = src[j];
  } else {
    store_row(dst, h, [&](int j) { return static_cast<A>(src[j]); });
  }
}

// dx += sum over slots s < k of src_of(s) (in order of s; a null row is a dropped slot), summed
// in A, rounded once.
// Two kept slots (top-2) take one pass: (dx + x0) + x1 per element in a register, the same
// additions in the same order as the chunked loop.
template <class A, class D, class SrcOf>
inline void moe_add_rows(int h, int k, const SrcOf& src_of, D* KOKKOS_RESTRICT dx) {
  if (k == 2 && src_of(0) && src_of(1)) {
    const auto* KOKKOS_RESTRICT x0 = src_of(0);
    const auto* KOKKOS_RESTRICT x1 = src_of(1);
    store_row(dx, h, [&](int l) {
      A a = static_cast<A>(dx[l]);
      a += static_cast<A>(x0[l]);
      a += static_cast<A>(x1[l]);
      return a;
    });
    return;
  }
  for (int j0 = 0; j0 < h; j0 += kMoeChunk) {
    const int w = h - j0 < kMoeChunk ? h - j0 : kMoeChunk;
    A acc[kMoeChunk];
    D* KOKKOS_RESTRICT out = dx + j0;
    for (int l = 0; l < w; ++l) acc[l] = static_cast<A>(out[l]);
    for (int s = 0; s < k; ++s) {
      const auto* row = src_of(s);
      if (!row) continue;
      const auto* KOKKOS_RESTRICT in = row + j0;
      for (int l = 0; l < w; ++l) acc[l] += static_cast<A>(in[l]);
    }
    store_row(out, w, [&](int l) { return acc[l]; });
  }
}

// y = sum over slots s < k of gate_of(s) * src_of(s) (in order of s, from 0; a null row is a
// dropped slot), summed in A.
// Two kept slots (top-2) take one pass, each element's sum in a register: (0 + g0 x0) + g1 x1,
// the same operations in the same order as the chunked loop.
template <class A, class D, class SrcOf, class GateOf>
inline void moe_weighted_rows(int h, int k, const SrcOf& src_of, const GateOf& gate_of,
                              D* KOKKOS_RESTRICT y) {
  if (k == 2 && src_of(0) && src_of(1)) {
    const auto* KOKKOS_RESTRICT x0 = src_of(0);
    const auto* KOKKOS_RESTRICT x1 = src_of(1);
    const A g0 = gate_of(0), g1 = gate_of(1);
    store_row(y, h, [&](int l) {
      A a = A(0);
      a += g0 * static_cast<A>(x0[l]);
      a += g1 * static_cast<A>(x1[l]);
      return a;
    });
    return;
  }
  for (int j0 = 0; j0 < h; j0 += kMoeChunk) {
    const int w = h - j0 < kMoeChunk ? h - j0 : kMoeChunk;
    A acc[kMoeChunk] = {};
    for (int s = 0; s < k; ++s) {
      const auto* row = src_of(s);
      if (!row) continue;
      const auto* KOKKOS_RESTRICT in = row + j0;
      const A g = gate_of(s);
      for (int l = 0; l < w; ++l) acc[l] += g * static_cast<A>(in[l]);
    }
    store_row(y + j0, w, [&](int l) { return acc[l]; });
  }
}

// dye = gate * dy; returns dot(dy, ye) (lanes).
template <class A, class TY, class TE, class TD>
inline A moe_combine_backward_row(int h, A gate, const TY* KOKKOS_RESTRICT dy,
                                  const TE* KOKKOS_RESTRICT ye, TD* KOKKOS_RESTRICT dye) {
  store_row(dye, h, [&](int j) { return gate * static_cast<A>(dy[j]); });
  return lane_sum<A>(h, [&](int j) { return static_cast<A>(dy[j]) * static_cast<A>(ye[j]); });
}

}  // namespace paraxis::kernels::detail
