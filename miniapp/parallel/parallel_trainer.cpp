// ParallelTrainer: one rank's shard, its pipeline schedule and the engine that runs it, and the
// data it reads; the step's metrics, reduced over the grid, and the wait time of its
// collectives are parallel_trainer_metrics.hpp's. An injected slow rank (fault.slow_rank)
// stretches this rank's compute (GptModel::set_compute_slowdown and the optimizer step).
#include "parallel/parallel_trainer.hpp"

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>

#include "config/config_rules.hpp"
#include "model/gpt_model.hpp"
#include "model/shard_layout.hpp"
#include "parallel/communicator.hpp"
#include "parallel/local_communicator.hpp"
#include "parallel/parallel_trainer_metrics.hpp"
#include "parallel/watchdog.hpp"
#include "parallel/zero_optimizer.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::parallel {

namespace {

using schedule::Action;
using schedule::ActionKind;
using schedule::PipelineShape;
using schedule::Schedule;

template <class T>
class ParallelTrainer final : public model::Trainer, private model::UnitHooks {
 public:
  using Space = Kokkos::DefaultExecutionSpace;
  using G = kernels::acc_t<T>;
  using Model = model::GptModel<T>;
  using Tokens = typename Model::Tokens;
  using Act = typename Model::Act;

  // compute_only: the step with every training collective and transfer a local copy
  // (make_compute_only_trainer).
  ParallelTrainer(const model::ModelConfig& m, const model::TrainConfig& t,
                  const config::ParallelConfig& p, const config::CommConfig& comm,
                  const ProcessGrid& grid, const config::SlowRank& slow, bool compute_only)
      : mcfg_(m),
        tcfg_(t),
        par_(p),
        slow_(slow),
        compute_only_(compute_only),
        coords_(grid.coords()),
        corpus_(m.vocab, t.corpus_branching, t.seed),
        tokens_("paraxis::tokens", static_cast<std::size_t>(t.micro_batch) * m.seq_len),
        targets_("paraxis::targets", tokens_.extent(0)) {
    config::require_valid(config::rule_violations(m, t, p, grid.world_size()));
    const auto& gs = grid.shape();
    if (gs.tp != p.tp || gs.pp != p.pp || gs.dp != p.dp || gs.ep != p.ep || gs.order != p.order)
      throw std::invalid_argument(
          "make_parallel_trainer: the configuration's grid differs from "
          "the process grid's");
    log_ = std::make_unique<CommLog>();
    if (compute_only_)
      make_local_comms(grid);
    else
      make_comms(comm, grid);
    world_ = grid.world();
    tp_comm_ = grid.tp();
    MPI_Comm_rank(world_, &world_rank_);
    if (slow.rank >= grid.world_size() || !std::isfinite(slow.factor) || slow.factor < 1)
      throw std::invalid_argument("make_parallel_trainer: slow rank " + std::to_string(slow.rank) +
                                  " with factor " + std::to_string(slow.factor) +
                                  " (expected a rank below " + std::to_string(grid.world_size()) +
                                  ", or -1, and a finite factor >= 1)");
    // Every rank's clock against world rank 0's, once: the wait time of each collective
    // compares start times across the group (docs/diagnosis.md, "Wait time"). Local copies
    // wait for no one.
    if (!compute_only_) clock_ = estimate_clock_offset(world_);
    Schedule sched;
    const model::ShardLayout layout = plan_pipeline(m, t, p, sched);
    build_model(m, t, p, comm, grid, layout, sched);
  }

  model::StepResult step() override {
    Kokkos::Profiling::pushRegion("paraxis::step");
    model::StepResult r;
    r.step = step_++;
    // Where this rank is, for a watchdog diagnosis (micro-batch: set per pipeline action).
    watchdog::set_step(r.step);
    watchdog::set_micro_batch(-1);
    ce_scale_ = model::loss_scale(mcfg_, tcfg_);
    aux_scale_ = model::aux_loss_scale(mcfg_, tcfg_);
    // An injected slow rank: this rank's compute of this step `slowdown` times as long.
    const double slowdown =
        slow_.active_at(r.step) && world_rank_ == slow_.rank ? slow_.factor : 1.0;
    model_->set_compute_slowdown(slowdown);
    const double i0 = model_->injected_seconds();
    const double f0 = model_->forward_seconds(), b0 = model_->backward_seconds(),
                 w0 = model_->backward_weight_seconds();
    Kokkos::fence();
    const double t0 = model::steady_seconds();
    zero_->begin_step();
    tally_ = StepTally(mcfg_.moe.experts);
    backwards_done_.assign(model_->chunks(), 0);
    live_peak_ = 0;
    const Interval pipe = run_pipeline();
    Kokkos::Profiling::pushRegion("paraxis::grad_sync");
    zero_->finish_gradients();
    if (par_.sp()) zero_->sum_sequence_parallel_gradients(*tp_);
    Kokkos::Profiling::popRegion();
    const Interval opt = optimizer_step(r, slowdown);
    zero_->end_step();
    finish_step_metrics(tally_, coords_.tp == 0, mcfg_, tcfg_, record_routing_, *metrics_, world_,
                        r);
    r.optimizer_s = opt.end - opt.begin;
    r.time_s = model::steady_seconds() - t0;
    if (!compute_only_) attribute_step_waits(r);
    r.forward_s = model_->forward_seconds() - f0;
    r.backward_s = model_->backward_seconds() - b0;
    r.backward_weight_s = model_->backward_weight_seconds() - w0;
    r.injected_s = model_->injected_seconds() - i0 + opt.injected;
    r.spans = model_->take_spans();
    pipeline_figures(pipe, r);
    r.spans.push_back({"optimizer", opt.begin, opt.end});
    compute_and_comm_figures(r);
    watchdog::set_step(-1);
    Kokkos::Profiling::popRegion();
    return r;
  }

  int steps_done() const override { return step_; }

  // Checkpoints: the optimizer's owned shard; tensors replicated over tensor parallelism are
  // written by tensor-parallel rank 0.
  void save_state(model::StateSink& sink) const override {
    zero_->save_state(sink, coords_.tp == 0);
  }
  void load_state(const model::StateSource& source, int steps) override {
    zero_->load_state(source);
    step_ = steps;
  }

  void record_routing(bool on) override {
    record_routing_ = on;
    model_->set_record_routing(on);
  }

  std::vector<double> parameters() const override {
    // Every rank's logical elements (its tensor-parallel slice, its stage, its experts; one
    // copy of what is replicated), placed at their single-rank positions.
    const auto flat = zero_->full_master();
    const auto& ps = model_->params();
    std::unordered_map<std::string, long long> base;
    long long total = 0;
    for (const auto& s : ref_specs_) {
      base[s.name] = total;
      total += static_cast<long long>(s.logical_size());
    }
    std::vector<long long> pos;
    std::vector<double> val;
    for (std::size_t i = 0; i < ps.specs().size(); ++i) {
      const auto& s = ps.specs()[i];
      if (zero_->group_of(s.unit).rank() != 0) continue;  // a data-parallel copy
      if (s.tp_replicated && coords_.tp != 0) continue;   // a tensor-parallel copy
      const std::size_t cols = s.cols ? s.cols : 1, lcols = s.logical_cols ? s.logical_cols : 1;
      for (std::size_t f = 0; f < s.size(); ++f) {
        const std::size_t row = f / cols + s.row_offset, col = f % cols + s.col_offset;
        if (row >= static_cast<std::size_t>(s.logical_rows) || col >= lcols) continue;  // padding
        pos.push_back(base.at(s.name) + static_cast<long long>(row * lcols + col));
        val.push_back(static_cast<double>(flat[s.offset + f]));
      }
    }
    std::vector<double> out(static_cast<std::size_t>(total), 0.0);
    const auto all_pos = all_gather_v(pos, MPI_LONG_LONG, world_);
    const auto all_val = all_gather_v(val, MPI_DOUBLE, world_);
    for (std::size_t k = 0; k < all_pos.size(); ++k)
      out[static_cast<std::size_t>(all_pos[k])] = all_val[k];
    return out;
  }

  double replica_divergence() const override {
    if (par_.tp == 1) return 0;
    const auto flat = zero_->full_master();
    const auto& ps = model_->params();
    std::vector<double> hi, lo;
    for (const auto& s : ps.specs())
      if (s.tp_replicated)
        for (std::size_t f = 0; f < s.size(); ++f)
          hi.push_back(static_cast<double>(flat[s.offset + f]));
    lo = hi;
    watchdog::all_reduce(MPI_IN_PLACE, hi.data(), static_cast<int>(hi.size()), MPI_DOUBLE, MPI_MAX,
                         tp_comm_, "all_reduce (replica divergence, max)", "tp");
    watchdog::all_reduce(MPI_IN_PLACE, lo.data(), static_cast<int>(lo.size()), MPI_DOUBLE, MPI_MIN,
                         tp_comm_, "all_reduce (replica divergence, min)", "tp");
    double worst = 0;
    for (std::size_t k = 0; k < hi.size(); ++k) worst = std::max(worst, hi[k] - lo[k]);
    watchdog::all_reduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, world_,
                         "all_reduce (replica divergence, worst)");
    return worst;
  }

  std::size_t parameter_count() const override {
    std::size_t n = 0;
    for (const auto& s : ref_specs_) n += s.logical_size();
    return n;
  }

  model::MemoryReport memory() const override { return model::memory_report(model_->ledger()); }

  const model::SyntheticCorpus& corpus() const override { return corpus_; }

 private:
  // ---- construction
  void make_comms(const config::CommConfig& comm, const ProcessGrid& grid) {
    // Training traffic crosses the emulated links and the injected slow link (docs/diagnosis.md,
    // "Nodes and emulated links"); the metrics and synchronisation communicators do not.
    const LinkModel links = make_link_model(comm.links, grid.nodes(comm.links.ranks_per_node));
    tp_ = make_communicator(comm.backend, grid.tp(), Axis::tp, log_.get(), links);
    // Pipeline transfers always go through MPI: the engine's sends must not block compute
    // (NCCL send/recv on the compute stream would wait there for the peer's matching call,
    // and 1F1B's crossing transfers could deadlock). With CUDA, MPI must be GPU-aware.
    pp_ = make_communicator(config::CommBackend::mpi, grid.pp(), Axis::pp, log_.get(), links);
    dp_ = make_communicator(comm.backend, grid.dp(), Axis::dp, log_.get(), links);
    if (par_.ep > 1) {
      ep_ = make_communicator(comm.backend, grid.ep(), Axis::ep, log_.get(), links);
      edp_ = make_communicator(comm.backend, grid.edp(), Axis::edp, log_.get(), links);
    }
    // Every communicator is labelled with the axis of its group, so that a wait on it names
    // that axis (the pipeline's barriers are a pp group's, not the world's).
    metrics_ = make_communicator(config::CommBackend::mpi, grid.world(), Axis::world, nullptr);
    if (par_.pp > 1)
      pp_sync_ = make_communicator(config::CommBackend::mpi, grid.pp(), Axis::pp, nullptr);
  }
  // The same groups (ranks and sizes), each a local copy (local_communicator.hpp), recorded in
  // the same log. ZeRO-1/2's parameter all-gathers after AdamW stay MPI's in the training
  // precision on host-readable memory, where the peers' reads of this process's pages slow
  // the next AdamW (local_communicator.hpp): those are blocked time, not compute.
  void make_local_comms(const ProcessGrid& grid) {
    const int zero = par_.effective_zero();
    const bool real_gathers =
        (zero == 1 || zero == 2) && std::is_same_v<T, G> &&
        Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space::memory_space>::accessible;
    if (real_gathers) {
      gather_dp_ = make_communicator(config::CommBackend::mpi, grid.dp(), Axis::dp, nullptr);
      if (par_.ep > 1)
        gather_edp_ = make_communicator(config::CommBackend::mpi, grid.edp(), Axis::edp, nullptr);
    }
    tp_ = make_local_communicator(grid.tp(), Axis::tp, log_.get());
    pp_ = make_local_communicator(grid.pp(), Axis::pp, log_.get());
    dp_ = make_local_communicator(grid.dp(), Axis::dp, log_.get(), gather_dp_.get());
    if (par_.ep > 1) {
      ep_ = make_local_communicator(grid.ep(), Axis::ep, log_.get());
      edp_ = make_local_communicator(grid.edp(), Axis::edp, log_.get(), gather_edp_.get());
    }
    metrics_ = make_local_communicator(grid.world(), Axis::world, nullptr);
    if (par_.pp > 1) pp_sync_ = make_local_communicator(grid.pp(), Axis::pp, nullptr);
  }
  // Pipeline: model chunks, this stage's share, its schedule (validated before it runs).
  model::ShardLayout plan_pipeline(const model::ModelConfig& m, const model::TrainConfig& t,
                                   const config::ParallelConfig& p, Schedule& sched) {
    shape_ = config::pipeline_shape(t, p);
    std::vector<int> global_of;
    model::ShardLayout layout = shard_layout_of(m, p, coords_, &global_of);
    local_of_.assign(shape_.chunks(), -1);
    for (std::size_t lc = 0; lc < global_of.size(); ++lc)
      local_of_[global_of[lc]] = static_cast<int>(lc);
    sched = make_schedule(p.schedule, shape_);
    const std::string problem = validate_schedule(sched, shape_);
    if (!problem.empty())
      throw std::logic_error("pipeline schedule " + std::string(to_string(p.schedule)) + ": " +
                             problem);
    actions_ = sched[coords_.pp];
    int tag_ub = 32767, flag = 0;
    int* attr = nullptr;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &flag);
    if (flag && attr) tag_ub = *attr;
    if (2L * shape_.micro_batches * shape_.chunks() > tag_ub)
      throw std::invalid_argument("pipeline: " + std::to_string(shape_.micro_batches) +
                                  " micro-batches x " + std::to_string(shape_.chunks()) +
                                  " chunks exceed the MPI tag range (" + std::to_string(tag_ub) +
                                  ")");
    return layout;
  }
  void build_model(const model::ModelConfig& m, const model::TrainConfig& t,
                   const config::ParallelConfig& p, const config::CommConfig& comm,
                   const ProcessGrid& grid, const model::ShardLayout& layout,
                   const Schedule& sched) {
    model::ShardComms comms;
    if (p.tp > 1) comms.tp = tp_.get();
    if (p.ep > 1) comms.ep = ep_.get();
    const int zero = p.effective_zero();
    model_ = std::make_unique<Model>(m, t.micro_batch, layout, comms, zero >= 1 ? p.dp : 1,
                                     /*allocate_store=*/false);
    zero_ = std::make_unique<ZeroOptimizer<T>>(*model_, t,
                                               ZeroOptions{zero, comm.bucket_mb, comm.overlap},
                                               *dp_, edp_.get(), grid.dp(), grid.edp());
    model_->set_recompute(t.recompute, t.recompute_layers);
    // A zero-bubble schedule runs each backward as B then W (model/gpt_model.hpp).
    split_ = schedule::splits_backward(sched);
    model_->set_split_backward(split_);
    zero_->set_split_backward(split_);
    model_->set_hooks(this);
    ref_specs_ = model::parameter_specs(m, model::ShardLayout::whole(m));
  }

  // ---- the step's parts
  struct Interval {
    double begin = 0, end = 0, injected = 0;
  };
  // The pipelined part: every action of this stage's schedule, between barriers of the
  // pipeline group; its span.
  Interval run_pipeline() {
    if (pp_sync_) pp_sync_->barrier();
    Interval pipe;
    pipe.begin = model::steady_seconds();
    for (const Action& a : actions_) {
      watchdog::set_micro_batch(a.micro_batch);
      run(a);
      progress_transfers();
    }
    watchdog::set_micro_batch(-1);
    for (auto& s : sends_) pp_->wait(s.request);
    for (auto& s : sends_)
      if (s.buffer >= 0) free_buffers_.push_back(s.buffer);
    sends_.clear();
    if (pp_sync_) pp_sync_->barrier();
    pipe.end = model::steady_seconds();
    return pipe;
  }
  // The global gradient norm, clipping and the update; its interval (stretched on an injected
  // slow rank, by `injected` seconds).
  Interval optimizer_step(model::StepResult& r, double slowdown) {
    Kokkos::Profiling::pushRegion("paraxis::optimizer");
    Interval opt;
    opt.begin = model::steady_seconds();
    // Each rank's share counts every element once over the grid; summed over tp, pp, dp.
    double ss = zero_->grad_sq_norm_share(coords_.tp);
    if (par_.tp > 1) ss = sum_over(*tp_, ss);
    if (par_.pp > 1) ss = sum_over(*pp_, ss);
    if (par_.dp > 1 && zero_->norm_sums_over_dp()) ss = sum_over(*dp_, ss);
    r.grad_norm = std::sqrt(ss);
    zero_->apply(r.step + 1, model::clip_scale(tcfg_, r.grad_norm));
    Kokkos::fence();
    opt.end = model::steady_seconds();
    if (slowdown > 1) {
      // Slowed like the model's intervals, but only its compute: not the calls inside it.
      const double blocked = log_->blocked_within(opt.begin, opt.end);
      const double measured = opt.end;
      opt.end = model::stretch_interval(opt.end, opt.end - opt.begin - blocked, slowdown);
      opt.injected = opt.end - measured;
    }
    Kokkos::Profiling::popRegion();
    return opt;
  }
  // After the timed step: each collective's wait for its group's last rank.
  void attribute_step_waits(model::StepResult& r) {
    for (Communicator* c : {tp_.get(), pp_.get(), dp_.get(), ep_.get(), edp_.get()}) {
      if (!c) continue;
      std::string note = attribute_waits(*log_, *c, clock_.offset_s);
      if (!note.empty()) r.notes.push_back(std::move(note));
    }
  }
  // Compute actions counted, the pipelined part's busy time and bubble, live activations.
  void pipeline_figures(const Interval& pipe, model::StepResult& r) const {
    for (const auto& sp : r.spans) {
      if (sp.begin >= pipe.begin && sp.end <= pipe.end) r.pipeline_busy_s += sp.end - sp.begin;
      if (std::string(sp.name) == "forward") ++r.forward_actions;
      if (std::string(sp.name) == "backward") ++r.backward_actions;
      if (std::string(sp.name) == "backward_weight") ++r.backward_weight_actions;
    }
    if (par_.pp > 1) {
      r.pipeline_span_s = pipe.end - pipe.begin;
      r.bubble_fraction = r.pipeline_span_s > 0 ? 1.0 - r.pipeline_busy_s / r.pipeline_span_s : 0.0;
    }
    r.peak_live_activations = live_peak_;
  }
  // Compute: the fenced phases less the time blocked in communication inside them (only the
  // part inside: a request started in one phase may be waited for after it), span by span.
  // Then every call of the step, and the totals and waits per axis (edp under dp).
  void compute_and_comm_figures(model::StepResult& r) {
    double blocked_inside = 0;
    for (auto& sp : r.spans) {
      sp.blocked_s = log_->blocked_within(sp.begin, sp.end);
      blocked_inside += sp.blocked_s;
    }
    r.compute_s = r.forward_s + r.backward_s + r.backward_weight_s + r.optimizer_s - blocked_inside;
    for (const auto& e : log_->events())
      r.comm_spans.push_back({to_string(e.axis == Axis::edp ? Axis::dp : e.axis), e.op, e.begin,
                              e.end, e.exposed, e.bytes, e.wait, e.ranks});
    const auto totals = log_->totals();
    for (Axis a : {Axis::tp, Axis::pp, Axis::dp, Axis::ep}) {
      const auto& x = totals[static_cast<std::size_t>(a)];
      r.comm[to_string(a)] = {x.time_s, x.exposed_s, x.bytes, x.calls};
    }
    for (const auto& e : log_->events())
      r.comm[to_string(e.axis == Axis::edp ? Axis::dp : e.axis)].wait_s += e.wait;
    log_->clear();
  }
  // A scalar summed over a group, through the memory space its backend reads (NCCL needs
  // device memory).
  double sum_over(Communicator& c, double x) {
    Kokkos::deep_copy(scalar_, x);
    Kokkos::fence();
    c.all_reduce(scalar_.data(), scalar_.data(), 1, DType::f64);
    double out = 0;
    Kokkos::deep_copy(out, scalar_);
    return out;
  }

  // ---- the engine
  // A transfer's tag names its message: the micro-batch, the chunk that receives it and the
  // direction (0: activation, 1: gradient). Sender and receiver compute the same tag.
  int tag(int mb, int receiving_chunk, int dir) const {
    return (mb * shape_.chunks() + receiving_chunk) * 2 + dir;
  }
  int take_buffer() {
    if (!free_buffers_.empty()) {
      const int b = free_buffers_.back();
      free_buffers_.pop_back();
      return b;
    }
    buffers_.push_back(model_->ledger().track(
        model::MemCategory::activations,
        Act(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("paraxis::pp_grad")),
            model_->local_tokens(), mcfg_.hidden)));
    return static_cast<int>(buffers_.size()) - 1;
  }
  void load_data(int mb, bool tokens, bool targets) {
    auto tok_h = Kokkos::create_mirror_view(tokens_);
    auto tgt_h = Kokkos::create_mirror_view(targets_);
    const std::uint64_t first =
        static_cast<std::uint64_t>(step_ - 1) * tcfg_.global_batch +
        static_cast<std::uint64_t>(coords_.dp) * (tcfg_.global_batch / par_.dp) +
        static_cast<std::uint64_t>(mb) * tcfg_.micro_batch;
    model::sample_micro_batch(corpus_, mcfg_.seq_len, first, tcfg_.micro_batch, tok_h.data(),
                              tgt_h.data());
    if (tokens) Kokkos::deep_copy(tokens_, tok_h);
    if (targets) Kokkos::deep_copy(targets_, tgt_h);
  }
  void wait_recv(int key) {
    auto it = recvs_.find(key);
    if (it == recvs_.end()) return;
    pp_->wait(it->second);
    recvs_.erase(it);
  }
  void run(const Action& a) {
    const int lc = local_of_[a.chunk];
    const auto& ch = model_->layout().chunks[lc];
    const DType dt = dtype_of<T>();
    switch (a.kind) {
      case ActionKind::recv_activation: {
        Act in = model_->chunk_input(lc, a.micro_batch);
        const int t = tag(a.micro_batch, a.chunk, 0);
        recvs_[t] = pp_->irecv(in.data(), in.span(), dt, chunk_stage(shape_, a.chunk - 1), t);
        break;
      }
      case ActionKind::forward: {
        wait_recv(tag(a.micro_batch, a.chunk, 0));
        if (ch.embedding || ch.head) load_data(a.micro_batch, ch.embedding, ch.head);
        tally_.add(model_->forward_chunk(lc, a.micro_batch, tokens_, targets_),
                   coords_.dp * shape_.micro_batches + a.micro_batch, ch.head);
        live_peak_ = std::max(live_peak_, model_->live_activation_sets());
        break;
      }
      case ActionKind::send_activation: {
        Act out = model_->chunk_output(lc, a.micro_batch);
        Kokkos::fence();
        const int t = tag(a.micro_batch, a.chunk + 1, 0);
        sends_.push_back(
            {pp_->isend(out.data(), out.span(), dt, chunk_stage(shape_, a.chunk + 1), t), t, -1});
        break;
      }
      case ActionKind::recv_gradient: {
        const int b = take_buffer();
        const int t = tag(a.micro_batch, a.chunk, 1);
        grad_in_[t] = b;
        recvs_[t] = pp_->irecv(buffers_[b].data(), buffers_[b].span(), dt,
                               chunk_stage(shape_, a.chunk + 1), t);
        break;
      }
      case ActionKind::backward:
        run_backward(a, lc, ch);
        break;
      case ActionKind::backward_weight: {
        // W of a split backward: the chunk's gradients; the last W of a chunk is its units'
        // final contribution of the step (ZeRO 0-1 reduce then).
        zero_->set_final_backward(++backwards_done_[lc] == shape_.micro_batches);
        model_->backward_weight_chunk(lc, a.micro_batch);
        break;
      }
      case ActionKind::send_gradient: {
        const int t = tag(a.micro_batch, a.chunk - 1, 1);
        const int b = grad_out_.at(t);
        grad_out_.erase(t);
        Kokkos::fence();
        sends_.push_back({pp_->isend(buffers_[b].data(), buffers_[b].span(), dt,
                                     chunk_stage(shape_, a.chunk - 1), t),
                          t, b});
        break;
      }
    }
  }
  // B of a micro-batch and chunk (or the whole backward): its gradient input received, the
  // activation send of the pair done, a buffer for the gradient it sends.
  void run_backward(const Action& a, int lc, const model::ModelChunk& ch) {
    const int t_in = tag(a.micro_batch, a.chunk, 1), t_out = tag(a.micro_batch, a.chunk - 1, 1);
    wait_recv(t_in);
    // The activation send of this pair reads the output that backward frees.
    for (auto& s : sends_)
      if (s.key == tag(a.micro_batch, a.chunk + 1, 0) && s.request.active()) pp_->wait(s.request);
    Act dy, dx;
    int in_buf = -1;
    if (!ch.head) {
      in_buf = grad_in_.at(t_in);
      grad_in_.erase(t_in);
      dy = buffers_[in_buf];
    }
    if (!ch.embedding) {
      const int b = take_buffer();
      grad_out_[t_out] = b;
      dx = buffers_[b];
    }
    if (split_) {
      model_->backward_input_chunk(lc, a.micro_batch, dy, dx, ce_scale_, aux_scale_);
    } else {
      zero_->set_final_backward(++backwards_done_[lc] == shape_.micro_batches);
      model_->backward_chunk(lc, a.micro_batch, dy, dx, ce_scale_, aux_scale_);
    }
    if (in_buf >= 0) free_buffers_.push_back(in_buf);
  }
  // MPI progresses only inside MPI calls: test the outstanding transfers between actions and
  // between units, and recycle the buffers of completed sends.
  void progress_transfers() {
    for (auto& [key, req] : recvs_)
      if (req.active()) pp_->test(req);
    for (auto it = sends_.begin(); it != sends_.end();) {
      if (!it->request.active() || pp_->test(it->request)) {
        if (it->buffer >= 0) free_buffers_.push_back(it->buffer);
        it = sends_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // ---- UnitHooks: ZeRO, and progress of the pipeline's transfers
  void before_forward(int u) override { zero_->before_forward(u); }
  void after_forward(int u) override {
    zero_->after_forward(u);
    if (!sends_.empty() || !recvs_.empty()) progress_transfers();
  }
  void before_backward(int u) override { zero_->before_backward(u); }
  void before_backward_input(int u) override { zero_->before_backward_input(u); }
  void after_backward_input(int u) override {
    zero_->after_backward_input(u);
    if (!sends_.empty() || !recvs_.empty()) progress_transfers();
  }
  void after_backward(int u) override {
    zero_->after_backward(u);
    if (!sends_.empty() || !recvs_.empty()) progress_transfers();
  }

  struct Send {
    Request request;
    int key;
    int buffer;  // gradient buffer to recycle, or -1 (an activation owned by the model)
  };

  model::ModelConfig mcfg_;
  model::TrainConfig tcfg_;
  config::ParallelConfig par_;
  config::SlowRank slow_;
  bool compute_only_ = false;  // every training collective a local copy
  int world_rank_ = 0;
  ClockOffset clock_;  // this rank's clock against world rank 0's
  GridCoords coords_;
  MPI_Comm world_ = MPI_COMM_NULL, tp_comm_ = MPI_COMM_NULL;
  model::SyntheticCorpus corpus_;
  Tokens tokens_, targets_;
  Kokkos::View<double, Space::memory_space> scalar_{"paraxis::norm_share"};
  std::unique_ptr<CommLog> log_;
  std::unique_ptr<Communicator> tp_, pp_, dp_, ep_, edp_, metrics_, pp_sync_;
  std::unique_ptr<Communicator> gather_dp_, gather_edp_;  // compute-only: the real gathers
  PipelineShape shape_;
  std::vector<int> local_of_;  // model chunk -> this rank's chunk index (-1: another stage's)
  std::vector<Action> actions_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ZeroOptimizer<T>> zero_;
  std::vector<model::TensorSpec> ref_specs_;  // the single-rank parameter order
  // Engine state of one step.
  std::map<int, Request> recvs_;
  std::vector<Send> sends_;
  std::vector<Act> buffers_;
  std::vector<int> free_buffers_;
  std::map<int, int> grad_in_, grad_out_;
  std::vector<int> backwards_done_;
  int live_peak_ = 0;
  bool split_ = false;  // the schedule splits backwards into B and W
  double ce_scale_ = 0, aux_scale_ = 0;
  StepTally tally_;
  bool record_routing_ = false;
  int step_ = 0;
};

}  // namespace

model::ShardLayout shard_layout_of(const model::ModelConfig& m, const config::ParallelConfig& g,
                                   const GridCoords& coords, std::vector<int>* global_chunk_of) {
  const schedule::PipelineShape shape{g.pp, 1, g.virtual_stages};
  const auto chunks = model::split_layers(m, shape.chunks(), g.stage_layers);
  model::ShardLayout layout;
  layout.tp = g.tp;
  layout.tp_rank = coords.tp;
  layout.sequence_parallel = g.sequence_parallel;
  layout.ep = g.ep;
  layout.ep_rank = coords.ep;
  if (global_chunk_of) global_chunk_of->clear();
  for (int c = 0; c < shape.chunks(); ++c)
    if (chunk_stage(shape, c) == coords.pp) {
      layout.chunks.push_back(chunks[c]);
      if (global_chunk_of) global_chunk_of->push_back(c);
    }
  return layout;
}

namespace {
std::unique_ptr<model::Trainer> make_engine(const model::ModelConfig& m,
                                            const model::TrainConfig& t,
                                            const config::ParallelConfig& p,
                                            const config::CommConfig& comm, const ProcessGrid& grid,
                                            const config::SlowRank& slow, bool compute_only) {
  switch (t.precision) {
    case model::Precision::fp64:
      return std::make_unique<ParallelTrainer<double>>(m, t, p, comm, grid, slow, compute_only);
    case model::Precision::fp32:
      return std::make_unique<ParallelTrainer<float>>(m, t, p, comm, grid, slow, compute_only);
    case model::Precision::bf16:
      return std::make_unique<ParallelTrainer<paraxis::bf16>>(m, t, p, comm, grid, slow,
                                                              compute_only);
  }
  return nullptr;
}
}  // namespace

std::unique_ptr<model::Trainer> make_parallel_trainer(
    const model::ModelConfig& m, const model::TrainConfig& t, const config::ParallelConfig& p,
    const config::CommConfig& comm, const ProcessGrid& grid, const config::SlowRank& slow) {
  return make_engine(m, t, p, comm, grid, slow, /*compute_only=*/false);
}

std::unique_ptr<model::Trainer> make_compute_only_trainer(const model::ModelConfig& m,
                                                          const model::TrainConfig& t,
                                                          const config::ParallelConfig& p,
                                                          const config::CommConfig& comm,
                                                          const ProcessGrid& grid) {
  return make_engine(m, t, p, comm, grid, config::SlowRank{}, /*compute_only=*/true);
}

}  // namespace paraxis::parallel
