// All parameters of a model (or of a shard of one) in one flat buffer per role: parameters
// (storage type T), gradients, and AdamW state (m, v, and fp32 master weights when T is bf16).
// Tensors are unmanaged row-major views into those buffers. Flat buffers are what
// data-parallel buckets and ZeRO shards cut; per-tensor views are what layers use.
//
// Tensors are grouped in units (the embedding, each block, the head): a unit is one
// contiguous range of the flat layout, padded to a multiple of `unit_multiple` elements so
// that ZeRO can cut it into equal shards. A unit's parameters and gradients are read through
// a per-unit base pointer, which ZeRO-3 points at a gathered workspace while the unit runs.
#pragma once

#include <Kokkos_Core.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "memory_ledger.hpp"
#include "paraxis/kernels/common.hpp"

namespace paraxis::model {

// normal: stddev * N(0, 1); zipf_logit: -stddev * ln(i + 1) for element i (a logit bias whose
// softmax is a Zipf distribution of exponent stddev: the router skew for benchmarking).
enum class Init { normal, ones, zeros, zipf_logit };

struct TensorSpec {
  std::string name;
  int rows = 0;
  int cols = 0;  // 0: a vector of `rows` elements
  Init init = Init::zeros;
  double stddev = 0;
  bool weight_decay = false;
  std::size_t offset = 0;  // in the flat layout
  int unit = 0;
  // Shard geometry: this tensor is the block [row_offset, row_offset + rows) x
  // [col_offset, col_offset + cols) of the logical (unsharded) tensor logical_rows x
  // logical_cols (a vector: logical_cols = cols = col_offset = 0). ParamStore::add sets the
  // tensor itself. Elements outside the logical tensor are padding (the vocabulary rounded up
  // to a multiple of tp): initialised to 0 whatever `init` says.
  int logical_rows = 0, logical_cols = 0;
  int row_offset = 0, col_offset = 0;
  // Tensor parallelism: the same tensor on every rank of the tensor-parallel group (LayerNorm,
  // replicated biases, positions, router) rather than a slice of it; and, with sequence
  // parallelism, whose gradient each rank holds only part of (the sum over its tokens: the
  // LayerNorms), to be summed over the group once per step.
  bool tp_replicated = false, sp_partial = false;
  std::size_t size() const { return static_cast<std::size_t>(rows) * (cols ? cols : 1); }
  std::size_t logical_size() const {
    return static_cast<std::size_t>(logical_rows) * (logical_cols ? logical_cols : 1);
  }
};

struct UnitSpec {
  std::string name;
  std::size_t begin = 0, size = 0;  // flat range, size padded to a multiple of unit_multiple
  int first_tensor = 0, end_tensor = 0;
  bool expert = false;  // expert weights: reduced over the expert-data-parallel group
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
  using ParamView = Kokkos::View<T*, Kokkos::LayoutRight, Mem>;
  using GradView = Kokkos::View<G*, Kokkos::LayoutRight, Mem>;
  static constexpr bool has_master = !std::is_same_v<T, G>;

  // Pad every unit to a multiple of this many elements (the data-parallel degree for ZeRO).
  explicit ParamStore(int unit_multiple = 1) : unit_multiple_(unit_multiple) {}

  void begin_unit(std::string name, bool expert = false);
  void end_unit();
  int add(std::string name, int rows, int cols, Init init, double stddev, bool decay);
  // A shard of the logical tensor `name` (logical_rows x logical_cols; logical_cols = 0 for a
  // vector): the rows x cols block at (row_offset, col_offset). Any block is accepted, so
  // uneven splits work too; the part of it past the logical tensor is padding (zero). The
  // split rule is the caller's (tensor_parallel.hpp: Megatron's even splits, heads and ffn
  // divisible by tp, the vocabulary padded to a multiple of tp). Throws
  // std::invalid_argument naming the tensor and the values on a negative extent or offset or
  // a mix of vector and matrix shapes.
  int add_shard(std::string name, int rows, int cols, int logical_rows, int logical_cols,
                int row_offset, int col_offset, Init init, double stddev, bool decay);

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

  void set_tp_flags(int i, bool replicated, bool sp_partial) {
    specs_[i].tp_replicated = replicated;
    specs_[i].sp_partial = sp_partial;
  }

  const std::vector<TensorSpec>& specs() const { return specs_; }
  const TensorSpec& spec(int i) const { return specs_[i]; }
  const std::vector<UnitSpec>& units() const { return units_; }
  int find(const std::string& name) const;
  std::size_t elements() const { return total_; }

  // Where unit u's parameters / gradients live now (ZeRO-3 rebinds them to workspaces).
  void bind_unit_params(int u, T* base) { unit_param_[u] = base; }
  void bind_unit_grads(int u, G* base) { unit_grad_[u] = base; }
  void bind_flat();  // every unit back to the flat buffers (those that are allocated)

  UView2<T> w2(int i) const { return UView2<T>(pptr(i), rows(i), cols(i)); }
  UView1<T> w1(int i) const { return UView1<T>(pptr(i), specs_[i].size()); }
  UView2<G> g2(int i) const { return UView2<G>(gptr(i), rows(i), cols(i)); }
  UView1<G> g1(int i) const { return UView1<G>(gptr(i), specs_[i].size()); }

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
    const auto& s = specs_[i];
    return unit_param_[s.unit] + (s.offset - units_[s.unit].begin);
  }
  G* gptr(int i) const {
    const auto& s = specs_[i];
    return unit_grad_[s.unit] + (s.offset - units_[s.unit].begin);
  }
  std::size_t rows(int i) const { return static_cast<std::size_t>(specs_[i].rows); }
  std::size_t cols(int i) const {
    return static_cast<std::size_t>(specs_[i].cols ? specs_[i].cols : 1);
  }
  int unit_multiple_;
  bool in_unit_ = false;
  std::vector<TensorSpec> specs_;
  std::vector<UnitSpec> units_;
  std::vector<T*> unit_param_;
  std::vector<G*> unit_grad_;
  std::size_t total_ = 0;
};

}  // namespace paraxis::model
