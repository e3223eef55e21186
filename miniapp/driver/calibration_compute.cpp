// Calibration of the compute: this rank's shard running its stage's schedule alone (its
// kernels at the model's shapes, every collective replaced by a local copy, no transfers), the
// forward and backward of every chunk it holds, and the AdamW step over the parameters it owns
// (model::owned_range).
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "driver/calibration_detail.hpp"
#include "analysis/statistics.hpp"
#include "model/collectives.hpp"
#include "model/gpt_model.hpp"
#include "model/param_store.hpp"
#include "model/synthetic_corpus.hpp"
#include "model/trainer.hpp"
#include "parallel/communicator.hpp"
#include "parallel/parallel_trainer.hpp"
#include "parallel/watchdog.hpp"
#include "paraxis/kernels/adamw.hpp"
#include "paraxis/kernels/elementwise.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver {

namespace {

double now() {
  return model::steady_seconds();
}

// Device bytes, copied (the collectives' buffers are in the default memory space).
void copy_bytes(const void* s, void* r, std::size_t bytes) {
  if (s == r || bytes == 0) return;
  using Bytes =
      Kokkos::View<char*, Kokkos::DefaultExecutionSpace::memory_space, Kokkos::MemoryUnmanaged>;
  Kokkos::deep_copy(Bytes(static_cast<char*>(r), bytes),
                    Bytes(const_cast<char*>(static_cast<const char*>(s)), bytes));
}

// A tensor-parallel group whose collectives are local copies with the shapes of the real
// ones: the shard's kernels run at their sizes, with finite (if meaningless) values, and
// nothing is exchanged.
class LocalCopyGroup final : public model::CommGroup {
 public:
  LocalCopyGroup(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(const void* s, void* r, std::size_t n, model::DType t, model::ReduceOp) override {
    copy_bytes(s, r, n * model::size_of(t));
  }
  void reduce_scatter(const void* s, void* r, std::size_t n, model::DType t,
                      model::ReduceOp) override {
    const std::size_t b = n * model::size_of(t);
    copy_bytes(static_cast<const char*>(s) + static_cast<std::size_t>(rank_) * b, r, b);
  }
  void all_gather(const void* s, void* r, std::size_t n, model::DType t) override {
    const std::size_t b = n * model::size_of(t);
    for (int k = 0; k < size_; ++k)
      copy_bytes(s, static_cast<char*>(r) + static_cast<std::size_t>(k) * b, b);
  }
  void all_to_all_v(const void*, const int*, const int*, void*, const int*, const int*,
                    model::DType) override {
    throw std::logic_error("calibration: all-to-all on the tensor-parallel group");
  }

 private:
  int rank_, size_;
};

// An expert-parallel group in which every other rank routes as this one does: from each
// source, this rank receives the rows it sends itself. Its experts (only its own: E / ep of
// them, as in training) then compute ep times its own rows for them — on average the rows the
// whole group sends them — and the return trip hands back rows of the right shapes.
class MirrorExpertGroup final : public model::CommGroup {
 public:
  MirrorExpertGroup(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(const void*, void*, std::size_t, model::DType, model::ReduceOp) override {
    unused("all-reduce");
  }
  void reduce_scatter(const void*, void*, std::size_t, model::DType, model::ReduceOp) override {
    unused("reduce-scatter");
  }
  void all_gather(const void*, void*, std::size_t, model::DType) override { unused("all-gather"); }
  void all_to_all_v(const void* send, const int* send_counts, const int* send_displs, void* recv,
                    const int* recv_counts, const int* recv_displs, model::DType t) override {
    const std::size_t e = model::size_of(t);
    const char* own =
        static_cast<const char*>(send) + static_cast<std::size_t>(send_displs[rank_]) * e;
    for (int s = 0; s < size_; ++s) {
      const int n = std::min(recv_counts[s], send_counts[rank_]);
      copy_bytes(own, static_cast<char*>(recv) + static_cast<std::size_t>(recv_displs[s]) * e,
                 static_cast<std::size_t>(n) * e);
    }
  }

 private:
  [[noreturn]] static void unused(const char* op) {
    throw std::logic_error(std::string("calibration: ") + op + " on the expert-parallel group");
  }
  int rank_, size_;
};

// Unit u's initial values (the counter-based generator's) into dst, u.size elements.
template <class T>
void fill_unit(const model::ParamStore<T>& ps, std::uint64_t seed, const model::UnitSpec& u,
               T* dst) {
  using G = kernels::acc_t<T>;
  using Mem = Kokkos::DefaultExecutionSpace::memory_space;
  const auto values = ps.initial_values(seed, u.begin, u.begin + u.size);
  Kokkos::View<const G*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> host(values.data(),
                                                                          values.size());
  Kokkos::View<T*, Mem, Kokkos::MemoryUnmanaged> out(dst, values.size());
  if constexpr (std::is_same_v<T, G>) {
    Kokkos::deep_copy(out, host);
  } else {
    Kokkos::View<G*, Mem> tmp(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "paraxis::calib_init"), values.size());
    Kokkos::deep_copy(tmp, host);
    kernels::convert(Kokkos::DefaultExecutionSpace(), tmp, out);
    Kokkos::fence();
  }
}

// The optimizer's pieces on this rank at the point's ZeRO stage: the owned part of every
// tensor, as ZeroOptimizer::apply launches them.
struct OptimizerPiece {
  std::size_t count;
  bool decay;
  std::size_t flat;  // its offset in the flat parameter store
};

// ZeRO-1/2 in the training precision (no master copy) update the parameters in place, and the
// unit's group then all-gathers each rank's shard of them (ZeroOptimizer::apply): the peers read
// the pages this rank's next AdamW writes. Where MPI reads them straight from this process's
// memory (UCX's CMA on one host), those writes ran 1.8x as long as into a buffer no MPI call had
// read (docs/performance.md, "Output inside the timed steps, the VM's cores and MPI's
// zero-copy transport"), so the calibration replays the gathers between its passes, through
// the same MPI communicator the step's ZeroOptimizer uses.
struct ParamGather {
  std::size_t begin, shard;       // the unit's first element and each rank's share
  parallel::Communicator* group;  // its ZeRO group (OptimizerReplay::groups)
};

struct OptimizerReplay {
  std::vector<std::unique_ptr<parallel::Communicator>> groups;  // the distinct ZeRO groups
  std::vector<ParamGather> gathers;  // empty: nothing to replay (compact buffers)
  std::size_t flat_size = 0;
};

// rank_of(unit): this rank's place in the unit's ZeRO group (0 without a grid).
template <class T, class RankOf>
std::vector<OptimizerPiece> owned_pieces(const model::ParamStore<T>& ps, int zero, int dp, int ep,
                                         RankOf&& rank_of) {
  std::vector<OptimizerPiece> out;
  for (const auto& u : ps.units()) {
    const int group = model::zero_group_size(u, dp, ep);
    const model::FlatRange own = model::owned_range(u, zero, group, rank_of(u));
    for (int i = u.first_tensor; i < u.end_tensor; ++i) {
      const auto& s = ps.spec(i);
      const std::size_t a = std::max(own.begin, s.offset),
                        b = std::min(own.end, s.offset + s.size());
      if (a < b) out.push_back({b - a, s.weight_decay, a});
    }
  }
  return out;
}

// The point's optimizer step over the owned pieces (the median of 3), on buffers of their own,
// as the trainer runs it: the gradient's squared norm piece by piece (for clipping; one
// reduction to the host each), then AdamW; with a replay, AdamW writes each piece at its place
// in a flat store whose gathers run, untimed, before each pass.
template <class T>
double time_optimizer(const RunConfig& cfg, const std::vector<OptimizerPiece>& pieces,
                      const OptimizerReplay& replay, std::size_t& bytes) {
  double sink = 0;  // the norms, kept so that nothing is optimised away
  using G = kernels::acc_t<T>;
  using Mem = Kokkos::DefaultExecutionSpace::memory_space;
  const Kokkos::DefaultExecutionSpace space;
  std::size_t n = 0;
  for (const auto& pc : pieces) n += pc.count;
  Kokkos::View<G*, Mem> g("paraxis::calib_opt_g", n), m1("paraxis::calib_opt_m", n),
      v1("paraxis::calib_opt_v", n), w("paraxis::calib_opt_w", replay.gathers.empty() ? n : 0);
  Kokkos::View<T*, Mem> param("paraxis::calib_opt_param", std::is_same_v<T, G> ? 0 : n);
  Kokkos::View<G*, Mem> flat("paraxis::calib_opt_flat", replay.flat_size);
  Kokkos::deep_copy(flat, G(0.02));
  Kokkos::deep_copy(w, G(0.02));
  Kokkos::deep_copy(g, G(1e-3));
  bytes = (g.span() + m1.span() + v1.span() + w.span() + flat.span()) * sizeof(G) +
          param.span() * sizeof(T);
  std::vector<double> t;
  for (int rep = 0; rep < 3; ++rep) {
    Kokkos::fence();
    // As ZeroOptimizer::apply: each rank's shard, in place, to every rank of the unit's group.
    for (const auto& gather : replay.gathers) {
      G* unit = flat.data() + gather.begin;
      gather.group->all_gather(unit + gather.group->rank() * gather.shard, unit, gather.shard,
                               model::dtype_of<G>());
    }
    // Every peer done reading this rank's pages before they are written, as in the step (a
    // forward and backward lie between its gather and the next AdamW).
    for (const auto& group : replay.groups) group->barrier();
    const double t0 = now();
    std::size_t c = 0;
    double ss = 0;
    for (const auto& pc : pieces) {
      ss += kernels::sum_squares(space, Kokkos::subview(g, std::make_pair(c, c + pc.count)));
      c += pc.count;
    }
    sink += ss;
    c = 0;
    for (const auto& pc : pieces) {
      kernels::AdamWHyper h;
      h.lr = cfg.train.lr;
      h.beta1 = cfg.train.beta1;
      h.beta2 = cfg.train.beta2;
      h.eps = cfg.train.adam_eps;
      h.weight_decay = pc.decay ? cfg.train.weight_decay : 0.0;
      const auto r = std::make_pair(c, c + pc.count);
      const auto dst = replay.gathers.empty()
                           ? Kokkos::subview(w, r)
                           : Kokkos::subview(flat, std::make_pair(pc.flat, pc.flat + pc.count));
      kernels::adamw_update(space, h, rep + 1, 1.0, Kokkos::subview(g, r), Kokkos::subview(m1, r),
                            Kokkos::subview(v1, r), dst);
      c += pc.count;
    }
    if constexpr (!std::is_same_v<T, G>) kernels::convert(space, w, param);
    Kokkos::fence();
    t.push_back(now() - t0);
  }
  if (!std::isfinite(sink)) throw std::logic_error("calibration: the gradient norm is not finite");
  return median(t);
}

// Memory: never more than the step holds — the shard's parameters (ZeRO-3: one unit's
// workspace per kind, dense and expert, every unit bound to it, as training gathers them unit
// by unit), its gradients (ZeRO-2/3: the same, as training reduces them unit by unit), the
// experts of this rank only, activations as in the step; the optimizer is timed afterwards,
// the shard gone, on buffers of the owned size (and, replaying ZeRO-1/2's gathers, a flat store
// of the parameters, which the step holds too).
template <class T>
ComputeCalibration time_shard(const RunConfig& cfg, const parallel::GridCoords& coords,
                              const parallel::ProcessGrid* grid) {
  using G = kernels::acc_t<T>;
  using Mem = Kokkos::DefaultExecutionSpace::memory_space;
  const auto& mc = cfg.model;
  const auto& p = cfg.parallel;
  const auto& shape = p;
  std::vector<int> global_of;
  const model::ShardLayout layout = parallel::shard_layout_of(mc, p, coords, &global_of);
  LocalCopyGroup tp(coords.tp, shape.tp);
  MirrorExpertGroup ep(layout.ep_rank, layout.ep);
  model::ShardComms comms;
  if (layout.tp > 1) comms.tp = &tp;
  if (layout.ep > 1) comms.ep = &ep;
  ComputeCalibration out;
  const int total = shape.pp * p.virtual_stages;
  out.forward_s.assign(total, 0.0);
  out.backward_s.assign(total, 0.0);
  out.backward_weight_s.assign(total, 0.0);
  const int zero = p.effective_zero();  // as the trainer runs it
  std::vector<OptimizerPiece> pieces;
  OptimizerReplay replay;
  {
    model::GptModel<T> m(mc, cfg.train.micro_batch, layout, comms, zero >= 1 ? shape.dp : 1,
                         /*allocate_store=*/false);
    m.set_recompute(cfg.train.recompute, cfg.train.recompute_layers);  // timed as the step runs
    const bool split = schedule::splits_backward(p.schedule);
    m.set_split_backward(split);
    auto& ps = m.params();
    const auto& units = ps.units();
    const int nu = static_cast<int>(units.size());
    std::size_t biggest[2] = {0, 0};
    int largest[2] = {-1, -1}, router[2] = {-1, -1};
    for (int u = 0; u < nu; ++u) {
      const int k = units[u].expert ? 1 : 0;
      if (units[u].size > biggest[k]) {
        biggest[k] = units[u].size;
        largest[k] = u;
      }
      for (int i = units[u].first_tensor; i < units[u].end_tensor && router[k] < 0; ++i)
        if (ps.spec(i).name.find("moe.router") != std::string::npos) router[k] = u;
    }
    // ZeRO-3 computes every unit from one gathered workspace per kind: so does the
    // calibration, every unit bound to it, filled with the values of the largest unit and,
    // over its start, those of the first unit with a router (the same layout in every MoE
    // block: each router reads router weights and skew bias, so tokens route as in the step).
    const bool unit_params = zero >= 3;
    Kokkos::View<T*, Mem> dense_pws("paraxis::calib_param_ws", unit_params ? biggest[0] : 0),
        expert_pws("paraxis::calib_param_ws_expert", unit_params ? biggest[1] : 0);
    if (unit_params) {
      auto fill_ws = [&](int k, T* ws) {
        if (largest[k] >= 0) fill_unit(ps, cfg.train.seed, units[largest[k]], ws);
        if (router[k] >= 0 && router[k] != largest[k])
          fill_unit(ps, cfg.train.seed, units[router[k]], ws);
      };
      fill_ws(0, dense_pws.data());
      fill_ws(1, expert_pws.data());
      for (int u = 0; u < nu; ++u)
        ps.bind_unit_params(u, units[u].expert ? expert_pws.data() : dense_pws.data());
    } else {
      ps.allocate_params(m.ledger());
      for (const auto& u : units) fill_unit(ps, cfg.train.seed, u, ps.param.data() + u.begin);
    }
    const bool unit_grads = zero >= 2;
    Kokkos::View<G*, Mem> dense_ws("paraxis::calib_grad_ws", unit_grads ? biggest[0] : 0),
        expert_ws("paraxis::calib_grad_ws_expert", unit_grads ? biggest[1] : 0);
    if (unit_grads) {
      for (int u = 0; u < nu; ++u)
        ps.bind_unit_grads(u, units[u].expert ? expert_ws.data() : dense_ws.data());
    } else {
      ps.allocate_grads(m.ledger());
    }
    const std::size_t ws_bytes = (dense_ws.span() + expert_ws.span()) * sizeof(G) +
                                 (dense_pws.span() + expert_pws.span()) * sizeof(T);
    const int N = cfg.train.micro_batch * mc.seq_len;
    typename model::GptModel<T>::Tokens tokens("paraxis::calib_tokens", N),
        targets("paraxis::calib_targets", N);
    {
      model::SyntheticCorpus corpus(mc.vocab, cfg.train.corpus_branching, cfg.train.seed);
      auto th = Kokkos::create_mirror_view(tokens);
      auto gh = Kokkos::create_mirror_view(targets);
      model::sample_micro_batch(corpus, mc.seq_len, 0, cfg.train.micro_batch, th.data(), gh.data());
      Kokkos::deep_copy(tokens, th);
      Kokkos::deep_copy(targets, gh);
    }
    using Act = typename model::GptModel<T>::Act;
    const int chunks = m.chunks();
    // This stage's actions of its own schedule, transfers left out: the chunks' compute with
    // the memory traffic of the step (activation sets in flight, gradients accumulating), not
    // one micro-batch in a warm cache.
    const schedule::PipelineShape pshape = config::pipeline_shape(cfg.train, p);
    const auto actions = schedule::make_schedule(p.schedule, pshape)[coords.pp];
    std::vector<int> local_of(pshape.chunks(), -1);
    for (int c = 0; c < chunks; ++c) local_of[global_of[c]] = c;
    Act grad_in("paraxis::calib_grad_in", m.local_tokens(), mc.hidden);
    Act grad_out("paraxis::calib_grad_out", m.local_tokens(), mc.hidden);
    std::vector<std::vector<double>> fwd(chunks), bwd(chunks), wgt(chunks);
    const double ce_scale = 1.0 / (static_cast<double>(cfg.train.global_batch) * mc.seq_len);
    for (int rep = 0; rep < 4; ++rep) {  // the first is a warm-up
      ps.zero_grads();
      Kokkos::deep_copy(dense_ws, G(0));
      Kokkos::deep_copy(expert_ws, G(0));
      for (const auto& a : actions) {
        const int c = local_of[a.chunk];
        if (a.kind == schedule::ActionKind::forward) {
          if (!layout.chunks[c].embedding) Kokkos::deep_copy(m.chunk_input(c, a.micro_batch), T(0));
          Kokkos::fence();
          const double t0 = now();
          m.forward_chunk(c, a.micro_batch, tokens, targets);
          Kokkos::fence();
          if (rep > 0) fwd[c].push_back(now() - t0);
        } else if (a.kind == schedule::ActionKind::backward) {
          const Act dy = layout.chunks[c].head ? Act() : grad_out;
          const Act dx = layout.chunks[c].embedding ? Act() : grad_in;
          Kokkos::fence();
          const double t0 = now();
          if (split)
            m.backward_input_chunk(c, a.micro_batch, dy, dx, ce_scale, 0.0);
          else
            m.backward_chunk(c, a.micro_batch, dy, dx, ce_scale, 0.0);
          Kokkos::fence();
          if (rep > 0) bwd[c].push_back(now() - t0);
        } else if (a.kind == schedule::ActionKind::backward_weight) {
          Kokkos::fence();
          const double t0 = now();
          m.backward_weight_chunk(c, a.micro_batch);
          Kokkos::fence();
          if (rep > 0) wgt[c].push_back(now() - t0);
        }
      }
    }
    // The median over every micro-batch of the three passes: one interrupted action (a shared
    // machine, a page fault) moves a mean of a dozen samples by several percent, not a median.
    for (int c = 0; c < chunks; ++c) {
      out.forward_s[global_of[c]] = median(fwd[c]);
      out.backward_s[global_of[c]] = median(bwd[c]);
      if (split) out.backward_weight_s[global_of[c]] = median(wgt[c]);
    }
    out.peak_bytes = m.ledger().peak_total() + ws_bytes;
    // The ZeRO group of a unit: the data-parallel group, or for expert units with experts split
    // the expert-data-parallel one (ranks holding the same experts).
    const auto comm_of = [&](const model::UnitSpec& u) {
      return u.expert && layout.ep > 1 ? grid->edp() : grid->dp();
    };
    const auto group_of = [&](MPI_Comm comm) {
      for (const auto& g : replay.groups)
        if (g->mpi_comm() == comm) return g.get();
      replay.groups.push_back(
          parallel::make_communicator(config::CommBackend::mpi, comm, parallel::Axis::dp, nullptr));
      return replay.groups.back().get();
    };
    const auto rank_of = [&](const model::UnitSpec& u) {
      if (!grid || zero < 1) return 0;
      int r = 0;
      MPI_Comm_rank(comm_of(u), &r);
      return r;
    };
    pieces = owned_pieces(ps, zero, shape.dp, layout.ep, rank_of);
    using Mem = Kokkos::DefaultExecutionSpace::memory_space;
    if (grid && (zero == 1 || zero == 2) && std::is_same_v<T, G> &&
        Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible) {
      replay.flat_size = ps.elements();
      for (const auto& u : units) {
        const int group = model::zero_group_size(u, shape.dp, layout.ep);
        if (group > 1)
          replay.gathers.push_back(
              {u.begin, u.size / static_cast<std::size_t>(group), group_of(comm_of(u))});
      }
      if (replay.gathers.empty()) replay.flat_size = 0;
    }
  }
  // The optimizer, once the shard is gone.
  std::size_t opt_bytes = 0;
  out.optimizer_s = time_optimizer<T>(cfg, pieces, replay, opt_bytes);
  out.peak_bytes = std::max(out.peak_bytes, opt_bytes);
  return out;
}

}  // namespace

namespace calibration_detail {

std::string compute_key(const RunConfig& c) {
  std::ostringstream os;
  const auto& m = c.model;
  const auto& p = c.parallel;
  os << m.vocab << ' ' << m.seq_len << ' ' << m.hidden << ' ' << m.heads << ' ' << m.layers << ' '
     << m.ffn << ' ' << m.moe.experts << ' ' << m.moe.top_k << ' ' << m.moe.every << ' '
     << m.moe.capacity_factor << ' ' << m.moe.router_skew << " | " << c.train.micro_batch << ' '
     << model::to_string(c.train.precision) << ' ' << to_string(c.hardware.gemm) << " | " << p.tp
     << ' ' << p.pp << ' ' << p.dp << ' ' << p.ep << ' ' << p.zero << ' ' << p.virtual_stages << ' '
     << p.sequence_parallel << ' ' << config::to_string(p.order) << ' '
     << schedule::to_string(p.schedule) << ' ' << c.train.global_batch;
  for (int l : p.stage_layers) os << ' ' << l;
  return os.str();
}

ComputeCalibration calibrate_compute(const RunConfig& cfg, const parallel::GridCoords& coords,
                                     const parallel::ProcessGrid* grid) {
  const config::ParallelConfig& shape = cfg.parallel;
  ComputeCalibration c;
  switch (cfg.train.precision) {
    case model::Precision::fp64:
      c = time_shard<double>(cfg, coords, grid);
      break;
    case model::Precision::fp32:
      c = time_shard<float>(cfg, coords, grid);
      break;
    case model::Precision::bf16:
      c = time_shard<paraxis::bf16>(cfg, coords, grid);
      break;
  }
  // Every chunk's times from every rank that holds it: its tensor-parallel ranks, data-parallel
  // replicas and expert-parallel ranks compute it at the same time and meet in their
  // collectives. The slowest is the step's critical path; the mean what a rank computes on
  // average (the others wait the difference where they meet: experts loaded unevenly by a
  // skewed router, a replica on a busier core). The optimizer's time from the slowest rank.
  c.forward_mean_s = c.forward_s;
  c.backward_mean_s = c.backward_s;
  c.backward_weight_mean_s = c.backward_weight_s;
  if (grid) {
    const int n = static_cast<int>(c.forward_s.size());
    std::vector<double> holders(n, 0.0);
    for (int k = 0; k < n; ++k) holders[k] = c.forward_s[k] > 0 ? 1.0 : 0.0;
    namespace wd = parallel::watchdog;
    const char* what = "calibration: reduce the chunk times";
    wd::all_reduce(MPI_IN_PLACE, holders.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, what);
    wd::all_reduce(MPI_IN_PLACE, c.forward_s.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, what);
    wd::all_reduce(MPI_IN_PLACE, c.backward_s.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, what);
    wd::all_reduce(MPI_IN_PLACE, c.forward_mean_s.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                   what);
    wd::all_reduce(MPI_IN_PLACE, c.backward_mean_s.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                   what);
    wd::all_reduce(MPI_IN_PLACE, c.backward_weight_s.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                   what);
    wd::all_reduce(MPI_IN_PLACE, c.backward_weight_mean_s.data(), n, MPI_DOUBLE, MPI_SUM,
                   MPI_COMM_WORLD, what);
    for (int k = 0; k < n; ++k) {
      const double h = std::max(holders[k], 1.0);
      c.forward_mean_s[k] /= h;
      c.backward_mean_s[k] /= h;
      c.backward_weight_mean_s[k] /= h;
    }
    wd::all_reduce(MPI_IN_PLACE, &c.optimizer_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                   "calibration: slowest optimizer time");
    unsigned long long peak = c.peak_bytes;
    wd::all_reduce(MPI_IN_PLACE, &peak, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD,
                   "calibration: largest peak memory");
    c.peak_bytes = static_cast<std::size_t>(peak);
  }
  double busy = 0;
  for (std::size_t k = 0; k < c.forward_s.size(); ++k)
    busy += c.forward_mean_s[k] + c.backward_mean_s[k] + c.backward_weight_mean_s[k];
  const double tokens = static_cast<double>(cfg.train.micro_batch) * cfg.model.seq_len;
  // Model FLOPs of one micro-batch's forward + backward over every chunk, per rank.
  const double flops =
      3.0 * model::forward_flops_per_token(cfg.model) * tokens / (static_cast<double>(shape.tp));
  c.flops_per_s = busy > 0 ? flops / busy : 0;
  return c;
}

}  // namespace calibration_detail

}  // namespace paraxis::driver
