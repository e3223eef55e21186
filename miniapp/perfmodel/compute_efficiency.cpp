// Compute efficiency that depends on the work (compute_efficiency.hpp): GEMM roofline with
// tile quantisation, memory-bound passes from bandwidth, and a chunk's times summed from them.
#include "perfmodel/compute_efficiency.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "perfmodel/model_chunks.hpp"
#include "perfmodel/shard_params.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::perfmodel {

namespace {

void require(bool ok, const char* field, double value, const char* expected) {
  if (!ok)
    throw std::invalid_argument(std::string("compute efficiency: ") + field + " = " +
                                std::to_string(value) + ", expected " + expected);
}

double padded(double x, int tile) {
  return std::ceil(x / tile) * tile;
}

}  // namespace

void validate(const ComputeEfficiency& e) {
  require(e.peak_flops > 0, "peak_flops", e.peak_flops, "> 0");
  require(e.memory_bytes_per_s > 0, "memory_bytes_per_s", e.memory_bytes_per_s, "> 0");
  require(e.gemm_efficiency > 0 && e.gemm_efficiency <= 1, "gemm_efficiency", e.gemm_efficiency,
          "in (0, 1]");
  require(e.memory_efficiency > 0 && e.memory_efficiency <= 1, "memory_efficiency",
          e.memory_efficiency, "in (0, 1]");
  require(e.tile_m >= 1, "tile_m", e.tile_m, ">= 1");
  require(e.tile_n >= 1, "tile_n", e.tile_n, ">= 1");
  require(std::isfinite(e.gradient_accumulation_bytes) && e.gradient_accumulation_bytes >= 0,
          "gradient_accumulation_bytes", e.gradient_accumulation_bytes, ">= 0");
}

double memory_time(const ComputeEfficiency& e, double bytes) {
  return bytes / (e.memory_bytes_per_s * e.memory_efficiency);
}

double gemm_time(const ComputeEfficiency& e, double m, double n, double k, double element_bytes,
                 double batch) {
  // The kernel computes whole output tiles: a partial tile costs a full one.
  const double flops = 2.0 * batch * padded(m, e.tile_m) * padded(n, e.tile_n) * k;
  const double bytes = batch * (m * k + k * n + m * n) * element_bytes;
  return std::max(flops / (e.peak_flops * e.gemm_efficiency), memory_time(e, bytes));
}

double gemm_backward_time(const ComputeEfficiency& e, double m, double n, double k,
                          double element_bytes, double batch) {
  return gemm_time(e, m, k, n, element_bytes, batch) + gemm_time(e, k, n, m, element_bytes, batch);
}

double gemm_weight_gradient_time(const ComputeEfficiency& e, double m, double n, double k,
                                 double element_bytes, double batch) {
  return gemm_time(e, k, n, m, element_bytes, batch);
}

LayerBytes dense_layer_bytes(const LayerShape& s) {
  const double e = s.element_bytes;
  const double N = static_cast<double>(s.micro_batch) * s.seq;
  const double Nl = s.sp ? N / s.tp : N;
  const double scores = s.fused_attention
                            ? 0.0
                            : static_cast<double>(s.micro_batch) * (s.heads / s.tp) * s.seq * s.seq;
  const double hidden = Nl * s.hidden * e;
  const double mlp = N * (static_cast<double>(s.ffn) / s.tp) * e;
  LayerBytes b;
  // Forward: LayerNorm x2 (read, write: 2 each), output-projection and MLP-output bias with
  // the residual add (read two, write one: 3 each), softmax with scale and causal mask fused
  // (read scores, write probabilities), bias with GeLU (read, write).
  b.forward = (2 + 3 + 2 + 3) * hidden + 2 * scores * e + 2 * mlp;
  // Backward: LayerNorm x2 (read dy and x, write dx: 3 each) each followed by the residual
  // gradient sum (read two, write one: 3 each), the two h-wide bias gradients (read dy: 1
  // each), softmax (read dP and P, write dS), GeLU (read dy and its input, write dx; b1's
  // gradient fused).
  b.backward = (3 + 3 + 1 + 3 + 3 + 1) * hidden + 3 * scores * e + 3 * mlp;
  b.softmax = 2 * scores * e;
  if (s.attention_dropout) {
    const double dropout = (2 * e + 1) * scores;
    b.forward += dropout;
    b.backward += dropout;
    b.softmax += dropout;
  }
  return b;
}

double moe_permutation_bytes(double tokens, double hidden, int top_k, int local_experts,
                             double element_bytes) {
  const double routed = tokens * top_k * hidden * element_bytes;  // N k h e
  const double sort = local_experts > 1 ? 2 * 2 * routed : 0.0;
  return 2 * routed + (routed + tokens * hidden * element_bytes) + sort;
}

namespace {

// The attention half of a block (projections, cores, their memory-bound passes are counted
// with the layer's bytes): forward and backward GEMM seconds.
struct Gemms {
  double forward = 0, backward = 0, scores = 0;  // scores: q k^T's forward alone
  double weight = 0;  // the projections' weight gradients (part of backward)
};

Gemms attention_gemms(const ComputeEfficiency& e, const LayerShape& s) {
  const double x = s.element_bytes;
  const double N = static_cast<double>(s.micro_batch) * s.seq;
  const double h = s.hidden, S = s.seq, d = static_cast<double>(s.hidden) / s.heads;
  // A fused causal kernel computes only the score tiles on or below the diagonal: half of them
  // (as half the heads' worth of whole products).
  const double heads =
      static_cast<double>(s.micro_batch) * (s.heads / s.tp) * (s.fused_attention ? 0.5 : 1.0);
  Gemms g;
  // Q, K, V projections (one N x 3h/tp GEMM), q k^T and P v per head, output projection.
  g.scores = gemm_time(e, S, S, d, x, heads);
  g.forward = gemm_time(e, N, 3 * h / s.tp, h, x) + g.scores + gemm_time(e, S, d, S, x, heads) +
              gemm_time(e, N, h, h / s.tp, x);
  g.backward = gemm_backward_time(e, N, 3 * h / s.tp, h, x) +
               gemm_backward_time(e, S, S, d, x, heads) + gemm_backward_time(e, S, d, S, x, heads) +
               gemm_backward_time(e, N, h, h / s.tp, x) +
               (s.fused_attention ? g.scores : 0.0);  // the fused backward's q k^T again
  g.weight = gemm_weight_gradient_time(e, N, 3 * h / s.tp, h, x) +
             gemm_weight_gradient_time(e, N, h, h / s.tp, x);
  return g;
}

}  // namespace

LayerTimes dense_layer_times(const ComputeEfficiency& e, const LayerShape& s) {
  const double x = s.element_bytes;
  const double N = static_cast<double>(s.micro_batch) * s.seq;
  const double h = s.hidden, f = static_cast<double>(s.ffn) / s.tp;
  const Gemms a = attention_gemms(e, s);
  const LayerBytes b = dense_layer_bytes(s);
  LayerTimes t;
  t.forward =
      a.forward + gemm_time(e, N, f, h, x) + gemm_time(e, N, h, f, x) + memory_time(e, b.forward);
  t.backward = a.backward + gemm_backward_time(e, N, f, h, x) + gemm_backward_time(e, N, h, f, x) +
               memory_time(e, b.backward);
  t.backward_weight = a.weight + gemm_weight_gradient_time(e, N, f, h, x) +
                      gemm_weight_gradient_time(e, N, h, f, x);
  t.full_again = t.forward;
  t.selective_again = a.scores + memory_time(e, b.softmax);
  return t;
}

namespace {

LayerShape layer_shape(const model::ModelConfig& m, const Scenario& c) {
  LayerShape s;
  s.tp = c.tp;
  s.sp = c.sp();
  s.micro_batch = c.micro_batch;
  s.seq = m.seq_len;
  s.hidden = m.hidden;
  s.ffn = m.ffn;
  s.heads = m.heads;
  s.element_bytes = element_bytes(c.precision).activation;
  s.fused_attention = m.attention == model::Attention::fused;
  s.attention_dropout = m.attention_dropout > 0;
  return s;
}

// An MoE block: the dense block's attention and passes, its MLP replaced by the router and the
// rank's experts (E / ep of them, each given ep N k / E rows when balanced), and the tokens'
// permutation to and from the experts each way (moe_permutation_bytes).
LayerTimes moe_layer_times(const ComputeEfficiency& e, const model::ModelConfig& m,
                           const Scenario& c, const LayerShape& s, const LayerTimes& dense) {
  const double x = s.element_bytes;
  const double N = static_cast<double>(c.micro_batch) * m.seq_len;
  const double h = m.hidden, f = static_cast<double>(m.ffn) / c.tp;
  const double E = m.moe.experts, local = E / c.ep, rows = c.ep * N * m.moe.top_k / E;
  const double dense_mlp_f = gemm_time(e, N, f, h, x) + gemm_time(e, N, h, f, x);
  const double dense_mlp_b = gemm_backward_time(e, N, f, h, x) + gemm_backward_time(e, N, h, f, x);
  const double experts_f = local * (gemm_time(e, rows, f, h, x) + gemm_time(e, rows, h, f, x)) +
                           gemm_time(e, N, E, h, x);
  const double experts_b =
      local * (gemm_backward_time(e, rows, f, h, x) + gemm_backward_time(e, rows, h, f, x)) +
      gemm_backward_time(e, N, E, h, x);
  const double dense_mlp_w =
      gemm_weight_gradient_time(e, N, f, h, x) + gemm_weight_gradient_time(e, N, h, f, x);
  const double experts_w = local * (gemm_weight_gradient_time(e, rows, f, h, x) +
                                    gemm_weight_gradient_time(e, rows, h, f, x)) +
                           gemm_weight_gradient_time(e, N, E, h, x);
  const double permutation =
      memory_time(e, moe_permutation_bytes(N, h, m.moe.top_k, m.moe.experts / c.ep, x));
  LayerTimes moe = dense;
  moe.forward += experts_f - dense_mlp_f + permutation;
  moe.backward += experts_b - dense_mlp_b + permutation;
  moe.backward_weight += experts_w - dense_mlp_w;
  moe.full_again = moe.forward;
  return moe;
}

// The embedding's and the head's work, added to t when the chunk holds them.
void add_embedding_and_head(const ComputeEfficiency& e, const model::ModelConfig& m,
                            const Scenario& c, const LayerShape& s, const model::ModelChunk& chunk,
                            ChunkTimes& t) {
  const double x = s.element_bytes;
  const double N = static_cast<double>(c.micro_batch) * m.seq_len;
  const double Nl = s.sp ? N / c.tp : N;
  const double h = m.hidden;
  if (chunk.embedding) {
    // Token and position rows gathered and summed, written once (read 2, write 1).
    t.forward += memory_time(e, 3 * Nl * h * x);
    t.backward += memory_time(e, 3 * Nl * h * x);
  }
  if (chunk.head) {
    // Final LayerNorm, logits on the rank's vocab / tp columns, softmax cross-entropy (read
    // the logits, write probabilities; backward: read them, write the logit gradient).
    const double v = static_cast<double>(m.vocab) / c.tp;
    t.forward +=
        memory_time(e, 2 * Nl * h * x) + gemm_time(e, N, v, h, x) + memory_time(e, 2 * N * v * x);
    t.backward += memory_time(e, 3 * Nl * h * x) + gemm_backward_time(e, N, v, h, x) +
                  memory_time(e, 2 * N * v * x);
    t.backward_weight += gemm_weight_gradient_time(e, N, v, h, x);
  }
}

}  // namespace

ChunkTimes chunk_times(const ComputeEfficiency& e, const model::ModelConfig& m, const Scenario& c,
                       const model::ModelChunk& chunk) {
  const LayerShape s = layer_shape(m, c);
  const LayerTimes dense = dense_layer_times(e, s);
  const LayerTimes moe = m.moe.experts > 0 ? moe_layer_times(e, m, c, s, dense) : dense;
  ChunkTimes t;
  for (int l = chunk.first_layer; l < chunk.end_layer; ++l) {
    const LayerTimes& b = m.is_moe_layer(l) ? moe : dense;
    t.forward += b.forward;
    t.backward += b.backward;
    t.backward_weight += b.backward_weight;
    if (c.recompute == model::Recompute::selective)
      t.recompute += b.selective_again;
    else if (model::recomputes_block(c.recompute, c.recompute_layers, l - chunk.first_layer))
      t.recompute += b.full_again;
  }
  add_embedding_and_head(e, m, c, s, chunk, t);
  return t;
}

double optimizer_bytes_per_parameter(model::Precision p) {
  const ElementBytes b = element_bytes(p);
  const double master = has_master_copy(p) ? b.gradient : 0;
  // Read parameter, gradient, two moments (and master); write parameter, moments (master).
  return (b.parameter + b.gradient + 2.0 * b.gradient + master) +
         (b.parameter + 2.0 * b.gradient + master);
}

double optimizer_time(const ComputeEfficiency& e, double parameters, double bytes_per_parameter) {
  return memory_time(e, parameters * bytes_per_parameter);
}

// The stack's gradient accumulation pass after every micro-batch's backward: the stage's
// parameters (its rank's share, all of them whatever the ZeRO stage) x
// gradient_accumulation_bytes, shared among the stage's chunks by their weight gradients and
// added to each chunk's backward (W's under a split schedule, which makes the gradients).
void add_gradient_accumulation(const ComputeEfficiency& e, const model::ModelConfig& m,
                               const Scenario& c, const std::vector<model::ModelChunk>& chunks,
                               bool split, StepTimeInputs& in) {
  if (e.gradient_accumulation_bytes <= 0) return;
  std::vector<double>& times = split ? in.backward_weight_s : in.backward_s;
  for (int s = 0; s < c.pp; ++s) {
    const std::size_t elements = in.stage_units ? unpadded_elements((*in.stage_units)[s])
                                                : unpadded_elements(shard_units(m, c, s));
    const double pass =
        memory_time(e, static_cast<double>(elements) * e.gradient_accumulation_bytes);
    const std::vector<int> ids = stage_chunk_ids(c, s);
    double total = 0;
    for (int id : ids) total += chunk_weight_gradient_flops_per_token(m, chunks[id]);
    for (int id : ids) {
      const double w = chunk_weight_gradient_flops_per_token(m, chunks[id]);
      times[id] += pass * (total > 0 ? w / total : 1.0 / static_cast<double>(ids.size()));
    }
  }
}

void set_compute_times(const ComputeEfficiency& e, const model::ModelConfig& m, const Scenario& c,
                       StepTimeInputs& in) {
  validate(e);
  std::vector<model::ModelChunk> own;
  if (!in.chunks) own = model::split_layers(m, c.chunks(), c.stage_layers);
  const std::vector<model::ModelChunk>& chunks = in.chunks ? *in.chunks : own;
  in.forward_s.clear();
  in.backward_s.clear();
  in.backward_weight_s.clear();
  const bool split = schedule::splits_backward(c.schedule);
  for (const auto& chunk : chunks) {
    const ChunkTimes t = chunk_times(e, m, c, chunk);
    in.forward_s.push_back(t.forward);
    // A split schedule's backward_s is B's alone (StepTimeInputs).
    in.backward_s.push_back(t.backward + t.recompute - (split ? t.backward_weight : 0.0));
    if (split) in.backward_weight_s.push_back(t.backward_weight);
  }
  add_gradient_accumulation(e, m, c, chunks, split, in);
  double parameters = 0;
  for (int s = 0; s < c.pp; ++s) {
    const std::size_t owned = in.stage_units
                                  ? owned_elements((*in.stage_units)[s], c.effective_zero())
                                  : owned_elements(shard_units(m, c, s), c.effective_zero());
    parameters = std::max(parameters, static_cast<double>(owned));
  }
  in.optimizer_s = optimizer_time(e, parameters, optimizer_bytes_per_parameter(c.precision));
}

}  // namespace paraxis::perfmodel
