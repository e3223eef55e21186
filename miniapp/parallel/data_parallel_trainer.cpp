// DataParallelTrainer: the single-rank step of model/trainer.cpp, with the gradient, optimizer
// and parameter traffic of each ZeRO stage over the data-parallel communicator.
#include "parallel/data_parallel_trainer.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/gpt_model.hpp"
#include "parallel/communicator.hpp"
#include "paraxis/kernels/adamw.hpp"
#include "paraxis/kernels/elementwise.hpp"

namespace paraxis::parallel {

namespace {

using model::MemCategory;

template <class T>
class DataParallelTrainer final : public model::Trainer, private model::UnitHooks {
 public:
  using Space = Kokkos::DefaultExecutionSpace;
  using G = kernels::acc_t<T>;
  using Mem = Space::memory_space;
  using TView = Kokkos::View<T*, Kokkos::LayoutRight, Mem>;
  using GView = Kokkos::View<G*, Kokkos::LayoutRight, Mem>;
  using Tokens = typename model::GptModel<T>::Tokens;
  static constexpr bool kMasterCopy = !std::is_same_v<T, G>;

  DataParallelTrainer(const model::ModelConfig& m, const model::TrainConfig& t,
                      const ProcessGrid& grid, const DataParallelOptions& opt)
      : mcfg_(m),
        tcfg_(t),
        opt_(opt),
        dp_size_(grid.shape().dp),
        dp_rank_(grid.coords().dp),
        corpus_(m.vocab, t.corpus_branching, t.seed),
        model_(m, t.micro_batch, opt.zero >= 1 ? grid.shape().dp : 1, /*allocate_store=*/false),
        tokens_("paraxis::tokens", static_cast<std::size_t>(t.micro_batch) * m.seq_len),
        targets_("paraxis::targets", tokens_.extent(0)) {
    if (grid.shape().tp != 1 || grid.shape().pp != 1)
      throw std::invalid_argument("data-parallel trainer: tp and pp must be 1");
    if (t.global_batch % (dp_size_ * t.micro_batch) != 0)
      throw std::invalid_argument(
          "train.global_batch must be a multiple of parallel.dp * train.micro_batch");
    dp_ = make_communicator(opt.backend, grid.dp(), Axis::dp, &log_);
    metrics_ = make_communicator("mpi", grid.dp(), Axis::world, nullptr);
    layout();
    allocate_and_initialize();
    if (opt_.zero == 3 || opt_.overlap) model_.set_hooks(this);
  }

  model::StepResult step() override {
    Kokkos::Profiling::pushRegion("paraxis::step");
    model::StepResult r;
    r.step = step_++;
    const int S = mcfg_.seq_len;
    const int local_micro = tcfg_.global_batch / (dp_size_ * tcfg_.micro_batch);
    const int total_micro = tcfg_.global_batch / tcfg_.micro_batch;
    const double ce_scale = 1.0 / (static_cast<double>(tcfg_.global_batch) * S);
    const double aux_scale = mcfg_.moe.aux_loss_coef / total_micro;
    const double f0 = model_.forward_seconds(), b0 = model_.backward_seconds();
    Kokkos::fence();
    const double t0 = model::steady_seconds();
    begin_step_buffers();
    auto tok_h = Kokkos::create_mirror_view(tokens_);
    auto tgt_h = Kokkos::create_mirror_view(targets_);
    const int E = mcfg_.moe.experts;
    model::MicroBatchTally tally(E);
    const std::uint64_t first =
        static_cast<std::uint64_t>(r.step) * tcfg_.global_batch +
        static_cast<std::uint64_t>(dp_rank_) * (tcfg_.global_batch / dp_size_);
    for (int mb = 0; mb < local_micro; ++mb) {
      last_micro_ = mb == local_micro - 1;
      model::sample_micro_batch(corpus_, S,
                                first + static_cast<std::uint64_t>(mb) * tcfg_.micro_batch,
                                tcfg_.micro_batch, tok_h.data(), tgt_h.data());
      Kokkos::deep_copy(tokens_, tok_h);
      Kokkos::deep_copy(targets_, tgt_h);
      tally.add(model_.forward_backward(tokens_, targets_, ce_scale, aux_scale));
      if (opt_.zero == 2 && !opt_.overlap) reduce_scatter_all_units(/*accumulate=*/true);
      if (opt_.zero >= 2 && opt_.overlap) {
        complete_pending();
        if (opt_.zero == 2) model_.params().zero_grads();
      }
    }
    Kokkos::Profiling::pushRegion("paraxis::grad_sync");
    if (opt_.zero == 0) finish_all_reduce();
    if (opt_.zero == 1 && !opt_.overlap) reduce_scatter_all_units(/*accumulate=*/false);
    complete_pending();
    Kokkos::Profiling::popRegion();

    Kokkos::Profiling::pushRegion("paraxis::optimizer");
    const double opt_begin = model::steady_seconds();
    const Space space;
    double ss = kernels::sum_squares(space, grad_c_);
    if (opt_.zero >= 1) ss = dp_->all_reduce_sum(ss);  // disjoint shards: each element once
    r.grad_norm = std::sqrt(ss);
    double scale = 1.0;
    if (tcfg_.grad_clip > 0 && r.grad_norm > tcfg_.grad_clip)
      scale = tcfg_.grad_clip / (r.grad_norm + 1e-6);
    adamw(r.step + 1, scale);
    publish_params();
    Kokkos::fence();
    const double opt_end = model::steady_seconds();
    Kokkos::Profiling::popRegion();
    end_step_buffers();

    // Metrics: the loss of the whole global batch, the same on every rank.
    double sums[2] = {tally.ce_sum, tally.aux_sum};
    std::vector<long long> moe_counts = tally.expert_tokens;  // + dropped, reduced together
    moe_counts.push_back(tally.dropped);
    r.routing = std::move(tally.routing);
    metrics_->all_reduce(sums, sums, 2, DType::f64);
    metrics_->all_reduce(moe_counts.data(), moe_counts.data(), moe_counts.size(), DType::i64);
    if (record_routing_ && !r.routing.empty()) {
      // Rank d holds global micro-batches d*m ... (d+1)*m - 1: gathering in rank order gives
      // the single-rank order.
      std::vector<int> all(r.routing.size() * static_cast<std::size_t>(dp_size_));
      metrics_->all_gather(r.routing.data(), all.data(), r.routing.size(), DType::i32);
      r.routing.swap(all);
    }
    r.optimizer_s = opt_end - opt_begin;
    r.time_s = model::steady_seconds() - t0;
    r.forward_s = model_.forward_seconds() - f0;
    r.backward_s = model_.backward_seconds() - b0;
    r.spans = model_.take_spans();
    r.spans.push_back({"optimizer", opt_begin, opt_end});
    r.lm_loss = sums[0] * ce_scale;
    r.aux_loss = sums[1] / total_micro;
    r.loss = r.lm_loss + mcfg_.moe.aux_loss_coef * r.aux_loss;
    if (E > 0) {
      std::vector<long long> per_expert(moe_counts.begin(), moe_counts.begin() + E);
      r.moe = model::moe_step_stats(per_expert, moe_counts[E]);
    }
    // Compute: the fenced phases less the communication they waited for inside them.
    double blocked_inside = 0;
    for (const auto& e : log_.events())
      for (const auto& sp : r.spans)
        if (e.begin >= sp.begin && e.begin < sp.end) {
          blocked_inside += e.exposed;
          break;
        }
    r.compute_s = r.forward_s + r.backward_s + r.optimizer_s - blocked_inside;
    for (const auto& e : log_.events())
      r.comm_spans.push_back({to_string(e.axis == Axis::edp ? Axis::dp : e.axis), e.op, e.begin,
                              e.end, e.exposed, e.bytes});
    const auto totals = log_.totals();
    for (Axis a : {Axis::tp, Axis::pp, Axis::dp, Axis::ep}) {
      const auto& x = totals[static_cast<std::size_t>(a)];
      r.comm[to_string(a)] = {x.time_s, x.exposed_s, x.bytes, x.calls};
    }
    log_.clear();
    Kokkos::Profiling::popRegion();
    return r;
  }

  void record_routing(bool on) override {
    record_routing_ = on;
    model_.set_record_routing(on);
  }

  std::vector<double> parameters() const override {
    // The master copy of every unit, gathered: flat G values on the host.
    const auto& ps = model_.params();
    std::vector<G> flat(ps.elements());
    auto& self = const_cast<DataParallelTrainer&>(*this);
    for (std::size_t u = 0; u < ps.units().size(); ++u) {
      const auto& U = ps.units()[u];
      GView full("paraxis::gather_master", U.size);
      if (!kMasterCopy && opt_.zero < 3) {
        kernels::convert(
            Space(), Kokkos::subview(ps.param, std::make_pair(U.begin, U.begin + U.size)), full);
      } else {
        GView mine("paraxis::gather_mine", shard_[u]);
        if constexpr (kMasterCopy) {
          Kokkos::deep_copy(mine, Kokkos::subview(master_c_, seg(u)));
        } else {
          kernels::convert(Space(), Kokkos::subview(param_c_, seg(u)), mine);
        }
        Kokkos::fence();
        if (opt_.zero == 0) {
          Kokkos::deep_copy(full, mine);  // unsharded: every rank holds the whole unit
        } else {
          // Through host memory: the metrics communicator is plain MPI, which need not be
          // GPU-aware. This runs once per point, for --verify and tests.
          auto mine_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), mine);
          self.metrics_->all_gather(mine_h.data(), flat.data() + U.begin, shard_[u], dtype_of<G>());
          continue;
        }
      }
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), full);
      std::copy(h.data(), h.data() + U.size, flat.begin() + static_cast<std::ptrdiff_t>(U.begin));
    }
    std::vector<double> out;
    out.reserve(parameter_count());
    for (const auto& s : ps.specs())
      for (std::size_t i = 0; i < s.size(); ++i)
        out.push_back(static_cast<double>(flat[s.offset + i]));
    return out;
  }

  std::size_t parameter_count() const override {
    std::size_t n = 0;
    for (const auto& s : model_.params().specs()) n += s.size();
    return n;
  }

  model::MemoryReport memory() const override { return model::memory_report(model_.ledger()); }

  const model::SyntheticCorpus& corpus() const override { return corpus_; }

 private:
  // ---- layout: per unit, the shard this rank owns and where it sits in the compact buffers.
  void layout() {
    const auto& units = model_.params().units();
    const int shards = opt_.zero >= 1 ? dp_size_ : 1;
    const int me = opt_.zero >= 1 ? dp_rank_ : 0;
    std::size_t c = 0;
    for (const auto& U : units) {
      const std::size_t s = U.size / static_cast<std::size_t>(shards);
      shard_.push_back(s);
      own_.push_back(U.begin + static_cast<std::size_t>(me) * s);
      compact_.push_back(c);
      c += s;
      max_unit_ = std::max(max_unit_, U.size);
      max_shard_ = std::max(max_shard_, s);
    }
    compact_total_ = c;
    // Buckets for the stage-0 all-reduce: runs of whole units from the last (whose gradients
    // are final first in backward) to the first, each up to bucket_mb.
    const std::size_t cap = static_cast<std::size_t>(opt_.bucket_mb * 1024 * 1024 / sizeof(G));
    for (int u = static_cast<int>(units.size()) - 1; u >= 0; --u) {
      if (buckets_.empty() || (buckets_.back().end - units[u].begin) > cap) {
        buckets_.push_back({units[u].begin, units[u].begin + units[u].size, u, Request(), false});
      } else {
        buckets_.back().begin = units[u].begin;
        buckets_.back().first_unit = u;
      }
    }
  }
  std::pair<std::size_t, std::size_t> seg(std::size_t u) const {
    return {compact_[u], compact_[u] + shard_[u]};
  }

  void allocate_and_initialize() {
    auto& ps = model_.params();
    auto& led = model_.ledger();
    const std::uint64_t seed = tcfg_.seed;
    const auto& units = ps.units();
    if (opt_.zero <= 2) {
      ps.allocate_params(led);
      const auto values = ps.initial_values(seed, 0, ps.elements());
      Kokkos::View<const G*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> h(values.data(),
                                                                           values.size());
      GView tmp("paraxis::init", values.size());
      Kokkos::deep_copy(tmp, h);
      kernels::convert(Space(), tmp, ps.param);
    } else {
      param_c_ = led.track(MemCategory::params, TView("paraxis::param_shard", compact_total_));
      fill_compact(param_c_, seed);
    }
    if (opt_.zero <= 1) ps.allocate_grads(led);
    if (opt_.zero == 0) {
      grad_c_ = ps.grad;  // no sharding: the compact layout is the flat one
    } else {
      grad_c_ = led.track(MemCategory::grads, GView("paraxis::grad_shard", compact_total_));
    }
    m_c_ = led.track(MemCategory::optimizer, GView("paraxis::adam_m", compact_total_));
    v_c_ = led.track(MemCategory::optimizer, GView("paraxis::adam_v", compact_total_));
    if constexpr (kMasterCopy) {
      master_c_ = led.track(MemCategory::optimizer, GView("paraxis::master_shard", compact_total_));
      fill_compact(master_c_, seed);
    }
    (void)units;
    Kokkos::fence();
  }

  template <class V>
  void fill_compact(const V& dst, std::uint64_t seed) {
    const auto& ps = model_.params();
    std::vector<G> all(compact_total_);
    for (std::size_t u = 0; u < ps.units().size(); ++u) {
      const auto vals = ps.initial_values(seed, own_[u], own_[u] + shard_[u]);
      std::copy(vals.begin(), vals.end(), all.begin() + static_cast<std::ptrdiff_t>(compact_[u]));
    }
    Kokkos::View<const G*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> h(all.data(), all.size());
    GView tmp("paraxis::init", all.size());
    Kokkos::deep_copy(tmp, h);
    kernels::convert(Space(), tmp, dst);
  }

  // ---- per-step buffers that must not stay resident between steps.
  void begin_step_buffers() {
    auto& ps = model_.params();
    auto& led = model_.ledger();
    if (opt_.zero == 2) ps.allocate_grads(led);  // zero-initialised
    // Receive buffer of the per-micro-batch reduce-scatter: one shard, or (overlapped) one
    // per unit, since several are in flight at once.
    if (opt_.zero >= 2)
      tmp_c_ = led.track(MemCategory::grads,
                         GView("paraxis::grad_recv", opt_.overlap ? compact_total_ : max_shard_));
    if (opt_.zero == 3) {
      param_ws_ = led.track(MemCategory::params, TView("paraxis::param_gather", max_unit_));
      // Overlapped: two gradient workspaces, so one unit's reduce-scatter can run while the
      // next unit's backward writes the other.
      for (int k = 0; k < (opt_.overlap ? 2 : 1); ++k)
        grad_ws_.push_back(led.track(MemCategory::grads, GView("paraxis::grad_unit", max_unit_)));
    }
    if (opt_.zero <= 1) ps.zero_grads();
    if (opt_.zero >= 1) Kokkos::deep_copy(grad_c_, G(0));
  }
  void end_step_buffers() {
    auto& ps = model_.params();
    auto& led = model_.ledger();
    if (opt_.zero == 2) ps.release_grads(led);
    if (opt_.zero >= 2) {
      led.release(MemCategory::grads, tmp_c_.span() * sizeof(G));
      tmp_c_ = GView();
    }
    if (opt_.zero == 3) {
      led.release(MemCategory::params, param_ws_.span() * sizeof(T));
      param_ws_ = TView();
      for (auto& ws : grad_ws_) led.release(MemCategory::grads, ws.span() * sizeof(G));
      grad_ws_.clear();
    }
  }

  // ---- gradient traffic
  void reduce_scatter_unit(std::size_t u, const G* unit_grads, bool accumulate) {
    const Space space;
    Kokkos::fence();
    if (accumulate) {
      dp_->reduce_scatter(unit_grads, tmp_c_.data(), shard_[u], dtype_of<G>());
      kernels::add_inplace(space, Kokkos::subview(grad_c_, seg(u)),
                           Kokkos::subview(tmp_c_, std::make_pair(std::size_t(0), shard_[u])));
    } else {
      dp_->reduce_scatter(unit_grads, grad_c_.data() + compact_[u], shard_[u], dtype_of<G>());
    }
  }
  void reduce_scatter_all_units(bool accumulate) {
    auto& ps = model_.params();
    for (std::size_t u = 0; u < ps.units().size(); ++u)
      reduce_scatter_unit(u, ps.grad.data() + ps.units()[u].begin, accumulate);
    if (opt_.zero == 2) ps.zero_grads();  // next micro-batch starts from zero
  }
  void finish_all_reduce() {
    auto& ps = model_.params();
    Kokkos::fence();
    for (auto& b : buckets_) {
      if (b.request.active()) {
        dp_->wait(b.request);
      } else if (!b.started) {
        dp_->all_reduce(ps.grad.data() + b.begin, ps.grad.data() + b.begin, b.end - b.begin,
                        dtype_of<G>());
      }
      b.started = false;
    }
  }

  // ---- UnitHooks: ZeRO-3 gathers, and stage-0 overlapped bucket reductions.
  void gather_unit(int u) {
    Kokkos::fence();
    dp_->all_gather(param_c_.data() + compact_[u], param_ws_.data(), shard_[u], dtype_of<T>());
    model_.params().bind_unit_params(u, param_ws_.data());
  }
  void before_forward(int u) override {
    if (opt_.zero == 3) gather_unit(u);
  }
  void after_forward(int u) override {
    if (opt_.zero == 3) model_.params().bind_unit_params(u, nullptr);
  }
  void before_backward(int u) override {
    if (opt_.zero == 3) {
      gather_unit(u);
      ws_slot_ = opt_.overlap ? 1 - ws_slot_ : 0;
      complete_pending_slot(ws_slot_);  // the workspace must be free before it is rewritten
      auto& ws = grad_ws_[ws_slot_];
      Kokkos::deep_copy(
          Kokkos::subview(ws, std::make_pair(std::size_t(0), model_.params().units()[u].size)),
          G(0));
      model_.params().bind_unit_grads(u, ws.data());
    }
    if (opt_.overlap) progress();
  }
  void after_backward(int u) override {
    const std::size_t uu = static_cast<std::size_t>(u);
    auto& ps = model_.params();
    if (opt_.zero == 3) {
      if (opt_.overlap) {
        start_reduce_scatter(uu, grad_ws_[ws_slot_].data(), /*accumulate=*/true, ws_slot_);
      } else {
        reduce_scatter_unit(uu, grad_ws_[0].data(), /*accumulate=*/true);
      }
      ps.bind_unit_grads(u, nullptr);
      ps.bind_unit_params(u, nullptr);
    }
    if (opt_.overlap && opt_.zero == 2)
      start_reduce_scatter(uu, ps.grad.data() + ps.units()[uu].begin, /*accumulate=*/true, -1);
    if (opt_.overlap && opt_.zero == 1 && last_micro_)
      start_reduce_scatter(uu, ps.grad.data() + ps.units()[uu].begin, /*accumulate=*/false, -1);
    if (opt_.overlap && opt_.zero == 0 && last_micro_) {
      // A bucket's gradients are final once the backward of its first unit is done.
      for (auto& b : buckets_)
        if (b.first_unit == u && !b.started) {
          Kokkos::fence();
          b.request = dp_->iall_reduce(ps.grad.data() + b.begin, ps.grad.data() + b.begin,
                                       b.end - b.begin, dtype_of<G>());
          b.started = true;
        }
    }
    if (opt_.overlap) progress();
  }

  // ---- overlapped reduce-scatters: started in after_backward, completed (and accumulated
  // into the owned gradient shard, in unit order per micro-batch, as without overlap) before
  // their buffers are reused and before the optimizer.
  struct PendingScatter {
    Request request;
    std::size_t unit;
    bool accumulate;
    int slot;  // ZeRO-3 gradient workspace in use, or -1
  };
  void start_reduce_scatter(std::size_t u, const G* unit_grads, bool accumulate, int slot) {
    Kokkos::fence();
    G* recv = accumulate ? tmp_c_.data() + compact_[u] : grad_c_.data() + compact_[u];
    pending_.push_back(
        {dp_->ireduce_scatter(unit_grads, recv, shard_[u], dtype_of<G>()), u, accumulate, slot});
  }
  void finish(PendingScatter& p) {
    dp_->wait(p.request);
    if (p.accumulate)
      kernels::add_inplace(Space(), Kokkos::subview(grad_c_, seg(p.unit)),
                           Kokkos::subview(tmp_c_, seg(p.unit)));
  }
  void complete_pending() {
    for (auto& p : pending_) finish(p);
    pending_.clear();
  }
  void complete_pending_slot(int slot) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->slot == slot) {
        finish(*it);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // MPI makes progress only inside MPI calls (no progress thread under Serial Kokkos): poke
  // every outstanding request between units.
  void progress() {
    for (auto& b : buckets_)
      if (b.request.active()) dp_->test(b.request);
    for (auto& p : pending_)
      if (p.request.active()) dp_->test(p.request);
  }

  // ---- optimizer over the owned shard of every tensor
  void adamw(int step, double grad_scale) {
    const Space space;
    auto& ps = model_.params();
    for (std::size_t u = 0; u < ps.units().size(); ++u) {
      const auto& U = ps.units()[u];
      const std::size_t ob = own_[u], oe = own_[u] + shard_[u];
      for (int i = U.first_tensor; i < U.end_tensor; ++i) {
        const auto& s = ps.spec(i);
        const std::size_t lo = std::max(ob, s.offset), hi = std::min(oe, s.offset + s.size());
        if (lo >= hi) continue;
        const auto c = std::make_pair(compact_[u] + (lo - ob), compact_[u] + (hi - ob));
        kernels::AdamWHyper h;
        h.lr = tcfg_.lr;
        h.beta1 = tcfg_.beta1;
        h.beta2 = tcfg_.beta2;
        h.eps = tcfg_.adam_eps;
        h.weight_decay = s.weight_decay ? tcfg_.weight_decay : 0.0;
        auto g = Kokkos::subview(grad_c_, c);
        auto m = Kokkos::subview(m_c_, c);
        auto v = Kokkos::subview(v_c_, c);
        if constexpr (kMasterCopy) {
          kernels::adamw_update(space, h, step, grad_scale, g, m, v, Kokkos::subview(master_c_, c));
        } else if (opt_.zero == 3) {
          kernels::adamw_update(space, h, step, grad_scale, g, m, v, Kokkos::subview(param_c_, c));
        } else {
          kernels::adamw_update(space, h, step, grad_scale, g, m, v,
                                Kokkos::subview(ps.param, std::make_pair(lo, hi)));
        }
      }
    }
  }

  // New parameters to where forward reads them: the shard into the flat buffer (bf16), then
  // (stages 1-2) every rank's shard to every rank.
  void publish_params() {
    const Space space;
    auto& ps = model_.params();
    for (std::size_t u = 0; u < ps.units().size(); ++u) {
      if constexpr (kMasterCopy) {
        if (opt_.zero == 3) {
          kernels::convert(space, Kokkos::subview(master_c_, seg(u)),
                           Kokkos::subview(param_c_, seg(u)));
        } else {
          kernels::convert(space, Kokkos::subview(master_c_, seg(u)),
                           Kokkos::subview(ps.param, std::make_pair(own_[u], own_[u] + shard_[u])));
        }
      }
      if (opt_.zero == 1 || opt_.zero == 2) {
        Kokkos::fence();
        const auto& U = ps.units()[u];
        dp_->all_gather(ps.param.data() + own_[u], ps.param.data() + U.begin, shard_[u],
                        dtype_of<T>());
      }
    }
  }

  struct Bucket {
    std::size_t begin, end;
    int first_unit;
    Request request;
    bool started = false;
  };

  model::ModelConfig mcfg_;
  model::TrainConfig tcfg_;
  DataParallelOptions opt_;
  int dp_size_, dp_rank_;
  model::SyntheticCorpus corpus_;
  model::GptModel<T> model_;
  Tokens tokens_, targets_;
  CommLog log_;
  std::unique_ptr<Communicator> dp_, metrics_;
  std::vector<std::size_t> shard_, own_, compact_;
  std::size_t compact_total_ = 0, max_unit_ = 0, max_shard_ = 0;
  std::vector<Bucket> buckets_;
  GView grad_c_, tmp_c_, m_c_, v_c_, master_c_;
  // ZeRO-3 gradient workspaces of the step (one, or two when overlapped). A vector, not an
  // array of default-constructed Views: with the Kokkos 4.6.99 develop snapshot tested, array
  // elements of View were left with an uninitialised reference-count tracker, and assigning to
  // or destroying them crashed (docs/portability.md).
  std::vector<GView> grad_ws_;
  int ws_slot_ = 0;
  std::vector<PendingScatter> pending_;
  TView param_c_, param_ws_;
  bool last_micro_ = false;
  bool record_routing_ = false;
  int step_ = 0;
};

}  // namespace

std::unique_ptr<model::Trainer> make_data_parallel_trainer(const model::ModelConfig& m,
                                                           const model::TrainConfig& t,
                                                           const ProcessGrid& grid,
                                                           const DataParallelOptions& opt) {
  switch (t.precision) {
    case model::Precision::fp64:
      return std::make_unique<DataParallelTrainer<double>>(m, t, grid, opt);
    case model::Precision::fp32:
      return std::make_unique<DataParallelTrainer<float>>(m, t, grid, opt);
    case model::Precision::bf16:
      return std::make_unique<DataParallelTrainer<paraxis::bf16>>(m, t, grid, opt);
  }
  return nullptr;
}

}  // namespace paraxis::parallel
