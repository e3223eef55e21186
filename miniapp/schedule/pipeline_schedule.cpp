// Pipeline schedule generators (GPipe, 1F1B, Megatron-LM's interleaved 1F1B, Qi et al.'s ZB-H1),
// the validator that proves a schedule complete and deadlock-free, and the replay that turns a
// schedule and compute durations into a timeline. Plain C++17: no MPI, no Kokkos, deterministic.
#include "schedule/pipeline_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace paraxis::schedule {

const char* to_string(ActionKind k) {
  switch (k) {
    case ActionKind::forward:
      return "forward";
    case ActionKind::backward:
      return "backward";
    case ActionKind::send_activation:
      return "send_activation";
    case ActionKind::recv_activation:
      return "recv_activation";
    case ActionKind::send_gradient:
      return "send_gradient";
    case ActionKind::recv_gradient:
      return "recv_gradient";
    case ActionKind::backward_weight:
      return "backward_weight";
  }
  return "unknown";
}

const char* to_string(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::gpipe:
      return "gpipe";
    case ScheduleKind::one_f_one_b:
      return "1f1b";
    case ScheduleKind::interleaved:
      return "interleaved";
    case ScheduleKind::zb_h1:
      return "zb-h1";
  }
  return "unknown";
}

ScheduleKind parse_schedule(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::gpipe;
  if (name == "1f1b") return ScheduleKind::one_f_one_b;
  if (name == "interleaved") return ScheduleKind::interleaved;
  if (name == "zb-h1") return ScheduleKind::zb_h1;
  throw std::invalid_argument("unknown pipeline schedule \"" + name +
                              "\" (expected gpipe, 1f1b, interleaved or zb-h1)");
}

namespace {

std::string describe(const Action& a) {
  std::ostringstream os;
  os << to_string(a.kind) << "(mb " << a.micro_batch << ", chunk " << a.chunk << ")";
  return os.str();
}

std::string describe(ActionKind k, int mb, int chunk) {
  return describe(Action{k, mb, chunk});
}

bool is_compute(ActionKind k) {
  return k == ActionKind::forward || k == ActionKind::backward || k == ActionKind::backward_weight;
}

// "" or what is wrong with the shape, prefixed by `what` ("interleaved schedule", ...).
std::string shape_problem(const PipelineShape& s, const std::string& what) {
  std::ostringstream os;
  if (s.stages < 1)
    os << what << ": stages p = " << s.stages << " must be at least 1";
  else if (s.micro_batches < 1)
    os << what << ": micro-batches m = " << s.micro_batches << " must be at least 1";
  else if (s.virtual_stages < 1)
    os << what << ": virtual stages v = " << s.virtual_stages << " must be at least 1";
  return os.str();
}

void require_shape(const PipelineShape& s, const std::string& what) {
  const std::string problem = shape_problem(s, what);
  if (!problem.empty()) throw std::invalid_argument(problem);
}

// "" or why make_schedule(kind, s) refuses the shape ("1f1b schedule: ...").
std::string generator_shape_problem(ScheduleKind kind, const PipelineShape& s) {
  const std::string what = std::string(to_string(kind)) + " schedule";
  const std::string problem = shape_problem(s, what);
  if (!problem.empty()) return problem;
  if (kind != ScheduleKind::interleaved && s.virtual_stages != 1)
    return what + ": virtual stages v = " + std::to_string(s.virtual_stages) +
           " must be 1 (only the interleaved schedule runs several chunks per stage)";
  if (kind == ScheduleKind::interleaved && s.micro_batches % s.stages != 0)
    return what + ": micro-batches m = " + std::to_string(s.micro_batches) +
           " not divisible by stages p = " + std::to_string(s.stages);
  return "";
}

// Chunks c and c + 1 exchange messages only when they live on different stages; with p = 1
// every chunk is on stage 0 and the output of one chunk is handed to the next in memory.
bool crosses_stages(const PipelineShape& s, int c) {
  return c % s.stages != (c + 1) % s.stages;
}

// Appends a compute action with the receive it needs right before it and the send of what it
// produced right after it. A backward_weight (W) has neither: it consumes what its B left on
// the stage and produces only weight gradients.
void append_compute(std::vector<Action>& out, const PipelineShape& s, ActionKind kind, int mb,
                    int chunk) {
  const int last = s.chunks() - 1;
  if (kind == ActionKind::forward) {
    if (chunk > 0 && crosses_stages(s, chunk - 1))
      out.push_back({ActionKind::recv_activation, mb, chunk});
    out.push_back({ActionKind::forward, mb, chunk});
    if (chunk < last && crosses_stages(s, chunk))
      out.push_back({ActionKind::send_activation, mb, chunk});
  } else if (kind == ActionKind::backward_weight) {
    out.push_back({ActionKind::backward_weight, mb, chunk});
  } else {
    if (chunk < last && crosses_stages(s, chunk))
      out.push_back({ActionKind::recv_gradient, mb, chunk});
    out.push_back({ActionKind::backward, mb, chunk});
    if (chunk > 0 && crosses_stages(s, chunk - 1))
      out.push_back({ActionKind::send_gradient, mb, chunk});
  }
}

std::vector<Action> gpipe_stage(const PipelineShape& s, int stage) {
  std::vector<Action> out;
  for (int mb = 0; mb < s.micro_batches; ++mb)
    append_compute(out, s, ActionKind::forward, mb, stage);
  for (int mb = s.micro_batches - 1; mb >= 0; --mb)
    append_compute(out, s, ActionKind::backward, mb, stage);
  return out;
}

std::vector<Action> one_f_one_b_stage(const PipelineShape& s, int stage) {
  const int p = s.stages, m = s.micro_batches;
  const int warmup = std::min(p - stage - 1, m);
  std::vector<Action> out;
  for (int mb = 0; mb < warmup; ++mb) append_compute(out, s, ActionKind::forward, mb, stage);
  for (int i = 0; i < m - warmup; ++i) {
    append_compute(out, s, ActionKind::forward, warmup + i, stage);
    append_compute(out, s, ActionKind::backward, i, stage);
  }
  for (int mb = m - warmup; mb < m; ++mb) append_compute(out, s, ActionKind::backward, mb, stage);
  return out;
}

// Qi et al. 2023's ZB-H1: 1F1B's forwards and B's in 1F1B's order, each stage's W deferred.
// Stage s runs W(j - s) right after B(j) (when j - s >= 0), then the W's still owed in
// micro-batch order at the end. Before F(w + k) of the steady phase (w = p - 1 - s warm-up
// forwards) the stage has run max(0, k - s) W's, so it holds w + k + 1 - max(0, k - s) <= p
// sets: 1F1B's peak, which 1F1B reaches on stage 0 only. The s deferred W's are what fills
// the cool-down where 1F1B's stage s waits for the gradients of the stages after it.
std::vector<Action> zb_h1_stage(const PipelineShape& s, int stage) {
  const int p = s.stages, m = s.micro_batches;
  const int warmup = std::min(p - stage - 1, m);
  std::vector<Action> out;
  int next_w = 0;  // the W's of micro-batches < next_w have been emitted
  auto backward_then_w = [&](int mb) {
    append_compute(out, s, ActionKind::backward, mb, stage);
    if (mb - stage >= 0) append_compute(out, s, ActionKind::backward_weight, next_w++, stage);
  };
  for (int mb = 0; mb < warmup; ++mb) append_compute(out, s, ActionKind::forward, mb, stage);
  for (int i = 0; i < m - warmup; ++i) {
    append_compute(out, s, ActionKind::forward, warmup + i, stage);
    backward_then_w(i);
  }
  for (int mb = m - warmup; mb < m; ++mb) backward_then_w(mb);
  while (next_w < m) append_compute(out, s, ActionKind::backward_weight, next_w++, stage);
  return out;
}

// Megatron-LM's interleaved 1F1B. Virtual micro-batch k runs groups of p micro-batches through
// one chunk before moving to the stage's next chunk, so the first of the group comes back from
// stage p - 1 exactly when stage 0 finishes the group (hence m % p == 0).
std::vector<Action> interleaved_stage(const PipelineShape& s, int stage) {
  const int p = s.stages, m = s.micro_batches, v = s.virtual_stages;
  const int total = v * m;
  auto micro_batch = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto forward_chunk = [&](int k) { return ((k / p) % v) * p + stage; };
  auto backward_chunk = [&](int k) { return (v - 1 - (k / p) % v) * p + stage; };
  // The factor 2 is Megatron-LM's, whose transfers pair a send with a receive in one blocking
  // call. With our non-blocking transfers the replay gives the same (ideal) bubble without it,
  // so here it only costs p - s - 1 more live chunk activations; kept so that we run the
  // schedule Megatron-LM runs.
  const int warmup = m == p ? total : std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  std::vector<Action> out;
  for (int k = 0; k < warmup; ++k)
    append_compute(out, s, ActionKind::forward, micro_batch(k), forward_chunk(k));
  for (int k = 0; k < total - warmup; ++k) {
    const int f = warmup + k;
    append_compute(out, s, ActionKind::forward, micro_batch(f), forward_chunk(f));
    append_compute(out, s, ActionKind::backward, micro_batch(k), backward_chunk(k));
  }
  for (int k = total - warmup; k < total; ++k)
    append_compute(out, s, ActionKind::backward, micro_batch(k), backward_chunk(k));
  return out;
}

// Per-(micro-batch, chunk) flags, one array per action kind.
struct Seen {
  explicit Seen(int n) : flags(7, std::vector<char>(n, 0)) {}
  char& operator()(ActionKind k, int idx) { return flags[static_cast<int>(k)][idx]; }
  std::vector<std::vector<char>> flags;
};

// Where every stage of a deadlocked run stands (pc: each stage's next action): finished, or
// blocked in a compute waiting for the send that feeds it.
std::string deadlock_text(const Schedule& sched, const PipelineShape& shape,
                          const std::vector<std::size_t>& pc) {
  const int p = shape.stages;
  std::ostringstream os;
  os << "deadlock:";
  for (int s = 0; s < p; ++s) {
    os << (s ? ";" : "") << " stage " << s;
    if (pc[s] == sched[s].size()) {
      os << " finished";
      continue;
    }
    const Action& a = sched[s][pc[s]];
    os << " blocked in " << describe(a) << " waiting for ";
    if (a.kind == ActionKind::forward)
      os << describe(ActionKind::send_activation, a.micro_batch, a.chunk - 1) << " on stage "
         << chunk_stage(shape, a.chunk - 1);
    else
      os << describe(ActionKind::send_gradient, a.micro_batch, a.chunk + 1) << " on stage "
         << chunk_stage(shape, a.chunk + 1);
  }
  return os.str();
}

// Runs the schedule's dependency semantics: a stage executes its actions in order and blocks
// only in a compute whose input message has not been sent. Times use `duration` for compute
// actions (transfers take none). Returns "" or a deadlock description naming where every
// unfinished stage is blocked. Assumes the static checks of validate_schedule passed.
std::string simulate(const Schedule& sched, const PipelineShape& shape,
                     const ActionDuration& duration, std::vector<std::vector<double>>& start,
                     std::vector<std::vector<double>>& end) {
  const int p = shape.stages, C = shape.chunks();
  const int n = shape.micro_batches * C;
  // When the message keyed by (mb, sending chunk) was sent; < 0: not yet.
  std::vector<double> activation_sent(n, -1), gradient_sent(n, -1);
  std::vector<std::size_t> pc(p, 0);
  std::vector<double> clock(p, 0);
  start.assign(p, {});
  end.assign(p, {});
  for (int s = 0; s < p; ++s) {
    start[s].assign(sched[s].size(), 0);
    end[s].assign(sched[s].size(), 0);
  }
  // The time the input of `a` became available, or < 0 if it has not yet. A backward_weight
  // consumes only what its backward left on the stage, which ran before it on the same stage.
  auto input_ready = [&](const Action& a) -> double {
    if (a.kind == ActionKind::backward_weight) return 0;
    if (a.kind == ActionKind::forward) {
      if (a.chunk == 0 || !crosses_stages(shape, a.chunk - 1)) return 0;
      return activation_sent[a.micro_batch * C + a.chunk - 1];
    }
    if (a.chunk == C - 1 || !crosses_stages(shape, a.chunk)) return 0;
    return gradient_sent[a.micro_batch * C + a.chunk + 1];
  };
  for (;;) {
    bool progressed = false, finished = true;
    for (int s = 0; s < p; ++s) {
      while (pc[s] < sched[s].size()) {
        const Action& a = sched[s][pc[s]];
        double t = clock[s];
        if (is_compute(a.kind)) {
          const double ready = input_ready(a);
          if (ready < 0) break;
          start[s][pc[s]] = std::max(t, ready);
          t = start[s][pc[s]] + duration(s, a);
        } else {
          start[s][pc[s]] = t;
          const int idx = a.micro_batch * C + a.chunk;
          if (a.kind == ActionKind::send_activation) activation_sent[idx] = t;
          if (a.kind == ActionKind::send_gradient) gradient_sent[idx] = t;
        }
        end[s][pc[s]] = clock[s] = t;
        ++pc[s];
        progressed = true;
      }
      if (pc[s] < sched[s].size()) finished = false;
    }
    if (finished) return "";
    if (!progressed) break;
  }
  return deadlock_text(sched, shape, pc);
}

}  // namespace

bool splits_backward(const Schedule& sched) {
  for (const auto& list : sched)
    for (const Action& a : list)
      if (a.kind == ActionKind::backward_weight) return true;
  return false;
}

bool splits_backward(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe:
    case ScheduleKind::one_f_one_b:
    case ScheduleKind::interleaved:
      return false;
    case ScheduleKind::zb_h1:
      return true;
  }
  throw std::invalid_argument("splits_backward: unknown schedule kind " +
                              std::to_string(static_cast<int>(kind)));
}

int chunk_stage(const PipelineShape& s, int chunk) {
  require_shape(s, "chunk_stage");
  if (chunk < 0 || chunk >= s.chunks())
    throw std::invalid_argument("chunk_stage: chunk " + std::to_string(chunk) + " outside 0 .. " +
                                std::to_string(s.chunks() - 1));
  return chunk % s.stages;
}

int chunk_local_index(const PipelineShape& s, int chunk) {
  chunk_stage(s, chunk);  // range checks
  return chunk / s.stages;
}

Schedule make_schedule(ScheduleKind kind, const PipelineShape& shape) {
  const std::string problem = generator_shape_problem(kind, shape);
  if (!problem.empty()) throw std::invalid_argument(problem);
  const int p = shape.stages;
  Schedule sched(p);
  for (int s = 0; s < p; ++s) {
    switch (kind) {
      case ScheduleKind::gpipe:
        sched[s] = gpipe_stage(shape, s);
        break;
      case ScheduleKind::one_f_one_b:
        sched[s] = one_f_one_b_stage(shape, s);
        break;
      case ScheduleKind::interleaved:
        sched[s] = interleaved_stage(shape, s);
        break;
      case ScheduleKind::zb_h1:
        sched[s] = zb_h1_stage(shape, s);
        break;
    }
  }
  return sched;
}

namespace {

// Why action a is out of order on its stage given what the stage ran before it (seen), as the
// text that follows its description; "" when it is in order.
std::string order_problem(const Action& a, Seen& seen, const PipelineShape& shape) {
  const int C = shape.chunks();
  const int mb = a.micro_batch, c = a.chunk, idx = mb * C + c;
  const bool has_prev = c > 0 && crosses_stages(shape, c - 1);
  const bool has_next = c < C - 1 && crosses_stages(shape, c);
  switch (a.kind) {
    case ActionKind::forward:
      if (has_prev && !seen(ActionKind::recv_activation, idx))
        return " without " + describe(ActionKind::recv_activation, mb, c) + " posted before it";
      if (c > 0 && !has_prev && !seen(ActionKind::forward, idx - 1))
        return " before " + describe(ActionKind::forward, mb, c - 1) + ", whose output it consumes";
      break;
    case ActionKind::backward:
      if (!seen(ActionKind::forward, idx)) return " before its forward";
      if (has_next && !seen(ActionKind::recv_gradient, idx))
        return " without " + describe(ActionKind::recv_gradient, mb, c) + " posted before it";
      if (c < C - 1 && !has_next && !seen(ActionKind::backward, idx + 1))
        return " before " + describe(ActionKind::backward, mb, c + 1) +
               ", whose gradient it consumes";
      break;
    case ActionKind::send_activation:
    case ActionKind::recv_gradient:
      if (!has_next)
        return ": no transfer to chunk " + std::to_string(c + 1) +
               (c == C - 1 ? " (chunk " + std::to_string(c) + " is the last)" : " (same stage)");
      if (a.kind == ActionKind::send_activation && !seen(ActionKind::forward, idx))
        return " before " + describe(ActionKind::forward, mb, c) + ", which produces its data";
      break;
    case ActionKind::send_gradient:
    case ActionKind::recv_activation:
      if (!has_prev)
        return ": no transfer from chunk " + std::to_string(c - 1) +
               (c == 0 ? " (chunk 0 is the first)" : " (same stage)");
      if (a.kind == ActionKind::send_gradient && !seen(ActionKind::backward, idx))
        return " before " + describe(ActionKind::backward, mb, c) + ", which produces its data";
      break;
    case ActionKind::backward_weight:
      // W reads what B left (the output gradient B received, the saved activations).
      if (!seen(ActionKind::backward, idx)) return " before its backward";
      break;
  }
  return "";
}

// Pass 2 of validate_schedule: every compute each stage owns is there (a W for each pair when
// the schedule splits its backwards), and every transfer's send.
std::string completeness_problem(const Schedule& sched, const PipelineShape& shape, Seen& seen) {
  const int p = shape.stages, m = shape.micro_batches, C = shape.chunks();
  const bool split = splits_backward(sched);
  for (int s = 0; s < p; ++s) {
    const std::string at = "stage " + std::to_string(s) + ": ";
    for (int c = s; c < C; c += p)
      for (int mb = 0; mb < m; ++mb)
        for (ActionKind k :
             {ActionKind::forward, ActionKind::backward, ActionKind::backward_weight}) {
          if (k == ActionKind::backward_weight && !split) continue;
          if (!seen(k, mb * C + c)) return at + describe(k, mb, c) + " missing";
        }
  }
  for (int c = 0; c + 1 < C; ++c) {
    if (!crosses_stages(shape, c)) continue;
    const int from = chunk_stage(shape, c), to = chunk_stage(shape, c + 1);
    for (int mb = 0; mb < m; ++mb) {
      if (!seen(ActionKind::send_activation, mb * C + c))
        return "stage " + std::to_string(to) + ": " +
               describe(ActionKind::recv_activation, mb, c + 1) + " has no matching " +
               describe(ActionKind::send_activation, mb, c) + " on stage " + std::to_string(from);
      if (!seen(ActionKind::send_gradient, mb * C + c + 1))
        return "stage " + std::to_string(from) + ": " + describe(ActionKind::recv_gradient, mb, c) +
               " has no matching " + describe(ActionKind::send_gradient, mb, c + 1) + " on stage " +
               std::to_string(to);
    }
  }
  return "";
}

}  // namespace

std::string validate_schedule(const Schedule& sched, const PipelineShape& shape) {
  const std::string bad_shape = shape_problem(shape, "validate_schedule");
  if (!bad_shape.empty()) return bad_shape;
  const int p = shape.stages, m = shape.micro_batches, C = shape.chunks();
  if (static_cast<int>(sched.size()) != p)
    return "schedule has " + std::to_string(sched.size()) +
           " stages, the shape p = " + std::to_string(p);

  // Pass 1, each stage in order: ranges, placement, repeats, and the order of each action
  // relative to the actions on its own stage that it depends on.
  Seen seen(m * C);
  for (int s = 0; s < p; ++s) {
    const std::string at = "stage " + std::to_string(s) + ": ";
    for (const Action& a : sched[s]) {
      if (a.micro_batch < 0 || a.micro_batch >= m || a.chunk < 0 || a.chunk >= C)
        return at + describe(a) + " outside micro-batches 0 .. " + std::to_string(m - 1) +
               ", chunks 0 .. " + std::to_string(C - 1);
      if (a.chunk % p != s)
        return at + describe(a) + " on the wrong stage: chunk " + std::to_string(a.chunk) +
               " lives on stage " + std::to_string(a.chunk % p);
      const int idx = a.micro_batch * C + a.chunk;
      if (seen(a.kind, idx)) return at + describe(a) + " repeated";
      if (const std::string why = order_problem(a, seen, shape); !why.empty())
        return at + describe(a) + why;
      seen(a.kind, idx) = 1;
    }
  }

  // Pass 2: completeness. Every compute present implies its receives are (pass 1), so what
  // can still be missing is a compute or a send. A schedule with one backward_weight splits
  // every backward, so each pair then needs its W too (its weight gradients are otherwise
  // never computed).
  if (std::string missing = completeness_problem(sched, shape, seen); !missing.empty())
    return missing;

  // Pass 3: deadlock freedom, by running the cross-stage dependencies.
  std::vector<std::vector<double>> start, end;
  return simulate(
      sched, shape, [](int, const Action&) { return 1.0; }, start, end);
}

ReplayResult replay_schedule(const Schedule& sched, const PipelineShape& shape,
                             const ActionDuration& duration) {
  // An incomplete or misordered schedule has no meaningful timeline either, so every problem
  // the validator finds (deadlocks included) is refused.
  const std::string problem = validate_schedule(sched, shape);
  if (!problem.empty()) throw std::invalid_argument("replay_schedule: " + problem);
  return replay_validated_schedule(sched, shape, duration);
}

ReplayResult replay_validated_schedule(const Schedule& sched, const PipelineShape& shape,
                                       const ActionDuration& duration) {
  const int p = shape.stages;
  ReplayResult r;
  // Cheap to check here: a schedule that was not validated and cannot finish is refused.
  const std::string stuck = simulate(sched, shape, duration, r.start, r.end);
  if (!stuck.empty())
    throw std::invalid_argument("replay_validated_schedule: " + stuck +
                                " (a schedule that was not validated)");
  r.busy.assign(p, 0);
  r.bubble_fraction.assign(p, 0);
  r.peak_live.assign(p, 0);
  // An activation set is alive from its forward to its backward, or to its backward_weight
  // in a split schedule (W reads the saved activations).
  const ActionKind frees =
      splits_backward(sched) ? ActionKind::backward_weight : ActionKind::backward;
  for (int s = 0; s < p; ++s) {
    int alive = 0;
    for (std::size_t i = 0; i < sched[s].size(); ++i) {
      const Action& a = sched[s][i];
      r.makespan = std::max(r.makespan, r.end[s][i]);
      if (!is_compute(a.kind)) continue;
      r.busy[s] += r.end[s][i] - r.start[s][i];
      if (a.kind == ActionKind::forward) r.peak_live[s] = std::max(r.peak_live[s], ++alive);
      if (a.kind == frees) --alive;
    }
  }
  for (int s = 0; s < p; ++s) {
    r.bubble_fraction[s] = r.makespan > 0 ? 1.0 - r.busy[s] / r.makespan : 0.0;
    r.mean_bubble_fraction += r.bubble_fraction[s] / p;
  }
  return r;
}

double ideal_bubble_fraction(ScheduleKind kind, const PipelineShape& shape) {
  require_shape(shape, "ideal_bubble_fraction");
  const double p = shape.stages, m = shape.micro_batches;
  if (kind == ScheduleKind::zb_h1) return (p - 1) / (3 * m + p - 1);
  const double v = kind == ScheduleKind::interleaved ? shape.virtual_stages : 1;
  return (p - 1) / (v * m + p - 1);
}

double bubble_fraction_formula(ScheduleKind kind, const PipelineShape& shape, double tf, double tb,
                               double tw) {
  const std::string problem = generator_shape_problem(kind, shape);
  if (!problem.empty()) throw std::invalid_argument("bubble_fraction_formula: " + problem);
  for (auto [name, t] : {std::pair{"tf", tf}, std::pair{"tb", tb}, std::pair{"tw", tw}})
    if (!std::isfinite(t) || t < 0)
      throw std::invalid_argument("bubble_fraction_formula: " + std::string(name) + " = " +
                                  std::to_string(t) + ", expected a finite time >= 0");
  if (tf + tb + tw == 0) return 0.0;  // a step of no length has no bubble, as in the replay
  if (kind != ScheduleKind::zb_h1) return ideal_bubble_fraction(kind, shape);
  if (tw > tf + tb)
    throw std::invalid_argument("bubble_fraction_formula: zb-h1 with tw = " + std::to_string(tw) +
                                " > tf + tb = " + std::to_string(tf + tb) +
                                ": the formula does not hold there (replay the schedule)");
  // The step takes (m+p-1)(tf+tb) + max(1, m-p+1) tw: 1F1B's with its backwards shortened to
  // B, plus the W's of stage 0 that do not fit where it waits for a gradient; min(m, p) - 1
  // of them do (header: the range of times where this is exact).
  const double p = shape.stages, m = shape.micro_batches;
  const double idle = (p - 1) * (tf + tb) - (std::min(m, p) - 1) * tw;
  return idle / (m * (tf + tb + tw) + idle);
}

}  // namespace paraxis::schedule
