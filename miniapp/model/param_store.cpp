// ParamStore: buffers of a ParamLayout, counter-based initialisation, gradient norm and the AdamW
// step.
#include "param_store.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "init_rng.hpp"
#include "paraxis/kernels/adamw.hpp"
#include "paraxis/kernels/elementwise.hpp"

namespace paraxis::model {

template <class T, class Space>
void ParamStore<T, Space>::set_layout(ParamLayout layout) {
  if (param.data() || grad.data()) throw std::logic_error("ParamStore::set_layout after allocate");
  if (layout.unit_multiple != unit_multiple_)
    throw std::logic_error("ParamStore::set_layout: the layout pads units to a multiple of " +
                           std::to_string(layout.unit_multiple) + ", the store expects " +
                           std::to_string(unit_multiple_));
  layout_ = std::move(layout);
  unit_param_.assign(layout_.units.size(), nullptr);
  unit_grad_.assign(layout_.units.size(), nullptr);
}

template <class T, class Space>
void ParamStore<T, Space>::bind_flat() {
  for (std::size_t u = 0; u < layout_.units.size(); ++u) {
    unit_param_[u] = param.data() ? param.data() + layout_.units[u].begin : nullptr;
    unit_grad_[u] = grad.data() ? grad.data() + layout_.units[u].begin : nullptr;
  }
}

template <class T, class Space>
void ParamStore<T, Space>::allocate_params(MemoryLedger& ledger) {
  param = ledger.track(MemCategory::params, ParamView("paraxis::params", layout_.total));
  bind_flat();
}

template <class T, class Space>
void ParamStore<T, Space>::allocate_grads(MemoryLedger& ledger) {
  grad = ledger.track(MemCategory::grads, GradView("paraxis::grads", layout_.total));
  bind_flat();
}

template <class T, class Space>
void ParamStore<T, Space>::release_grads(MemoryLedger& ledger) {
  ledger.release(MemCategory::grads, grad.span() * sizeof(G));
  grad = GradView();
  bind_flat();
}

template <class T, class Space>
std::vector<typename ParamStore<T, Space>::G> ParamStore<T, Space>::initial_values(
    std::uint64_t seed, std::size_t begin, std::size_t end) const {
  std::vector<G> out(end - begin, G(0));
  for (const auto& s : layout_.tensors) {
    const std::size_t lo = std::max(begin, s.offset), hi = std::min(end, s.offset + s.size());
    if (lo >= hi) continue;
    const auto key = stream_key(seed, s.name);
    const std::size_t cols = s.cols ? s.cols : 1, lcols = s.logical_cols ? s.logical_cols : 1;
    for (std::size_t f = lo; f < hi; ++f) {
      const std::size_t r = (f - s.offset) / cols + s.row_offset;
      const std::size_t c = (f - s.offset) % cols + s.col_offset;
      G v = G(0);
      if (r < static_cast<std::size_t>(s.logical_rows) && c < lcols) {  // else padding
        if (s.init == Init::ones) v = G(1);
        if (s.init == Init::normal) v = static_cast<G>(s.stddev * normal01(key, r * lcols + c));
        if (s.init == Init::zipf_logit)
          v = static_cast<G>(-s.stddev * std::log(static_cast<double>(r * lcols + c + 1)));
      }
      out[f - begin] = v;
    }
  }
  return out;
}

template <class T, class Space>
void ParamStore<T, Space>::allocate(MemoryLedger& ledger) {
  allocate_params(ledger);
  allocate_grads(ledger);
  m = ledger.track(MemCategory::optimizer, GradView("paraxis::adam_m", layout_.total));
  v = ledger.track(MemCategory::optimizer, GradView("paraxis::adam_v", layout_.total));
  if constexpr (has_master)
    master = ledger.track(MemCategory::optimizer, GradView("paraxis::master", layout_.total));
}

template <class T, class Space>
typename ParamStore<T, Space>::GradView ParamStore<T, Space>::master_view() const {
  if constexpr (has_master) {
    return master;
  } else {
    return param;
  }
}

template <class T, class Space>
void ParamStore<T, Space>::initialize(std::uint64_t seed) {
  const std::vector<G> values = initial_values(seed, 0, layout_.total);
  Kokkos::View<const G*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> host(values.data(),
                                                                          layout_.total);
  Kokkos::deep_copy(master_view(), host);
  if constexpr (has_master) kernels::convert(Space(), master, param);
  Kokkos::fence();
}

template <class T, class Space>
double ParamStore<T, Space>::grad_sq_norm(const Space& space) const {
  return kernels::sum_squares(space, grad);
}

template <class T, class Space>
void ParamStore<T, Space>::adamw_step(const Space& space, double lr, double beta1, double beta2,
                                      double eps, double weight_decay, int step,
                                      double grad_scale) const {
  auto mv = master_view();
  for (const auto& s : layout_.tensors) {
    const auto range = std::make_pair(s.offset, s.offset + s.size());
    kernels::AdamWHyper h;
    h.lr = lr;
    h.beta1 = beta1;
    h.beta2 = beta2;
    h.eps = eps;
    h.weight_decay = s.weight_decay ? weight_decay : 0.0;
    kernels::adamw_update(space, h, step, grad_scale, Kokkos::subview(grad, range),
                          Kokkos::subview(m, range), Kokkos::subview(v, range),
                          Kokkos::subview(mv, range));
  }
  if constexpr (has_master) kernels::convert(space, master, param);
}

template class ParamStore<double>;
template class ParamStore<float>;
template class ParamStore<paraxis::bf16>;

}  // namespace paraxis::model
