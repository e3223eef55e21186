// ZeroOptimizer: the per-unit shards, buffers, traffic and update of each ZeRO stage.
#include "parallel/zero_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "config/parallel_config.hpp"
#include "model/param_layout.hpp"
#include "paraxis/kernels/adamw.hpp"
#include "paraxis/kernels/elementwise.hpp"

namespace paraxis::parallel {

using model::MemCategory;

namespace {
template <class T>
constexpr bool kMasterCopy = !std::is_same_v<T, kernels::acc_t<T>>;
}

template <class T>
ZeroOptimizer<T>::ZeroOptimizer(model::GptModel<T>& model, const model::TrainConfig& train,
                                const ZeroOptions& opt, Communicator& dp, Communicator* edp,
                                MPI_Comm dp_comm, MPI_Comm edp_comm)
    : model_(model),
      tcfg_(train),
      opt_(opt),
      dp_(dp),
      edp_(edp),
      dp_comm_(dp_comm),
      edp_comm_(edp_comm) {
  config::require_zero_stage(opt.zero);
  layout();
  allocate_and_initialize();
}

template <class T>
Communicator& ZeroOptimizer<T>::group_of(int unit) const {
  return *group_[static_cast<std::size_t>(unit)];
}

template <class T>
void ZeroOptimizer<T>::layout() {
  const auto& units = model_.params().units();
  std::size_t c = 0;
  for (const auto& U : units) {
    // Expert units have workspaces of their own (both units of an MoE block are open at
    // once) and, with expert parallelism, their own group.
    const bool expert = U.expert;
    Communicator* g = expert && edp_ ? edp_ : &dp_;
    expert_.push_back(expert);
    group_.push_back(g);
    // This rank's shard of the unit: the layout's one definition of ZeRO ownership.
    const model::FlatRange own = model::owned_range(U, opt_.zero, g->size(), g->rank());
    const std::size_t s = own.size();
    shard_.push_back(s);
    own_.push_back(own.begin);
    compact_.push_back(c);
    c += s;
    max_unit_[expert ? 1 : 0] = std::max(max_unit_[expert ? 1 : 0], U.size);
    max_shard_ = std::max(max_shard_, s);
  }
  compact_total_ = c;
  unit_slot_.assign(units.size(), 0);
  // Buckets for the stage-0 all-reduce (model::gradient_buckets): whole units of one group.
  std::vector<model::FlatRange> ranges;
  std::vector<int> group_key;
  for (std::size_t u = 0; u < units.size(); ++u) {
    ranges.push_back({units[u].begin, units[u].begin + units[u].size});
    group_key.push_back(group_[u] == &dp_ ? 0 : 1);
  }
  const auto cap = model::bucket_cap_elements(opt_.bucket_mb, sizeof(G));
  for (const auto& b : model::gradient_buckets(ranges, group_key, cap))
    buckets_.push_back({b.begin, b.end, b.first_unit, Request(), false});
}

template <class T>
void ZeroOptimizer<T>::allocate_and_initialize() {
  auto& ps = model_.params();
  auto& led = model_.ledger();
  const std::uint64_t seed = tcfg_.seed;
  if (opt_.zero <= 2) {
    ps.allocate_params(led);
    const auto values = ps.initial_values(seed, 0, ps.elements());
    Kokkos::View<const G*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> h(values.data(),
                                                                         values.size());
    GView tmp("paraxis::init", values.size());
    Kokkos::deep_copy(tmp, h);
    kernels::convert(Space(), tmp, ps.param);
  } else {
    param_c_ = led.track(MemCategory::params, TView("paraxis::param_shard", compact_total_));
    fill_compact(param_c_, seed);
  }
  if (opt_.zero <= 1) ps.allocate_grads(led);
  if (opt_.zero == 0) {
    grad_c_ = ps.grad;  // no sharding: the compact layout is the flat one
  } else {
    grad_c_ = led.track(MemCategory::grads, GView("paraxis::grad_shard", compact_total_));
  }
  m_c_ = led.track(MemCategory::optimizer, GView("paraxis::adam_m", compact_total_));
  v_c_ = led.track(MemCategory::optimizer, GView("paraxis::adam_v", compact_total_));
  if constexpr (kMasterCopy<T>) {
    master_c_ = led.track(MemCategory::optimizer, GView("paraxis::master_shard", compact_total_));
    fill_compact(master_c_, seed);
  }
  Kokkos::fence();
}

template <class T>
template <class V>
void ZeroOptimizer<T>::fill_compact(const V& dst, std::uint64_t seed) {
  const auto& ps = model_.params();
  std::vector<G> all(compact_total_);
  for (std::size_t u = 0; u < ps.units().size(); ++u) {
    const auto vals = ps.initial_values(seed, own_[u], own_[u] + shard_[u]);
    std::copy(vals.begin(), vals.end(), all.begin() + static_cast<std::ptrdiff_t>(compact_[u]));
  }
  Kokkos::View<const G*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> h(all.data(), all.size());
  GView tmp("paraxis::init", all.size());
  Kokkos::deep_copy(tmp, h);
  kernels::convert(Space(), tmp, dst);
}

// ---- per-step buffers that must not stay resident between steps
template <class T>
void ZeroOptimizer<T>::begin_step() {
  auto& ps = model_.params();
  auto& led = model_.ledger();
  if (opt_.zero == 2) ps.allocate_grads(led);  // zero-initialised
  // Receive buffer of the per-micro-batch reduce-scatter: one shard, or (overlapped) one per
  // unit, since several are in flight at once.
  if (opt_.zero >= 2)
    tmp_c_ = led.track(MemCategory::grads,
                       GView("paraxis::grad_recv", opt_.overlap ? compact_total_ : max_shard_));
  if (opt_.zero == 3) {
    grad_ws_.assign(2, {});
    ws_slot_.assign(2, 0);
    for (int kind = 0; kind < 2; ++kind) {
      if (max_unit_[kind] == 0) {
        param_ws_.push_back(TView());
        continue;
      }
      param_ws_.push_back(
          led.track(MemCategory::params, TView("paraxis::param_gather", max_unit_[kind])));
      for (int s = 0; s < (opt_.overlap ? 2 : 1); ++s)
        grad_ws_[kind].push_back(
            led.track(MemCategory::grads, GView("paraxis::grad_unit", max_unit_[kind])));
    }
  }
  if (opt_.zero <= 1) ps.zero_grads();
  if (opt_.zero >= 1) Kokkos::deep_copy(grad_c_, G(0));
}

template <class T>
void ZeroOptimizer<T>::end_step() {
  auto& ps = model_.params();
  auto& led = model_.ledger();
  if (opt_.zero == 2) ps.release_grads(led);
  if (opt_.zero >= 2) {
    led.release(MemCategory::grads, tmp_c_.span() * sizeof(G));
    tmp_c_ = GView();
  }
  if (opt_.zero == 3) {
    for (auto& ws : param_ws_) led.release(MemCategory::params, ws.span() * sizeof(T));
    param_ws_.clear();
    for (auto& kind : grad_ws_)
      for (auto& ws : kind) led.release(MemCategory::grads, ws.span() * sizeof(G));
    grad_ws_.clear();
  }
}

// ---- gradient traffic
template <class T>
void ZeroOptimizer<T>::reduce_scatter_unit(std::size_t u, const G* unit_grads, bool accumulate) {
  Kokkos::fence();
  Communicator& g = *group_[u];
  if (accumulate) {
    g.reduce_scatter(unit_grads, tmp_c_.data(), shard_[u], dtype_of<G>());
    kernels::add_inplace(Space(), Kokkos::subview(grad_c_, seg(u)),
                         Kokkos::subview(tmp_c_, std::make_pair(std::size_t(0), shard_[u])));
  } else {
    g.reduce_scatter(unit_grads, grad_c_.data() + compact_[u], shard_[u], dtype_of<G>());
  }
}

template <class T>
void ZeroOptimizer<T>::start_reduce_scatter(std::size_t u, const G* unit_grads, bool accumulate,
                                            int slot) {
  Kokkos::fence();
  G* recv = accumulate ? tmp_c_.data() + compact_[u] : grad_c_.data() + compact_[u];
  pending_.push_back({group_[u]->ireduce_scatter(unit_grads, recv, shard_[u], dtype_of<G>()), u,
                      accumulate, kind(u), slot});
}

template <class T>
void ZeroOptimizer<T>::finish(PendingScatter& p) {
  group_[p.unit]->wait(p.request);
  if (p.accumulate)
    kernels::add_inplace(Space(), Kokkos::subview(grad_c_, seg(p.unit)),
                         Kokkos::subview(tmp_c_, seg(p.unit)));
}

template <class T>
void ZeroOptimizer<T>::complete_pending_if(
    const std::function<bool(const PendingScatter&)>& which) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (which(*it)) {
      finish(*it);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

template <class T>
void ZeroOptimizer<T>::zero_unit_grads(std::size_t u) {
  auto& ps = model_.params();
  const auto& U = ps.units()[u];
  Kokkos::deep_copy(Kokkos::subview(ps.grad, std::make_pair(U.begin, U.begin + U.size)), G(0));
}

template <class T>
void ZeroOptimizer<T>::finish_gradients() {
  auto& ps = model_.params();
  if (opt_.zero == 0) {
    Kokkos::fence();
    for (auto& b : buckets_) {
      if (b.request.active()) {
        group_[b.first_unit]->wait(b.request);
      } else if (!b.started) {
        group_[b.first_unit]->all_reduce(ps.grad.data() + b.begin, ps.grad.data() + b.begin,
                                         b.end - b.begin, dtype_of<G>());
      }
      b.started = false;
    }
  }
  if (opt_.zero == 1 && !opt_.overlap)
    for (std::size_t u = 0; u < ps.units().size(); ++u)
      reduce_scatter_unit(u, ps.grad.data() + ps.units()[u].begin, /*accumulate=*/false);
  complete_pending_if([](const PendingScatter&) { return true; });
}

// ---- hooks
template <class T>
void ZeroOptimizer<T>::gather_unit(int u) {
  Kokkos::fence();
  const auto uu = static_cast<std::size_t>(u);
  group_[uu]->all_gather(param_c_.data() + compact_[uu], param_ws_[kind(uu)].data(), shard_[uu],
                         dtype_of<T>());
  model_.params().bind_unit_params(u, param_ws_[kind(uu)].data());
}

template <class T>
void ZeroOptimizer<T>::before_forward(int u) {
  if (opt_.zero == 3) gather_unit(u);
}

template <class T>
void ZeroOptimizer<T>::after_forward(int u) {
  if (opt_.zero == 3) model_.params().bind_unit_params(u, nullptr);
}

template <class T>
void ZeroOptimizer<T>::before_backward_input(int u) {
  if (opt_.zero == 3) gather_unit(u);
  if (opt_.overlap) progress();
}

template <class T>
void ZeroOptimizer<T>::after_backward_input(int u) {
  if (opt_.zero == 3) model_.params().bind_unit_params(u, nullptr);
  if (opt_.overlap) progress();
}

template <class T>
void ZeroOptimizer<T>::before_backward(int u) {
  const auto uu = static_cast<std::size_t>(u);
  if (opt_.zero == 3) {
    if (!split_) gather_unit(u);  // W reads no parameter
    const int kd = kind(uu);
    const int slot = opt_.overlap ? 1 - ws_slot_[kd] : 0;
    ws_slot_[kd] = slot;
    unit_slot_[uu] = slot;
    // The workspace must be free before it is rewritten, and the unit's previous reduction
    // (whose receive buffer this one reuses) accumulated first.
    complete_pending_if(
        [&](const PendingScatter& p) { return (p.kind == kd && p.slot == slot) || p.unit == uu; });
    auto& ws = grad_ws_[kd][slot];
    Kokkos::deep_copy(
        Kokkos::subview(ws, std::make_pair(std::size_t(0), model_.params().units()[uu].size)),
        G(0));
    model_.params().bind_unit_grads(u, ws.data());
  }
  if (opt_.zero == 2 && opt_.overlap) {
    // The previous micro-batch's reduction of this unit reads its gradients: complete it
    // (accumulating in micro-batch order, as the plain path does) before they are rewritten.
    bool had = false;
    complete_pending_if([&](const PendingScatter& p) {
      const bool mine = p.unit == uu;
      had = had || mine;
      return mine;
    });
    if (had) zero_unit_grads(uu);
  }
  if (opt_.overlap) progress();
}

template <class T>
void ZeroOptimizer<T>::after_backward(int u) {
  const auto uu = static_cast<std::size_t>(u);
  auto& ps = model_.params();
  const G* unit_grads = ps.grad.data() ? ps.grad.data() + ps.units()[uu].begin : nullptr;
  if (opt_.zero == 3) {
    const int kd = kind(uu), slot = unit_slot_[uu];
    if (opt_.overlap) {
      start_reduce_scatter(uu, grad_ws_[kd][slot].data(), /*accumulate=*/true, slot);
    } else {
      reduce_scatter_unit(uu, grad_ws_[kd][slot].data(), /*accumulate=*/true);
    }
    ps.bind_unit_grads(u, nullptr);
    ps.bind_unit_params(u, nullptr);
  }
  if (opt_.zero == 2) {
    if (opt_.overlap) {
      start_reduce_scatter(uu, unit_grads, /*accumulate=*/true, -1);
    } else {
      reduce_scatter_unit(uu, unit_grads, /*accumulate=*/true);
      zero_unit_grads(uu);  // the next micro-batch starts from zero
    }
  }
  if (opt_.overlap && opt_.zero == 1 && final_)
    start_reduce_scatter(uu, unit_grads, /*accumulate=*/false, -1);
  if (opt_.overlap && opt_.zero == 0 && final_) {
    // A bucket's gradients are final once the last backward of its first unit is done (the
    // later units of the bucket ran theirs before it).
    for (auto& b : buckets_)
      if (b.first_unit == u && !b.started) {
        Kokkos::fence();
        b.request = group_[uu]->iall_reduce(ps.grad.data() + b.begin, ps.grad.data() + b.begin,
                                            b.end - b.begin, dtype_of<G>());
        b.started = true;
      }
  }
  if (opt_.overlap) progress();
}

// MPI makes progress only inside MPI calls (no progress thread under Serial Kokkos): poke every
// outstanding request between units.
template <class T>
void ZeroOptimizer<T>::progress() {
  for (auto& b : buckets_)
    if (b.request.active()) group_[b.first_unit]->test(b.request);
  for (auto& p : pending_)
    if (p.request.active()) group_[p.unit]->test(p.request);
}

// ---- the owned part of every tensor: f(spec index, compact begin, compact end)
template <class T>
template <class F>
void ZeroOptimizer<T>::for_each_owned_piece(F&& f) const {
  const auto& ps = model_.params();
  for (std::size_t u = 0; u < ps.units().size(); ++u) {
    const auto& U = ps.units()[u];
    const std::size_t ob = own_[u], oe = own_[u] + shard_[u];
    for (int i = U.first_tensor; i < U.end_tensor; ++i) {
      const auto& s = ps.spec(i);
      const std::size_t lo = std::max(ob, s.offset), hi = std::min(oe, s.offset + s.size());
      if (lo >= hi) continue;
      f(i, u, compact_[u] + (lo - ob), compact_[u] + (hi - ob), lo, hi);
    }
  }
}

template <class T>
void ZeroOptimizer<T>::sum_sequence_parallel_gradients(Communicator& tp) {
  const auto& ps = model_.params();
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  std::size_t total = 0;
  for_each_owned_piece(
      [&](int i, std::size_t, std::size_t c0, std::size_t c1, std::size_t, std::size_t) {
        if (!ps.spec(i).sp_partial) return;
        pieces.emplace_back(c0, c1);
        total += c1 - c0;
      });
  if (total == 0) return;
  // Packed, so the whole sum is one all-reduce.
  GView packed("paraxis::sp_grads", total);
  std::size_t at = 0;
  for (const auto& [c0, c1] : pieces) {
    Kokkos::deep_copy(Kokkos::subview(packed, std::make_pair(at, at + c1 - c0)),
                      Kokkos::subview(grad_c_, std::make_pair(c0, c1)));
    at += c1 - c0;
  }
  Kokkos::fence();
  tp.all_reduce(packed.data(), packed.data(), total, dtype_of<G>());
  at = 0;
  for (const auto& [c0, c1] : pieces) {
    Kokkos::deep_copy(Kokkos::subview(grad_c_, std::make_pair(c0, c1)),
                      Kokkos::subview(packed, std::make_pair(at, at + c1 - c0)));
    at += c1 - c0;
  }
}

template <class T>
bool ZeroOptimizer<T>::norm_sums_over_dp() const {
  // Stage 0 without expert parallelism: every data-parallel rank holds every gradient and
  // computes the whole norm itself.
  return opt_.zero >= 1 || edp_ != nullptr;
}

template <class T>
double ZeroOptimizer<T>::grad_sq_norm_share(int tp_rank) const {
  const auto& ps = model_.params();
  const Space space;
  double ss = 0;
  for_each_owned_piece(
      [&](int i, std::size_t u, std::size_t c0, std::size_t c1, std::size_t, std::size_t) {
        if (ps.spec(i).tp_replicated && tp_rank != 0) return;
        // Stage 0 with expert parallelism: the group's copies are identical; one counts.
        if (opt_.zero == 0 && norm_sums_over_dp() && group_[u]->rank() != 0) return;
        ss += kernels::sum_squares(space, Kokkos::subview(grad_c_, std::make_pair(c0, c1)));
      });
  return ss;
}

// ---- optimizer over the owned shard of every tensor
template <class T>
void ZeroOptimizer<T>::apply(int step, double grad_scale) {
  const Space space;
  auto& ps = model_.params();
  for_each_owned_piece(
      [&](int i, std::size_t, std::size_t c0, std::size_t c1, std::size_t lo, std::size_t hi) {
        const auto& s = ps.spec(i);
        const auto c = std::make_pair(c0, c1);
        kernels::AdamWHyper h;
        h.lr = tcfg_.lr;
        h.beta1 = tcfg_.beta1;
        h.beta2 = tcfg_.beta2;
        h.eps = tcfg_.adam_eps;
        h.weight_decay = s.weight_decay ? tcfg_.weight_decay : 0.0;
        auto g = Kokkos::subview(grad_c_, c);
        auto m = Kokkos::subview(m_c_, c);
        auto v = Kokkos::subview(v_c_, c);
        if constexpr (kMasterCopy<T>) {
          kernels::adamw_update(space, h, step, grad_scale, g, m, v, Kokkos::subview(master_c_, c));
        } else if (opt_.zero == 3) {
          kernels::adamw_update(space, h, step, grad_scale, g, m, v, Kokkos::subview(param_c_, c));
        } else {
          kernels::adamw_update(space, h, step, grad_scale, g, m, v,
                                Kokkos::subview(ps.param, std::make_pair(lo, hi)));
        }
      });
  // New parameters to where forward reads them: the shard into the flat buffer (bf16), then
  // (stages 1-2) every rank's shard to every rank of the group.
  for (std::size_t u = 0; u < ps.units().size(); ++u) {
    if constexpr (kMasterCopy<T>) {
      if (opt_.zero == 3) {
        kernels::convert(space, Kokkos::subview(master_c_, seg(u)),
                         Kokkos::subview(param_c_, seg(u)));
      } else {
        kernels::convert(space, Kokkos::subview(master_c_, seg(u)),
                         Kokkos::subview(ps.param, std::make_pair(own_[u], own_[u] + shard_[u])));
      }
    }
    if (opt_.zero == 1 || opt_.zero == 2) {
      Kokkos::fence();
      const auto& U = ps.units()[u];
      group_[u]->all_gather(ps.param.data() + own_[u], ps.param.data() + U.begin, shard_[u],
                            dtype_of<T>());
    }
  }
}

template <class T>
std::vector<typename ZeroOptimizer<T>::G> ZeroOptimizer<T>::full_master() const {
  const auto& ps = model_.params();
  std::vector<G> flat(ps.elements());
  // Gathers go through host memory on plain MPI communicators (which need not be GPU-aware,
  // and record nothing): this runs once per point, for --verify and tests.
  auto quiet_dp = make_communicator(config::CommBackend::mpi, dp_comm_, Axis::dp, nullptr);
  auto quiet_edp =
      edp_ ? make_communicator(config::CommBackend::mpi, edp_comm_, Axis::edp, nullptr) : nullptr;
  for (std::size_t u = 0; u < ps.units().size(); ++u) {
    const auto& U = ps.units()[u];
    if (!kMasterCopy<T> && opt_.zero < 3) {
      GView full("paraxis::gather_master", U.size);
      kernels::convert(Space(),
                       Kokkos::subview(ps.param, std::make_pair(U.begin, U.begin + U.size)), full);
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), full);
      std::copy(h.data(), h.data() + U.size, flat.begin() + static_cast<std::ptrdiff_t>(U.begin));
      continue;
    }
    GView mine("paraxis::gather_mine", shard_[u]);
    if constexpr (kMasterCopy<T>) {
      Kokkos::deep_copy(mine, Kokkos::subview(master_c_, seg(u)));
    } else {
      kernels::convert(Space(), Kokkos::subview(param_c_, seg(u)), mine);
    }
    Kokkos::fence();
    auto mine_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), mine);
    if (opt_.zero == 0) {  // unsharded: every rank holds the whole unit
      std::copy(mine_h.data(), mine_h.data() + U.size,
                flat.begin() + static_cast<std::ptrdiff_t>(U.begin));
    } else {
      Communicator& q = group_[u] == edp_ ? *quiet_edp : *quiet_dp;
      q.all_gather(mine_h.data(), flat.data() + U.begin, shard_[u], dtype_of<G>());
    }
  }
  return flat;
}

template class ZeroOptimizer<double>;
template class ZeroOptimizer<float>;
template class ZeroOptimizer<paraxis::bf16>;

}  // namespace paraxis::parallel
