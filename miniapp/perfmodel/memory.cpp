// Model state, ZeRO step buffers and activations per rank, following paraxis's allocations
// (zero_optimizer.cpp, gpt_model_activations.cpp allocate_set and the model's constructor,
// parallel_trainer.cpp).
#include "perfmodel/memory.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "config/parallel_config.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::perfmodel {

namespace {

void check_zero(int zero) {
  config::require_zero_stage(zero);
}

// Rows of a grow-only buffer: paraxis allocates at least one.
double rows_at_least_one(double r) {
  return std::max(r, 1.0);
}

struct Dims {
  double N, Nl, H, Hl, Fl, Vl, B, S, al, E, K, e, a;
};

Dims dims(const model::ModelConfig& m, const Scenario& c) {
  const ElementBytes eb = element_bytes(c.precision);
  Dims d;
  d.N = static_cast<double>(c.micro_batch) * m.seq_len;
  d.Nl = c.sp() ? d.N / c.tp : d.N;
  d.H = m.hidden;
  d.al = m.heads / c.tp;
  d.Hl = d.al * m.head_dim();
  d.Fl = m.ffn / c.tp;
  d.Vl = (m.vocab + c.tp - 1) / c.tp;
  d.B = c.micro_batch;
  d.S = m.seq_len;
  d.E = m.moe.experts;
  d.K = m.moe.experts > 0 ? m.moe.top_k : 0;
  d.e = eb.activation;
  d.a = eb.accumulator;
  return d;
}

// Rows of one MoE layer and micro-batch: kept at the source (P in gpt_model_moe.cpp) and computed
// by this rank's experts (R).
std::pair<double, double> moe_rows(const model::ModelConfig& m, const Scenario& c,
                                   const ExpertRouting& r) {
  const int N = c.micro_batch * m.seq_len;
  const double kept = r.kept_rows >= 0 ? r.kept_rows : expected_kept_rows(m, N);
  const double local = c.ep > 1 ? (r.local_rows >= 0 ? r.local_rows : kept) : kept;
  return {kept, local};
}

}  // namespace

ModelStateBytes model_state_bytes(int zero, double P, int dp, model::Precision precision) {
  check_zero(zero);
  if (dp < 1) throw std::invalid_argument("dp = " + std::to_string(dp) + ", expected >= 1");
  const ElementBytes eb = element_bytes(precision);
  const double C = zero >= 1 ? P / dp : P;
  ModelStateBytes s;
  s.params = eb.parameter * (zero == 3 ? C : P);
  s.grads = zero == 0 ? eb.gradient * P : zero == 1 ? eb.gradient * (P + C) : eb.gradient * C;
  s.optimizer = (2.0 + (has_master_copy(precision) ? 1.0 : 0.0)) * eb.gradient * C;
  return s;
}

ModelStateBytes model_state_bytes(const std::vector<ParamUnit>& units, const Scenario& c) {
  check_zero(c.zero);
  const int zero = c.effective_zero();
  const ElementBytes eb = element_bytes(c.precision);
  const double P = static_cast<double>(padded_elements(units));
  const double C = static_cast<double>(owned_elements(units, zero));
  ModelStateBytes s;
  s.params = eb.parameter * (zero == 3 ? C : P);
  s.grads = zero == 0 ? eb.gradient * P : zero == 1 ? eb.gradient * (P + C) : eb.gradient * C;
  s.optimizer = (2.0 + (has_master_copy(c.precision) ? 1.0 : 0.0)) * eb.gradient * C;
  return s;
}

double zero_step_buffer_bytes(const std::vector<ParamUnit>& units, const Scenario& c) {
  check_zero(c.zero);
  const int zero = c.effective_zero();
  if (zero < 2) return 0;
  const ElementBytes eb = element_bytes(c.precision);
  const double P = static_cast<double>(padded_elements(units));
  const double C = static_cast<double>(owned_elements(units, zero));
  double max_shard = 0, max_unit[2] = {0, 0};
  for (const auto& u : units) {
    max_shard = std::max(max_shard, static_cast<double>(u.owned(zero)));
    double& mu = max_unit[u.expert ? 1 : 0];
    mu = std::max(mu, static_cast<double>(u.padded));
  }
  // The reduce-scatter's receive buffer: one shard, or one per unit when several are in flight.
  double bytes = eb.gradient * (c.overlap ? C : max_shard);
  if (zero == 2) bytes += eb.gradient * P;  // the full gradient buffer of the step
  if (zero == 3)
    for (double mu : max_unit) bytes += mu * (eb.parameter + (c.overlap ? 2.0 : 1.0) * eb.gradient);
  return bytes;
}

namespace {

// Everything one block keeps without recomputation (allocate_layer with recompute none, plus
// the block's input in the set's residual stream).
double stored_block_bytes(const model::ModelConfig& m, const Scenario& c, int layer,
                          const ExpertRouting& routing) {
  const Dims d = dims(m, c);
  double elems = 4 * d.Nl * d.H     // block input, LN1 out, x_mid, LN2 out
                 + d.N * d.Hl       // attention output (input of the row-parallel projection)
                 + 3 * d.N * d.Hl;  // q, k, v as attention saved them
  double bytes = 4 * d.Nl * d.a;    // LayerNorm statistics
  if (m.attention == model::Attention::fused)
    bytes += d.B * d.al * d.S * d.a;  // fused: each row's log-sum-exp, per head
  else
    elems += d.B * d.al * d.S * d.S;  // unfused: the softmax probabilities
  if (!m.is_moe_layer(layer)) {
    elems += 2 * d.N * d.Fl;
  } else {
    const auto [kept, local] = moe_rows(m, c, routing);
    const double NK = d.N * d.K;
    elems += d.N * d.E + NK;                   // router probabilities, gate weights
    bytes += 4 * NK;                           // expert indices
    const double blocks = std::ceil(NK / 64);  // kernels/moe.hpp routing blocks
    bytes += 4 * (4 * d.E + 1 + 3 * NK + blocks * d.E);
    elems += rows_at_least_one(kept) * d.H;  // expert outputs of the kept rows (source side)
    elems += rows_at_least_one(local) * (d.H + 2 * d.Fl);  // expert inputs, u, gelu(u)
    if (c.ep > 1) {
      elems += rows_at_least_one(local) * d.H;    // outputs before they travel back
      bytes += 2 * 4 * rows_at_least_one(local);  // source <-> expert order permutations
    }
  }
  return bytes + elems * d.e;
}

}  // namespace

double block_activation_bytes(const model::ModelConfig& m, const Scenario& c, int layer, int index,
                              const ExpertRouting& routing) {
  const Dims d = dims(m, c);
  // Full: the input alone; the block's forward runs again in the shard's working set.
  if (model::recomputes_block(c.recompute, c.recompute_layers, index)) return d.Nl * d.H * d.e;
  const double stored = stored_block_bytes(m, c, layer, routing);
  // Selective: the probabilities go to the shard's one buffer (activation_scratch_bytes); fused
  // attention keeps none (and is refused with selective, config_rules.cpp).
  if (c.recompute == model::Recompute::selective && m.attention == model::Attention::unfused)
    return stored - d.B * d.al * d.S * d.S * d.e;
  return stored;
}

double layernorm_gradient_set_bytes(const model::ModelConfig& m, const Scenario& c,
                                    const ChunkLayers& chunk) {
  if (!schedule::splits_backward(c.schedule)) return 0;
  const double H = m.hidden;
  return element_bytes(c.precision).gradient * (4 * H * chunk.layers() + (chunk.head ? 2 * H : 0));
}

double chunk_activation_bytes(const model::ModelConfig& m, const Scenario& c,
                              const ChunkLayers& chunk, const ExpertRouting& routing) {
  const Dims d = dims(m, c);
  double bytes = d.Nl * d.H * d.e;  // the chunk's output (the last residual)
  for (int l = chunk.first_layer; l < chunk.end_layer; ++l)
    bytes += block_activation_bytes(m, c, l, l - chunk.first_layer, routing);
  if (chunk.embedding) bytes += 4 * d.N;  // tokens
  if (chunk.head)
    bytes += 4 * d.N                            // targets
             + (d.Nl * d.H + d.N * d.Vl) * d.e  // final LayerNorm output, logits
             + (2 * d.Nl + d.N) * d.a;          // its statistics, log-sum-exp
  return bytes + layernorm_gradient_set_bytes(m, c, chunk);
}

namespace {

// activation_scratch_bytes with the model's cut given.
double scratch_bytes(const model::ModelConfig& m, const Scenario& c, int stage,
                     const ExpertRouting& routing, const std::vector<ChunkLayers>& chunks) {
  const Dims d = dims(m, c);
  bool head = false, moe = false;
  int working[2] = {-1, -1};  // a dense and an MoE block recomputed in full, if any
  for (int id : stage_chunk_ids(c, stage)) {
    head = head || chunks[id].head;
    for (int l = chunks[id].first_layer; l < chunks[id].end_layer; ++l) {
      moe = moe || m.is_moe_layer(l);
      if (model::recomputes_block(c.recompute, c.recompute_layers, l - chunks[id].first_layer))
        working[m.is_moe_layer(l) ? 1 : 0] = l;
    }
  }
  // q, k, v and their gradients, the attention gradient; a split backward's B writes the
  // gradients of q, k and v into the set's own q, k and v, and the model frees those three.
  const double qkv = schedule::splits_backward(c.schedule) ? 4 : 7;
  const bool fused = m.attention == model::Attention::fused;
  double elems = qkv * d.N * d.Hl + 3 * d.Nl * d.H  // residual-stream gradients
                 + d.N * d.Fl;                      // MLP gradient
  double bytes = 0;
  if (fused) {  // the fused kernel's dk, dv and per-row delta
    elems += 2 * d.N * d.Hl;
    bytes += d.B * d.al * d.S * d.a;
  } else {  // context and its gradient, dq, dk, dv, the scores and their gradient
    elems += 5 * d.N * d.Hl + d.B * d.al * d.S * d.S;
  }
  if (c.sp()) elems += 3 * d.N * d.H;  // gathered input, gathered gradient, unreduced product
  if (head) {
    elems += d.N * d.Vl;                   // logits gradient
    if (c.tp > 1) bytes += 3 * d.N * d.a;  // vocabulary-parallel cross-entropy statistics
  }
  if (d.E > 0) {  // allocated whenever the model has experts, used by MoE blocks only
    elems += d.N * d.K + 2 * d.N * d.E;
    bytes += 4 * d.E + d.a * d.E;
  }
  if (moe) {  // grow-only buffers, sized by the largest routing seen
    const auto [kept, local] = moe_rows(m, c, routing);
    elems += 2 * rows_at_least_one(kept) * d.H + 2 * rows_at_least_one(local) * d.Fl;
    if (c.ep > 1)
      elems +=
          2 * rows_at_least_one(local) * d.H + 2 * rows_at_least_one(std::max(kept, local)) * d.H;
  }
  // Recomputation's buffers, one per shard: selective's probabilities; full's working set per
  // kind of block, everything a stored block keeps but its input (which the set keeps).
  if (c.recompute == model::Recompute::selective && !fused) elems += d.B * d.al * d.S * d.S;
  for (int l : working)
    if (l >= 0) bytes += stored_block_bytes(m, c, l, routing) - d.Nl * d.H * d.e;
  return bytes + elems * d.e;
}

}  // namespace

double activation_scratch_bytes(const model::ModelConfig& m, const Scenario& c, int stage,
                                const ExpertRouting& routing) {
  return scratch_bytes(m, c, stage, routing, split_layers(m, c.chunks(), c.stage_layers));
}

int peak_live_sets(const Scenario& c, int stage) {
  const auto shape = c.pipeline_shape();
  if (stage < 0 || stage >= c.pp)
    throw std::invalid_argument("pipeline stage " + std::to_string(stage) +
                                " outside pp = " + std::to_string(c.pp));
  switch (c.schedule) {
    case schedule::ScheduleKind::gpipe:
      return shape.micro_batches * shape.virtual_stages;
    case schedule::ScheduleKind::one_f_one_b:
      return std::min(c.pp - stage, shape.micro_batches);
    case schedule::ScheduleKind::interleaved:
    case schedule::ScheduleKind::zb_h1: {
      const auto sched = schedule::make_schedule(c.schedule, shape);
      const auto r =
          schedule::replay_schedule(sched, shape, [](int, const schedule::Action&) { return 1.0; });
      return r.peak_live[stage];
    }
  }
  return 0;
}

std::vector<int> peak_live_sets_per_chunk(const Scenario& c, int stage) {
  return peak_live_sets_per_chunk(c, stage,
                                  schedule::make_schedule(c.schedule, c.pipeline_shape()));
}

std::vector<int> peak_live_sets_per_chunk(const Scenario& c, int stage,
                                          const schedule::Schedule& sched) {
  const auto ids = stage_chunk_ids(c, stage);
  // Vectors indexed by chunk and (chunk, micro-batch), sized by what the stage's actions name:
  // the walk runs once per stage of every configuration a planner tries.
  int chunks = 0, micro_batches = 0;
  for (const auto& a : sched[stage]) {
    chunks = std::max(chunks, a.chunk + 1);
    micro_batches = std::max(micro_batches, a.micro_batch + 1);
  }
  std::vector<int> live(chunks, 0), peak(chunks, 0);
  std::vector<char> held(static_cast<std::size_t>(chunks) * micro_batches, 0);
  using K = schedule::ActionKind;
  // A split backward frees the set after W (every stage of such a schedule has W actions).
  const bool split =
      std::any_of(sched[stage].begin(), sched[stage].end(),
                  [](const schedule::Action& a) { return a.kind == K::backward_weight; });
  const K frees = split ? K::backward_weight : K::backward;
  for (const auto& a : sched[stage]) {
    char& h = held[static_cast<std::size_t>(a.chunk) * micro_batches + a.micro_batch];
    if ((a.kind == K::recv_activation || a.kind == K::forward) && !h) {
      h = 1;
      peak[a.chunk] = std::max(peak[a.chunk], ++live[a.chunk]);
    } else if (a.kind == frees) {
      h = 0;
      --live[a.chunk];
    }
  }
  std::vector<int> out;
  for (int id : ids) out.push_back(id >= 0 && id < chunks ? peak[id] : 0);
  return out;
}

int pipeline_gradient_buffers(const Scenario& c, int stage) {
  if (c.pp <= 1) return 0;
  return pipeline_gradient_buffers(c, stage,
                                   schedule::make_schedule(c.schedule, c.pipeline_shape()));
}

int pipeline_gradient_buffers(const Scenario& c, int stage, const schedule::Schedule& sched) {
  if (c.pp <= 1) return 0;
  const int last = c.chunks() - 1;
  using K = schedule::ActionKind;
  int held = 0, peak = 0;
  for (const auto& a : sched[stage]) {
    switch (a.kind) {
      case K::recv_gradient:  // the gradient of the chunk's output lands in a buffer
        peak = std::max(peak, ++held);
        break;
      case K::backward:
        if (a.chunk > 0) peak = std::max(peak, ++held);  // the input gradient it produces
        if (a.chunk < last) --held;                      // the received gradient, consumed
        break;
      case K::send_gradient:  // completes (by assumption) at the progress call after it
        --held;
        break;
      default:
        break;
    }
  }
  return peak;
}

namespace {

MemoryEstimate stage_memory(const model::ModelConfig& m, const Scenario& c, int stage,
                            const ExpertRouting& routing, const std::vector<ParamUnit>& units,
                            const std::vector<int>& live, int gradient_buffers,
                            const std::vector<ChunkLayers>& chunks) {
  const ModelStateBytes st = model_state_bytes(units, c);
  MemoryEstimate r;
  r.params = st.params;
  r.grads = st.grads;
  r.optimizer = st.optimizer;
  r.step_buffers = zero_step_buffer_bytes(units, c);
  const auto ids = stage_chunk_ids(c, stage);
  for (std::size_t i = 0; i < ids.size(); ++i)
    r.activations += live[i] * chunk_activation_bytes(m, c, chunks[ids[i]], routing);
  r.activations += scratch_bytes(m, c, stage, routing, chunks);
  const Dims d = dims(m, c);
  r.activations += gradient_buffers * d.Nl * d.H * d.e;
  r.peak = r.params + r.grads + r.optimizer + r.step_buffers + r.activations;
  return r;
}

}  // namespace

MemoryEstimate memory_per_rank(const model::ModelConfig& m, const Scenario& c, int stage,
                               const ExpertRouting& routing) {
  if (stage < 0 || stage >= c.pp)
    throw std::invalid_argument("pipeline stage " + std::to_string(stage) +
                                " outside pp = " + std::to_string(c.pp));
  const auto sched = schedule::make_schedule(c.schedule, c.pipeline_shape());
  return stage_memory(
      m, c, stage, routing, shard_units(m, c, stage), peak_live_sets_per_chunk(c, stage, sched),
      pipeline_gradient_buffers(c, stage, sched), split_layers(m, c.chunks(), c.stage_layers));
}

ScheduleWalk walk_schedule(const Scenario& c, const schedule::Schedule& sched) {
  if (static_cast<int>(sched.size()) != c.pp)
    throw std::invalid_argument("walk_schedule: schedule has " + std::to_string(sched.size()) +
                                " stages, expected pp = " + std::to_string(c.pp));
  ScheduleWalk w;
  for (int s = 0; s < c.pp; ++s) {
    w.live.push_back(peak_live_sets_per_chunk(c, s, sched));
    w.gradient_buffers.push_back(pipeline_gradient_buffers(c, s, sched));
  }
  return w;
}

MemoryEstimate largest_rank_memory(const model::ModelConfig& m, const Scenario& c,
                                   const PrebuiltStages& parts, const ExpertRouting& routing,
                                   int* stage) {
  if (!parts.walk || !parts.chunks || !parts.units)
    throw std::invalid_argument("largest_rank_memory: a prebuilt part is missing (walk " +
                                std::string(parts.walk ? "set" : "null") + ", chunks " +
                                (parts.chunks ? "set" : "null") + ", units " +
                                (parts.units ? "set" : "null") + "), expected all three");
  if (static_cast<int>(parts.walk->live.size()) != c.pp ||
      static_cast<int>(parts.units->size()) != c.pp ||
      static_cast<int>(parts.chunks->size()) != c.chunks())
    throw std::invalid_argument(
        "largest_rank_memory: prebuilt parts for " + std::to_string(parts.walk->live.size()) +
        " stages, " + std::to_string(parts.units->size()) + " shards and " +
        std::to_string(parts.chunks->size()) + " chunks, expected pp = " + std::to_string(c.pp) +
        " and " + std::to_string(c.chunks()) + " chunks");
  MemoryEstimate best;
  int at = 0;
  for (int s = 0; s < c.pp; ++s) {
    const MemoryEstimate e = stage_memory(m, c, s, routing, (*parts.units)[s], parts.walk->live[s],
                                          parts.walk->gradient_buffers[s], *parts.chunks);
    if (s == 0 || e.peak > best.peak) {
      best = e;
      at = s;
    }
  }
  if (stage) *stage = at;
  return best;
}

MemoryEstimate largest_rank_memory(const model::ModelConfig& m, const Scenario& c,
                                   const ExpertRouting& routing, int* stage) {
  const ScheduleWalk walk =
      walk_schedule(c, schedule::make_schedule(c.schedule, c.pipeline_shape()));
  const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
  std::vector<std::vector<ParamUnit>> units;
  for (int s = 0; s < c.pp; ++s) units.push_back(shard_units(m, c, s));
  return largest_rank_memory(m, c, PrebuiltStages{&walk, &chunks, &units}, routing, stage);
}

double korthikanti_layer_activation_bytes(KorthikantiCase k, double s, double b, double h, double a,
                                          double t, model::Recompute r) {
  if (!(t >= 1)) throw std::invalid_argument("korthikanti: t = " + std::to_string(t) + " < 1");
  if (r == model::Recompute::full)  // the layer's input, sharded by sequence parallelism
    return 2.0 * s * b * h / (k == KorthikantiCase::tensor_sequence_parallel ? t : 1.0);
  // Selective recomputation keeps everything but the attention core's 5 a s / h term.
  const double attention = r == model::Recompute::selective ? 0.0 : 5.0 * a * s / h;
  switch (k) {
    case KorthikantiCase::no_parallelism:
      return s * b * h * (34.0 + attention);
    case KorthikantiCase::tensor_parallel:
      return s * b * h * (10.0 + 24.0 / t + attention / t);
    case KorthikantiCase::tensor_sequence_parallel:
      return s * b * h * (34.0 / t + attention / t);
  }
  return 0;
}

}  // namespace paraxis::perfmodel
