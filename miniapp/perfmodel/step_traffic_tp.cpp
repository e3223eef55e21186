// The tensor-parallel calls in the order the step issues them, with the compute before each
// (step_traffic.hpp, tensor_parallel_call_sequence), mirroring gpt_model.cpp,
// gpt_model_block.cpp and gpt_model_moe.cpp call for call.
#include <utility>

#include "model/model_pieces.hpp"
#include "perfmodel/model_chunks.hpp"
#include "perfmodel/step_traffic.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::perfmodel {

namespace {

using C = Collective;
using K = schedule::ActionKind;

// Appends calls, each with the FLOPs since the previous call as its compute_share of one
// micro-batch's forward and backward of the stage (`pass`); the first follows a whole phase.
class TpWriter {
 public:
  TpWriter(int tp, double pass) : tp_(tp), pass_(pass) {}
  void compute(double flops) { since_ += flops; }
  void call(CallSequence& out, Collective op, double bytes) {
    const double share = first_ || pass_ <= 0 ? 0.0 : since_ / pass_;
    out.push_back({op, bytes, tp_, first_ || share > 0, 0.0, share});
    first_ = false;
    since_ = 0;
  }

 private:
  int tp_;
  double pass_, since_ = 0;
  bool first_ = true;
};

// The S of the chunk's calls: rows N*H*e (every activation collective), the MoE gate's N*K*e,
// the loss's max N*a and sum 2N*a.
struct TpBytes {
  double rows = 0, gate = 0, loss_max = 0, loss_sum = 0;
};

// What one pass of a chunk writes its calls with.
struct TpPass {
  TpWriter& w;
  CallSequence& out;
  TpBytes b;
  bool sp = false;
  void gather() {
    if (sp) w.call(out, C::all_gather, b.rows);
  }
  void reduce() { w.call(out, sp ? C::reduce_scatter : C::all_reduce, b.rows); }
};

// block_forward: (gather) attention, reduce; (gather) MLP or MoE, reduce.
void block_forward(TpPass& p, double f) {
  p.gather();
  p.w.compute(f / 2);
  p.reduce();
  p.gather();
  p.w.compute(f / 2);
  p.reduce();
}

// block_backward: the MLP branch (the incoming gradient gathered; dense: the LayerNorm output
// gathered after w2's backward, then w1's reduces; MoE: gathered first, the gate's all-reduce
// after the experts' backward, then the reduction), then the attention branch.
void block_backward(TpPass& p, double f, bool moe) {
  p.gather();
  if (!moe) {
    p.w.compute(f / 2);
    p.gather();
    p.w.compute(f / 2);
  } else {
    p.gather();
    p.w.compute(f);
    p.w.call(p.out, C::all_reduce, p.b.gate);
  }
  p.reduce();
  p.gather();
  p.w.compute(f / 2);
  p.gather();
  p.w.compute(f / 2);
  p.reduce();
}

// block_backward_input (B): the input-gradient path, no LayerNorm output gathered.
void block_input(TpPass& p, double f, bool moe) {
  p.gather();
  p.w.compute(f / 2);
  if (moe) p.w.call(p.out, C::all_reduce, p.b.gate);
  p.reduce();
  p.gather();
  p.w.compute(f / 2);
  p.reduce();
}

// block_backward_weight (W), sequence parallelism only: h2, the MLP's incoming gradient (dense),
// wo's incoming gradient and h1 gathered again, each before the GEMMs that read it.
void block_weight(TpPass& p, double f, bool moe) {
  if (!p.sp) {
    p.w.compute(f);
    return;
  }
  p.gather();
  p.w.compute(f / 4);
  if (!moe) p.gather();
  p.w.compute(f / 4);
  p.gather();
  p.w.compute(f / 4);
  p.gather();
  p.w.compute(f / 4);
}

struct ChunkCosts {
  double embedding = 0, head = 0;
  std::vector<double> blocks;
  std::vector<bool> moe, recomputed;
};

ChunkCosts chunk_costs(const model::ModelConfig& m, const Scenario& c, const ChunkLayers& ch) {
  const auto cost = model::piece_costs(m);
  ChunkCosts out;
  if (ch.embedding) out.embedding = cost.front();
  if (ch.head) out.head = cost.back();
  for (int l = ch.first_layer; l < ch.end_layer; ++l) {
    out.blocks.push_back(cost[static_cast<std::size_t>(l) + 1]);
    out.moe.push_back(m.is_moe_layer(l));
    out.recomputed.push_back(
        model::recomputes_block(c.recompute, c.recompute_layers, l - ch.first_layer));
  }
  return out;
}

// gpt_model.cpp's forward_chunk: the embedding's reduction, the blocks, the head's gather, its
// logits, the loss's two all-reduces.
void chunk_forward(TpPass& p, const ChunkLayers& ch, const ChunkCosts& k) {
  if (ch.embedding) {
    p.w.compute(k.embedding);
    p.reduce();
  }
  for (double f : k.blocks) block_forward(p, f);
  if (ch.head) {
    p.gather();
    p.w.compute(k.head);
    p.w.call(p.out, C::all_reduce, p.b.loss_max);
    p.w.call(p.out, C::all_reduce, p.b.loss_sum);
  }
}

// backward_chunk (or B of a split one, `split`): the head's, the blocks last first (a recomputed
// block's forward first), the embedding's gather of its gradient (W's when split).
void chunk_backward(TpPass& p, const ChunkLayers& ch, const ChunkCosts& k, bool split) {
  const double times = split ? 1.0 : 2.0;
  if (ch.head) {
    if (!split) p.gather();
    p.w.compute(times * k.head);
    p.reduce();
  }
  for (std::size_t i = k.blocks.size(); i-- > 0;) {
    if (k.recomputed[i]) block_forward(p, k.blocks[i]);
    if (split)
      block_input(p, k.blocks[i], k.moe[i]);
    else
      block_backward(p, k.blocks[i], k.moe[i]);
  }
  if (ch.embedding && !split) p.gather();
  p.w.compute(times * k.embedding);
}

// backward_weight_chunk (W): the head's input, the blocks' (last first), the embedding's gradient.
void chunk_weight(TpPass& p, const ChunkLayers& ch, const ChunkCosts& k) {
  if (ch.head) {
    p.gather();
    p.w.compute(k.head);
  }
  for (std::size_t i = k.blocks.size(); i-- > 0;) block_weight(p, k.blocks[i], k.moe[i]);
  if (ch.embedding) p.gather();
  p.w.compute(k.embedding);
}

// One micro-batch of the stage, pass by pass: (chunk id, kind, its calls).
struct Segment {
  int chunk = 0;
  K kind = K::forward;
  CallSequence calls;
};

std::vector<Segment> stage_segments(const model::ModelConfig& m, const Scenario& c, int stage) {
  std::vector<Segment> out;
  if (c.tp <= 1) return out;
  const ElementBytes eb = element_bytes(c.precision);
  const double N = static_cast<double>(c.micro_batch) * m.seq_len;
  const TpBytes bytes{N * m.hidden * eb.activation, N * m.moe.top_k * eb.activation,
                      N * eb.accumulator, 2 * N * eb.accumulator};
  const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
  const auto ids = stage_chunk_ids(c, stage);
  double pass = 0;
  std::vector<ChunkCosts> costs;
  for (int id : ids) {
    costs.push_back(chunk_costs(m, c, chunks[static_cast<std::size_t>(id)]));
    const ChunkCosts& k = costs.back();
    pass += 3 * (k.embedding + k.head);
    for (std::size_t i = 0; i < k.blocks.size(); ++i)
      pass += (k.recomputed[i] ? 4.0 : 3.0) * k.blocks[i];
  }
  TpWriter w(c.tp, pass);
  const bool sp = c.sp(), split = schedule::splits_backward(c.schedule);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    out.push_back({ids[i], K::forward, {}});
    TpPass p{w, out.back().calls, bytes, sp};
    chunk_forward(p, chunks[static_cast<std::size_t>(ids[i])], costs[i]);
  }
  for (std::size_t i = ids.size(); i-- > 0;) {
    out.push_back({ids[i], K::backward, {}});
    TpPass p{w, out.back().calls, bytes, sp};
    chunk_backward(p, chunks[static_cast<std::size_t>(ids[i])], costs[i], split);
    if (!split) continue;
    out.push_back({ids[i], K::backward_weight, {}});
    TpPass q{w, out.back().calls, bytes, sp};
    chunk_weight(q, chunks[static_cast<std::size_t>(ids[i])], costs[i]);
  }
  return out;
}

// Stage 0's segments with the seconds of `timed`; empty when `timed` is not their calls.
std::vector<Segment> timed_segments(const model::ModelConfig& m, const Scenario& c,
                                    const CallSequence& timed) {
  auto segs = stage_segments(m, c, 0);
  std::size_t at = 0;
  for (auto& s : segs)
    for (auto& q : s.calls) {
      if (at >= timed.size()) return {};
      const SequenceCall& t = timed[at++];
      if (t.op != q.op || t.bytes != q.bytes || t.group != q.group) return {};
      q.seconds = t.seconds;
    }
  if (at != timed.size()) return {};
  return segs;
}

}  // namespace

CallSequence tensor_parallel_call_sequence(const model::ModelConfig& m, const Scenario& c,
                                           int stage) {
  CallSequence out;
  for (const auto& s : stage_segments(m, c, stage))
    out.insert(out.end(), s.calls.begin(), s.calls.end());
  return out;
}

PassCalls tensor_parallel_timed_chunk(const model::ModelConfig& m, const Scenario& c, int chunk_id,
                                      const CallSequence& timed) {
  PassCalls out;
  if (timed.empty()) return out;
  for (auto& s : timed_segments(m, c, timed)) {
    if (s.chunk != chunk_id) continue;
    auto& slot = s.kind == K::forward    ? out.forward
                 : s.kind == K::backward ? out.backward
                                         : out.backward_weight;
    slot = std::move(s.calls);
  }
  return out;
}

CallSequence tensor_parallel_step_sequence(const model::ModelConfig& m, const Scenario& c,
                                           const CallSequence& timed) {
  const auto segs = timed.empty() ? std::vector<Segment>{} : timed_segments(m, c, timed);
  if (segs.empty()) return {};
  CallSequence out;
  const schedule::Schedule sched = schedule::make_schedule(c.schedule, c.pipeline_shape());
  for (const auto& a : sched.front())
    for (const auto& s : segs)
      if (s.chunk == a.chunk && s.kind == a.kind)
        out.insert(out.end(), s.calls.begin(), s.calls.end());
  for (const auto& o : tensor_parallel_step_extras(m, c, 0).ops)
    for (long k = 0; k < o.count; ++k) out.push_back({o.op, o.bytes, c.tp, false, -1.0, 0.0});
  return out;
}

}  // namespace paraxis::perfmodel
