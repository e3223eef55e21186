// Per-step communication of each axis, mirroring the calls paraxis makes (gpt_model*.cpp,
// parallel_trainer.cpp, zero_optimizer.cpp).
#include "perfmodel/step_traffic.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <stdexcept>
#include <tuple>

#include "config/parallel_config.hpp"
#include "model/param_layout.hpp"
#include "perfmodel/shard_params.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::perfmodel {

using C = Collective;

void AxisTraffic::add(Collective op, double bytes, long count, int group) {
  if (count == 0) return;
  for (auto& o : ops)
    if (o.op == op && o.bytes == bytes && o.group == group) {
      o.count += count;
      return;
    }
  ops.push_back({op, bytes, count, group});
}

void AxisTraffic::add(const AxisTraffic& other, long times) {
  for (const auto& o : other.ops) add(o.op, o.bytes, o.count * times, o.group);
  receives += other.receives * times;
}

double AxisTraffic::bytes() const {
  double b = 0;
  for (const auto& o : ops) b += o.bytes * static_cast<double>(o.count);
  return b;
}

long AxisTraffic::calls() const {
  long n = receives;
  for (const auto& o : ops) n += o.count;
  return n;
}

double AxisTraffic::bytes_of(Collective op) const {
  double b = 0;
  for (const auto& o : ops)
    if (o.op == op) b += o.bytes * static_cast<double>(o.count);
  return b;
}

long AxisTraffic::calls_of(Collective op) const {
  long n = 0;
  for (const auto& o : ops)
    if (o.op == op) n += o.count;
  return n;
}

double bus_bytes(const AxisTraffic& traffic, int group) {
  double b = 0;
  for (const auto& o : traffic.ops)
    b += o.bytes * static_cast<double>(o.count) * busbw_factor(o.op, o.group > 0 ? o.group : group);
  return b;
}

double expected_kept_rows(const model::ModelConfig& m, int tokens) {
  const double requested = static_cast<double>(tokens) * m.moe.top_k;
  const int cap = model::expert_capacity(m, tokens);
  if (cap == 0) return requested;
  return std::min(requested, static_cast<double>(m.moe.experts) * cap);
}

namespace {

int tokens_per_micro_batch(const model::ModelConfig& m, const Scenario& c) {
  return c.micro_batch * m.seq_len;
}

void check_stage(const Scenario& c, int stage) {
  if (stage < 0 || stage >= c.pp)
    throw std::invalid_argument("pipeline stage " + std::to_string(stage) +
                                " outside pp = " + std::to_string(c.pp));
}

}  // namespace

PassTraffic tensor_parallel_chunk_traffic(const model::ModelConfig& m, const Scenario& c,
                                          const ChunkLayers& chunk) {
  PassTraffic t;
  if (c.tp <= 1) return t;
  const ElementBytes eb = element_bytes(c.precision);
  const double N = tokens_per_micro_batch(m, c);
  const double rows = N * m.hidden * eb.activation;  // S of every activation collective
  const double gate = N * m.moe.top_k * eb.activation;
  auto& f = t.forward;
  auto& b = t.backward;
  int blocks = 0, moe_blocks = 0, recomputed = 0;
  for (int l = chunk.first_layer; l < chunk.end_layer; ++l) {
    ++blocks;
    if (m.is_moe_layer(l)) ++moe_blocks;
    if (model::recomputes_block(c.recompute, c.recompute_layers, l - chunk.first_layer))
      ++recomputed;
  }
  if (!c.sp()) {
    if (chunk.embedding) f.add(C::all_reduce, rows);
    f.add(C::all_reduce, rows, 2L * blocks);
    b.add(C::all_reduce, rows, 2L * recomputed);  // the recomputed forwards, again
    b.add(C::all_reduce, rows, 2L * blocks);
    b.add(C::all_reduce, gate, moe_blocks);
    if (chunk.head) {
      b.add(C::all_reduce, rows);
    }
  } else {
    // A split backward's W gathers what only the weight gradients read: the LayerNorm outputs,
    // the head's input and the embedding's gradient (moved from B), and the incoming gradients
    // of the row-parallel linears again (B gathered them for the input gradient and did not
    // keep them): the output projection's, and the MLP's second linear's in a dense block (an
    // MoE block's experts take their rows from the dispatch, which B kept).
    const bool split = schedule::splits_backward(c.schedule);
    auto& w = split ? t.backward_weight : t.backward;
    if (chunk.embedding) {
      f.add(C::reduce_scatter, rows);
      w.add(C::all_gather, rows);
    }
    f.add(C::all_gather, rows, 2L * blocks);
    f.add(C::reduce_scatter, rows, 2L * blocks);
    b.add(C::all_gather, rows, 2L * recomputed);  // the recomputed forwards, again
    b.add(C::reduce_scatter, rows, 2L * recomputed);
    b.add(C::all_gather, rows, 2L * blocks);  // the incoming gradients
    w.add(C::all_gather, rows, 2L * blocks);  // the LayerNorm outputs, again
    if (split) w.add(C::all_gather, rows, 2L * blocks - moe_blocks);  // incoming, again
    b.add(C::reduce_scatter, rows, 2L * blocks);
    b.add(C::all_reduce, gate, moe_blocks);
    if (chunk.head) {
      f.add(C::all_gather, rows);
      w.add(C::all_gather, rows);
      b.add(C::reduce_scatter, rows);
    }
  }
  if (chunk.head) {  // vocabulary-parallel cross-entropy: the logits never leave the rank
    f.add(C::all_reduce, N * eb.accumulator);
    f.add(C::all_reduce, 2 * N * eb.accumulator);
  }
  return t;
}

PassTraffic expert_chunk_traffic(const model::ModelConfig& m, const Scenario& c,
                                 const ChunkLayers& chunk, const ExpertRouting& routing) {
  PassTraffic t;
  if (c.ep <= 1 || m.moe.experts == 0) return t;
  const ElementBytes eb = element_bytes(c.precision);
  const int N = tokens_per_micro_batch(m, c);
  const double kept = routing.kept_rows >= 0 ? routing.kept_rows : expected_kept_rows(m, N);
  const double local = routing.local_rows >= 0 ? routing.local_rows : kept;
  const double row = static_cast<double>(m.hidden) * eb.activation;
  for (int l = chunk.first_layer; l < chunk.end_layer; ++l) {
    if (!m.is_moe_layer(l)) continue;
    t.forward.add(C::all_to_all, 4.0 * m.moe.experts);  // rows per (rank, local expert)
    t.forward.add(C::all_to_all, kept * row);
    t.forward.add(C::all_to_all, local * row);
    if (model::recomputes_block(c.recompute, c.recompute_layers, l - chunk.first_layer)) {
      t.backward.add(C::all_to_all, 4.0 * m.moe.experts);  // the recomputed forward's three
      t.backward.add(C::all_to_all, kept * row);
      t.backward.add(C::all_to_all, local * row);
    }
    t.backward.add(C::all_to_all, kept * row);
    t.backward.add(C::all_to_all, local * row);
  }
  return t;
}

AxisTraffic tensor_parallel_step_traffic(const model::ModelConfig& m, const Scenario& c, int stage,
                                         int dp_rank) {
  check_stage(c, stage);
  AxisTraffic t;
  if (c.tp <= 1) return t;
  const long mb = c.micro_batches();
  const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
  for (int id : stage_chunk_ids(c, stage)) {
    const PassTraffic p = tensor_parallel_chunk_traffic(m, c, chunks[id]);
    t.add(p.forward, mb);
    t.add(p.backward, mb);
    t.add(p.backward_weight, mb);
  }
  t.add(tensor_parallel_step_extras(m, c, stage, dp_rank));
  return t;
}

AxisTraffic tensor_parallel_step_extras(const model::ModelConfig& m, const Scenario& c, int stage,
                                        int dp_rank) {
  check_stage(c, stage);
  if (c.tp <= 1 || !c.sp()) return tensor_parallel_step_extras(c, {}, dp_rank);
  return tensor_parallel_step_extras(c, shard_units(m, c, stage), dp_rank);
}

AxisTraffic tensor_parallel_step_extras(const Scenario& c, const std::vector<ParamUnit>& units,
                                        int dp_rank) {
  AxisTraffic t;
  if (c.tp <= 1) return t;
  if (c.sp()) {
    const std::size_t n = owned_sp_partial_elements(units, c.effective_zero(), dp_rank);
    // paraxis skips the call when the rank owns none of the LayerNorm gradients.
    if (n > 0) t.add(C::all_reduce, static_cast<double>(n) * element_bytes(c.precision).gradient);
  }
  t.add(C::all_reduce, 8);  // the squared gradient norm, one double
  return t;
}

AxisTraffic pipeline_step_traffic(const model::ModelConfig& m, const Scenario& c, int stage) {
  check_stage(c, stage);
  AxisTraffic t;
  if (c.pp <= 1) return t;
  const long mb = c.micro_batches();
  const int Nl = tokens_per_micro_batch(m, c) / (c.sp() ? c.tp : 1);
  const double message = static_cast<double>(Nl) * m.hidden * element_bytes(c.precision).activation;
  const int last = c.chunks() - 1;
  for (int id : stage_chunk_ids(c, stage)) {
    if (id < last) {  // sends its output forward, receives the gradient of it
      t.add(C::point_to_point, message, mb);
      t.receives += mb;
    }
    if (id > 0) {  // receives its input, sends the gradient of it back
      t.add(C::point_to_point, message, mb);
      t.receives += mb;
    }
  }
  t.add(C::all_reduce, 8);  // the squared gradient norm
  return t;
}

ZeroVolume zero_volume(int zero, double P, int m, int grad_bytes, int param_bytes) {
  config::require_zero_stage(zero);
  ZeroVolume v;
  switch (zero) {
    case 0:
      v.reduce_bytes = P * grad_bytes;
      break;
    case 1:
      v.reduce_bytes = P * grad_bytes;
      v.gather_bytes = P * param_bytes;
      break;
    case 2:
      v.reduce_bytes = m * P * grad_bytes;
      v.gather_bytes = P * param_bytes;
      break;
    case 3:
      v.reduce_bytes = m * P * grad_bytes;
      v.gather_bytes = 2.0 * m * P * param_bytes;
      break;
  }
  return v;
}

AxisTraffic data_parallel_step_traffic(const model::ModelConfig& m, const Scenario& c, int stage) {
  check_stage(c, stage);
  config::require_zero_stage(c.zero);
  return data_parallel_step_traffic(c, shard_units(m, c, stage));
}

namespace {

// ZeRO 0: one all-reduce per gradient bucket of each group (model::gradient_buckets, as
// zero_optimizer.cpp reduces them), in issue order. The flat layout is unpadded at stage 0.
// Expert units have a group of their own only with expert parallelism.
void add_bucket_calls(const Scenario& c, const std::vector<ParamUnit>& units,
                      const ElementBytes& eb, CallSequence& out) {
  std::vector<model::FlatRange> ranges;
  std::vector<int> key;
  std::size_t at = 0;
  for (const auto& u : units) {
    ranges.push_back({at, at + u.padded});
    at += u.padded;
    key.push_back(c.ep > 1 && u.expert ? 1 : 0);
  }
  const auto cap = model::bucket_cap_elements(c.bucket_mb, eb.gradient);
  for (const auto& b : model::gradient_buckets(ranges, key, cap)) {
    const int group = units[static_cast<std::size_t>(b.first_unit)].group;
    if (group > 1)
      out.push_back({C::all_reduce, static_cast<double>(b.end - b.begin) * eb.gradient, group,
                     out.empty(), 0.0});
  }
}

void add_bucket_traffic(const Scenario& c, const std::vector<ParamUnit>& units,
                        const ElementBytes& eb, AxisTraffic& t) {
  CallSequence calls;
  add_bucket_calls(c, units, eb, calls);
  t.add(traffic_of(calls));
}

// ZeRO 1-2: the units' reduce-scatters after the backward, the norm, the all-gathers after the
// optimizer (zero_optimizer.cpp: after_backward, finish_gradients, apply). ZeRO 1 reduces once,
// after the last backward (the last unit first with comm.overlap, started as each unit's backward
// ends); ZeRO 2 after each micro-batch's backward, each unit's as its backward ends (the last
// unit first), a group per micro-batch, each after that micro-batch's compute.
void add_zero12_calls(const Scenario& c, const std::vector<ParamUnit>& units,
                      const ElementBytes& eb, CallSequence& out) {
  const bool zero2 = c.effective_zero() == 2;
  std::vector<const ParamUnit*> order;
  for (const auto& u : units)
    if (u.group > 1) order.push_back(&u);
  if (c.overlap || zero2) std::reverse(order.begin(), order.end());
  const long groups = zero2 ? c.micro_batches() : 1;
  for (long g = 0; g < groups; ++g)
    for (std::size_t k = 0; k < order.size(); ++k)
      out.push_back({C::reduce_scatter, static_cast<double>(order[k]->padded) * eb.gradient,
                     order[k]->group, k == 0, 0.0});
  if (c.dp > 1) out.push_back({C::all_reduce, 8, c.dp, false, 0.0});
  bool first = true;
  for (const auto& u : units)
    if (u.group > 1) {
      out.push_back(
          {C::all_gather, static_cast<double>(u.padded) * eb.parameter, u.group, first, 0.0});
      first = false;
    }
}

// ZeRO 3: a piece of a chunk (the embedding, a block, the head): its units in the order the hooks
// gather them (a block's dense unit, then its experts'), its forward FLOPs per token, and whether
// its backward runs its forward again first (full recomputation).
struct Zero3Piece {
  std::vector<const ParamUnit*> units;
  double flops = 0;
  bool embedding = false, recomputed = false;
};
using Zero3Pieces = std::map<int, std::vector<Zero3Piece>>;  // by chunk id

// The pieces of the stage's chunks, matched to `units` (shard_units: chunk by chunk, in flat
// order).
Zero3Pieces zero3_pieces(const model::ModelConfig& m, const Scenario& c, int stage,
                         const std::vector<ParamUnit>& units) {
  const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
  const auto cost = model::piece_costs(m);
  Zero3Pieces out;
  std::size_t next = 0;
  for (int id : stage_chunk_ids(c, stage)) {
    const ChunkLayers& ch = chunks[static_cast<std::size_t>(id)];
    auto& pieces = out[id];
    auto add = [&](double flops, int unit_count, bool embedding, bool recomputed) {
      Zero3Piece p{{}, flops, embedding, recomputed};
      for (int k = 0; k < unit_count; ++k) {
        if (next >= units.size()) throw std::logic_error("ZeRO-3 sequence: a piece without units");
        p.units.push_back(&units[next++]);
      }
      pieces.push_back(std::move(p));
    };
    if (ch.embedding) add(0.0, 1, true, false);
    for (int l = ch.first_layer; l < ch.end_layer; ++l)
      add(cost[static_cast<std::size_t>(l) + 1], m.is_moe_layer(l) ? 2 : 1, false,
          model::recomputes_block(c.recompute, c.recompute_layers, l - ch.first_layer));
    if (ch.head) add(cost.back(), 1, false, false);
  }
  if (next != units.size()) throw std::logic_error("ZeRO-3 sequence: units left over");
  return out;
}

// Appends the calls one by one, each with the compute since the previous call as its
// compute_share of one micro-batch's forward and backward of the stage (`pass` FLOPs per token).
class Zero3Writer {
 public:
  Zero3Writer(const ElementBytes& eb, double pass, CallSequence& out)
      : eb_(eb), pass_(pass), out_(out) {}
  void compute(double flops) { since_ += flops; }
  void gather(const ParamUnit& u) { call(C::all_gather, double(u.padded) * eb_.parameter, u); }
  void reduce(const ParamUnit& u) { call(C::reduce_scatter, double(u.padded) * eb_.gradient, u); }

 private:
  void call(Collective op, double bytes, const ParamUnit& u) {
    if (u.group <= 1) return;  // a group of one moves nothing and logs nothing
    const double share = first_ || pass_ <= 0 ? 0.0 : since_ / pass_;
    out_.push_back({op, bytes, u.group, first_ || share > 0, 0.0, share});
    first_ = false;
    since_ = 0;
  }
  ElementBytes eb_;
  double pass_, since_ = 0;
  bool first_ = true;  // the step's first call follows the previous step's optimizer
  CallSequence& out_;
};

// One backward (or B of a split one) of a chunk's pieces, last piece first.
void zero3_backward(const std::vector<Zero3Piece>& pieces, bool split, Zero3Writer& w) {
  for (auto p = pieces.rbegin(); p != pieces.rend(); ++p) {
    if (!split || !p->embedding)  // B of the embedding reads no parameter
      for (const ParamUnit* u : p->units) w.gather(*u);
    w.compute((split ? 1.0 : 2.0) * p->flops + (p->recomputed ? p->flops : 0.0));
    if (split) continue;  // W reduces
    for (auto u = p->units.rbegin(); u != p->units.rend(); ++u) w.reduce(**u);
  }
}

void add_zero3_calls(const model::ModelConfig& m, const Scenario& c, int stage,
                     const std::vector<ParamUnit>& units, const ElementBytes& eb,
                     CallSequence& out) {
  const Zero3Pieces pieces = zero3_pieces(m, c, stage, units);
  const bool split = schedule::splits_backward(c.schedule);
  double pass = 0;
  for (const auto& [id, ps] : pieces)
    for (const auto& p : ps) pass += (p.recomputed ? 4.0 : 3.0) * p.flops;
  Zero3Writer w(eb, pass, out);
  using K = schedule::ActionKind;
  const schedule::Schedule sched = schedule::make_schedule(c.schedule, c.pipeline_shape());
  for (const auto& a : sched[static_cast<std::size_t>(stage)]) {
    const auto it = pieces.find(a.chunk);
    if (it == pieces.end()) continue;
    if (a.kind == K::forward) {
      for (const auto& p : it->second) {
        for (const ParamUnit* u : p.units) w.gather(*u);
        w.compute(p.flops);
      }
    } else if (a.kind == K::backward) {
      zero3_backward(it->second, split, w);
    } else if (a.kind == K::backward_weight) {
      for (auto p = it->second.rbegin(); p != it->second.rend(); ++p) {
        w.compute(p->flops);
        for (auto u = p->units.rbegin(); u != p->units.rend(); ++u) w.reduce(**u);
      }
    }
  }
  if (c.dp > 1) out.push_back({C::all_reduce, 8, c.dp, false, 0.0});
}

// ZeRO 1-3: each unit's reduce-scatter of its gradients and all-gather of its parameters.
void add_sharded_traffic(const Scenario& c, const std::vector<ParamUnit>& units,
                         const ElementBytes& eb, long mb, AxisTraffic& t) {
  for (const auto& u : units) {
    if (u.group <= 1) continue;  // a group of one moves nothing and logs nothing
    const double grads = static_cast<double>(u.padded) * eb.gradient;
    const double params = static_cast<double>(u.padded) * eb.parameter;
    switch (c.effective_zero()) {
      case 1:
        t.add(C::reduce_scatter, grads, 1, u.group);
        t.add(C::all_gather, params, 1, u.group);
        break;
      case 2:
        t.add(C::reduce_scatter, grads, mb, u.group);
        t.add(C::all_gather, params, 1, u.group);
        break;
      case 3: {
        // Gathered before the forward and the backward; under a split backward before B only
        // (W reads no parameter), and the embedding's B reads none either.
        const bool skip = schedule::splits_backward(c.schedule) && u.name == "embedding";
        t.add(C::all_gather, params, (skip ? 1 : 2) * mb, u.group);
        t.add(C::reduce_scatter, grads, mb, u.group);
        break;
      }
    }
  }
}

}  // namespace

CallSequence data_parallel_call_sequence(const Scenario& c, const std::vector<ParamUnit>& units) {
  config::require_zero_stage(c.zero);
  if (c.effective_zero() == 3)
    throw std::invalid_argument(
        "data_parallel_call_sequence: ZeRO 3's calls follow the model's pieces (pass the model)");
  CallSequence out;
  const ElementBytes eb = element_bytes(c.precision);
  if (c.effective_zero() == 0) {
    add_bucket_calls(c, units, eb, out);
    if (c.dp > 1 && c.ep > 1) out.push_back({C::all_reduce, 8, c.dp, false, 0.0});
  } else {
    add_zero12_calls(c, units, eb, out);
  }
  return out;
}

CallSequence data_parallel_call_sequence(const model::ModelConfig& m, const Scenario& c,
                                         int stage) {
  check_stage(c, stage);
  config::require_zero_stage(c.zero);
  const auto units = shard_units(m, c, stage);
  if (c.effective_zero() != 3) return data_parallel_call_sequence(c, units);
  CallSequence out;
  add_zero3_calls(m, c, stage, units, element_bytes(c.precision), out);
  return out;
}

AxisTraffic traffic_of(const CallSequence& seq) {
  AxisTraffic t;
  for (const auto& s : seq) t.add(s.op, s.bytes, 1, s.group);
  return t;
}

bool same_calls(const AxisTraffic& a, const AxisTraffic& b) {
  using Key = std::tuple<Collective, double, int>;
  auto counts = [](const AxisTraffic& t) {
    std::map<Key, long> m;
    for (const auto& o : t.ops) m[{o.op, o.bytes, o.group}] += o.count;
    return m;
  };
  return counts(a) == counts(b);
}

AxisTraffic data_parallel_step_traffic(const Scenario& c, const std::vector<ParamUnit>& units) {
  config::require_zero_stage(c.zero);
  AxisTraffic t;
  const ElementBytes eb = element_bytes(c.precision);
  const long mb = c.micro_batches();
  if (c.effective_zero() == 0)
    add_bucket_traffic(c, units, eb, t);
  else
    add_sharded_traffic(c, units, eb, mb, t);
  // The norm's all-reduce over dp: whenever ranks hold different gradient elements (sharded,
  // or experts).
  if (c.dp > 1 && (c.effective_zero() >= 1 || c.ep > 1)) t.add(C::all_reduce, 8, 1, c.dp);
  return t;
}

AxisTraffic expert_step_traffic(const model::ModelConfig& m, const Scenario& c, int stage,
                                const ExpertRouting& routing) {
  check_stage(c, stage);
  AxisTraffic t;
  if (c.ep <= 1) return t;
  const long mb = c.micro_batches();
  const auto chunks = split_layers(m, c.chunks(), c.stage_layers);
  for (int id : stage_chunk_ids(c, stage)) {
    const PassTraffic p = expert_chunk_traffic(m, c, chunks[id], routing);
    t.add(p.forward, mb);
    t.add(p.backward, mb);
    t.add(p.backward_weight, mb);
  }
  return t;
}

StepTraffic step_traffic(const model::ModelConfig& m, const Scenario& c, int stage, int dp_rank,
                         const ExpertRouting& routing) {
  StepTraffic s;
  s.tp = tensor_parallel_step_traffic(m, c, stage, dp_rank);
  s.pp = pipeline_step_traffic(m, c, stage);
  s.dp = data_parallel_step_traffic(m, c, stage);
  s.ep = expert_step_traffic(m, c, stage, routing);
  return s;
}

}  // namespace paraxis::perfmodel
