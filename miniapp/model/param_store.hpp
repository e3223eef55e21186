// All parameters of a model (or of a shard of one) in one flat buffer per role: parameters
// (storage type T), gradients, and AdamW state (m, v, and fp32 master weights when T is bf16).
// Tensors are unmanaged row-major views into those buffers. Flat buffers are what
// data-parallel buckets and ZeRO shards cut; per-tensor views are what layers use.
//
// The layout (which tensors, where, grouped in units padded to a multiple of `unit_multiple`
// elements so that ZeRO can cut them into equal shards) is a model::ParamLayout
// (param_layout.hpp, the one description of it); the store allocates and fills it. A unit's
// parameters and gradients are read through a per-unit base pointer, which ZeRO-3 points at a
// gathered workspace while the unit runs.
#pragma once

#include <Kokkos_Core.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "memory_ledger.hpp"
#include "model/param_layout.hpp"
#include "paraxis/kernels/common.hpp"

namespace paraxis::model {

template <class T, class Space = Kokkos::DefaultExecutionSpace>
class ParamStore {
 public:
  using G = kernels::acc_t<T>;  // gradients, master weights, optimizer state
  using Mem = typename Space::memory_space;
  template <class V>
  using UView1 = Kokkos::View<V*, Kokkos::LayoutRight, Mem, Kokkos::MemoryUnmanaged>;
  template <class V>
  using UView2 = Kokkos::View<V**, Kokkos::LayoutRight, Mem, Kokkos::MemoryUnmanaged>;
  using ParamView = Kokkos::View<T*, Kokkos::LayoutRight, Mem>;
  using GradView = Kokkos::View<G*, Kokkos::LayoutRight, Mem>;
  static constexpr bool has_master = !std::is_same_v<T, G>;

  // Pad every unit to a multiple of this many elements (the data-parallel degree for ZeRO).
  // Empty until set_layout.
  explicit ParamStore(int unit_multiple = 1) : unit_multiple_(unit_multiple) {}
  explicit ParamStore(ParamLayout layout) : unit_multiple_(layout.unit_multiple) {
    set_layout(std::move(layout));
  }

  // Lays the store out (before allocating). Throws std::logic_error when already allocated or
  // when the layout's unit_multiple is not the store's.
  void set_layout(ParamLayout layout);
  const ParamLayout& layout() const { return layout_; }
  int unit_multiple() const { return unit_multiple_; }

  // The single-rank layout: flat parameters, gradients and AdamW state, all resident.
  void allocate(MemoryLedger& ledger);
  // Only what a data-parallel trainer asks for; it owns the rest (shards, workspaces).
  void allocate_params(MemoryLedger& ledger);
  void allocate_grads(MemoryLedger& ledger);
  void release_grads(MemoryLedger& ledger);

  // Fills every tensor from the counter-based generator (init_rng.hpp), keyed by name and by
  // the element's index in the logical tensor: (row_offset + r) * logical_cols +
  // (col_offset + c) for element (r, c) of a shard, so a shard holds exactly its slice of
  // the single-rank values.
  void initialize(std::uint64_t seed);
  // Initial values of the flat range [begin, end) (padding is 0), on the host, in type G.
  std::vector<G> initial_values(std::uint64_t seed, std::size_t begin, std::size_t end) const;

  const std::vector<TensorSpec>& specs() const { return layout_.tensors; }
  const TensorSpec& spec(int i) const { return layout_.tensors[i]; }
  const std::vector<UnitSpec>& units() const { return layout_.units; }
  int find(const std::string& name) const { return layout_.find(name); }
  std::size_t elements() const { return layout_.total; }

  // Where unit u's parameters / gradients live now (ZeRO-3 rebinds them to workspaces).
  void bind_unit_params(int u, T* base) { unit_param_[u] = base; }
  void bind_unit_grads(int u, G* base) { unit_grad_[u] = base; }
  void bind_flat();  // every unit back to the flat buffers (those that are allocated)

  UView2<T> w2(int i) const { return UView2<T>(pptr(i), rows(i), cols(i)); }
  UView1<T> w1(int i) const { return UView1<T>(pptr(i), spec(i).size()); }
  UView2<G> g2(int i) const { return UView2<G>(gptr(i), rows(i), cols(i)); }
  UView1<G> g1(int i) const { return UView1<G>(gptr(i), spec(i).size()); }

  void zero_grads() const { Kokkos::deep_copy(grad, G(0)); }
  double grad_sq_norm(const Space& space) const;
  void adamw_step(const Space& space, double lr, double beta1, double beta2, double eps,
                  double weight_decay, int step, double grad_scale) const;

  // Master copy of the parameters: the parameters themselves unless T is bf16.
  GradView master_view() const;

  ParamView param;
  GradView grad, master, m, v;

 private:
  T* pptr(int i) const {
    const auto& s = spec(i);
    return unit_param_[s.unit] + (s.offset - layout_.units[s.unit].begin);
  }
  G* gptr(int i) const {
    const auto& s = spec(i);
    return unit_grad_[s.unit] + (s.offset - layout_.units[s.unit].begin);
  }
  std::size_t rows(int i) const { return static_cast<std::size_t>(spec(i).rows); }
  std::size_t cols(int i) const {
    return static_cast<std::size_t>(spec(i).cols ? spec(i).cols : 1);
  }
  int unit_multiple_;
  ParamLayout layout_;
  std::vector<T*> unit_param_;
  std::vector<G*> unit_grad_;
};

}  // namespace paraxis::model
