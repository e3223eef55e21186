// Calibration: collective size sweeps on the grid's communicators, and the shard's compute
// with its collectives replaced by local copies.
#include "driver/calibration.hpp"

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <sstream>
#include <type_traits>

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
#include "perfmodel/collectives.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver {

namespace {

double now() {
  return model::steady_seconds();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
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

// ---- communication
std::vector<perfmodel::Collective> ops_of(const std::string& axis) {
  using C = perfmodel::Collective;
  if (axis == "tp" || axis == "dp") return {C::all_reduce, C::reduce_scatter, C::all_gather};
  if (axis == "ep") return {C::all_to_all};
  return {C::point_to_point};
}

// Median over repetitions of the slowest rank's time of `op` with nccl-tests size S (bytes).
double time_collective(parallel::Communicator& c, MPI_Comm comm, const char* axis,
                       perfmodel::Collective op, std::size_t S) {
  using C = perfmodel::Collective;
  const int p = c.size();
  // fp32 elements; reduce-scatter / all-gather / all-to-all need a multiple of p.
  std::size_t n = std::max<std::size_t>(S / 4, static_cast<std::size_t>(p));
  n = (n + static_cast<std::size_t>(p) - 1) / static_cast<std::size_t>(p) *
      static_cast<std::size_t>(p);
  Kokkos::View<float*, Kokkos::DefaultExecutionSpace::memory_space> a("paraxis::calib_a", n),
      b("paraxis::calib_b", n);
  std::vector<int> counts(p, static_cast<int>(n / p)), displs(p);
  for (int k = 0; k < p; ++k) displs[k] = k * static_cast<int>(n / p);
  const int me = c.rank();
  auto once = [&]() {
    switch (op) {
      case C::all_reduce:
        c.all_reduce(a.data(), b.data(), n, model::DType::f32);
        break;
      case C::reduce_scatter:
        c.reduce_scatter(a.data(), b.data(), n / p, model::DType::f32);
        break;
      case C::all_gather:
        c.all_gather(a.data(), b.data(), n / p, model::DType::f32);
        break;
      case C::all_to_all:
        c.all_to_all_v(a.data(), counts.data(), displs.data(), b.data(), counts.data(),
                       displs.data(), model::DType::f32);
        break;
      default:  // ping-pong between ranks 0 and 1 of the group: half the round trip
        if (me == 0) {
          c.send(a.data(), n, model::DType::f32, 1, 91);
          c.recv(b.data(), n, model::DType::f32, 1, 92);
        } else if (me == 1) {
          c.recv(b.data(), n, model::DType::f32, 0, 91);
          c.send(a.data(), n, model::DType::f32, 0, 92);
        }
        break;
    }
  };
  Kokkos::fence();
  once();  // warm-up
  std::vector<double> times;
  // Small messages are latency-bound and noisy on a shared machine: more repetitions.
  const int reps = S <= (1u << 16) ? 9 : 5;
  for (int rep = 0; rep < reps; ++rep) {
    parallel::watchdog::barrier(comm, "calibration: barrier before a repetition", axis);
    const double t0 = now();
    once();
    Kokkos::fence();
    double t = now() - t0;
    if (op == C::point_to_point) t *= 0.5;
    parallel::watchdog::all_reduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm,
                                   "calibration: slowest rank's time", axis);
    times.push_back(t);
  }
  return median(times);
}

std::vector<CommCalibration> calibrate_axis(const std::string& axis, MPI_Comm comm,
                                            config::CommBackend backend) {
  auto c = parallel::make_communicator(backend, comm, parallel::Axis::world, nullptr);
  std::vector<CommCalibration> out;
  for (auto op : ops_of(axis)) {
    CommCalibration cc;
    cc.axis = axis;
    cc.op = perfmodel::to_string(op);
    cc.ranks = op == perfmodel::Collective::point_to_point ? 2 : c->size();
    for (std::size_t S = 1 << 10; S <= (1u << 22); S <<= 2)
      cc.samples.push_back(
          {static_cast<double>(S), time_collective(*c, comm, axis.c_str(), op, S)});
    const auto fit = perfmodel::fit_alpha_beta(op, cc.ranks, cc.samples);
    cc.alpha = fit.alpha;
    cc.beta = fit.beta;
    cc.latency = fit.latency;
    cc.beta_eff = fit.beta_eff;
    cc.rms_residual = fit.rms_residual;
    out.push_back(std::move(cc));
  }
  return out;
}

// ---- compute
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
// tensor, as ZeroOptimizer::apply launches them (for its group's rank 0).
struct OptimizerPiece {
  std::size_t count;
  bool decay;
};

template <class T>
std::vector<OptimizerPiece> owned_pieces(const model::ParamStore<T>& ps, int zero, int dp, int ep) {
  std::vector<OptimizerPiece> out;
  for (const auto& u : ps.units()) {
    const model::FlatRange own = model::owned_range(u, zero, model::zero_group_size(u, dp, ep), 0);
    for (int i = u.first_tensor; i < u.end_tensor; ++i) {
      const auto& s = ps.spec(i);
      const std::size_t a = std::max(own.begin, s.offset),
                        b = std::min(own.end, s.offset + s.size());
      if (a < b) out.push_back({b - a, s.weight_decay});
    }
  }
  return out;
}

// The point's AdamW step over the owned pieces (the median of 3), on buffers of their own.
template <class T>
double time_optimizer(const RunConfig& cfg, const std::vector<OptimizerPiece>& pieces,
                      std::size_t& bytes) {
  using G = kernels::acc_t<T>;
  using Mem = Kokkos::DefaultExecutionSpace::memory_space;
  const Kokkos::DefaultExecutionSpace space;
  std::size_t n = 0;
  for (const auto& pc : pieces) n += pc.count;
  Kokkos::View<G*, Mem> g("paraxis::calib_opt_g", n), m1("paraxis::calib_opt_m", n),
      v1("paraxis::calib_opt_v", n), w("paraxis::calib_opt_w", n);
  Kokkos::View<T*, Mem> param("paraxis::calib_opt_param", std::is_same_v<T, G> ? 0 : n);
  Kokkos::deep_copy(w, G(0.02));
  Kokkos::deep_copy(g, G(1e-3));
  bytes = 4 * n * sizeof(G) + param.span() * sizeof(T);
  std::vector<double> t;
  for (int rep = 0; rep < 3; ++rep) {
    Kokkos::fence();
    const double t0 = now();
    std::size_t c = 0;
    for (const auto& pc : pieces) {
      kernels::AdamWHyper h;
      h.lr = cfg.train.lr;
      h.beta1 = cfg.train.beta1;
      h.beta2 = cfg.train.beta2;
      h.eps = cfg.train.adam_eps;
      h.weight_decay = pc.decay ? cfg.train.weight_decay : 0.0;
      const auto r = std::make_pair(c, c + pc.count);
      kernels::adamw_update(space, h, rep + 1, 1.0, Kokkos::subview(g, r), Kokkos::subview(m1, r),
                            Kokkos::subview(v1, r), Kokkos::subview(w, r));
      c += pc.count;
    }
    if constexpr (!std::is_same_v<T, G>) kernels::convert(space, w, param);
    Kokkos::fence();
    t.push_back(now() - t0);
  }
  return median(t);
}

// Memory: never more than the step holds — the shard's parameters (ZeRO-3: one unit's
// workspace per kind, dense and expert, every unit bound to it, as training gathers them unit
// by unit), its gradients (ZeRO-2/3: the same, as training reduces them unit by unit), the
// experts of this rank only, activations as in the step; the optimizer is timed afterwards,
// the shard gone, on buffers of the owned size.
template <class T>
ComputeCalibration time_shard(const RunConfig& cfg, const parallel::GridCoords& coords) {
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
  const int zero = p.effective_zero();  // as the trainer runs it
  std::vector<OptimizerPiece> pieces;
  {
    model::GptModel<T> m(mc, cfg.train.micro_batch, layout, comms, zero >= 1 ? shape.dp : 1,
                         /*allocate_store=*/false);
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
    std::vector<std::vector<double>> fwd(chunks), bwd(chunks);
    const double ce_scale = 1.0 / (static_cast<double>(cfg.train.global_batch) * mc.seq_len);
    for (int rep = 0; rep < 3; ++rep) {  // the first is a warm-up
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
          m.backward_chunk(c, a.micro_batch, dy, dx, ce_scale, 0.0);
          Kokkos::fence();
          if (rep > 0) bwd[c].push_back(now() - t0);
        }
      }
    }
    for (int c = 0; c < chunks; ++c) {
      out.forward_s[global_of[c]] = mean(fwd[c]);
      out.backward_s[global_of[c]] = mean(bwd[c]);
    }
    out.peak_bytes = m.ledger().peak_total() + ws_bytes;
    pieces = owned_pieces(ps, zero, shape.dp, layout.ep);
  }
  // The optimizer, once the shard is gone.
  std::size_t opt_bytes = 0;
  out.optimizer_s = time_optimizer<T>(cfg, pieces, opt_bytes);
  out.peak_bytes = std::max(out.peak_bytes, opt_bytes);
  return out;
}

std::string compute_key(const RunConfig& c) {
  std::ostringstream os;
  const auto& m = c.model;
  const auto& p = c.parallel;
  os << m.vocab << ' ' << m.seq_len << ' ' << m.hidden << ' ' << m.heads << ' ' << m.layers << ' '
     << m.ffn << ' ' << m.moe.experts << ' ' << m.moe.top_k << ' ' << m.moe.every << ' '
     << m.moe.capacity_factor << ' ' << m.moe.router_skew << " | " << c.train.micro_batch << ' '
     << model::to_string(c.train.precision) << ' ' << c.hardware.gemm << " | " << p.tp << ' '
     << p.pp << ' ' << p.dp << ' ' << p.ep << ' ' << p.zero << ' ' << p.virtual_stages << ' '
     << p.sequence_parallel << ' ' << config::to_string(p.order) << ' '
     << schedule::to_string(p.schedule) << ' ' << c.train.global_batch;
  for (int l : p.stage_layers) os << ' ' << l;
  return os.str();
}

}  // namespace

Calibration Calibrator::calibrate(const RunConfig& cfg, const parallel::ProcessGrid* grid) {
  Calibration out;
  const double t0 = now();
  bool measured = false;
  const config::ParallelConfig& shape = cfg.parallel;  // the grid's shape, when there is one
  parallel::GridCoords coords;
  if (grid) {
    coords = grid->coords();
    const std::pair<const char*, MPI_Comm> axes[] = {
        {"tp", grid->tp()}, {"pp", grid->pp()}, {"dp", grid->dp()}, {"ep", grid->ep()}};
    const int sizes[] = {shape.tp, shape.pp, shape.dp, shape.ep};
    for (int a = 0; a < 4; ++a) {
      if (sizes[a] < 2) continue;
      // The communicator's shape: its axis, size, the rank order and the backend.
      const std::string key = std::string(axes[a].first) + ' ' + std::to_string(sizes[a]) + ' ' +
                              std::to_string(shape.tp) + 'x' + std::to_string(shape.pp) + 'x' +
                              std::to_string(shape.dp) + 'x' + std::to_string(shape.ep) + ' ' +
                              config::to_string(shape.order) + ' ' +
                              config::to_string(cfg.comm.backend);
      auto it = comm_cache_.find(key);
      if (it == comm_cache_.end()) {
        // Rank 0's group speaks for the axis (every group of an axis runs at once, as in
        // training); its fit is broadcast so every rank stores the same.
        // The pipeline's transfers always use MPI (parallel_trainer.cpp).
        const config::CommBackend backend = a == 1 ? config::CommBackend::mpi : cfg.comm.backend;
        auto fits = calibrate_axis(axes[a].first, axes[a].second, backend);
        for (auto& f : fits) {
          double v[4] = {f.alpha, f.beta, f.latency, f.beta_eff};
          parallel::watchdog::broadcast(v, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD,
                                        "calibration: broadcast a fit");
          f.alpha = v[0];
          f.beta = v[1];
          f.latency = v[2];
          f.beta_eff = v[3];
          for (auto& s : f.samples)
            parallel::watchdog::broadcast(&s.second, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD,
                                          "calibration: broadcast a sample");
          parallel::watchdog::broadcast(&f.rms_residual, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD,
                                        "calibration: broadcast a fit's residual");
        }
        it = comm_cache_.emplace(key, std::move(fits)).first;
        measured = true;
      }
      out.comm.insert(out.comm.end(), it->second.begin(), it->second.end());
    }
  }
  const std::string ckey = compute_key(cfg);
  auto it = compute_cache_.find(ckey);
  if (it == compute_cache_.end()) {
    ComputeCalibration c;
    switch (cfg.train.precision) {
      case model::Precision::fp64:
        c = time_shard<double>(cfg, coords);
        break;
      case model::Precision::fp32:
        c = time_shard<float>(cfg, coords);
        break;
      case model::Precision::bf16:
        c = time_shard<paraxis::bf16>(cfg, coords);
        break;
    }
    // Every chunk's times from the ranks that hold it: tensor-parallel rank 0 of the first
    // expert-parallel group (replica 0 without experts split). Its ranks' experts may be
    // loaded unevenly (router skew): the slowest is the step's critical path, the mean what
    // a rank computes on average (the others wait in the all-to-all for the rest). The
    // optimizer's time from the slowest rank.
    const bool speaks = coords.tp == 0 && coords.edp == 0;
    if (!speaks) {
      std::fill(c.forward_s.begin(), c.forward_s.end(), 0.0);
      std::fill(c.backward_s.begin(), c.backward_s.end(), 0.0);
    }
    c.forward_mean_s = c.forward_s;
    c.backward_mean_s = c.backward_s;
    if (grid) {
      const int n = static_cast<int>(c.forward_s.size());
      namespace wd = parallel::watchdog;
      const char* what = "calibration: reduce the chunk times";
      wd::all_reduce(MPI_IN_PLACE, c.forward_s.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                     what);
      wd::all_reduce(MPI_IN_PLACE, c.backward_s.data(), n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                     what);
      wd::all_reduce(MPI_IN_PLACE, c.forward_mean_s.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                     what);
      wd::all_reduce(MPI_IN_PLACE, c.backward_mean_s.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                     what);
      for (int k = 0; k < n; ++k) {
        c.forward_mean_s[k] /= shape.ep;
        c.backward_mean_s[k] /= shape.ep;
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
      busy += c.forward_mean_s[k] + c.backward_mean_s[k];
    const double tokens = static_cast<double>(cfg.train.micro_batch) * cfg.model.seq_len;
    // Model FLOPs of one micro-batch's forward + backward over every chunk, per rank.
    const double flops =
        3.0 * model::forward_flops_per_token(cfg.model) * tokens / (static_cast<double>(shape.tp));
    c.flops_per_s = busy > 0 ? flops / busy : 0;
    it = compute_cache_.emplace(ckey, std::move(c)).first;
    measured = true;
  }
  out.compute = it->second;
  if (measured) out.seconds = now() - t0;
  return out;
}

nlohmann::json calibration_to_json(const Calibration& c) {
  nlohmann::json comm = nlohmann::json::object();
  for (const auto& f : c.comm) {
    nlohmann::json s = nlohmann::json::array();
    for (const auto& [S, t] : f.samples) s.push_back({S, t});
    comm[f.axis][f.op] = {{"ranks", f.ranks},
                          {"alpha_s", f.alpha},
                          {"beta_s_per_byte", f.beta},
                          {"latency_s", f.latency},
                          {"beta_eff_s_per_byte", f.beta_eff},
                          {"rms_residual_s", f.rms_residual},
                          {"samples", s}};
  }
  return {{"seconds", c.seconds},
          {"comm", comm},
          {"compute",
           {{"forward_s_per_chunk", c.compute.forward_s},
            {"backward_s_per_chunk", c.compute.backward_s},
            {"forward_mean_s_per_chunk", c.compute.forward_mean_s},
            {"backward_mean_s_per_chunk", c.compute.backward_mean_s},
            {"optimizer_s", c.compute.optimizer_s},
            {"flops_per_s", c.compute.flops_per_s},
            {"peak_bytes", c.compute.peak_bytes}}}};
}

Calibration calibration_from_json(const nlohmann::json& j) {
  Calibration c;
  c.seconds = j.value("seconds", 0.0);
  for (const auto& [axis, ops] : j.at("comm").items())
    for (const auto& [op, f] : ops.items()) {
      CommCalibration cc;
      cc.axis = axis;
      cc.op = op;
      cc.ranks = f.at("ranks");
      cc.alpha = f.at("alpha_s");
      cc.beta = f.at("beta_s_per_byte");
      cc.latency = f.value("latency_s", 0.0);
      cc.beta_eff = f.value("beta_eff_s_per_byte", 0.0);
      cc.rms_residual = f.value("rms_residual_s", 0.0);
      for (const auto& s : f.at("samples")) cc.samples.push_back({s.at(0), s.at(1)});
      c.comm.push_back(std::move(cc));
    }
  const auto& k = j.at("compute");
  c.compute.forward_s = k.at("forward_s_per_chunk").get<std::vector<double>>();
  c.compute.backward_s = k.at("backward_s_per_chunk").get<std::vector<double>>();
  c.compute.forward_mean_s = k.value("forward_mean_s_per_chunk", c.compute.forward_s);
  c.compute.backward_mean_s = k.value("backward_mean_s_per_chunk", c.compute.backward_s);
  c.compute.optimizer_s = k.at("optimizer_s");
  c.compute.flops_per_s = k.at("flops_per_s");
  c.compute.peak_bytes = k.value("peak_bytes", std::size_t{0});
  return c;
}

}  // namespace paraxis::driver
