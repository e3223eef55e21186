// The parameter layout of one model shard, as a value: every tensor (name, shape, its block of
// the logical tensor, initialisation, tensor-parallel flags, offset in the flat buffer) and the
// units that group them (the embedding, each block's dense part, each MoE block's experts, the
// final LayerNorm + head), with the two paddings of the flat layout:
//   - every tensor starts kParamAlign-aligned within its unit (each tensor takes its size
//     rounded up to a multiple of kParamAlign; in the flat buffer the starts are aligned too
//     when unit_multiple is a power of two up to 16 or a multiple of 16);
//   - every unit is padded to a multiple of `unit_multiple` elements (the data-parallel degree
//     under ZeRO >= 1), so that it cuts into equal shards over its group.
// param_layout() is the one description of it: the model's ParamStore is laid out from it,
// ZeRO and the calibration take each rank's owned shard from owned_range(), the performance
// models size the traffic and the memory from it, and a checkpoint can index tensors by it.
// Plain C++ (no Kokkos): part of paraxis_model_core.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/model_config.hpp"

namespace paraxis::model {

struct ShardLayout;  // shard_layout.hpp

// Elements: every tensor's offset from its unit's start is a multiple of this.
constexpr std::size_t kParamAlign = 16;

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
  // In the flat layout; offset minus its unit's begin is a multiple of kParamAlign.
  std::size_t offset = 0;
  int unit = 0;
  // Shard geometry: this tensor is the block [row_offset, row_offset + rows) x
  // [col_offset, col_offset + cols) of the logical (unsharded) tensor logical_rows x
  // logical_cols (a vector: logical_cols = cols = col_offset = 0). Elements outside the
  // logical tensor are padding (the vocabulary rounded up to a multiple of tp): initialised to
  // 0 whatever `init` says.
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
  std::string name;                 // "embedding", "layers.3", "layers.3.experts", "head"
  std::size_t begin = 0, size = 0;  // flat range, size padded to a multiple of unit_multiple
  std::size_t aligned = 0;          // its tensors with their alignment, before that padding
  int first_tensor = 0, end_tensor = 0;
  bool expert = false;  // expert weights: reduced over the expert-data-parallel group
};

struct ParamLayout {
  std::vector<TensorSpec> tensors;  // in flat-layout (declaration) order
  std::vector<UnitSpec> units;      // in flat-layout order, contiguous, covering [0, total)
  std::size_t total = 0;            // elements of the flat layout, paddings included
  int unit_multiple = 1;

  // Index of the tensor called `name`, or -1.
  int find(const std::string& name) const;
  // The sum of the tensors' sizes: the shard's elements without alignment or unit padding
  // (the vocabulary padding to a multiple of tp included).
  std::size_t elements() const;
};

// Builds a layout tensor by tensor, unit by unit (param_layout's declaration order; also for
// tests that need a layout of their own). Throws std::logic_error on a tensor outside a unit
// or nested units, std::invalid_argument naming the tensor and the values on a negative extent
// or offset or a mix of vector and matrix shapes.
class ParamLayoutBuilder {
 public:
  // Pad every unit to a multiple of this many elements (>= 1).
  explicit ParamLayoutBuilder(int unit_multiple = 1);
  void begin_unit(std::string name, bool expert = false);
  void end_unit();
  // A whole tensor (its own logical tensor).
  int add(std::string name, int rows, int cols, Init init, double stddev, bool decay);
  // The rows x cols block at (row_offset, col_offset) of the logical tensor `name`
  // (logical_rows x logical_cols; logical_cols = 0 for a vector). Any block is accepted, so
  // uneven splits work too; the part of it past the logical tensor is padding.
  int add_shard(std::string name, int rows, int cols, int logical_rows, int logical_cols,
                int row_offset, int col_offset, Init init, double stddev, bool decay);
  void set_tp_flags(int i, bool replicated, bool sp_partial);
  int units() const { return static_cast<int>(layout_.units.size()); }
  ParamLayout finish();  // throws std::logic_error inside an open unit

 private:
  ParamLayout layout_;
  bool in_unit_ = false;
};

// The parameter layout of the shard `lay` of the model `c`, every unit padded to a multiple of
// unit_multiple: its tensor-parallel slice (heads and ffn split evenly over tp, the vocabulary
// padded to a multiple of tp), the experts of its expert-parallel rank, its chunks in model
// order. ShardLayout::whole(c) gives the single-rank order every parallel run is compared against.
// Throws std::invalid_argument naming the values when tp does not divide heads or ffn, ep the
// experts, a chunk lies outside the model, or unit_multiple < 1.
ParamLayout param_layout(const ModelConfig& c, const ShardLayout& lay, int unit_multiple = 1);

// param_layout(c, lay).tensors: every tensor of the shard, without padding the units.
std::vector<TensorSpec> parameter_specs(const ModelConfig& c, const ShardLayout& lay);

// A flat range [begin, end).
struct FlatRange {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
};

// ZeRO ownership: the part of unit u that rank group_rank of the group_size ranks its
// gradients are reduced over updates and keeps optimizer state for — the whole unit under ZeRO
// stage 0, else its group_rank-th of group_size equal shards. Throws std::invalid_argument
// naming the unit and the values when group_rank is outside the group or (zero >= 1) the unit
// is not padded to a multiple of group_size.
FlatRange owned_range(const UnitSpec& u, int zero, int group_size, int group_rank);

// The number of ranks unit u's gradients are reduced over (its ZeRO group): the data-parallel
// group (dp ranks), or for expert units with expert parallelism the expert-data-parallel group
// (dp / ep ranks: those holding the same experts).
int zero_group_size(const UnitSpec& u, int dp, int ep);

// A ZeRO-0 gradient bucket: the flat range of a run of whole units of one group, first_unit
// the lowest of them.
struct GradientBucket {
  std::size_t begin = 0, end = 0;
  int first_unit = 0;
};
// The ZeRO-0 gradient buckets in the order the step reduces them: runs of whole units (flat
// ranges `units`, in layout order) of one group (`group_key[u]`: units with different keys never
// share a bucket) from the last unit (whose gradients are final first in backward) to the first,
// each closed when the next unit would take it past `cap_elements`. The one statement of the
// bucketing: ZeroOptimizer reduces these, the step model counts them, the calibration times
// them (docs/perfmodel.md, "Data parallelism").
std::vector<GradientBucket> gradient_buckets(const std::vector<FlatRange>& units,
                                             const std::vector<int>& group_key,
                                             std::size_t cap_elements);
// The elements of a bucket of comm.bucket_mb MiB of gradient elements of `element_bytes` each.
std::size_t bucket_cap_elements(double bucket_mb, int element_bytes);

}  // namespace paraxis::model
