// Step time: the schedule replayed with modelled action times, plus the exposed communication
// of each axis.
#include "perfmodel/step_time.hpp"

#include <algorithm>
#include <stdexcept>

#include "perfmodel/flops.hpp"
#include "perfmodel/model_chunks.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::perfmodel {

double traffic_time(const AxisTraffic& traffic, int group, const LinkCost& link,
                    AllReduceAlgorithm all_reduce, const OpLinks* per_op) {
  double t = 0;
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

StepTimeBreakdown predict_step_time(const model::ModelConfig& m, const Scenario& c,
                                    const StepTimeInputs& in) {
  const int C = c.chunks();
  std::vector<ChunkLayers> own_chunks;
  if (!in.chunks) own_chunks = split_layers(m, C, c.stage_layers);
  const std::vector<ChunkLayers>& chunks = in.chunks ? *in.chunks : own_chunks;
  if (!in.forward_s.empty() && static_cast<int>(in.forward_s.size()) != C)
    throw std::invalid_argument("predict_step_time: forward_s has " +
                                std::to_string(in.forward_s.size()) + " entries for " +
                                std::to_string(C) + " model chunks");
  if (!in.backward_s.empty() && static_cast<int>(in.backward_s.size()) != C)
    throw std::invalid_argument("predict_step_time: backward_s has " +
                                std::to_string(in.backward_s.size()) + " entries for " +
                                std::to_string(C) + " model chunks");
  if (!in.backward_weight_s.empty() && static_cast<int>(in.backward_weight_s.size()) != C)
    throw std::invalid_argument("predict_step_time: backward_weight_s has " +
                                std::to_string(in.backward_weight_s.size()) + " entries for " +
                                std::to_string(C) + " model chunks");
  if (in.forward_s.empty() && !(in.flops_per_s > 0))
    throw std::invalid_argument(
        "predict_step_time: flops_per_s = " + std::to_string(in.flops_per_s) +
        ", expected a positive achieved rate (or forward_s)");
  const double tokens = static_cast<double>(c.micro_batch) * m.seq_len;
  // Selective recomputation's softmax per block and micro-batch: the scores read, the
  // probabilities written, B * heads/tp * S * S elements each.
  const double softmax_bytes = 2.0 * c.micro_batch * (m.heads / c.tp) * m.seq_len * m.seq_len *
                               element_bytes(c.precision).activation;

  // Per chunk and micro-batch: compute, and the tensor/expert collectives inside it. bwd is the
  // whole backward; a split schedule runs it as B (bin) and W (wgt), any other as one action
  // (bin = bwd, wgt = 0).
  const bool split = schedule::splits_backward(c.schedule);
  const bool measured_w = split && !in.backward_weight_s.empty();
  std::vector<double> fwd(C), bwd(C), bin(C), wgt(C, 0.0), tp_f(C), tp_b(C), tp_w(C, 0.0), ep_f(C),
      ep_b(C);
  for (int k = 0; k < C; ++k) {
    fwd[k] = in.forward_s.empty()
                 ? chunk_forward_flops_per_token(m, chunks[k]) * tokens / c.tp / in.flops_per_s
                 : in.forward_s[k];
    // Recomputation runs forward work again inside the backward (a measured backward_s has
    // it already): its FLOPs at the forward's rate (from the measured forward's time per FLOP
    // when given), and selective's softmax pass from memory bandwidth when known.
    double again = 0;
    const double rflops = chunk_recompute_flops_per_token(m, c, chunks[k]);
    if (rflops > 0)
      again = in.forward_s.empty()
                  ? rflops * tokens / c.tp / in.flops_per_s
                  : in.forward_s[k] * rflops / chunk_forward_flops_per_token(m, chunks[k]);
    if (c.recompute == model::Recompute::selective && in.memory_bytes_per_s > 0)
      again += chunks[k].layers() * softmax_bytes / in.memory_bytes_per_s;
    const double modelled = in.backward_ratio * fwd[k] + again;
    if (measured_w) {
      wgt[k] = in.backward_weight_s[k];
      // B measured (backward_s) or the modelled backward less W.
      bin[k] = in.backward_s.empty() ? modelled - wgt[k] : in.backward_s[k];
      if (!(wgt[k] >= 0) || !(bin[k] >= 0))
        throw std::invalid_argument("predict_step_time: backward_weight_s[" + std::to_string(k) +
                                    "] = " + std::to_string(wgt[k]) +
                                    " s, expected >= 0 and, without backward_s, at most the " +
                                    "modelled backward's " + std::to_string(modelled) + " s");
      bwd[k] = bin[k] + wgt[k];
    } else {
      bwd[k] = in.backward_s.empty() ? modelled : in.backward_s[k];
      bin[k] = bwd[k];
      if (split) {
        // One x^T dy GEMM per linear, as costly as its forward; never more than the backward
        // it is part of (a measured backward can be shorter than the FLOP model's W).
        const double wflops = chunk_weight_gradient_flops_per_token(m, chunks[k]);
        wgt[k] = in.forward_s.empty()
                     ? wflops * tokens / c.tp / in.flops_per_s
                     : in.forward_s[k] * wflops / chunk_forward_flops_per_token(m, chunks[k]);
        wgt[k] = std::min(wgt[k], bwd[k]);
        bin[k] = bwd[k] - wgt[k];
      }
    }
    const PassTraffic tpt = tensor_parallel_chunk_traffic(m, c, chunks[k]);
    const PassTraffic ept = expert_chunk_traffic(m, c, chunks[k], in.routing);
    tp_f[k] = traffic_time(tpt.forward, c.tp, in.links.tp, in.all_reduce, &in.op_links.tp);
    tp_b[k] = traffic_time(tpt.backward, c.tp, in.links.tp, in.all_reduce, &in.op_links.tp);
    tp_w[k] = traffic_time(tpt.backward_weight, c.tp, in.links.tp, in.all_reduce, &in.op_links.tp);
    ep_f[k] = traffic_time(ept.forward, c.ep, in.links.ep, in.all_reduce, &in.op_links.ep);
    ep_b[k] = traffic_time(ept.backward, c.ep, in.links.ep, in.all_reduce, &in.op_links.ep);
  }

  const schedule::PipelineShape shape = c.pipeline_shape();
  // The pipeline's messages (a micro-batch's activation or its gradient, one size).
  const double p2p = c.pp > 1
                         ? call_time(Collective::point_to_point, 2, pipeline_message_bytes(m, c),
                                     in.links.pp, &in.op_links.pp, in.all_reduce)
                         : 0.0;
  std::vector<double> xt(C);  // per chunk: the transfers of its forward, and of its backward
  for (int k = 0; k < C; ++k) xt[k] = transfer_time(C, k, in.pipeline_transfer_occupancy * p2p);
  // With a blocking pipeline engine, what each forward and backward of chunk k waits on: its
  // receive and its send, one point-to-point time each (none past the pipeline's ends).
  std::vector<double> wait(C, 0.0);
  if (in.blocking_pipeline_transfers)
    for (int k = 0; k < C; ++k) wait[k] = transfer_time(C, k, p2p);
  // Unsplit schedules: wgt and tp_w are 0 and backward runs whole (bin = bwd).
  const auto duration = [&](int, const schedule::Action& a) {
    const int k = a.chunk;
    switch (a.kind) {
      case schedule::ActionKind::forward:
        return fwd[k] + tp_f[k] + ep_f[k] + xt[k] + wait[k];
      case schedule::ActionKind::backward_weight:
        return wgt[k] + tp_w[k];
      default:
        return bin[k] + tp_b[k] + ep_b[k] + xt[k] + wait[k];
    }
  };
  const auto summarise = [&]() {
    const auto r = in.schedule ? schedule::replay_validated_schedule(*in.schedule, shape, duration)
                               : schedule::replay_schedule(
                                     schedule::make_schedule(c.schedule, shape), shape, duration);
    return ReplayMemo::Summary{r.makespan, r.mean_bubble_fraction, r.busy};
  };
  ReplayMemo::Summary own;
  const ReplayMemo::Summary* replay = &own;
  if (in.replay_memo && in.schedule) {
    // The replay depends on the schedule and on these durations alone.
    std::vector<double> key;
    key.reserve(3 * C);
    for (int k = 0; k < C; ++k) {
      key.push_back(fwd[k] + tp_f[k] + ep_f[k] + xt[k] + wait[k]);
      key.push_back(bin[k] + tp_b[k] + ep_b[k] + xt[k] + wait[k]);
      key.push_back(wgt[k] + tp_w[k]);
    }
    replay = &in.replay_memo->get(in.schedule, std::move(key), summarise);
  } else {
    own = summarise();
  }

  // Pipeline transfers on the fill and drain (inside the actions when blocking), and the norm's
  // all-reduce over the stages.
  double pp_time = 0;
  if (c.pp > 1)
    pp_time =
        (in.blocking_pipeline_transfers ? 0.0 : 2.0 * (C - 1) * p2p) +
        call_time(Collective::all_reduce, c.pp, 8, in.links.pp, &in.op_links.pp, in.all_reduce);

  const double mb = c.micro_batches();
  // Per stage: its transfers' time, in the replay's busy time but a bubble, as the engine counts
  // it (the time between compute actions).
  std::vector<double> xfer(c.pp, 0.0);
  double idle = 0;  // summed over stages
  for (int s = 0; s < c.pp; ++s) {
    for (int k : stage_chunk_ids(c, s)) xfer[s] += 2 * mb * xt[k];
    idle += std::max(0.0, replay->makespan - replay->busy[s] + xfer[s]);
  }
  StepTimeBreakdown best;
  bool first = true;
  for (int s = 0; s < c.pp; ++s) {
    StepTimeBreakdown r;
    r.stage = s;
    r.pipeline_span = replay->makespan;
    r.bubble_fraction = replay->makespan > 0 ? idle / c.pp / replay->makespan : 0.0;
    // The backward work the gradient reductions can hide behind: W's under a split backward.
    double last_backward = 0;
    for (int k : stage_chunk_ids(c, s)) {
      r.compute += mb * (fwd[k] + bwd[k]);
      r.tp += mb * (tp_f[k] + tp_b[k] + tp_w[k]);
      r.ep += mb * (ep_f[k] + ep_b[k]);
      r.pp += mb * 2.0 * wait[k];  // blocking transfers: busy time, not bubble
      last_backward += split ? wgt[k] : bwd[k];
    }
    r.bubble = std::max(0.0, replay->makespan - replay->busy[s] + xfer[s]);
    const AxisTraffic extras = in.stage_units ? tensor_parallel_step_extras(c, (*in.stage_units)[s])
                                              : tensor_parallel_step_extras(m, c, s);
    r.tp += traffic_time(extras, c.tp, in.links.tp, in.all_reduce, &in.op_links.tp);
    r.pp += pp_time;

    // Data parallelism: gradient reductions may hide behind backward compute; the rest shows.
    const AxisTraffic dpt = in.stage_units ? data_parallel_step_traffic(c, (*in.stage_units)[s])
                                           : data_parallel_step_traffic(m, c, s);
    double reductions = 0, rest = 0;
    for (const auto& o : dpt.ops) {
      const double t = o.count * call_time(o.op, o.group > 0 ? o.group : c.dp, o.bytes, in.links.dp,
                                           &in.op_links.dp, in.all_reduce);
      // The gradient norm is the one 8-byte all-reduce (a gradient bucket holds at least one
      // 16-element aligned tensor).
      const bool gradient =
          o.op == Collective::reduce_scatter || (o.op == Collective::all_reduce && o.bytes > 8);
      (gradient ? reductions : rest) += t;
    }
    if (c.overlap) {
      const double window = c.effective_zero() >= 2 ? mb * last_backward : last_backward;
      const double hidden = std::clamp(in.dp_overlap, 0.0, 1.0) * std::min(reductions, window);
      r.dp = rest + reductions - hidden;
    } else {
      r.dp = rest + reductions;
    }
    r.optimizer = in.optimizer_s;
    r.step_time = r.compute + r.tp + r.ep + r.bubble + r.pp + r.dp + r.optimizer;
    // The stage that ends last sets the step; among equals, the busiest (least bubble).
    if (first || r.step_time > best.step_time ||
        (r.step_time == best.step_time && r.bubble < best.bubble)) {
      best = r;
      first = false;
    }
  }
  return best;
}

}  // namespace paraxis::perfmodel
