// All parameters of a model (or of a shard of one) in one flat buffer per role: parameters
// (storage type T), gradients, and AdamW state (m, v, and fp32 master weights when T is bf16).
// Tensors are unmanaged row-major views into those buffers. Flat buffers are what
// data-parallel buckets and ZeRO shards cut; per-tensor views are what layers use.
#pragma once

#include <Kokkos_Core.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "memory_ledger.hpp"
#include "paraxis/kernels/common.hpp"

namespace paraxis::model {

enum class Init { normal, ones, zeros };

struct TensorSpec {
  std::string name;
  int rows = 0;
  int cols = 0;  // 0: a vector of `rows` elements
  Init init = Init::zeros;
  double stddev = 0;
  bool weight_decay = false;
  std::size_t offset = 0;
  std::size_t size() const { return static_cast<std::size_t>(rows) * (cols ? cols : 1); }
};

template <class T, class Space = Kokkos::DefaultExecutionSpace>
class ParamStore {
 public:
  using G = kernels::acc_t<T>;  // gradients, master weights, optimizer state
  using Mem = typename Space::memory_space;
  template <class V>
  using UView1 = Kokkos::View<V*, Kokkos::LayoutRight, Mem, Kokkos::MemoryUnmanaged>;
  template <class V>
  using UView2 = Kokkos::View<V**, Kokkos::LayoutRight, Mem, Kokkos::MemoryUnmanaged>;
  static constexpr bool has_master = !std::is_same_v<T, G>;

  int add(std::string name, int rows, int cols, Init init, double stddev, bool decay);
  void allocate(MemoryLedger& ledger);
  // Fills every tensor from the counter-based generator (init_rng.hpp), keyed by name and by
  // the element's index in the logical tensor.
  void initialize(std::uint64_t seed);

  const std::vector<TensorSpec>& specs() const { return specs_; }
  const TensorSpec& spec(int i) const { return specs_[i]; }
  int find(const std::string& name) const;
  std::size_t elements() const { return total_; }

  UView2<T> w2(int i) const { return UView2<T>(param.data() + specs_[i].offset, rows(i), cols(i)); }
  UView1<T> w1(int i) const { return UView1<T>(param.data() + specs_[i].offset, specs_[i].size()); }
  UView2<G> g2(int i) const { return UView2<G>(grad.data() + specs_[i].offset, rows(i), cols(i)); }
  UView1<G> g1(int i) const { return UView1<G>(grad.data() + specs_[i].offset, specs_[i].size()); }

  void zero_grads() const { Kokkos::deep_copy(grad, G(0)); }
  double grad_sq_norm(const Space& space) const;
  void adamw_step(const Space& space, double lr, double beta1, double beta2, double eps,
                  double weight_decay, int step, double grad_scale) const;

  // Master copy of the parameters: the parameters themselves unless T is bf16.
  Kokkos::View<G*, Kokkos::LayoutRight, Mem> master_view() const;

  Kokkos::View<T*, Kokkos::LayoutRight, Mem> param;
  Kokkos::View<G*, Kokkos::LayoutRight, Mem> grad, master, m, v;

 private:
  std::size_t rows(int i) const { return static_cast<std::size_t>(specs_[i].rows); }
  std::size_t cols(int i) const {
    return static_cast<std::size_t>(specs_[i].cols ? specs_[i].cols : 1);
  }
  std::vector<TensorSpec> specs_;
  std::size_t total_ = 0;
};

}  // namespace paraxis::model
