// Checkpoints of the sharded optimizer (zero_optimizer.hpp, save_state / load_state;
// docs/checkpoint.md): every rank's owned pieces of the master parameters and AdamW moments as
// boxes of the logical tensors, so that a checkpoint written under one layout reads under any.
#include <Kokkos_Core.hpp>
#include <type_traits>
#include <vector>

#include "parallel/zero_optimizer.hpp"
#include "paraxis/kernels/elementwise.hpp"

namespace paraxis::parallel {

namespace {

template <class T>
constexpr bool kHasMaster = !std::is_same_v<T, kernels::acc_t<T>>;

// A box whose `flat` index is moved from the flat layout to a compact array where the flat
// range [lo, ...) starts at compact index c0.
model::LogicalBox in_compact(model::LogicalBox b, std::size_t lo, std::size_t c0) {
  b.flat = b.flat - lo + c0;
  return b;
}

// A load's destinations and the host views it fills them through: the views themselves where
// the host reaches their memory (Kokkos::create_mirror_view: no copy, no fresh pages), else host
// mirrors. What no piece covers (the alignment padding) is set to 0 after the reads
// (model::PieceReads::zero_rest), not the whole buffer before them.
template <class V>
struct LoadTargets {
  typename V::HostMirror m_h, v_h, master_h, flat_h;
  V master, flat;  // the owned shard's master copies; every tensor whole (the parameters' source)
};

template <class V>
typename V::HostMirror host_of(const V& v) {
  return Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
}

template <class G, class H>
void zero_rest(model::PieceReads<G>& reads, const H& h) {
  if (h.data()) reads.zero_rest(h.data(), h.extent(0));
}

// `own`: the view a destination already has (the optimizer's), else one of `n` elements.
template <class V>
V target(const V* own, std::size_t n, typename V::HostMirror& host) {
  const V v =
      own ? *own : V(Kokkos::view_alloc("paraxis::load_master", Kokkos::WithoutInitializing), n);
  host = host_of(v);
  return v;
}

}  // namespace

template <class T>
void ZeroOptimizer<T>::save_state(model::StateSink& sink, bool tp_writer) const {
  const auto& ps = model_.params();
  const char* dt = model::state_dtype<G>();
  // Host views of the state: the views themselves where the host reaches their memory (no
  // copy). The master copies: a compact shard (bf16 training, or ZeRO-3's parameters) or the
  // flat parameters themselves.
  const auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m_c_);
  const auto v = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v_c_);
  typename GView::HostMirror master_h;
  typename TView::HostMirror param_c_h;
  typename std::decay_t<decltype(ps.param)>::HostMirror param_h;
  const G* master = nullptr;
  const bool flat = !kHasMaster<T> && opt_.zero != 3;
  if constexpr (kHasMaster<T>) {
    master_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), master_c_);
    master = master_h.data();
  } else if (opt_.zero == 3) {
    param_c_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), param_c_);
    master = param_c_h.data();
  } else {
    param_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ps.param);
    master = param_h.data();
  }
  // A piece straight from its host view where its box is contiguous there, else gathered.
  auto add = [&](const char* kind, const model::TensorSpec& s, const model::LogicalBox& box,
                 const G* src, const model::LogicalBox& at) {
    const auto piece = model::state_piece(kind, s, box, dt);
    if (model::contiguous(at)) return sink.add(piece, src + at.flat, box.size() * sizeof(G));
    const auto data = model::gather_box(src, at);
    sink.add(piece, data.data(), data.size() * sizeof(G));
  };
  for (std::size_t u = 0; u < ps.units().size(); ++u) {
    const auto& U = ps.units()[u];
    const Communicator& g = *group_[u];
    if (opt_.zero == 0 && static_cast<int>(u % static_cast<std::size_t>(g.size())) != g.rank())
      continue;  // another replica writes this unit
    const std::size_t ob = own_[u], oe = own_[u] + shard_[u], c0 = compact_[u];
    for (int i = U.first_tensor; i < U.end_tensor; ++i) {
      const auto& s = ps.spec(i);
      if (s.tp_replicated && !tp_writer) continue;
      const std::size_t lo = std::max(ob, s.offset), hi = std::min(oe, s.offset + s.size());
      if (lo >= hi) continue;
      for (const auto& box : model::logical_boxes(s, lo, hi)) {
        const auto cb = in_compact(box, ob, c0);
        add("master", s, box, master, flat ? box : cb);
        add("adam_m", s, box, m.data(), cb);
        add("adam_v", s, box, v.data(), cb);
      }
    }
  }
}

template <class T>
void ZeroOptimizer<T>::load_state(const model::StateSource& source) {
  const auto& ps = model_.params();
  const bool fill = source.fills();  // false: read once's first pass (no buffers, no change)
  model::PieceReads<G> reads(source, model::state_dtype<G>());
  // The owned shard's master copies are apart only in bf16 and ZeRO-3 (else the parameters,
  // loaded whole below). Each destination is filled through its host view (LoadTargets).
  const bool compact_master = kHasMaster<T> || opt_.zero == 3;
  LoadTargets<GView> t;
  if (fill) {
    t.m_h = host_of(m_c_);
    t.v_h = host_of(v_c_);
    if (compact_master)
      t.master = target<GView>(kHasMaster<T> ? &master_c_ : nullptr, compact_total_, t.master_h);
    const GView* params = nullptr;  // the parameters themselves, where they are the master copies
    if constexpr (std::is_same_v<GView, std::decay_t<decltype(ps.param)>>) params = &ps.param;
    if (opt_.zero != 3) t.flat = target<GView>(params, ps.elements(), t.flat_h);
  }
  for (std::size_t u = 0; u < ps.units().size(); ++u) {
    const auto& U = ps.units()[u];
    const std::size_t ob = own_[u], oe = own_[u] + shard_[u], c0 = compact_[u];
    for (int i = U.first_tensor; i < U.end_tensor; ++i) {
      const auto& s = ps.spec(i);
      const std::size_t lo = std::max(ob, s.offset), hi = std::min(oe, s.offset + s.size());
      if (lo >= hi) continue;
      for (const auto& box : model::logical_boxes(s, lo, hi)) {
        const auto cb = in_compact(box, ob, c0);
        if (compact_master) reads.load("master", s, box, t.master_h.data(), cb);
        reads.load("adam_m", s, box, t.m_h.data(), cb);
        reads.load("adam_v", s, box, t.v_h.data(), cb);
      }
    }
  }
  // Every tensor this rank holds, whole (its replicas' shards included), unless ZeRO-3's
  // parameters are the owned shard.
  if (opt_.zero != 3)
    for (const auto& s : ps.specs())
      for (const auto& box : model::logical_boxes(s, s.offset, s.offset + s.size()))
        reads.load("master", s, box, t.flat_h.data(), box);
  if (!fill) return;
  reads.settle();
  for (const auto* h : {&t.m_h, &t.v_h, &t.master_h, &t.flat_h}) zero_rest(reads, *h);
  Kokkos::deep_copy(m_c_, t.m_h);  // no copy where they are the same view
  Kokkos::deep_copy(v_c_, t.v_h);
  if (compact_master) Kokkos::deep_copy(t.master, t.master_h);
  if (opt_.zero != 3) Kokkos::deep_copy(t.flat, t.flat_h);
  // The parameters, in the training precision: ZeRO-3's owned shard, else every tensor whole.
  if (opt_.zero == 3)
    kernels::convert(Space(), t.master, param_c_);
  else if (static_cast<const void*>(t.flat.data()) != static_cast<const void*>(ps.param.data()))
    kernels::convert(Space(), t.flat, ps.param);
  Kokkos::fence();
}

// The class is instantiated in zero_optimizer.cpp; these two members here.
#define PARAXIS_ZERO_STATE(T)                                                \
  template void ZeroOptimizer<T>::save_state(model::StateSink&, bool) const; \
  template void ZeroOptimizer<T>::load_state(const model::StateSource&);
PARAXIS_ZERO_STATE(double)
PARAXIS_ZERO_STATE(float)
PARAXIS_ZERO_STATE(paraxis::bf16)
#undef PARAXIS_ZERO_STATE

}  // namespace paraxis::parallel
