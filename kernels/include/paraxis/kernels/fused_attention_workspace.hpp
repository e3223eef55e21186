// The fused attention's workspace and launch shape (fused_attention.hpp has the passes and the
// algorithm). Memory is O(seq): saved_bytes() = q, k, v (3 N E of T) + lse (batch*heads*seq of
// acc_t<T>); scratch_bytes() = dk, dv (2 N E of T) + delta (batch*heads*seq of acc_t<T>). The
// tile size depends only on head_dim, the storage type and the execution space (never on batch,
// heads or seq), so a head computes the same bits whichever shard of the heads a rank holds.
#pragma once

#include <cmath>
#include <string>

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/math.hpp"

namespace paraxis::kernels {

template <class T, class Space>
struct FusedAttentionWorkspace {
  using A = acc_t<T>;

  // tile: rows of a query or key tile; 0 chooses it from head_dim (fused_attention_tile).
  FusedAttentionWorkspace(int batch_, int seq_, int heads_, int head_dim_, int tile_ = 0)
      : batch(batch_), seq(seq_), heads(heads_), head_dim(head_dim_), tile(tile_) {
    check();
    q = alloc_rows("paraxis::fused_attention_q");
    k = alloc_rows("paraxis::fused_attention_k");
    v = alloc_rows("paraxis::fused_attention_v");
    lse = alloc_stats("paraxis::fused_attention_lse");
    dk = alloc_rows("paraxis::fused_attention_dk");
    dv = alloc_rows("paraxis::fused_attention_dv");
    delta = alloc_stats("paraxis::fused_attention_delta");
  }

  // Saved buffers of its own, scratch shared with `other` when share_scratch (as
  // AttentionWorkspace: the workspaces of several layers or micro-batches in flight).
  FusedAttentionWorkspace(const FusedAttentionWorkspace& other, bool share_scratch)
      : batch(other.batch),
        seq(other.seq),
        heads(other.heads),
        head_dim(other.head_dim),
        tile(other.tile) {
    q = alloc_rows("paraxis::fused_attention_q");
    k = alloc_rows("paraxis::fused_attention_k");
    v = alloc_rows("paraxis::fused_attention_v");
    lse = alloc_stats("paraxis::fused_attention_lse");
    if (share_scratch) {
      dk = other.dk;
      dv = other.dv;
      delta = other.delta;
    } else {
      dk = alloc_rows("paraxis::fused_attention_dk");
      dv = alloc_rows("paraxis::fused_attention_dv");
      delta = alloc_stats("paraxis::fused_attention_delta");
    }
  }

  int batch, seq, heads, head_dim, tile;
  // Saved by fused_attention_forward for fused_attention_backward: q, k, v as [N, E] and the
  // log-sum-exp of each row's scaled scores, [batch*heads, seq].
  View2<T, Space> q, k, v;
  View2<A, Space> lse;
  // Scratch of the backward pass.
  View2<T, Space> dk, dv;
  View2<A, Space> delta;

  std::size_t saved_bytes() const {
    return (q.span() + k.span() + v.span()) * sizeof(T) + lse.span() * sizeof(A);
  }
  std::size_t scratch_bytes() const {
    return (dk.span() + dv.span()) * sizeof(T) + delta.span() * sizeof(A);
  }
  std::size_t bytes() const { return saved_bytes() + scratch_bytes(); }

 private:
  void check() const {
    if (batch < 1 || seq < 1 || heads < 1 || head_dim < 1 || tile < 0) {
      std::ostringstream os;
      os << "paraxis::FusedAttentionWorkspace: batch = " << batch << ", seq = " << seq
         << ", heads = " << heads << ", head_dim = " << head_dim << ", tile = " << tile
         << ", expected all >= 1 (tile >= 0, 0: chosen from head_dim)";
      throw std::invalid_argument(os.str());
    }
  }
  View2<T, Space> alloc_rows(const char* label) const {
    return View2<T, Space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)),
                           static_cast<std::size_t>(batch) * seq,
                           static_cast<std::size_t>(heads) * head_dim);
  }
  View2<A, Space> alloc_stats(const char* label) const {
    return View2<A, Space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)),
                           static_cast<std::size_t>(batch) * heads, seq);
  }
};

namespace detail {

// Accumulator elements of team scratch each pass needs for tile t and head dim D.
//   forward: Q, O (t x D), K^T, V (D x t, t x D), probabilities (t x t), max, sum, rescale (t).
//   dK/dV:   K, V, dK, dV (t x D), Q, Q^T, dOut, dOut^T (t x D), P^T, dS^T (t x t), lse, delta.
//   dQ:      Q, dOut, dQ (t x D), K, K^T, V^T (t x D), scores, dS (t x t), lse, delta.
enum class FusedPass { forward, dkv, dq };
inline std::size_t fused_scratch_elems(FusedPass p, int t, int D) {
  const std::size_t tD = std::size_t(t) * D, tt = std::size_t(t) * t;
  switch (p) {
    case FusedPass::forward:
      return 4 * tD + tt + 3 * std::size_t(t);
    case FusedPass::dkv:
      return 8 * tD + 2 * tt + 2 * std::size_t(t);
    case FusedPass::dq:
      return 6 * tD + 2 * tt + 2 * std::size_t(t);
  }
  return 0;
}

template <class ExecSpace>
constexpr bool fused_on_host() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace,
                                    typename ExecSpace::memory_space>::accessible;
}

// Launch shape of the passes: the tile, the scratch level and the team's threads and lanes.
struct FusedLaunch {
  int tile, level, team, lanes;
  std::size_t scratch_elems;
};

template <class ExecSpace, class A>
FusedLaunch fused_launch(FusedPass pass, int head_dim, int requested_tile) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  constexpr bool host = fused_on_host<ExecSpace>();
  auto bytes = [&](int t) {
    return fused_scratch_elems(pass, t, head_dim) * sizeof(A) + 64;  // plus alignment
  };
  int t = requested_tile;
  if (t == 0) {
    // Host: 64-row tiles (a 64-wide score row is four AVX-512 vectors) while the pass's tiles
    // stay within 256 KiB (L2). Device: 32 rows, halved while they exceed the level-0 (shared)
    // scratch, down to 16.
    t = host ? 64 : 32;
    const std::size_t budget =
        host ? std::size_t(256) * 1024 : static_cast<std::size_t>(Policy::scratch_size_max(0));
    while (t > 16 && bytes(t) > budget) t /= 2;
  }
  FusedLaunch l;
  l.tile = t;
  l.level = bytes(t) <= static_cast<std::size_t>(Policy::scratch_size_max(0)) ? 0 : 1;
  if (bytes(t) > static_cast<std::size_t>(Policy::scratch_size_max(l.level))) {
    std::ostringstream os;
    os << "paraxis::fused_attention: tile " << t << " at head_dim " << head_dim << " needs "
       << bytes(t) << " bytes of team scratch, more than the space's level-1 limit "
       << Policy::scratch_size_max(1);
    throw std::invalid_argument(os.str());
  }
  // One thread per tile row on a device (lanes over the contiguous dimension); one thread per
  // team on a host, whose parallelism is the league of tiles.
  l.team = host ? 1 : t;
  l.lanes = host ? 1 : 8;
  l.scratch_elems = fused_scratch_elems(pass, t, head_dim);
  return l;
}

template <class ExecSpace, class A>
using FusedScratch = Kokkos::View<A*, typename ExecSpace::scratch_memory_space,
                                  Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class ExecSpace, class A>
Kokkos::TeamPolicy<ExecSpace> fused_policy(const ExecSpace& space, const FusedLaunch& l,
                                           int league) {
  return Kokkos::TeamPolicy<ExecSpace>(space, league, l.team, l.lanes)
      .set_scratch_size(l.level,
                        Kokkos::PerTeam(FusedScratch<ExecSpace, A>::shmem_size(l.scratch_elems)));
}

// Copy of an [N, E] view into the workspace's own (converting to its storage type).
template <class ExecSpace, class XV, class YV>
void fused_copy(const ExecSpace& space, const XV& X, const YV& Y) {
  using TY = value_t<YV>;
  using A = acc_t<value_t<XV>>;
  Kokkos::parallel_for(
      "paraxis::fused_attention_copy",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(
          space, {0, 0}, {static_cast<int>(X.extent(0)), static_cast<int>(X.extent(1))}),
      KOKKOS_LAMBDA(const int n, const int e) {
        Y(n, e) = static_cast<TY>(static_cast<A>(X(n, e)));
      });
}

template <class WS, class V>
void check_fused_arg(const char* kernel, const char* arg, const WS& ws, const V& X) {
  static_assert(V::rank == 2, "fused_attention: [N,E] Views");
  require_shape(kernel, arg, X,
                {static_cast<std::size_t>(ws.batch) * ws.seq,
                 static_cast<std::size_t>(ws.heads) * ws.head_dim});
}

}  // namespace detail

}  // namespace paraxis::kernels
