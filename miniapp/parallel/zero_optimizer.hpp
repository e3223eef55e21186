// Data parallelism with ZeRO stages 0-3 for one model shard: where its parameters, gradients
// and AdamW state live, the gradient/parameter traffic of each stage, the gradient norm's
// share of this rank, and the update. Units of the ParamStore (the embedding, each block's
// dense part, each MoE block's experts, the head) are the grain: each unit is padded to a
// multiple of dp and cut into equal shards over its group:
//   - dense units over the data-parallel group (the ranks holding the same tensor-parallel
//     slice and pipeline stage);
//   - expert units over the expert-data-parallel group (the ranks holding the same experts:
//     dp / ep of them). Each expert has already summed the tokens of its whole expert-parallel
//     group, so summing over this group gives the single-rank gradient (the loss is scaled by
//     the global token count on every rank: a sum, never a mean, on every axis).
// Stages:
//   0  gradients summed by all-reduce in buckets (comm.bucket_mb) of whole units of one group;
//      every rank updates everything;
//   1  optimizer state sharded: each unit reduce-scattered once per step, each rank updates
//      its shard, parameters all-gathered;
//   2  also gradients: each unit reduce-scattered after every micro-batch's backward into the
//      owned shard; the full gradient buffer lives only during the step;
//   3  also parameters: each unit is all-gathered before its forward and again before its
//      backward into a workspace that lives only while the unit runs; its gradients are
//      reduce-scattered as soon as its backward is done.
// comm.overlap: the reductions start non-blocking as soon as a unit's gradients are final and
// are driven by progress() between units (MPI makes no progress on its own under Serial
// Kokkos); the arithmetic and the bytes are those of the plain path.
#pragma once

#include <Kokkos_Core.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "model/gpt_model.hpp"
#include "model/model_config.hpp"
#include "model/state_pieces.hpp"
#include "parallel/communicator.hpp"

namespace paraxis::parallel {

struct ZeroOptions {
  int zero = 0;
  double bucket_mb = 25;
  bool overlap = false;
};

template <class T>
class ZeroOptimizer {
 public:
  using Space = Kokkos::DefaultExecutionSpace;
  using G = kernels::acc_t<T>;
  using Mem = Space::memory_space;
  using TView = Kokkos::View<T*, Kokkos::LayoutRight, Mem>;
  using GView = Kokkos::View<G*, Kokkos::LayoutRight, Mem>;

  // dp: the data-parallel group; edp: the expert-data-parallel group (null when ep == 1: the
  // experts then follow the dense units over dp); dp_comm / edp_comm: their MPI
  // communicators (full_master gathers through host memory over plain MPI). Allocates what
  // the stage keeps resident and fills it with the initial values of the model's parameters.
  ZeroOptimizer(model::GptModel<T>& model, const model::TrainConfig& train, const ZeroOptions& opt,
                Communicator& dp, Communicator* edp, MPI_Comm dp_comm, MPI_Comm edp_comm);

  void begin_step();
  // Whether the backward about to run is the unit's last of the step (stages 0 and 1 reduce
  // then).
  void set_final_backward(bool final) { final_ = final; }
  void before_forward(int unit);
  void after_forward(int unit);
  void before_backward(int unit);
  void after_backward(int unit);
  // Split backward (zero-bubble schedules, model/gpt_model.hpp's UnitHooks): B reads a unit's
  // parameters between these two (ZeRO-3 gathers them), and before_backward/after_backward
  // then bracket W, which writes its gradients and reads no parameter (no gather).
  void set_split_backward(bool on) { split_ = on; }
  void before_backward_input(int unit);
  void after_backward_input(int unit);
  void progress();
  // After the step's last backward: every gradient reduction complete, the owned gradient
  // shard final (up to the tensor-parallel sum of sequence-parallel partial gradients).
  void finish_gradients();
  // Sums the owned gradients of the TensorSpec::sp_partial tensors over the tensor-parallel
  // group (one all-reduce).
  void sum_sequence_parallel_gradients(Communicator& tp);
  // This rank's share of the squared gradient norm: each element of the model counted once
  // over the whole grid once the shares are summed over tp, pp and, when
  // norm_sums_over_dp(), dp. tp_rank: tensors replicated over tp count on rank 0 only.
  double grad_sq_norm_share(int tp_rank) const;
  bool norm_sums_over_dp() const;
  // AdamW on the owned shard with the gradients scaled by grad_scale, then the new parameters
  // to where forward reads them (all-gathered at stages 1 and 2).
  void apply(int step, double grad_scale);
  void end_step();
  // This rank's whole flat store (master copy, type G), every unit gathered over its group.
  std::vector<G> full_master() const;
  // Checkpoints (docs/checkpoint.md; zero_optimizer_state.cpp). save_state: the master, adam_m
  // and adam_v pieces of this rank's owned shard, each written by one rank: under ZeRO >= 1 the
  // shards partition the group; under ZeRO 0 every member owns the whole unit and unit u is
  // written by group rank u % group size (spreading the writes over the replicas); tensors
  // replicated over tensor parallelism only where tp_writer. load_state: this rank's owned
  // pieces from `source`, and the parameters it holds from the saved master copies (converted
  // to the training precision, as after an optimizer step). No communication.
  void save_state(model::StateSink& sink, bool tp_writer) const;
  void load_state(const model::StateSource& source);
  Communicator& group_of(int unit) const;

 private:
  struct Bucket {
    std::size_t begin, end;
    int first_unit;
    Request request;
    bool started = false;
  };
  struct PendingScatter {
    Request request;
    std::size_t unit;
    bool accumulate;
    int kind, slot;  // ZeRO-3 gradient workspace in use (kind, slot), or slot -1
  };
  std::pair<std::size_t, std::size_t> seg(std::size_t u) const {
    return {compact_[u], compact_[u] + shard_[u]};
  }
  int kind(std::size_t u) const { return expert_[u] ? 1 : 0; }
  void layout();
  void allocate_and_initialize();
  template <class V>
  void fill_compact(const V& dst, std::uint64_t seed);
  void reduce_scatter_unit(std::size_t u, const G* unit_grads, bool accumulate);
  void start_reduce_scatter(std::size_t u, const G* unit_grads, bool accumulate, int slot);
  void finish(PendingScatter& p);
  void complete_pending_if(const std::function<bool(const PendingScatter&)>& which);
  void gather_unit(int u);
  void zero_unit_grads(std::size_t u);
  // f(spec index, unit, compact begin, compact end, flat begin, flat end) for the owned part
  // of every tensor.
  template <class F>
  void for_each_owned_piece(F&& f) const;

  model::GptModel<T>& model_;
  model::TrainConfig tcfg_;
  ZeroOptions opt_;
  Communicator& dp_;
  Communicator* edp_;
  MPI_Comm dp_comm_, edp_comm_;
  std::vector<Communicator*> group_;  // per unit
  std::vector<bool> expert_;
  std::vector<std::size_t> shard_, own_, compact_;
  std::size_t compact_total_ = 0, max_shard_ = 0;
  std::size_t max_unit_[2] = {0, 0};  // per kind: dense units, expert units
  std::vector<Bucket> buckets_;
  GView grad_c_, tmp_c_, m_c_, v_c_, master_c_;
  // ZeRO-3 workspaces of the step: one parameter workspace per kind, one gradient workspace
  // per kind (two when overlapped, so one unit's reduce-scatter can run while the next
  // unit's backward writes the other). Vectors, not arrays of default-constructed Views: with
  // the Kokkos 4.6.99 develop snapshot tested, array elements of View were left with an
  // uninitialised reference-count tracker (docs/portability.md).
  std::vector<TView> param_ws_;
  std::vector<std::vector<GView>> grad_ws_;
  std::vector<int> ws_slot_;
  std::vector<int> unit_slot_;  // ZeRO-3: the gradient workspace slot a unit in backward uses
  std::vector<PendingScatter> pending_;
  TView param_c_;
  bool final_ = false;
  bool split_ = false;
};

}  // namespace paraxis::parallel
