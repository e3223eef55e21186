// Step time: the schedule replayed with modelled action times, plus the exposed communication
// of each axis.
#include "perfmodel/step_time.hpp"

#include <algorithm>
#include <array>
#include <random>
#include <stdexcept>
#include <string>

#include "perfmodel/flops.hpp"
#include "perfmodel/model_chunks.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::perfmodel {

double traffic_time(const AxisTraffic& traffic, int group, const LinkCost& link,
                    AllReduceAlgorithm all_reduce, const OpLinks* per_op,
                    const CallSequence* as_issued) {
  double t = 0;
  // The axis's whole group (0) named, so that a sequence's calls (each naming its group) compare.
  auto named = [group](const AxisTraffic& a) {
    AxisTraffic out;
    for (const auto& o : a.ops) out.add(o.op, o.bytes, o.count, o.group > 0 ? o.group : group);
    return out;
  };
  if (as_issued && !as_issued->empty() &&
      same_calls(named(traffic_of(*as_issued)), named(traffic))) {
    // A position not timed (seconds < 0) takes its curve's time.
    for (const auto& q : *as_issued)
      t += q.seconds >= 0
               ? q.seconds
               : call_time(q.op, q.group > 0 ? q.group : group, q.bytes, link, per_op, all_reduce);
    return t;
  }
  for (const auto& o : traffic.ops)
    t +=
        o.count * call_time(o.op, o.group > 0 ? o.group : group, o.bytes, link, per_op, all_reduce);
  return t;
}

double pipeline_message_bytes(const model::ModelConfig& m, const Scenario& c) {
  const double tokens = static_cast<double>(c.micro_batch) * m.seq_len;
  return (c.sp() ? tokens / c.tp : tokens) * m.hidden * element_bytes(c.precision).activation;
}

double transfer_time(int chunks, int k, double p2p) {
  // A forward receives from chunk k - 1 and sends to k + 1; a backward the reverse.
  return ((k > 0 ? 1 : 0) + (k < chunks - 1 ? 1 : 0)) * p2p;
}

namespace {

void check_step_time_inputs(const Scenario& c, const StepTimeInputs& in) {
  const int C = c.chunks();
  const auto check_size = [C](const std::vector<double>& v, const char* name) {
    if (!v.empty() && static_cast<int>(v.size()) != C)
      throw std::invalid_argument("predict_step_time: " + std::string(name) + " has " +
                                  std::to_string(v.size()) + " entries for " + std::to_string(C) +
                                  " model chunks");
  };
  check_size(in.forward_s, "forward_s");
  check_size(in.backward_s, "backward_s");
  check_size(in.backward_weight_s, "backward_weight_s");
  check_size(in.action_overhead_s, "action_overhead_s");
  for (double o : in.action_overhead_s)
    if (!(o >= 0))
      throw std::invalid_argument("predict_step_time: action_overhead_s has " + std::to_string(o) +
                                  " s, expected >= 0");
  if (in.forward_s.empty() && !(in.flops_per_s > 0))
    throw std::invalid_argument(
        "predict_step_time: flops_per_s = " + std::to_string(in.flops_per_s) +
        ", expected a positive achieved rate (or forward_s)");
}

// Per chunk and micro-batch: compute, and the tensor/expert collectives inside it. bwd is the
// whole backward; a split schedule runs it as B (bin) and W (wgt), any other as one action
// (bin = bwd, wgt = 0). xt: the transfers of a forward, and of a backward; wait_f, wait_b: with
// a blocking pipeline engine, what each forward and each backward waits on; ovh: the engine's
// own time per action (StepTimeInputs::action_overhead_s).
struct ChunkActionTimes {
  std::vector<double> fwd, bwd, bin, wgt, tp_f, tp_b, tp_w, ep_f, ep_b, xt, wait_f, wait_b, ovh;
  explicit ChunkActionTimes(int C)
      : fwd(C),
        bwd(C),
        bin(C),
        wgt(C, 0.0),
        tp_f(C),
        tp_b(C),
        tp_w(C, 0.0),
        ep_f(C),
        ep_b(C),
        xt(C),
        wait_f(C, 0.0),
        wait_b(C, 0.0),
        ovh(C, 0.0) {}
  // The replayed actions' durations (unsplit schedules: wgt and tp_w are 0 and backward runs
  // whole, bin = bwd).
  double forward_action(int k) const {
    return fwd[k] + tp_f[k] + ep_f[k] + xt[k] + wait_f[k] + ovh[k];
  }
  double backward_action(int k) const {
    return bin[k] + tp_b[k] + ep_b[k] + xt[k] + wait_b[k] + ovh[k];
  }
  double weight_action(int k) const { return wgt[k] + tp_w[k] + ovh[k]; }
  // Seconds of a stage's replayed busy time that are not its compute and collectives but its
  // transfers and the engine's own time: the engine counts them as bubble.
  double between_actions(int k, double micro_batches, bool split) const {
    return micro_batches * (2 * xt[k] + (split ? 3 : 2) * ovh[k]);
  }
};

// The time of `flops` per token of chunk k at the forward's rate: the achieved rate, or the
// measured forward's time per FLOP when given.
double at_forward_rate(const model::ModelConfig& m, const Scenario& c, const StepTimeInputs& in,
                       const ChunkLayers& chunk, int k, double flops) {
  const double tokens = static_cast<double>(c.micro_batch) * m.seq_len;
  return in.forward_s.empty() ? flops * tokens / c.tp / in.flops_per_s
                              : in.forward_s[k] * flops / chunk_forward_flops_per_token(m, chunk);
}

// Recomputation runs forward work again inside the backward (a measured backward_s has it
// already): its FLOPs at the forward's rate, and selective's softmax pass from memory bandwidth
// when known.
double recompute_time(const model::ModelConfig& m, const Scenario& c, const StepTimeInputs& in,
                      const ChunkLayers& chunk, int k) {
  // Selective recomputation's softmax per block and micro-batch: the scores read, the
  // probabilities written, B * heads/tp * S * S elements each.
  const double softmax_bytes = 2.0 * c.micro_batch * (m.heads / c.tp) * m.seq_len * m.seq_len *
                               element_bytes(c.precision).activation;
  double again = 0;
  const double rflops = chunk_recompute_flops_per_token(m, c, chunk);
  if (rflops > 0) again = at_forward_rate(m, c, in, chunk, k, rflops);
  if (c.recompute == model::Recompute::selective && in.memory_bytes_per_s > 0)
    again += chunk.layers() * softmax_bytes / in.memory_bytes_per_s;
  return again;
}

// Chunk k's forward, and its backward as a whole and as B and W.
void chunk_compute_times(const model::ModelConfig& m, const Scenario& c, const StepTimeInputs& in,
                         const ChunkLayers& chunk, int k, ChunkActionTimes& t) {
  const bool split = schedule::splits_backward(c.schedule);
  const double tokens = static_cast<double>(c.micro_batch) * m.seq_len;
  t.fwd[k] = in.forward_s.empty()
                 ? chunk_forward_flops_per_token(m, chunk) * tokens / c.tp / in.flops_per_s
                 : in.forward_s[k];
  const double modelled = in.backward_ratio * t.fwd[k] + recompute_time(m, c, in, chunk, k);
  if (split && !in.backward_weight_s.empty()) {
    t.wgt[k] = in.backward_weight_s[k];
    // B measured (backward_s) or the modelled backward less W.
    t.bin[k] = in.backward_s.empty() ? modelled - t.wgt[k] : in.backward_s[k];
    if (!(t.wgt[k] >= 0) || !(t.bin[k] >= 0))
      throw std::invalid_argument("predict_step_time: backward_weight_s[" + std::to_string(k) +
                                  "] = " + std::to_string(t.wgt[k]) +
                                  " s, expected >= 0 and, without backward_s, at most the " +
                                  "modelled backward's " + std::to_string(modelled) + " s");
    t.bwd[k] = t.bin[k] + t.wgt[k];
    return;
  }
  t.bwd[k] = in.backward_s.empty() ? modelled : in.backward_s[k];
  t.bin[k] = t.bwd[k];
  if (split) {
    // One x^T dy GEMM per linear, as costly as its forward; never more than the backward it is
    // part of (a measured backward can be shorter than the FLOP model's W).
    t.wgt[k] = at_forward_rate(m, c, in, chunk, k, chunk_weight_gradient_flops_per_token(m, chunk));
    t.wgt[k] = std::min(t.wgt[k], t.bwd[k]);
    t.bin[k] = t.bwd[k] - t.wgt[k];
  }
}

// Chunk k's tensor and expert collectives per forward, backward and W.
void chunk_collective_times(const model::ModelConfig& m, const Scenario& c,
                            const StepTimeInputs& in, const ChunkLayers& chunk, int k,
                            ChunkActionTimes& t) {
  const PassTraffic tpt = tensor_parallel_chunk_traffic(m, c, chunk);
  const PassTraffic ept = expert_chunk_traffic(m, c, chunk, in.routing);
  // The calls as the step issues them, where the calibration timed them (tp_sequence).
  const PassCalls as_issued = tensor_parallel_timed_chunk(m, c, k, in.tp_sequence);
  auto tp_time = [&](const AxisTraffic& tr, const CallSequence& q) {
    return traffic_time(tr, c.tp, in.links.tp, in.all_reduce, &in.op_links.tp, &q);
  };
  t.tp_f[k] = tp_time(tpt.forward, as_issued.forward);
  t.tp_b[k] = tp_time(tpt.backward, as_issued.backward);
  t.tp_w[k] = tp_time(tpt.backward_weight, as_issued.backward_weight);
  t.ep_f[k] = traffic_time(ept.forward, c.ep, in.links.ep, in.all_reduce, &in.op_links.ep);
  t.ep_b[k] = traffic_time(ept.backward, c.ep, in.links.ep, in.all_reduce, &in.op_links.ep);
}

// A blocking pipeline engine (DeepSpeed's PipelineEngine, docs/perfmodel.md "Step time"): each
// forward waits for its activation's receive and send, each backward for its gradient's, none
// past the pipeline's ends. With tp > 1 the engine partitions every transfer over the
// tensor-parallel ranks: a rank sends 1/tp of the message and the receiver all-gathers it over
// tp; a backward first all-gathers its own forward output again (kept partitioned after its
// send), then the received gradient. A sequence-parallel message is a rank's own shard already:
// sent whole, nothing gathered.
void blocking_transfer_waits(const model::ModelConfig& m, const Scenario& c,
                             const StepTimeInputs& in, ChunkActionTimes& t) {
  const int C = c.chunks();
  if (c.pp <= 1) return;
  const bool partitioned = c.tp > 1 && !c.sp();
  const double bytes = pipeline_message_bytes(m, c);
  const double part = call_time(Collective::point_to_point, 2, partitioned ? bytes / c.tp : bytes,
                                in.links.pp, &in.op_links.pp, in.all_reduce);
  const double gather = partitioned ? call_time(Collective::all_gather, c.tp, bytes, in.links.tp,
                                                &in.op_links.tp, in.all_reduce)
                                    : 0.0;
  for (int k = 0; k < C; ++k) {
    const bool from_before = k > 0, to_after = k < C - 1;
    t.wait_f[k] = transfer_time(C, k, part) + (from_before ? gather : 0.0);
    t.wait_b[k] = transfer_time(C, k, part) + (to_after ? 2 * gather : 0.0);
  }
}

// Per chunk, the samples of one kind as factors of their mean (empty: none for the chunk).
std::vector<std::vector<double>> sample_factors(const std::vector<std::vector<double>>& samples,
                                                int C, const char* kind) {
  std::vector<std::vector<double>> out(C);
  if (samples.empty()) return out;
  const std::string what = std::string("predict_step_time: variation.") + kind;
  if (static_cast<int>(samples.size()) != C)
    throw std::invalid_argument(what + " has " + std::to_string(samples.size()) + " chunks for " +
                                std::to_string(C) + " model chunks");
  for (int k = 0; k < C; ++k) {
    double sum = 0;
    for (double x : samples[k]) {
      if (!(x >= 0))
        throw std::invalid_argument(what + "[" + std::to_string(k) + "] has a sample " +
                                    std::to_string(x) + ", expected >= 0");
      sum += x;
    }
    if (samples[k].empty()) continue;
    if (!(sum > 0))
      throw std::invalid_argument(what + "[" + std::to_string(k) + "]: no positive mean");
    const double mean = sum / static_cast<double>(samples[k].size());
    for (double x : samples[k]) out[k].push_back(x / mean);
  }
  return out;
}

// Per action kind (forward, backward, W) and chunk, the factors of its samples.
using VariationFactors = std::array<std::vector<std::vector<double>>, 3>;

int kind_index(schedule::ActionKind a) {
  return a == schedule::ActionKind::forward           ? 0
         : a == schedule::ActionKind::backward_weight ? 2
                                                      : 1;
}

// One draw: per (kind, chunk, micro-batch), in that order, a factor picked uniformly from its
// samples' (1 without samples): the replay's order of asking does not change what it gets. The
// pick from the generator's raw output (portable: std::mt19937_64's sequence is the standard's,
// a distribution's is the library's).
void draw_factors(const VariationFactors& f, int M, std::mt19937_64& rng, std::vector<double>& d) {
  const int C = static_cast<int>(f[0].size());
  d.assign(3 * C * M, 1.0);
  for (int kind = 0; kind < 3; ++kind)
    for (int k = 0; k < C; ++k) {
      const auto& s = f[kind][k];
      if (s.empty()) continue;
      for (int mb = 0; mb < M; ++mb) {
        const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
        const auto i = std::min(s.size() - 1, static_cast<std::size_t>(u * s.size()));
        d[(kind * C + k) * M + mb] = s[i];
      }
    }
}

// The pipeline replayed in.variation.draws times with each action's compute drawn from its
// samples (StepTimeInputs::variation): the draws' mean span and busy times.
ReplayMemo::Summary replay_with_variation(const Scenario& c, const StepTimeInputs& in,
                                          const ChunkActionTimes& t) {
  const int C = c.chunks();
  const schedule::PipelineShape shape = c.pipeline_shape();
  const int M = shape.micro_batches;
  const VariationFactors f{sample_factors(in.variation.forward, C, "forward"),
                           sample_factors(in.variation.backward, C, "backward"),
                           sample_factors(in.variation.backward_weight, C, "backward_weight")};
  schedule::Schedule own;
  if (!in.schedule) {
    own = schedule::make_schedule(c.schedule, shape);
    const std::string problem = schedule::validate_schedule(own, shape);
    if (!problem.empty()) throw std::invalid_argument("predict_step_time: " + problem);
  }
  const schedule::Schedule& sched = in.schedule ? *in.schedule : own;
  std::vector<double> d;
  const auto duration = [&](int, const schedule::Action& a) {
    const int kind = kind_index(a.kind);
    const double x = d[(kind * C + a.chunk) * M + a.micro_batch] - 1;  // 0: the action's own
    if (kind == 0) return t.forward_action(a.chunk) + x * t.fwd[a.chunk];
    if (kind == 2) return t.weight_action(a.chunk) + x * t.wgt[a.chunk];
    return t.backward_action(a.chunk) + x * t.bin[a.chunk];
  };
  std::mt19937_64 rng(in.variation.seed);
  ReplayMemo::Summary sum;
  sum.busy.assign(c.pp, 0.0);
  const int n = in.variation.draws;
  for (int i = 0; i < n; ++i) {
    draw_factors(f, M, rng, d);
    const auto r = schedule::replay_validated_schedule(sched, shape, duration);
    sum.makespan += r.makespan;
    for (int s = 0; s < c.pp; ++s) sum.busy[s] += r.busy[s];
  }
  sum.makespan /= n;
  for (int s = 0; s < c.pp; ++s) {
    sum.busy[s] /= n;
    sum.mean_bubble_fraction += (sum.makespan > 0 ? 1 - sum.busy[s] / sum.makespan : 0.0) / c.pp;
  }
  return sum;
}

// The pipeline replayed with the chunks' action durations, from in.replay_memo when it has one
// (else into own); with the actions' samples, their draws' mean (never remembered).
const ReplayMemo::Summary& replay_pipeline(const Scenario& c, const StepTimeInputs& in,
                                           const ChunkActionTimes& t, ReplayMemo::Summary& own) {
  if (in.variation.draws > 0 && !in.variation.empty()) {
    own = replay_with_variation(c, in, t);
    return own;
  }
  const int C = c.chunks();
  const schedule::PipelineShape shape = c.pipeline_shape();
  const auto duration = [&](int, const schedule::Action& a) {
    switch (a.kind) {
      case schedule::ActionKind::forward:
        return t.forward_action(a.chunk);
      case schedule::ActionKind::backward_weight:
        return t.weight_action(a.chunk);
      default:
        return t.backward_action(a.chunk);
    }
  };
  const auto summarise = [&]() {
    const auto r = in.schedule ? schedule::replay_validated_schedule(*in.schedule, shape, duration)
                               : schedule::replay_schedule(
                                     schedule::make_schedule(c.schedule, shape), shape, duration);
    return ReplayMemo::Summary{r.makespan, r.mean_bubble_fraction, r.busy};
  };
  if (!(in.replay_memo && in.schedule)) {
    own = summarise();
    return own;
  }
  // The replay depends on the schedule and on these durations alone.
  std::vector<double> key;
  key.reserve(3 * C);
  for (int k = 0; k < C; ++k) {
    key.push_back(t.forward_action(k));
    key.push_back(t.backward_action(k));
    key.push_back(t.weight_action(k));
  }
  return in.replay_memo->get(in.schedule, std::move(key), summarise);
}

// The gradient norm is the one 8-byte all-reduce (a gradient bucket holds at least one
// 16-element aligned tensor); every other reduce-scatter or all-reduce reduces gradients.
bool gradient_reduction(Collective op, double bytes) {
  return op == Collective::reduce_scatter || (op == Collective::all_reduce && bytes > 8);
}

// Stage s's data-parallel time that shows: gradient reductions may hide behind the backward work
// `last_backward` (one micro-batch's), the rest shows. Each call's time: its position's in the
// calibrated sequence when the stage's calls are that sequence's, else its curve's.
double exposed_data_parallel_time(const model::ModelConfig& m, const Scenario& c,
                                  const StepTimeInputs& in, int s, double last_backward) {
  const double mb = c.micro_batches();
  const AxisTraffic dpt = in.stage_units ? data_parallel_step_traffic(c, (*in.stage_units)[s])
                                         : data_parallel_step_traffic(m, c, s);
  double reductions = 0, rest = 0;
  if (!in.dp_sequence.empty() && same_calls(traffic_of(in.dp_sequence), dpt)) {
    for (const auto& q : in.dp_sequence)
      (gradient_reduction(q.op, q.bytes) ? reductions : rest) += q.seconds;
  } else {
    for (const auto& o : dpt.ops) {
      const double t = o.count * call_time(o.op, o.group > 0 ? o.group : c.dp, o.bytes, in.links.dp,
                                           &in.op_links.dp, in.all_reduce);
      (gradient_reduction(o.op, o.bytes) ? reductions : rest) += t;
    }
  }
  if (!c.overlap) return rest + reductions;
  const double window = c.effective_zero() >= 2 ? mb * last_backward : last_backward;
  const double hidden = std::clamp(in.dp_overlap, 0.0, 1.0) * std::min(reductions, window);
  return rest + reductions - hidden;
}

// What the step costs stage s. bubble_s: its bubble; idle: the bubbles summed over stages; pp_time:
// the pipeline's fill/drain transfers and norm all-reduce.
StepTimeBreakdown stage_step_time(const model::ModelConfig& m, const Scenario& c,
                                  const StepTimeInputs& in, const ChunkActionTimes& t,
                                  const ReplayMemo::Summary& replay, int s, double bubble_s,
                                  double idle, double pp_time) {
  const bool split = schedule::splits_backward(c.schedule);
  const double mb = c.micro_batches();
  StepTimeBreakdown r;
  r.stage = s;
  r.pipeline_span = replay.makespan;
  r.bubble_fraction = replay.makespan > 0 ? idle / c.pp / replay.makespan : 0.0;
  // The backward work the gradient reductions can hide behind: W's under a split backward.
  double last_backward = 0;
  for (int k : stage_chunk_ids(c, s)) {
    r.compute += mb * (t.fwd[k] + t.bwd[k]);
    r.tp += mb * (t.tp_f[k] + t.tp_b[k] + t.tp_w[k]);
    r.ep += mb * (t.ep_f[k] + t.ep_b[k]);
    r.pp += mb * (t.wait_f[k] + t.wait_b[k]);  // blocking transfers: busy time, not bubble
    last_backward += split ? t.wgt[k] : t.bwd[k];
  }
  r.bubble = bubble_s;
  const AxisTraffic extras = in.stage_units ? tensor_parallel_step_extras(c, (*in.stage_units)[s])
                                            : tensor_parallel_step_extras(m, c, s);
  r.tp += traffic_time(extras, c.tp, in.links.tp, in.all_reduce, &in.op_links.tp);
  r.pp += pp_time;
  r.dp = exposed_data_parallel_time(m, c, in, s, last_backward);
  r.optimizer = in.optimizer_s;
  r.step_time = r.compute + r.tp + r.ep + r.bubble + r.pp + r.dp + r.optimizer;
  return r;
}

}  // namespace

StepTimeBreakdown predict_step_time(const model::ModelConfig& m, const Scenario& c,
                                    const StepTimeInputs& in) {
  const int C = c.chunks();
  std::vector<ChunkLayers> own_chunks;
  if (!in.chunks) own_chunks = split_layers(m, C, c.stage_layers);
  const std::vector<ChunkLayers>& chunks = in.chunks ? *in.chunks : own_chunks;
  check_step_time_inputs(c, in);
  ChunkActionTimes t(C);
  for (int k = 0; k < C; ++k) {
    chunk_compute_times(m, c, in, chunks[k], k, t);
    chunk_collective_times(m, c, in, chunks[k], k, t);
  }

  // The pipeline's messages (a micro-batch's activation or its gradient, one size).
  const double p2p = c.pp > 1
                         ? call_time(Collective::point_to_point, 2, pipeline_message_bytes(m, c),
                                     in.links.pp, &in.op_links.pp, in.all_reduce)
                         : 0.0;
  for (int k = 0; k < C; ++k) {
    t.xt[k] = transfer_time(C, k, in.pipeline_transfer_occupancy * p2p);
    if (!in.action_overhead_s.empty()) t.ovh[k] = in.action_overhead_s[k];
  }
  if (in.blocking_pipeline_transfers) blocking_transfer_waits(m, c, in, t);
  ReplayMemo::Summary own;
  const ReplayMemo::Summary& replay = replay_pipeline(c, in, t, own);

  // Pipeline transfers on the fill and drain (inside the actions when blocking), and the norm's
  // all-reduce over the stages.
  double pp_time = 0;
  if (c.pp > 1)
    pp_time =
        (in.blocking_pipeline_transfers ? 0.0 : 2.0 * (C - 1) * p2p) +
        call_time(Collective::all_reduce, c.pp, 8, in.links.pp, &in.op_links.pp, in.all_reduce);

  const double mb = c.micro_batches();
  // Per stage: its bubble, counting its transfers' and the engine's time (in the replay's busy
  // time) as bubble, as the engine counts it (the time between compute actions).
  std::vector<double> bubble(c.pp, 0.0);
  double idle = 0;  // summed over stages
  for (int s = 0; s < c.pp; ++s) {
    double xfer = 0;
    for (int k : stage_chunk_ids(c, s))
      xfer += t.between_actions(k, mb, schedule::splits_backward(c.schedule));
    bubble[s] = std::max(0.0, replay.makespan - replay.busy[s] + xfer);
    idle += bubble[s];
  }
  // The stage that ends last sets the step; among equals, the busiest (least bubble).
  StepTimeBreakdown best;
  for (int s = 0; s < c.pp; ++s) {
    const StepTimeBreakdown r = stage_step_time(m, c, in, t, replay, s, bubble[s], idle, pp_time);
    if (s == 0 || r.step_time > best.step_time ||
        (r.step_time == best.step_time && r.bubble < best.bubble))
      best = r;
  }
  return best;
}

}  // namespace paraxis::perfmodel
