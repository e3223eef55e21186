// ParamStore: layout, counter-based initialisation, gradient norm and the AdamW step.
#include "param_store.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "init_rng.hpp"
#include "paraxis/kernels/adamw.hpp"
#include "paraxis/kernels/elementwise.hpp"

namespace paraxis::model {

namespace {
constexpr std::size_t kAlign = 16;  // elements: keeps every tensor's start vector-aligned
}

template <class T, class Space>
void ParamStore<T, Space>::begin_unit(std::string name, bool expert) {
  if (in_unit_) throw std::logic_error("ParamStore::begin_unit inside unit " + units_.back().name);
  if (param.data() || grad.data()) throw std::logic_error("ParamStore::begin_unit after allocate");
  in_unit_ = true;
  units_.push_back({std::move(name), total_, 0, static_cast<int>(specs_.size()), 0, expert});
}

template <class T, class Space>
void ParamStore<T, Space>::end_unit() {
  if (!in_unit_) throw std::logic_error("ParamStore::end_unit without begin_unit");
  in_unit_ = false;
  UnitSpec& u = units_.back();
  const std::size_t m = static_cast<std::size_t>(unit_multiple_);
  u.size = (total_ - u.begin + m - 1) / m * m;
  total_ = u.begin + u.size;
  u.end_tensor = static_cast<int>(specs_.size());
  unit_param_.push_back(nullptr);
  unit_grad_.push_back(nullptr);
}

template <class T, class Space>
int ParamStore<T, Space>::add(std::string name, int rows, int cols, Init init, double stddev,
                              bool decay) {
  if (!in_unit_) throw std::logic_error("ParamStore::add outside a unit: " + name);
  return add_shard(std::move(name), rows, cols, rows, cols, 0, 0, init, stddev, decay);
}

template <class T, class Space>
int ParamStore<T, Space>::add_shard(std::string name, int rows, int cols, int logical_rows,
                                    int logical_cols, int row_offset, int col_offset, Init init,
                                    double stddev, bool decay) {
  if (!in_unit_) throw std::logic_error("ParamStore::add outside a unit: " + name);
  const bool vector = cols == 0;
  const bool bad = rows < 0 || cols < 0 || logical_rows < 0 || logical_cols < 0 || row_offset < 0 ||
                   col_offset < 0 || vector != (logical_cols == 0) || (vector && col_offset != 0);
  if (bad) {
    std::ostringstream os;
    os << "ParamStore::add_shard: tensor " << name << ": block " << rows << " x " << cols << " at ("
       << row_offset << ", " << col_offset << ") of logical " << logical_rows << " x "
       << logical_cols
       << ", expected non-negative extents and offsets (cols = logical_cols = col_offset = 0 "
          "for a vector)";
    throw std::invalid_argument(os.str());
  }
  TensorSpec s{std::move(name), rows,  cols,   init,
               stddev,          decay, total_, static_cast<int>(units_.size()) - 1};
  s.logical_rows = logical_rows;
  s.logical_cols = logical_cols;
  s.row_offset = row_offset;
  s.col_offset = col_offset;
  total_ += (s.size() + kAlign - 1) / kAlign * kAlign;
  specs_.push_back(std::move(s));
  return static_cast<int>(specs_.size()) - 1;
}

template <class T, class Space>
void ParamStore<T, Space>::bind_flat() {
  for (std::size_t u = 0; u < units_.size(); ++u) {
    unit_param_[u] = param.data() ? param.data() + units_[u].begin : nullptr;
    unit_grad_[u] = grad.data() ? grad.data() + units_[u].begin : nullptr;
  }
}

template <class T, class Space>
void ParamStore<T, Space>::allocate_params(MemoryLedger& ledger) {
  param = ledger.track(MemCategory::params, ParamView("paraxis::params", total_));
  bind_flat();
}

template <class T, class Space>
void ParamStore<T, Space>::allocate_grads(MemoryLedger& ledger) {
  grad = ledger.track(MemCategory::grads, GradView("paraxis::grads", total_));
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
  for (const auto& s : specs_) {
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
int ParamStore<T, Space>::find(const std::string& name) const {
  for (std::size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) return static_cast<int>(i);
  return -1;
}

template <class T, class Space>
void ParamStore<T, Space>::allocate(MemoryLedger& ledger) {
  allocate_params(ledger);
  allocate_grads(ledger);
  m = ledger.track(MemCategory::optimizer, GradView("paraxis::adam_m", total_));
  v = ledger.track(MemCategory::optimizer, GradView("paraxis::adam_v", total_));
  if constexpr (has_master)
    master = ledger.track(MemCategory::optimizer, GradView("paraxis::master", total_));
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
  const std::vector<G> values = initial_values(seed, 0, total_);
  Kokkos::View<const G*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> host(values.data(), total_);
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
