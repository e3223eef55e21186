// Trainer: the single-rank step (data, micro-batches, clipping, AdamW) for each precision.
#include "trainer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "gpt_model.hpp"
#include "paraxis/kernels/elementwise.hpp"

namespace paraxis::model {

namespace {

template <class T>
class TrainerImpl final : public Trainer {
 public:
  using Space = Kokkos::DefaultExecutionSpace;
  using Tokens = typename GptModel<T>::Tokens;

  TrainerImpl(const ModelConfig& m, const TrainConfig& t)
      : mcfg_(m),
        tcfg_(t),
        corpus_(m.vocab, t.corpus_branching, t.seed),
        model_(m, t.micro_batch),
        tokens_("paraxis::tokens", static_cast<std::size_t>(t.micro_batch) * m.seq_len),
        targets_("paraxis::targets", tokens_.extent(0)) {
    model_.set_recompute(t.recompute, t.recompute_layers);
    model_.initialize(t.seed);
  }

  StepResult step() override {
    Kokkos::Profiling::pushRegion("paraxis::step");
    StepResult r;
    r.step = step_++;
    const int S = mcfg_.seq_len;
    const int micro = tcfg_.micro_batches_per_step();
    const double ce_scale = loss_scale(mcfg_, tcfg_);
    const double aux_scale = aux_loss_scale(mcfg_, tcfg_);
    const double f0 = model_.forward_seconds(), b0 = model_.backward_seconds();
    Kokkos::fence();
    Kokkos::Timer timer;
    model_.params().zero_grads();
    auto tok_h = Kokkos::create_mirror_view(tokens_);
    auto tgt_h = Kokkos::create_mirror_view(targets_);
    const int E = mcfg_.moe.experts;
    // Routing choices per micro-batch: every MoE layer's [tokens * top_k].
    const std::size_t per_micro = static_cast<std::size_t>(tcfg_.micro_batch) * S *
                                  (E > 0 ? mcfg_.moe.top_k : 0) * mcfg_.moe_layer_count();
    if (replay_ && replay_->size() != per_micro * micro)
      throw std::invalid_argument(
          "Trainer::replay_routing: step " + std::to_string(r.step + 1) + " was given " +
          std::to_string(replay_->size()) + " routing choices, expected " +
          std::to_string(per_micro * micro) + " (global_batch * seq_len * top_k * MoE layers)");
    MicroBatchTally tally(E);
    for (int mb = 0; mb < micro; ++mb) {
      sample_micro_batch(corpus_, S,
                         static_cast<std::uint64_t>(r.step) * tcfg_.global_batch +
                             static_cast<std::uint64_t>(mb) * tcfg_.micro_batch,
                         tcfg_.micro_batch, tok_h.data(), tgt_h.data());
      Kokkos::deep_copy(tokens_, tok_h);
      Kokkos::deep_copy(targets_, tgt_h);
      model_.set_replay_routing(replay_ ? replay_->data() + mb * per_micro : nullptr);
      tally.add(model_.forward_backward(tokens_, targets_, ce_scale, aux_scale));
    }
    model_.set_replay_routing(nullptr);
    Kokkos::Profiling::pushRegion("paraxis::optimizer");
    const double opt_begin = steady_seconds();
    const Space space;
    r.grad_norm = std::sqrt(model_.params().grad_sq_norm(space));
    model_.params().adamw_step(space, tcfg_.lr, tcfg_.beta1, tcfg_.beta2, tcfg_.adam_eps,
                               tcfg_.weight_decay, r.step + 1, clip_scale(tcfg_, r.grad_norm));
    Kokkos::fence();
    const double opt_end = steady_seconds();
    r.optimizer_s = opt_end - opt_begin;
    r.spans = model_.take_spans();
    r.spans.push_back({"optimizer", opt_begin, opt_end});
    Kokkos::Profiling::popRegion();
    r.time_s = timer.seconds();
    r.forward_s = model_.forward_seconds() - f0;
    r.backward_s = model_.backward_seconds() - b0;
    r.compute_s = r.forward_s + r.backward_s + r.optimizer_s;
    set_losses(mcfg_, tcfg_, tally.ce_sum, tally.aux_sum, r);
    r.routing = std::move(tally.routing);
    r.routing_flips = tally.routing_flips;
    if (E > 0) r.moe = moe_step_stats(tally.expert_tokens, tally.expert_dropped);
    Kokkos::Profiling::popRegion();
    return r;
  }

  void record_routing(bool on) override { model_.set_record_routing(on); }
  void replay_routing(const std::vector<int>* routing) override { replay_ = routing; }

  std::vector<double> parameters() const override {
    return in_tensor_order(model_.params().master_view());
  }

  // adamw_step reads the gradients with the clipping scale and leaves them as they were.
  std::vector<double> gradients() const override { return in_tensor_order(model_.params().grad); }

  std::size_t parameter_count() const override {
    std::size_t n = 0;
    for (const auto& s : model_.params().specs()) n += s.size();
    return n;
  }

  MemoryReport memory() const override { return memory_report(model_.ledger()); }

  const SyntheticCorpus& corpus() const override { return corpus_; }

  int steps_done() const override { return step_; }

  // The whole model on one rank: every tensor whole.
  void save_state(StateSink& sink) const override {
    const auto& ps = model_.params();
    const auto master = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ps.master_view());
    const auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ps.m);
    const auto v = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ps.v);
    const std::string dt = state_dtype<G>();
    for (const auto& s : ps.specs())
      for (const auto& box : logical_boxes(s, s.offset, s.offset + s.size()))
        for (const auto& [kind, view] :
             {std::make_pair("master", master.data()), std::make_pair("adam_m", m.data()),
              std::make_pair("adam_v", v.data())}) {
          const auto piece = state_piece(kind, s, box, dt);
          if (contiguous(box)) {
            sink.add(piece, view + box.flat, box.size() * sizeof(G));  // contiguous: no gather
            continue;
          }
          const auto data = gather_box(view, box);
          sink.add(piece, data.data(), data.size() * sizeof(G));
        }
  }

  void load_state(const StateSource& source, int steps) override {
    auto& ps = model_.params();
    auto master = Kokkos::create_mirror_view(Kokkos::HostSpace(), ps.master_view());
    auto m = Kokkos::create_mirror_view(Kokkos::HostSpace(), ps.m);
    auto v = Kokkos::create_mirror_view(Kokkos::HostSpace(), ps.v);
    PieceReads<G> reads(source, state_dtype<G>());
    for (const auto& s : ps.specs())
      for (const auto& box : logical_boxes(s, s.offset, s.offset + s.size()))
        for (const auto& [kind, view] :
             {std::make_pair("master", master.data()), std::make_pair("adam_m", m.data()),
              std::make_pair("adam_v", v.data())})
          reads.load(kind, s, box, view, box);
    reads.settle();
    reads.zero_rest(master.data(), master.extent(0));  // the padding, as initialised
    reads.zero_rest(m.data(), m.extent(0));
    reads.zero_rest(v.data(), v.extent(0));
    Kokkos::deep_copy(ps.master_view(), master);
    Kokkos::deep_copy(ps.m, m);
    Kokkos::deep_copy(ps.v, v);
    if constexpr (!std::is_same_v<T, G>) kernels::convert(Space(), ps.master, ps.param);
    Kokkos::fence();
    step_ = steps;
  }

 private:
  using G = kernels::acc_t<T>;
  // A flat buffer of the ParamStore (alignment padding left out), tensor by tensor, in double.
  template <class View>
  std::vector<double> in_tensor_order(const View& flat) const {
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), flat);
    std::vector<double> out;
    out.reserve(parameter_count());
    for (const auto& s : model_.params().specs())
      for (std::size_t i = 0; i < s.size(); ++i)
        out.push_back(static_cast<double>(host(s.offset + i)));
    return out;
  }
  ModelConfig mcfg_;
  TrainConfig tcfg_;
  SyntheticCorpus corpus_;
  GptModel<T> model_;
  Tokens tokens_, targets_;
  int step_ = 0;
  const std::vector<int>* replay_ = nullptr;
};

}  // namespace

void Trainer::save_state(StateSink&) const {
  throw std::logic_error("this trainer cannot write checkpoints");
}
void Trainer::load_state(const StateSource&, int) {
  throw std::logic_error("this trainer cannot resume from checkpoints");
}

std::vector<double> Trainer::gradients() const {
  throw std::logic_error("gradients() is implemented by the single-rank trainer only");
}

void Trainer::replay_routing(const std::vector<int>* routing) {
  if (routing)
    throw std::logic_error(
        "routing replay is implemented by the single-rank trainer only (the reference of "
        "--verify), not by this trainer");
}

double loss_scale(const ModelConfig& m, const TrainConfig& t) {
  return 1.0 / (static_cast<double>(t.global_batch) * m.seq_len);
}

double aux_loss_scale(const ModelConfig& m, const TrainConfig& t) {
  return m.moe.aux_loss_coef / t.micro_batches_per_step();
}

double clip_scale(const TrainConfig& t, double grad_norm) {
  if (t.grad_clip > 0 && grad_norm > t.grad_clip) return t.grad_clip / (grad_norm + 1e-6);
  return 1.0;
}

void set_losses(const ModelConfig& m, const TrainConfig& t, double ce_sum, double aux_sum,
                StepResult& r) {
  r.lm_loss = ce_sum * loss_scale(m, t);
  r.aux_loss = aux_sum / t.micro_batches_per_step();
  r.loss = r.lm_loss + m.moe.aux_loss_coef * r.aux_loss;
}

void sample_micro_batch(const SyntheticCorpus& corpus, int seq_len, std::uint64_t first_sample,
                        int sequences, int* tokens, int* targets) {
  std::vector<int> seq(seq_len + 1);
  for (int b = 0; b < sequences; ++b) {
    corpus.sample(first_sample + b, seq_len, seq.data());
    for (int s = 0; s < seq_len; ++s) {
      tokens[b * seq_len + s] = seq[s];
      targets[b * seq_len + s] = seq[s + 1];
    }
  }
}

MemoryReport memory_report(const MemoryLedger& l) {
  MemoryReport m;
  m.params_bytes = l.current(MemCategory::params);
  m.grads_bytes = l.current(MemCategory::grads);
  m.optimizer_bytes = l.current(MemCategory::optimizer);
  m.activations_peak_bytes = l.peak(MemCategory::activations);
  m.peak_bytes = l.peak_total();
  m.params_peak_bytes = l.peak(MemCategory::params);
  m.grads_peak_bytes = l.peak(MemCategory::grads);
  m.optimizer_peak_bytes = l.peak(MemCategory::optimizer);
  return m;
}

void MicroBatchTally::add(const MicroBatchResult& mr) {
  ce_sum += mr.ce_sum;
  aux_sum += mr.aux_sum;
  for (const auto& st : mr.moe) {
    routing_flips += st.routing_flips;
    routing.insert(routing.end(), st.routing.begin(), st.routing.end());
    for (std::size_t e = 0; e < expert_tokens.size(); ++e) {
      expert_tokens[e] += st.tokens_per_expert[e];
      expert_dropped[e] += st.dropped_per_expert[e];
    }
  }
}

MoeStepStats moe_step_stats(const std::vector<long long>& tokens_per_expert,
                            const std::vector<long long>& dropped_per_expert) {
  MoeStepStats m;
  if (tokens_per_expert.empty()) return m;
  const auto [mn, mx] = std::minmax_element(tokens_per_expert.begin(), tokens_per_expert.end());
  double sum = 0;
  for (long v : tokens_per_expert) sum += static_cast<double>(v);
  m.min_tokens = static_cast<int>(*mn);
  m.max_tokens = static_cast<int>(*mx);
  m.mean_tokens = sum / static_cast<double>(tokens_per_expert.size());
  m.imbalance = m.mean_tokens > 0 ? static_cast<double>(*mx) / m.mean_tokens : 0.0;
  m.dropped = 0;
  for (long long d : dropped_per_expert) m.dropped += d;
  m.tokens_per_expert = tokens_per_expert;
  m.dropped_per_expert = dropped_per_expert;
  return m;
}

std::unique_ptr<Trainer> make_trainer(const ModelConfig& m, const TrainConfig& t) {
  switch (t.precision) {
    case Precision::fp64:
      return std::make_unique<TrainerImpl<double>>(m, t);
    case Precision::fp32:
      return std::make_unique<TrainerImpl<float>>(m, t);
    case Precision::bf16:
      return std::make_unique<TrainerImpl<paraxis::bf16>>(m, t);
  }
  return nullptr;
}

}  // namespace paraxis::model
