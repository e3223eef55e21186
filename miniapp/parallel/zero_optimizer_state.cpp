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

}  // namespace

template <class T>
void ZeroOptimizer<T>::save_state(model::StateSink& sink, bool tp_writer) const {
  const auto& ps = model_.params();
  const char* dt = model::state_dtype<G>();
  // The master copies: a compact shard (bf16 training, or ZeRO-3's parameters) or the flat
  // parameters themselves.
  std::vector<G> master_compact, master_flat;
  if constexpr (kHasMaster<T>) {
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), master_c_);
    master_compact.assign(h.data(), h.data() + h.extent(0));
  } else if (opt_.zero == 3) {
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), param_c_);
    master_compact.assign(h.data(), h.data() + h.extent(0));
  } else {
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ps.param);
    master_flat.assign(h.data(), h.data() + h.extent(0));
  }
  const auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m_c_);
  const auto v = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v_c_);
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
        const auto master = master_flat.empty() ? model::gather_box(master_compact.data(), cb)
                                                : model::gather_box(master_flat.data(), box);
        const auto mm = model::gather_box(m.data(), cb);
        const auto vv = model::gather_box(v.data(), cb);
        sink.add(model::state_piece("master", s, box, dt), master.data(),
                 master.size() * sizeof(G));
        sink.add(model::state_piece("adam_m", s, box, dt), mm.data(), mm.size() * sizeof(G));
        sink.add(model::state_piece("adam_v", s, box, dt), vv.data(), vv.size() * sizeof(G));
      }
    }
  }
}

template <class T>
void ZeroOptimizer<T>::load_state(const model::StateSource& source) {
  const auto& ps = model_.params();
  const char* dt = model::state_dtype<G>();
  // A source that only records the pieces (read once's first pass) gets no buffers, and the
  // state is left as it was.
  const bool fill = source.fills();
  auto load = [&](const char* kind, const model::TensorSpec& s, const model::LogicalBox& box,
                  std::vector<G>& dst, const model::LogicalBox& at) {
    const auto piece = model::state_piece(kind, s, box, dt);
    if (!fill) return source.read(piece, nullptr, box.size() * sizeof(G));
    if (at.rows <= 1 || at.stride == static_cast<std::size_t>(at.cols))  // contiguous: in place
      return source.read(piece, dst.data() + at.flat, box.size() * sizeof(G));
    std::vector<G> data(box.size());
    source.read(piece, data.data(), data.size() * sizeof(G));
    model::scatter_box(dst.data(), at, data);
  };
  // The master copies of the owned shard are kept apart only in bf16 training and under ZeRO-3
  // (else they are the parameters, loaded whole below).
  const bool compact_master = kHasMaster<T> || opt_.zero == 3;
  // The owned shard: master (where it is kept apart from the parameters) and the moments.
  const std::size_t n = fill ? compact_total_ : 0;
  std::vector<G> master_compact(compact_master ? n : 0, G(0)), m(n, G(0)), v(n, G(0));
  for (std::size_t u = 0; u < ps.units().size(); ++u) {
    const auto& U = ps.units()[u];
    const std::size_t ob = own_[u], oe = own_[u] + shard_[u], c0 = compact_[u];
    for (int i = U.first_tensor; i < U.end_tensor; ++i) {
      const auto& s = ps.spec(i);
      const std::size_t lo = std::max(ob, s.offset), hi = std::min(oe, s.offset + s.size());
      if (lo >= hi) continue;
      for (const auto& box : model::logical_boxes(s, lo, hi)) {
        const auto cb = in_compact(box, ob, c0);
        if (compact_master) load("master", s, box, master_compact, cb);
        load("adam_m", s, box, m, cb);
        load("adam_v", s, box, v, cb);
      }
    }
  }
  // Every tensor this rank holds, whole (its replicas' shards included), unless ZeRO-3's
  // parameters are the owned shard.
  std::vector<G> flat(fill && opt_.zero != 3 ? ps.elements() : 0, G(0));
  if (opt_.zero != 3)
    for (const auto& s : ps.specs())
      for (const auto& box : model::logical_boxes(s, s.offset, s.offset + s.size()))
        load("master", s, box, flat, box);
  if (!fill) return;
  auto to_device = [](const std::vector<G>& host, const GView& dst) {
    Kokkos::View<const G*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> h(host.data(), host.size());
    Kokkos::deep_copy(dst, h);
  };
  to_device(m, m_c_);
  to_device(v, v_c_);
  if constexpr (kHasMaster<T>) to_device(master_compact, master_c_);
  // The parameters, in the training precision: ZeRO-3's owned shard, else every tensor whole.
  const std::vector<G>& master = opt_.zero == 3 ? master_compact : flat;
  GView tmp("paraxis::load_master", master.size());
  to_device(master, tmp);
  kernels::convert(Space(), tmp, opt_.zero == 3 ? param_c_ : ps.param);
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
