// GptModel: the forward/backward of a chunk (embedding, blocks, final LayerNorm, head and the
// loss, with the hooks around each unit; the embedding, head and loss are the vocabulary-parallel
// layers of tensor_parallel.hpp; a block recomputed in full runs its forward again just before
// its backward), the public members and their timing. The other parts: see gpt_model_impl.hpp.
#include "model/gpt_model.hpp"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>

#include "model/gpt_model_impl.hpp"
#include "paraxis/kernels/layernorm.hpp"

namespace paraxis::model {

using namespace detail;

namespace {
// Fences before starting and before stopping: never times asynchronous work. With a slowdown
// factor (set_compute_slowdown) the interval is stretched inside itself: the span and the sink
// see the slowed length, like the compute of a slower device.
class FencedTimer {
 public:
  FencedTimer(const char* name, double& sink, std::vector<Span>& spans, int mb, int chunk,
              double slowdown, double& injected)
      : name_(name),
        sink_(sink),
        spans_(spans),
        mb_(mb),
        chunk_(chunk),
        slowdown_(slowdown),
        injected_(injected) {
    Kokkos::fence();
    begin_ = steady_seconds();
  }
  ~FencedTimer() {
    Kokkos::fence();
    const double measured = steady_seconds();
    const double end = stretch_interval(measured, measured - begin_, slowdown_);
    injected_ += end - measured;
    sink_ += end - begin_;
    spans_.push_back({name_, begin_, end, mb_, chunk_});
  }

 private:
  const char* name_;
  double& sink_;
  std::vector<Span>& spans_;
  int mb_, chunk_;
  double slowdown_;
  double& injected_;
  double begin_;
};
}  // namespace

template <class T>
MicroBatchResult GptModel<T>::Impl::forward_chunk(int chunk, ActSet& S, const Tokens& tokens,
                                                  const Tokens& targets) {
  const Space space;
  const TpGroup g = tpg();
  auto& ps = m.params_;
  const ChunkParams& cp = chunk_params[chunk];
  MicroBatchResult res;
  if (cp.spec.embedding) {
    h().before_forward(cp.emb_unit);
    Kokkos::deep_copy(S.tokens, tokens);
    const V2 x0 = S.xs[0];
    vocab_parallel_embedding_forward(space, g, tokens, ps.w2(cp.wte), ps.w2(cp.wpe), cfg.seq_len,
                                     voff, tp_partial_target(g, x0, part), x0);
    h().after_forward(cp.emb_unit);
  }
  for (std::size_t i = 0; i < cp.blocks.size(); ++i) {
    const int b = static_cast<int>(i);
    S.replay_at[i] = m.replay_routing_;
    open_units(cp.blocks[i], true);
    block_forward(cp.blocks[i], acts_of(S, b), S.xs[i], S.xs[i + 1], res);
    close_units(cp.blocks[i], true);
  }
  if (cp.spec.head) {
    h().before_forward(cp.head_unit);
    Kokkos::deep_copy(S.targets, targets);
    k::layernorm_forward(space, S.xs.back(), ps.w1(cp.lnf_g), ps.w1(cp.lnf_b), kLayerNormEps, S.xf,
                         S.lnf_mean, S.lnf_rstd);
    // The LM head: a column-parallel linear over the vocabulary (no bias), then the loss.
    const V2 xf = tp_gather_tokens(space, g, S.xf, full);
    column_parallel_forward(space, xf, ps.w2(cp.head), V1(), S.logits);
    res.ce_sum = static_cast<double>(
        cross_entropy().forward(space, g, S.logits, targets, voff, cfg.vocab, S.lse));
    h().after_forward(cp.head_unit);
  }
  return res;
}

// Runs block i's forward again from its kept input into the working set, as forward_chunk ran
// it: the same parameters, the same routing (a replayed one is replayed again), its collectives
// issued again (and logged). Its output is written over the kept next input with the same bits
// (that block's backward is done; a pipeline send of the chunk output completed before the
// backward began); its statistics and recorded routing are not counted twice.
template <class T>
void GptModel<T>::Impl::recompute_block(const BlockParams& b, ActSet& S, int i) {
  Kokkos::Profiling::pushRegion("paraxis::recompute_block");
  const int* replay = m.replay_routing_;
  const bool record = m.record_routing_;
  m.replay_routing_ = S.replay_at[i];
  m.record_routing_ = false;
  MicroBatchResult ignored;
  block_forward(b, acts_of(S, i), S.xs[i], S.xs[i + 1], ignored);
  m.replay_routing_ = replay;
  m.record_routing_ = record;
  Kokkos::Profiling::popRegion();
}

template <class T>
void GptModel<T>::Impl::backward_chunk(int chunk, ActSet& S, const Act& grad_output,
                                       const Act& grad_input, double ce_scale, double aux_scale) {
  const Space space;
  const TpGroup g = tpg();
  auto& ps = m.params_;
  const ChunkParams& cp = chunk_params[chunk];
  if (cp.spec.head) {
    h().before_backward(cp.head_unit);
    cross_entropy().backward(space, g, S.logits, S.targets, S.lse, voff, cfg.vocab, ce_scale,
                             dlogits);
    const V2 xf = tp_gather_tokens(space, g, S.xf, full);
    column_parallel_backward(space, g, dlogits, xf, ps.w2(cp.head),
                             tp_partial_target(g, dtmp, part), 0.0, dtmp, ps.g2(cp.head), A1());
    k::layernorm_backward(space, dtmp, S.xs.back(), ps.w1(cp.lnf_g), S.lnf_mean, S.lnf_rstd, dx_a,
                          ps.g1(cp.lnf_g), ps.g1(cp.lnf_b));
    h().after_backward(cp.head_unit);
  } else {
    require_rows("grad_output", grad_output);
    Kokkos::deep_copy(dx_a, grad_output);
  }
  for (int i = static_cast<int>(cp.blocks.size()) - 1; i >= 0; --i) {
    // The units are open for backward (ZeRO-3: their parameters gathered) before a
    // recomputed forward runs, and stay open through the block's backward.
    open_units(cp.blocks[i], false);
    if (m.recomputed_in_full(i)) recompute_block(cp.blocks[i], S, i);
    block_backward(cp.blocks[i], acts_of(S, i), S.xs[i], aux_scale);
    close_units(cp.blocks[i], false);
  }
  if (cp.spec.embedding) {
    h().before_backward(cp.emb_unit);
    const V2 dX = tp_gather_tokens(space, g, dx_a, dfull);
    vocab_parallel_embedding_backward(space, S.tokens, dX, cfg.seq_len, voff, ps.g2(cp.wte),
                                      ps.g2(cp.wpe));
    h().after_backward(cp.emb_unit);
  } else {
    require_rows("grad_input", grad_input);
    Kokkos::deep_copy(grad_input, dx_a);
  }
}

// B of a split backward: backward_chunk's input-gradient path (the head's, each block's and
// the hand-over to the previous chunk); no gradient of a parameter is written. W's inputs stay
// in the set: the head's output gradient where the logits were, the LayerNorm sums in
// S.ln_grads, each block's (block_backward_input) and, on the chunk with the embedding, the
// embedding's output gradient in the first block's input.
template <class T>
void GptModel<T>::Impl::backward_input_chunk(int chunk, ActSet& S, const Act& grad_output,
                                             const Act& grad_input, double ce_scale,
                                             double aux_scale) {
  const Space space;
  const TpGroup g = tpg();
  auto& ps = m.params_;
  const ChunkParams& cp = chunk_params[chunk];
  const int H = cfg.hidden, nb = static_cast<int>(cp.blocks.size());
  const std::size_t ln_size = static_cast<std::size_t>(4 * nb + (cp.spec.head ? 2 : 0)) * H;
  if (!S.ln_grads.data()) S.ln_grads = vec("paraxis::ln_grads", static_cast<int>(ln_size));
  Kokkos::deep_copy(S.ln_grads, G(0));
  auto ln = [&](std::size_t begin, std::size_t n) {
    return Kokkos::subview(S.ln_grads, std::make_pair(begin, begin + n));
  };
  if (cp.spec.head) {
    h().before_backward_input(cp.head_unit);
    cross_entropy().backward(space, g, S.logits, S.targets, S.lse, voff, cfg.vocab, ce_scale,
                             dlogits);
    column_parallel_backward_input(space, g, dlogits, ps.w2(cp.head),
                                   tp_partial_target(g, dtmp, part), 0.0, dtmp);
    Kokkos::deep_copy(S.logits, dlogits);
    const std::size_t f = static_cast<std::size_t>(4 * nb) * H;
    k::layernorm_backward(space, dtmp, S.xs.back(), ps.w1(cp.lnf_g), S.lnf_mean, S.lnf_rstd, dx_a,
                          ln(f, H), ln(f + H, H));
    h().after_backward_input(cp.head_unit);
  } else {
    require_rows("grad_output", grad_output);
    Kokkos::deep_copy(dx_a, grad_output);
  }
  for (int i = nb - 1; i >= 0; --i) {
    for (int u : {cp.blocks[i].unit, cp.blocks[i].expert_unit})
      if (u >= 0) h().before_backward_input(u);
    block_backward_input(cp.blocks[i], acts_of(S, i), S.xs[i], S.xs[i + 1],
                         ln(static_cast<std::size_t>(4 * i) * H, 4 * H), aux_scale);
    for (int u : {cp.blocks[i].expert_unit, cp.blocks[i].unit})
      if (u >= 0) h().after_backward_input(u);
  }
  if (cp.spec.embedding) {
    Kokkos::deep_copy(S.xs[0], dx_a);
  } else {
    require_rows("grad_input", grad_input);
    Kokkos::deep_copy(grad_input, dx_a);
  }
}

// W of a split backward: backward_chunk's weight gradients, unit by unit in its order (the
// head, the blocks last to first, the embedding), from what B kept.
template <class T>
void GptModel<T>::Impl::backward_weight_chunk(int chunk, ActSet& S) {
  const Space space;
  const TpGroup g = tpg();
  auto& ps = m.params_;
  const ChunkParams& cp = chunk_params[chunk];
  const int H = cfg.hidden, nb = static_cast<int>(cp.blocks.size());
  auto ln = [&](std::size_t begin, std::size_t n) {
    return Kokkos::subview(S.ln_grads, std::make_pair(begin, begin + n));
  };
  if (cp.spec.head) {
    h().before_backward(cp.head_unit);
    const V2 xf = tp_gather_tokens(space, g, S.xf, full);
    column_parallel_backward_weight(space, S.logits, xf, ps.g2(cp.head), A1());
    const std::size_t f = static_cast<std::size_t>(4 * nb) * H;
    k::add_inplace(space, ps.g1(cp.lnf_g), ln(f, H));
    k::add_inplace(space, ps.g1(cp.lnf_b), ln(f + H, H));
    h().after_backward(cp.head_unit);
  }
  for (int i = nb - 1; i >= 0; --i) {
    open_units(cp.blocks[i], false);
    block_backward_weight(cp.blocks[i], acts_of(S, i), S.xs[i + 1],
                          ln(static_cast<std::size_t>(4 * i) * H, 4 * H));
    close_units(cp.blocks[i], false);
  }
  if (cp.spec.embedding) {
    h().before_backward(cp.emb_unit);
    const V2 dX = tp_gather_tokens(space, g, S.xs[0], dfull);
    vocab_parallel_embedding_backward(space, S.tokens, dX, cfg.seq_len, voff, ps.g2(cp.wte),
                                      ps.g2(cp.wpe));
    h().after_backward(cp.emb_unit);
  }
}

template <class T>
GptModel<T>::GptModel(const ModelConfig& cfg, int micro_batch, const ShardLayout& layout,
                      ShardComms comms, int unit_multiple, bool allocate_store)
    : cfg_(cfg), micro_batch_(micro_batch), layout_(layout), params_(unit_multiple) {
  impl_ = std::make_unique<Impl>(*this, comms, allocate_store);
}

template <class T>
GptModel<T>::~GptModel() = default;

template <class T>
void GptModel<T>::initialize(std::uint64_t seed) {
  params_.initialize(seed);
}

template <class T>
void GptModel<T>::set_recompute(Recompute mode, int layers) {
  if (mode == recompute_ && layers == recompute_layers_) return;
  for (const auto& sets : impl_->pool)
    if (!sets.empty())
      throw std::logic_error(
          "GptModel::set_recompute: activation sets exist already (set it before the first "
          "forward)");
  if (split_ && mode == Recompute::full)
    throw std::invalid_argument(
        "train.recompute: full with a split backward (parallel.schedule: zb-h1): W needs every "
        "block's activations, which full recomputation keeps in one shared working set");
  if (layers < 0)
    throw std::invalid_argument("train.recompute_layers = " + std::to_string(layers) +
                                ", expected >= 0");
  if (layers != 0 && mode != Recompute::full)
    throw std::invalid_argument("train.recompute_layers = " + std::to_string(layers) +
                                " needs train.recompute: full (it is " + to_string(mode) + ")");
  // Selective recomputation writes the probabilities into the scratch workspace's buffer,
  // which no other mode uses: count it while it is used.
  const std::size_t probs = impl_->attn_scratch->probs.span() * sizeof(T);
  if (recompute_ == Recompute::selective) ledger_.release(MemCategory::activations, probs);
  if (mode == Recompute::selective) ledger_.add(MemCategory::activations, probs);
  recompute_ = mode;
  recompute_layers_ = layers;
}

template <class T>
int GptModel<T>::local_tokens() const {
  return impl_->Nl;
}

template <class T>
typename GptModel<T>::Act GptModel<T>::chunk_input(int chunk, int mb) {
  return impl_->acquire(chunk, mb).xs.front();
}

template <class T>
typename GptModel<T>::Act GptModel<T>::chunk_output(int chunk, int mb) {
  return impl_->find(chunk, mb).xs.back();
}

template <class T>
typename GptModel<T>::Act GptModel<T>::chunk_logits(int chunk, int mb) {
  const Act logits = impl_->find(chunk, mb).logits;
  if (!logits.data())
    throw std::logic_error("GptModel::chunk_logits: chunk " + std::to_string(chunk) +
                           " has no head (or no forward yet)");
  return logits;
}

template <class T>
MicroBatchResult GptModel<T>::forward_chunk(int chunk, int mb, const Tokens& tokens,
                                            const Tokens& targets) {
  Kokkos::Profiling::pushRegion("paraxis::forward");
  MicroBatchResult r;
  {
    FencedTimer t("forward", fwd_s_, spans_, mb, chunk, slowdown_, injected_s_);
    r = impl_->forward_chunk(chunk, impl_->acquire(chunk, mb), tokens, targets);
  }
  Kokkos::Profiling::popRegion();
  return r;
}

template <class T>
void GptModel<T>::backward_chunk(int chunk, int mb, const Act& grad_output, const Act& grad_input,
                                 double ce_scale, double aux_scale) {
  if (split_)
    throw std::logic_error(
        "GptModel::backward_chunk: the backward is split (backward_input_chunk, then "
        "backward_weight_chunk)");
  Kokkos::Profiling::pushRegion("paraxis::backward");
  {
    FencedTimer t("backward", bwd_s_, spans_, mb, chunk, slowdown_, injected_s_);
    impl_->backward_chunk(chunk, impl_->find(chunk, mb), grad_output, grad_input, ce_scale,
                          aux_scale);
  }
  impl_->release(chunk, mb);
  Kokkos::Profiling::popRegion();
}

template <class T>
void GptModel<T>::backward_input_chunk(int chunk, int mb, const Act& grad_output,
                                       const Act& grad_input, double ce_scale, double aux_scale) {
  if (!split_)
    throw std::logic_error(
        "GptModel::backward_input_chunk: the backward is not split "
        "(set_split_backward(true) before the first forward)");
  auto& S = impl_->find(chunk, mb);
  if (S.input_grad_done)
    throw std::logic_error("GptModel::backward_input_chunk: B of chunk " + std::to_string(chunk) +
                           ", micro-batch " + std::to_string(mb) + " ran already");
  Kokkos::Profiling::pushRegion("paraxis::backward_input");
  {
    FencedTimer t("backward", bwd_s_, spans_, mb, chunk, slowdown_, injected_s_);
    impl_->backward_input_chunk(chunk, S, grad_output, grad_input, ce_scale, aux_scale);
  }
  S.input_grad_done = true;
  Kokkos::Profiling::popRegion();
}

template <class T>
void GptModel<T>::backward_weight_chunk(int chunk, int mb) {
  auto& S = impl_->find(chunk, mb);
  if (!S.input_grad_done)
    throw std::logic_error("GptModel::backward_weight_chunk: W of chunk " + std::to_string(chunk) +
                           ", micro-batch " + std::to_string(mb) + " before its B");
  Kokkos::Profiling::pushRegion("paraxis::backward_weight");
  {
    FencedTimer t("backward_weight", wgt_s_, spans_, mb, chunk, slowdown_, injected_s_);
    impl_->backward_weight_chunk(chunk, S);
  }
  impl_->release(chunk, mb);
  Kokkos::Profiling::popRegion();
}

template <class T>
void GptModel<T>::set_split_backward(bool on) {
  if (on == split_) return;
  for (const auto& sets : impl_->pool)
    if (!sets.empty())
      throw std::logic_error(
          "GptModel::set_split_backward: activation sets exist already (set it before the first "
          "forward)");
  if (on && recompute_ == Recompute::full)
    throw std::invalid_argument(
        "a split backward (parallel.schedule: zb-h1) needs the activations of every block until "
        "W; train.recompute: full keeps them in one shared working set (use selective or none)");
  // The whole backward's q, k and v gradients: B writes them into each block's own q, k, v.
  auto& im = *impl_;
  const char* labels[] = {"paraxis::dq", "paraxis::dk", "paraxis::dv"};
  int k = 0;
  for (auto* v : {&im.dq, &im.dk, &im.dv}) {
    if (on) {
      ledger_.release(MemCategory::activations, v->span() * sizeof(T));
      *v = {};
    } else {
      *v = im.mat(labels[k], im.N, im.Hl);
    }
    ++k;
  }
  split_ = on;
}

template <class T>
void GptModel<T>::discard(int chunk, int mb) {
  impl_->release(chunk, mb);
}

template <class T>
int GptModel<T>::live_activation_sets() const {
  return static_cast<int>(impl_->live.size());
}

namespace {
void require_whole_chain(const ShardLayout& lay) {
  for (std::size_t c = 0; c < lay.chunks.size(); ++c) {
    const auto& ch = lay.chunks[c];
    const bool ok = (c == 0) == ch.embedding && (c + 1 == lay.chunks.size()) == ch.head &&
                    (c == 0 || lay.chunks[c - 1].end_layer == ch.first_layer);
    if (!ok)
      throw std::logic_error(
          "GptModel::forward_backward needs the shard's chunks to be the whole model in order");
  }
}
}  // namespace

template <class T>
MicroBatchResult GptModel<T>::forward_all(int key, const Tokens& tokens, const Tokens& targets) {
  require_whole_chain(layout_);
  MicroBatchResult all;
  for (int c = 0; c < chunks(); ++c) {
    if (c > 0) Kokkos::deep_copy(chunk_input(c, key), chunk_output(c - 1, key));
    auto r = forward_chunk(c, key, tokens, targets);
    all.ce_sum += r.ce_sum;
    all.aux_sum += r.aux_sum;
    for (auto& s : r.moe) all.moe.push_back(std::move(s));
  }
  return all;
}

template <class T>
MicroBatchResult GptModel<T>::forward(const Tokens& tokens, const Tokens& targets) {
  constexpr int key = -1;
  MicroBatchResult all = forward_all(key, tokens, targets);
  for (int c = 0; c < chunks(); ++c) discard(c, key);
  return all;
}

template <class T>
MicroBatchResult GptModel<T>::forward_backward(const Tokens& tokens, const Tokens& targets,
                                               double ce_scale, double aux_scale) {
  constexpr int key = -1;
  MicroBatchResult all = forward_all(key, tokens, targets);
  auto& grads = impl_->chain_grad;
  if (chunks() > 1 && grads.empty())
    for (int k = 0; k < 2; ++k)
      grads.push_back(impl_->mat("paraxis::chunk_grad", impl_->Nl, cfg_.hidden));
  for (int c = chunks() - 1; c >= 0; --c) {
    const Act out = c + 1 < chunks() ? grads[(c + 1) % 2] : Act();
    const Act in = c > 0 ? grads[c % 2] : Act();
    backward_chunk(c, key, out, in, ce_scale, aux_scale);
  }
  return all;
}

double steady_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double stretch_interval(double end, double measured, double factor) {
  if (!(factor > 1) || !(measured > 0)) return end;
  const double until = end + (factor - 1) * measured;
  // Sleep through most of it (the other ranks of a shared machine keep the core), then spin:
  // a sleep may end late by the scheduler's slack, which would add noise to the injected time.
  constexpr double spin_s = 200e-6;
  const double sleep_s = until - steady_seconds() - spin_s;
  if (sleep_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
  while (steady_seconds() < until) {
  }
  // The slowed interval ends at `until`, not at the clock read that saw it pass: a late wake-up
  // on a busy machine is the host's noise, not the injected fault, and the injected time stays
  // exactly (factor - 1) x measured whatever the load.
  return until;
}

template <class T>
void GptModel<T>::set_compute_slowdown(double factor) {
  if (!std::isfinite(factor) || factor < 1)
    throw std::invalid_argument("GptModel::set_compute_slowdown: factor " + std::to_string(factor) +
                                " (expected a finite number >= 1; 1: off)");
  slowdown_ = factor;
}

template class GptModel<double>;
template class GptModel<float>;
template class GptModel<paraxis::bf16>;

}  // namespace paraxis::model
