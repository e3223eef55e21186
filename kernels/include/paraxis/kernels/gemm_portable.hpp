// Portable GEMM: a packed, register-blocked Kokkos kernel for any execution space and any
// storage type (fp64, fp32, bf16, mixed). One team owns one MC x NC tile of C (the batch index
// is part of the league). For each KC-deep panel of K the team packs op(A) into MR-row
// micro-panels and op(B) into NR-column micro-panels in team scratch, converting to the
// accumulation type on the way (so bf16 and the N/T layouts cost nothing in the inner loop),
// then updates MR x NR register blocks of C. Packed panels are zero-padded, so edge tiles run
// the same inner loop and only the stores are masked. Every C entry has one owner and a fixed
// summation order: results are deterministic. On host spaces the C tile (mc x nc, at most
// MC x NC) is chosen at run time for the space's thread count (gemm_host_tile_shape); KC is
// fixed, so the summation order, and the bits, are the same for any thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "paraxis/kernels/common.hpp"

// Host micro-kernel with GCC/Clang vector extensions; never in a device compilation pass.
// -DPARAXIS_GEMM_HOST_VECTORS=0 forces the plain loop (for comparison).
#ifndef PARAXIS_GEMM_HOST_VECTORS
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__) && \
    !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
#define PARAXIS_GEMM_HOST_VECTORS 1
#else
#define PARAXIS_GEMM_HOST_VECTORS 0
#endif
#endif

namespace paraxis::kernels {

enum class Trans : char { N = 'N', T = 'T' };

namespace detail {

template <class AV, class BV, class CV>
using gemm_acc_t =
    std::conditional_t<std::is_same_v<value_t<AV>, double> || std::is_same_v<value_t<BV>, double> ||
                           std::is_same_v<value_t<CV>, double>,
                       double, float>;

// Tile sizes per execution space and accumulation type. Host spaces: one thread per team,
// the whole mc x nc tile walked by that thread; MR x NR sized to fill the vector registers
// (16 zmm accumulators), KC so a B micro-panel (KC x NR) stays in L1 and the A block
// (mc x KC) in L2. MC x NC is the largest C tile (fewer repacks of A and B; measured best at
// 512^3 and the 512x2048 MLP shapes on an AVX-512 EPYC, Serial); threaded host spaces cut C
// into smaller tiles at run time so that every thread gets an equal share
// (gemm_host_tile_shape). KC is the same for Serial and threaded spaces: the same bits.
// Device spaces: one MR x NR block per thread, panels small enough for shared memory.
template <class ExecSpace>
constexpr bool is_serial_space() {
#ifdef KOKKOS_ENABLE_SERIAL
  return std::is_same_v<ExecSpace, Kokkos::Serial>;
#else
  return false;
#endif
}

template <class Acc>
struct gemm_host_tiles {
  static constexpr int MR = 8, NR = 2 * 64 / sizeof(Acc);  // two 64-byte vectors
  static constexpr int MC = 512, NC = 512, KC = 128;
  static constexpr int team_size = 1;
};

template <class ExecSpace, class Acc,
          bool Host = Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible>
struct gemm_tiles : gemm_host_tiles<Acc> {};

template <class ExecSpace, class Acc>
struct gemm_tiles<ExecSpace, Acc, false> {
  static constexpr int MR = 4, NR = 4, MC = 64, NC = 64, KC = 16;
  static constexpr int team_size = (MC / MR) * (NC / NR);
};

// The C tile of one team: mc x nc, multiples of the register block, at most MC x NC.
struct GemmTileShape {
  int mc = 0, nc = 0;
};

// The C tile for a host GEMM of `batch` m x n products on `threads` threads (one team per
// thread, teams handed out in equal contiguous shares). Candidates cut m and n into equal
// parts (rounded up to MR, NR); the cost of one is the tiles of the busiest thread times the
// work of a tile, its multiply-adds (padding included) plus `pack_cost` per packed row or
// column (A and B are repacked for every tile). The cheapest wins; of equal ones the widest
// (C cut along m: each thread writes whole rows). With one thread this is the largest tile
// that fits, as it always was.
inline GemmTileShape gemm_host_tile_shape(int m, int n, int batch, int threads, int MR, int NR,
                                          int MC, int NC) {
  // A packed element costs about a cycle (load, convert, store), in which a core with two
  // 16-wide FMA pipes (Zen 4, AVX-512 fp32) does 32 multiply-adds: an estimate, not a fit.
  constexpr double pack_cost = 32;
  const auto ceil_div = [](long a, long b) { return (a + b - 1) / b; };
  const auto round_up = [&](long a, long b) { return ceil_div(a, b) * b; };
  if (threads < 1) threads = 1;
  GemmTileShape best{int(std::min<long>(round_up(m, MR), MC)),
                     int(std::min<long>(round_up(n, NR), NC))};
  double best_cost = -1;
  const long tm_min = ceil_div(m, MC), tn_min = ceil_div(n, NC);
  const long tm_max = ceil_div(m, MR), tn_max = ceil_div(n, NR);
  // Enough parts to give every thread a team with either axis alone; at most 4 tiles per
  // thread (or per tile of the largest tiling), which bounds the search at large thread counts.
  const long tiles_cap = 4 * std::max<long>(threads, long(batch) * tm_min * tn_min);
  for (long tm = tm_min; tm <= tm_max && tm <= tm_min * threads; ++tm) {
    const long mc = round_up(ceil_div(m, tm), MR);
    if (ceil_div(m, mc) != tm) continue;  // the same tile as a smaller tm
    for (long tn = tn_min; tn <= tn_max && tn <= tn_min * threads; ++tn) {
      if (long(batch) * tm * tn > tiles_cap) break;
      const long nc = round_up(ceil_div(n, tn), NR);
      if (ceil_div(n, nc) != tn) continue;
      const long per_thread = ceil_div(long(batch) * tm * tn, threads);
      const double cost = double(per_thread) * (double(mc) * nc + pack_cost * double(mc + nc));
      if (best_cost < 0 || cost < best_cost || (cost == best_cost && nc > best.nc)) {
        best_cost = cost;
        best = {int(mc), int(nc)};
      }
    }
  }
  return best;
}

KOKKOS_FORCEINLINE_FUNCTION constexpr int imin(int a, int b) {
  return a < b ? a : b;
}

// Element (i, j) of matrix `batch` of a rank-2 (batch ignored) or rank-3 View.
template <class V>
KOKKOS_FORCEINLINE_FUNCTION decltype(auto) mat_at(const V& v, int batch, int i, int j) {
  if constexpr (V::rank == 3) {
    return v(batch, i, j);
  } else {
    (void)batch;
    return v(i, j);
  }
}

#if PARAXIS_GEMM_HOST_VECTORS
// Host packing of a transposed panel: dst[p * ldd + r] = src[r * lds + p] for the 8 rows
// r < 8 of src (unit stride along p) and p < kc. Blocks of 8 x 8 go through vector registers
// (eight 8-lane loads, three butterfly stages of two-source shuffles, eight stores); a block
// stage with distance s swaps bit s of the row and column index, so the three stages
// transpose. Plain copies, so the packed values are bitwise the scalar loop's.
template <class T>
inline void transpose_pack8(T* KOKKOS_RESTRICT dst, int ldd, const T* KOKKOS_RESTRICT src, long lds,
                            int kc) {
  typedef T vec8 __attribute__((vector_size(8 * sizeof(T))));
  const int kb = kc / 8 * 8;
  for (int p0 = 0; p0 < kb; p0 += 8) {
    vec8 v[8], w[8];
    for (int r = 0; r < 8; ++r) std::memcpy(&v[r], src + r * lds + p0, sizeof(vec8));
    for (int i = 0; i < 8; i += 2) {  // s = 1
      w[i] = __builtin_shufflevector(v[i], v[i + 1], 0, 8, 2, 10, 4, 12, 6, 14);
      w[i + 1] = __builtin_shufflevector(v[i], v[i + 1], 1, 9, 3, 11, 5, 13, 7, 15);
    }
    for (int i : {0, 1, 4, 5}) {  // s = 2
      v[i] = __builtin_shufflevector(w[i], w[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      v[i + 2] = __builtin_shufflevector(w[i], w[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int i = 0; i < 4; ++i) {  // s = 4
      w[i] = __builtin_shufflevector(v[i], v[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
      w[i + 4] = __builtin_shufflevector(v[i], v[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
    for (int q = 0; q < 8; ++q) std::memcpy(dst + (p0 + q) * ldd, &w[q], sizeof(vec8));
  }
  for (int p = kb; p < kc; ++p)
    for (int r = 0; r < 8; ++r) dst[p * ldd + r] = src[r * lds + p];
}
#endif

template <class ExecSpace, class AV, class BV, class CV>
struct GemmPortableFunctor {
  using Acc = gemm_acc_t<AV, BV, CV>;
  using TC = value_t<CV>;
  using Tiles = gemm_tiles<ExecSpace, Acc>;
  static constexpr int MR = Tiles::MR, NR = Tiles::NR, MC = Tiles::MC, NC = Tiles::NC,
                       KC = Tiles::KC;
  static_assert(MC % MR == 0 && NC % NR == 0, "gemm_tiles: MC, NC must be multiples of MR, NR");
  // When C holds the accumulation type the partial sums of each K panel go straight into C;
  // otherwise (bf16 C, or float C of a double GEMM) they wait in an Acc tile in scratch, so C
  // is rounded once.
  static constexpr bool direct_c = std::is_same_v<TC, Acc>;
  static constexpr int align_elems = 64 / sizeof(Acc);
  static constexpr std::size_t scratch_elems = std::size_t(MC) * KC + std::size_t(KC) * NC +
                                               (direct_c ? 0 : std::size_t(MC) * NC) + align_elems;

  using team_member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using ScratchView = Kokkos::View<Acc*, typename ExecSpace::scratch_memory_space,
                                   Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  AV A;
  BV B;
  CV C;
  int m, n, k;
  int mc_tile, nc_tile;  // this launch's C tile (at most MC x NC)
  int tiles_m, tiles_n;
  bool tA, tB;
  // Whether the source of a packed panel is contiguous along K (A) or along N (B): the packing
  // loops then run along the contiguous direction.
  bool a_contig_k, b_contig_n;
  bool c_contig_n;  // C's rows contiguous (unit stride along n): store_direct's row pointers
  Acc alpha, beta;

  static std::size_t scratch_bytes() { return ScratchView::shmem_size(scratch_elems); }

  KOKKOS_INLINE_FUNCTION Acc a_op(int batch, int i, int l) const {
    return static_cast<Acc>(tA ? mat_at(A, batch, l, i) : mat_at(A, batch, i, l));
  }
  KOKKOS_INLINE_FUNCTION Acc b_op(int batch, int l, int j) const {
    return static_cast<Acc>(tB ? mat_at(B, batch, j, l) : mat_at(B, batch, l, j));
  }

#if PARAXIS_GEMM_HOST_VECTORS
  // Addresses of op(A)(i, l) and op(B)(l, j) (host packing of transposed panels).
  const auto* a_addr(int batch, int i, int l) const {
    return tA ? &mat_at(A, batch, l, i) : &mat_at(A, batch, i, l);
  }
  const auto* b_addr(int batch, int l, int j) const {
    return tB ? &mat_at(B, batch, j, l) : &mat_at(B, batch, l, j);
  }

  // A full strip of R source lines (line 0 at s0, line 1 at s1, the next element along K at
  // sk) packed by transpose_pack8 when it has the panel's storage type and unit stride along
  // K; false: the caller takes the plain loop.
  template <int R, class P>
  static bool transpose_strip(Acc* dst, const P* s0, const P* s1, const P* sk, int kc) {
    if constexpr (std::is_same_v<std::remove_const_t<P>, Acc>) {
      static_assert(R % 8 == 0, "transpose_pack8 packs 8 lines at a time");
      if (sk - s0 == 1) {
        const long lds = static_cast<long>(s1 - s0);
        for (int g = 0; g < R; g += 8) transpose_pack8(dst + g, R, s0 + g * lds, lds, kc);
        return true;
      }
    }
    return false;
  }

  // A full strip of R source lines whose elements are adjacent across the lines (line 1 at
  // s0 + 1) with the next K step at sk: each K step's R values are one contiguous run, copied
  // as a block when it has the panel's storage type (the plain loop went through the View per
  // element: TN's A, NN's and TN's B); false: the caller takes the plain loop.
  template <int R, class P>
  static bool copy_strip(Acc* dst, const P* s0, const P* s1, const P* sk, int kc) {
    if constexpr (std::is_same_v<std::remove_const_t<P>, Acc>) {
      if (s1 - s0 == 1) {
        const long ldk = static_cast<long>(sk - s0);
        for (int p = 0; p < kc; ++p) std::memcpy(dst + p * R, s0 + p * ldk, R * sizeof(Acc));
        return true;
      }
    }
    return false;
  }
#endif

  // Ap[r][p][ii] = op(A)(i0 + r*MR + ii, l0 + p), zero outside op(A).
  KOKKOS_INLINE_FUNCTION void pack_a(const team_member& team, Acc* Ap, int batch, int i0, int l0,
                                     int kc) const {
    const int mc = imin(mc_tile, m - i0);
    if constexpr (Tiles::team_size == 1) {
      // One thread: plain loops, inner loop along the source's contiguous direction.
      (void)team;
      for (int r = 0; r * MR < mc; ++r) {
        Acc* dst = Ap + r * (KC * MR);
        const int ib = i0 + r * MR, rv = imin(MR, mc - r * MR);
        if (a_contig_k) {
#if PARAXIS_GEMM_HOST_VECTORS
          if (rv == MR && kc > 1 &&
              transpose_strip<MR>(dst, a_addr(batch, ib, l0), a_addr(batch, ib + 1, l0),
                                  a_addr(batch, ib, l0 + 1), kc))
            continue;
#endif
          for (int ii = 0; ii < MR; ++ii) {
            if (ii < rv) {
              if (tA) {
                for (int p = 0; p < kc; ++p)
                  dst[p * MR + ii] = static_cast<Acc>(mat_at(A, batch, l0 + p, ib + ii));
              } else {
                for (int p = 0; p < kc; ++p)
                  dst[p * MR + ii] = static_cast<Acc>(mat_at(A, batch, ib + ii, l0 + p));
              }
            } else {
              for (int p = 0; p < kc; ++p) dst[p * MR + ii] = Acc(0);
            }
          }
        } else {
#if PARAXIS_GEMM_HOST_VECTORS
          if (rv == MR && kc > 1 &&
              copy_strip<MR>(dst, a_addr(batch, ib, l0), a_addr(batch, ib + 1, l0),
                             a_addr(batch, ib, l0 + 1), kc))
            continue;
#endif
          for (int p = 0; p < kc; ++p) {
            if (rv == MR) {
              for (int ii = 0; ii < MR; ++ii) dst[p * MR + ii] = a_op(batch, ib + ii, l0 + p);
            } else {
              for (int ii = 0; ii < MR; ++ii)
                dst[p * MR + ii] = ii < rv ? a_op(batch, ib + ii, l0 + p) : Acc(0);
            }
          }
        }
      }
    } else {
      // Many threads: one element each, consecutive threads along the contiguous direction.
      const int mc_pad = (mc + MR - 1) / MR * MR;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, mc_pad * kc), [&](const int idx) {
        const int row = a_contig_k ? idx / kc : idx % mc_pad;
        const int p = a_contig_k ? idx % kc : idx / mc_pad;
        Ap[(row / MR) * (KC * MR) + p * MR + row % MR] =
            row < mc ? a_op(batch, i0 + row, l0 + p) : Acc(0);
      });
    }
  }

  // Bp[s][p][jj] = op(B)(l0 + p, j0 + s*NR + jj), zero outside op(B).
  KOKKOS_INLINE_FUNCTION void pack_b(const team_member& team, Acc* Bp, int batch, int j0, int l0,
                                     int kc) const {
    const int nc = imin(nc_tile, n - j0);
    if constexpr (Tiles::team_size == 1) {
      (void)team;
      for (int s = 0; s * NR < nc; ++s) {
        Acc* dst = Bp + s * (KC * NR);
        const int jb = j0 + s * NR, cv = imin(NR, nc - s * NR);
        if (b_contig_n) {
#if PARAXIS_GEMM_HOST_VECTORS
          if (cv == NR && kc > 1 &&
              copy_strip<NR>(dst, b_addr(batch, l0, jb), b_addr(batch, l0, jb + 1),
                             b_addr(batch, l0 + 1, jb), kc))
            continue;
#endif
          for (int p = 0; p < kc; ++p) {
            if (cv == NR) {
              if (tB) {
                for (int jj = 0; jj < NR; ++jj)
                  dst[p * NR + jj] = static_cast<Acc>(mat_at(B, batch, jb + jj, l0 + p));
              } else {
                for (int jj = 0; jj < NR; ++jj)
                  dst[p * NR + jj] = static_cast<Acc>(mat_at(B, batch, l0 + p, jb + jj));
              }
            } else {
              for (int jj = 0; jj < NR; ++jj)
                dst[p * NR + jj] = jj < cv ? b_op(batch, l0 + p, jb + jj) : Acc(0);
            }
          }
        } else {
#if PARAXIS_GEMM_HOST_VECTORS
          if (cv == NR && kc > 1 &&
              transpose_strip<NR>(dst, b_addr(batch, l0, jb), b_addr(batch, l0, jb + 1),
                                  b_addr(batch, l0 + 1, jb), kc))
            continue;
#endif
          for (int jj = 0; jj < NR; ++jj) {
            if (jj < cv) {
              for (int p = 0; p < kc; ++p) dst[p * NR + jj] = b_op(batch, l0 + p, jb + jj);
            } else {
              for (int p = 0; p < kc; ++p) dst[p * NR + jj] = Acc(0);
            }
          }
        }
      }
    } else {
      const int nc_pad = (nc + NR - 1) / NR * NR;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nc_pad * kc), [&](const int idx) {
        const int col = b_contig_n ? idx % nc_pad : idx / kc;
        const int p = b_contig_n ? idx / nc_pad : idx % kc;
        Bp[(col / NR) * (KC * NR) + p * NR + col % NR] =
            col < nc ? b_op(batch, l0 + p, j0 + col) : Acc(0);
      });
    }
  }

  // c = sum_p a[p][:] (outer) b[p][:]: the hot loop. Fixed trip counts over MR and NR so the
  // compiler keeps c in registers and vectorises along NR with FMAs.
  KOKKOS_FORCEINLINE_FUNCTION static void micro_kernel(int kc, const Acc* KOKKOS_RESTRICT a,
                                                       const Acc* KOKKOS_RESTRICT b,
                                                       Acc (&c)[MR][NR]) {
#if PARAXIS_GEMM_HOST_VECTORS
    if constexpr (Tiles::team_size == 1 && NR % host_vec_width == 0) {
      micro_kernel_host_vectors(kc, a, b, c);
      return;
    }
#endif
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) c[i][j] = Acc(0);
    for (int p = 0; p < kc; ++p) {
      for (int i = 0; i < MR; ++i) {
        const Acc ai = a[p * MR + i];
        for (int j = 0; j < NR; ++j) c[i][j] += ai * b[p * NR + j];
      }
    }
  }

#if PARAXIS_GEMM_HOST_VECTORS
  // The same loop with the NR axis spelled as 64-byte vectors. Left to itself GCC's SLP pass
  // vectorises some tile shapes (fp64 8x16) along MR with permutes and runs 15x slower; the
  // vector type pins the layout: MR x NR/W accumulators, one broadcast of a[i] per row.
  static constexpr int host_vec_width = 64 / sizeof(Acc);
  static void micro_kernel_host_vectors(int kc, const Acc* KOKKOS_RESTRICT a,
                                        const Acc* KOKKOS_RESTRICT b, Acc (&c)[MR][NR]) {
    typedef Acc vec __attribute__((vector_size(64)));
    constexpr int NV = NR / host_vec_width;
    vec acc[MR][NV];
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = vec{};
    for (int p = 0; p < kc; ++p) {
      vec bv[NV];
      for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + p * NR + v * host_vec_width, 64);
      for (int i = 0; i < MR; ++i) {
        const Acc ai = a[p * MR + i];
        for (int v = 0; v < NV; ++v) acc[i][v] += ai * bv[v];
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v) std::memcpy(&c[i][v * host_vec_width], &acc[i][v], 64);
  }
#endif

  KOKKOS_INLINE_FUNCTION void operator()(const team_member& team) const {
    const int tiles_per_batch = tiles_m * tiles_n;
    const int league = team.league_rank();
    const int batch = league / tiles_per_batch;
    const int tile = league % tiles_per_batch;
    const int i0 = (tile / tiles_n) * mc_tile;
    const int j0 = (tile % tiles_n) * nc_tile;
    const int mc = imin(mc_tile, m - i0);
    const int nc = imin(nc_tile, n - j0);
    const int mr_tiles = (mc + MR - 1) / MR;
    const int nr_tiles = (nc + NR - 1) / NR;

    ScratchView scratch(team.team_scratch(0), scratch_elems);
    // Start the panels on a 64-byte boundary: vector loads then never straddle cache lines.
    const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(scratch.data());
    const int skew = static_cast<int>((64 - addr % 64) % 64) / static_cast<int>(sizeof(Acc));
    Acc* Ap = scratch.data() + skew;
    Acc* Bp = Ap + MC * KC;
    Acc* Ct = Bp + KC * NC;  // only used when !direct_c

    for (int l0 = 0; l0 < k; l0 += KC) {
      const int kc = imin(KC, k - l0);
      const bool first = l0 == 0;
      const bool last = l0 + KC >= k;
      pack_a(team, Ap, batch, i0, l0, kc);
      pack_b(team, Bp, batch, j0, l0, kc);
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, mr_tiles * nr_tiles), [&](const int t) {
        // Walk micro-tiles column-major: consecutive ones reuse the same B micro-panel,
        // which then stays in L1 on a host team.
        const int r = t % mr_tiles;
        const int s = t / mr_tiles;
        Acc c[MR][NR];
        micro_kernel(kc, Ap + r * (KC * MR), Bp + s * (KC * NR), c);
        const int ib = i0 + r * MR, jb = j0 + s * NR;
        const int mv = imin(MR, m - ib), nv = imin(NR, n - jb);
        if constexpr (direct_c) {
          store_direct(c, batch, ib, jb, mv, nv, first);
        } else {
          Acc* ct = Ct + (r * MR) * NC + s * NR;
          for (int i = 0; i < mv; ++i)
            for (int j = 0; j < nv; ++j) {
              const Acc sum = first ? c[i][j] : ct[i * NC + j] + c[i][j];
              if (last) {
                const Acc prev = beta == Acc(0)
                                     ? Acc(0)
                                     : beta * static_cast<Acc>(mat_at(C, batch, ib + i, jb + j));
                mat_at(C, batch, ib + i, jb + j) = static_cast<TC>(alpha * sum + prev);
              } else {
                ct[i * NC + j] = sum;
              }
            }
        }
      });
      team.team_barrier();
    }
  }

  // First K panel: C = alpha*c + beta*C (C unread when beta == 0); later: C += alpha*c.
  KOKKOS_FORCEINLINE_FUNCTION void store_direct(const Acc (&c)[MR][NR], int batch, int ib, int jb,
                                                int mv, int nv, bool first) const {
    if constexpr (Tiles::team_size == 1) {
      // Host, a whole MR x NR block of C with contiguous rows: the same arithmetic through a
      // row pointer and a fixed trip count, which the compiler vectorizes (through the View
      // per element it stayed scalar: 18-26 % of the time at the attention shapes, K = 64).
      if (mv == MR && nv == NR && c_contig_n) {
        const bool zero = first && beta == Acc(0);
        const Acc scale = first ? beta : Acc(1);
        for (int i = 0; i < MR; ++i) {
          Acc* KOKKOS_RESTRICT dst = &mat_at(C, batch, ib + i, jb);
          if (zero) {
            for (int j = 0; j < NR; ++j) dst[j] = alpha * c[i][j];
          } else {
            for (int j = 0; j < NR; ++j) dst[j] = alpha * c[i][j] + scale * dst[j];
          }
        }
        return;
      }
    }
    if (first && beta == Acc(0)) {
      for (int i = 0; i < mv; ++i)
        for (int j = 0; j < nv; ++j) mat_at(C, batch, ib + i, jb + j) = alpha * c[i][j];
    } else {
      const Acc scale = first ? beta : Acc(1);
      for (int i = 0; i < mv; ++i)
        for (int j = 0; j < nv; ++j) {
          auto& dst = mat_at(C, batch, ib + i, jb + j);
          dst = alpha * c[i][j] + scale * dst;
        }
    }
  }
};

// Stride-based check whether matrix dims (r, c) of a rank-2/3 View run fastest along c.
template <class V>
bool fastest_along_cols(const V& v) {
  constexpr unsigned r = V::rank - 2, c = V::rank - 1;
  if (v.extent(c) <= 1) return false;
  if (v.extent(r) <= 1) return true;
  return v.stride(c) <= v.stride(r);
}

// K == 0: op(A)*op(B) is the zero matrix, so C = beta*C (C zeroed when beta == 0).
template <class ExecSpace, class CV>
void gemm_scale_c(const ExecSpace& space, double beta, const CV& C) {
  using TC = value_t<CV>;
  using Acc = acc_t<TC>;
  const Acc b = static_cast<Acc>(beta);
  const int batch = CV::rank == 3 ? static_cast<int>(C.extent(0)) : 1;
  const int m = static_cast<int>(C.extent(CV::rank - 2));
  const int n = static_cast<int>(C.extent(CV::rank - 1));
  Kokkos::parallel_for(
      "paraxis::gemm_scale_c",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>(space, {0, 0, 0}, {batch, m, n}),
      KOKKOS_LAMBDA(const int p, const int i, const int j) {
        auto& dst = mat_at(C, p, i, j);
        dst = static_cast<TC>(b == Acc(0) ? Acc(0) : b * static_cast<Acc>(dst));
      });
}

// The C tile a GEMM launch uses: on a host space chosen for its thread count (`tiles`, when
// given, instead: tests use it to check that the tiling never changes a bit), on a device the
// fixed MC x NC of the team layout.
template <class F, class ExecSpace>
GemmTileShape gemm_launch_tiles(const ExecSpace& space, int m, int n, int batch,
                                GemmTileShape tiles) {
  if constexpr (F::Tiles::team_size == 1) {
    if (tiles.mc > 0 && tiles.nc > 0) {
      if (tiles.mc % F::MR != 0 || tiles.nc % F::NR != 0 || tiles.mc > F::MC || tiles.nc > F::NC)
        throw std::invalid_argument(
            "gemm_portable: tile " + std::to_string(tiles.mc) + "x" + std::to_string(tiles.nc) +
            " is not a multiple of " + std::to_string(F::MR) + "x" + std::to_string(F::NR) +
            " within " + std::to_string(F::MC) + "x" + std::to_string(F::NC));
      return tiles;
    }
    return gemm_host_tile_shape(m, n, batch, space.concurrency(), F::MR, F::NR, F::MC, F::NC);
  } else {
    (void)space, (void)m, (void)n, (void)batch, (void)tiles;
    return {F::MC, F::NC};
  }
}

// C = alpha*op(A)*op(B) + beta*C for rank-2 Views, or for each leading index of rank-3 Views.
// Shapes are the caller's to check.
template <class ExecSpace, class AV, class BV, class CV>
void gemm_portable(const ExecSpace& space, Trans ta, Trans tb, double alpha, const AV& A,
                   const BV& B, double beta, const CV& C, GemmTileShape tiles = {}) {
  static_assert(int(AV::rank) == int(CV::rank) && int(BV::rank) == int(CV::rank) &&
                    (CV::rank == 2 || CV::rank == 3),
                "gemm_portable: A, B, C must all be rank 2 or all rank 3");
  using F = GemmPortableFunctor<ExecSpace, AV, BV, CV>;
  using Acc = typename F::Acc;
  constexpr unsigned r0 = CV::rank - 2;
  const int batch = CV::rank == 3 ? static_cast<int>(C.extent(0)) : 1;
  const int m = static_cast<int>(C.extent(r0));
  const int n = static_cast<int>(C.extent(r0 + 1));
  const int k = static_cast<int>(ta == Trans::N ? A.extent(r0 + 1) : A.extent(r0));
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {
    gemm_scale_c(space, beta, C);
    return;
  }
  const bool tA = ta == Trans::T, tB = tb == Trans::T;
  const bool a_cols = fastest_along_cols(A), b_cols = fastest_along_cols(B);
  const GemmTileShape t = gemm_launch_tiles<F>(space, m, n, batch, tiles);
  F f{A,
      B,
      C,
      m,
      n,
      k,
      t.mc,
      t.nc,
      (m + t.mc - 1) / t.mc,
      (n + t.nc - 1) / t.nc,
      tA,
      tB,
      tA ? !a_cols : a_cols,
      tB ? !b_cols : b_cols,
      C.stride(r0 + 1) == 1,
      static_cast<Acc>(alpha),
      static_cast<Acc>(beta)};
  const int league = batch * f.tiles_m * f.tiles_n;
  Kokkos::TeamPolicy<ExecSpace> policy(space, league, F::Tiles::team_size);
  policy.set_scratch_size(0, Kokkos::PerTeam(F::scratch_bytes()));
  Kokkos::parallel_for("paraxis::gemm_portable", policy, f);
}

}  // namespace detail
}  // namespace paraxis::kernels
