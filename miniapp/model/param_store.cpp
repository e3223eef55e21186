// ParamStore: layout, counter-based initialisation, gradient norm and the AdamW step.
#include "param_store.hpp"

#include <stdexcept>

#include "init_rng.hpp"
#include "paraxis/kernels/adamw.hpp"
#include "paraxis/kernels/elementwise.hpp"

namespace paraxis::model {

namespace {
constexpr std::size_t kAlign = 16;  // elements: keeps every tensor's start vector-aligned
}

template <class T, class Space>
int ParamStore<T, Space>::add(std::string name, int rows, int cols, Init init, double stddev,
                              bool decay) {
  if (param.data()) throw std::logic_error("ParamStore::add after allocate: " + name);
  TensorSpec s{std::move(name), rows, cols, init, stddev, decay, total_};
  total_ += (s.size() + kAlign - 1) / kAlign * kAlign;
  specs_.push_back(std::move(s));
  return static_cast<int>(specs_.size()) - 1;
}

template <class T, class Space>
int ParamStore<T, Space>::find(const std::string& name) const {
  for (std::size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) return static_cast<int>(i);
  return -1;
}

template <class T, class Space>
void ParamStore<T, Space>::allocate(MemoryLedger& ledger) {
  using VT = decltype(param);
  using VG = decltype(grad);
  param = ledger.track(MemCategory::params, VT("paraxis::params", total_));
  grad = ledger.track(MemCategory::grads, VG("paraxis::grads", total_));
  m = ledger.track(MemCategory::optimizer, VG("paraxis::adam_m", total_));
  v = ledger.track(MemCategory::optimizer, VG("paraxis::adam_v", total_));
  if constexpr (has_master) master = ledger.track(MemCategory::optimizer, VG("paraxis::master", total_));
}

template <class T, class Space>
Kokkos::View<typename ParamStore<T, Space>::G*, Kokkos::LayoutRight,
             typename ParamStore<T, Space>::Mem>
ParamStore<T, Space>::master_view() const {
  if constexpr (has_master) {
    return master;
  } else {
    return param;
  }
}

template <class T, class Space>
void ParamStore<T, Space>::initialize(std::uint64_t seed) {
  auto host = Kokkos::create_mirror_view(master_view());
  Kokkos::deep_copy(host, G(0));
  for (const auto& s : specs_) {
    G* p = host.data() + s.offset;
    const std::size_t n = s.size();
    switch (s.init) {
      case Init::zeros:
        for (std::size_t i = 0; i < n; ++i) p[i] = G(0);
        break;
      case Init::ones:
        for (std::size_t i = 0; i < n; ++i) p[i] = G(1);
        break;
      case Init::normal: {
        const auto key = stream_key(seed, s.name);
        for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<G>(s.stddev * normal01(key, i));
        break;
      }
    }
  }
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
  for (const auto& s : specs_) {
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
