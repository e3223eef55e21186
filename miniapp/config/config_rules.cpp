// The rules between a configuration's keys (config_rules.hpp).
#include "config/config_rules.hpp"

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <stdexcept>

#include "config/checked_product.hpp"

namespace paraxis::config {

namespace {

std::string num(long long v) {
  return std::to_string(v);
}

}  // namespace

// tp * pp * dp when it is a possible world size (fits an int), else nullopt.
std::optional<long long> grid_world(const ParallelConfig& p) {
  return checked_product({p.tp, p.pp, p.dp}, INT_MAX);
}

namespace {

struct Rules {
  std::vector<RuleViolation> found;
  void operator()(std::initializer_list<const char*> keys, bool broken, const std::string& msg) {
    if (broken) found.push_back({std::vector<std::string>(keys.begin(), keys.end()), msg});
  }
};

// Expects every degree >= 1 (the callers check it first).
void grid_rules(Rules& rule, const ParallelConfig& p, int world) {
  const auto w = grid_world(p);
  const std::string grid_text =
      "tp * pp * dp = " + num(p.tp) + " * " + num(p.pp) + " * " + num(p.dp);
  rule({"parallel", "parallel.tp", "parallel.pp", "parallel.dp"}, !w,
       grid_text + " exceeds the largest world size, " + num(INT_MAX) + " ranks");
  rule({"parallel", "parallel.tp", "parallel.pp", "parallel.dp"}, w && world > 0 && *w != world,
       grid_text + " = " + (w ? num(*w) : "") + " but the run has " + num(world) + " ranks");
  rule({"parallel.ep", "parallel.dp"}, p.dp % p.ep != 0,
       "ep = " + num(p.ep) + " does not divide parallel.dp = " + num(p.dp));
}

}  // namespace

std::vector<RuleViolation> grid_rule_violations(const ParallelConfig& p, int world) {
  Rules rule;
  for (auto [key, degree] : {std::pair{"parallel.tp", p.tp}, std::pair{"parallel.pp", p.pp},
                             std::pair{"parallel.dp", p.dp}, std::pair{"parallel.ep", p.ep}})
    rule({key}, degree < 1, std::string(key) + " = " + num(degree) + ", expected >= 1");
  if (rule.found.empty()) grid_rules(rule, p, world);
  return rule.found;
}

void require_valid(const std::vector<RuleViolation>& violations) {
  if (violations.empty()) return;
  std::string text;
  for (const auto& v : violations)
    text += (text.empty() ? "" : "\n") + v.keys.front() + ": " + v.message;
  throw std::invalid_argument(text);
}

namespace {

// The ranges of single keys, which the deck checks key by key: restated for callers that build
// a configuration themselves (the planner, tests), because every division after them needs them.
void range_rules(Rules& rule, const model::ModelConfig& m, const model::TrainConfig& t,
                 const ParallelConfig& p) {
  for (auto [key, value] :
       {std::pair{"parallel.tp", p.tp}, std::pair{"parallel.pp", p.pp},
        std::pair{"parallel.dp", p.dp}, std::pair{"parallel.ep", p.ep},
        std::pair{"model.heads", m.heads}, std::pair{"model.layers", m.layers},
        std::pair{"model.seq_len", m.seq_len}, std::pair{"model.moe.top_k", m.moe.top_k},
        std::pair{"train.global_batch", t.global_batch},
        std::pair{"train.micro_batch", t.micro_batch},
        std::pair{"parallel.virtual_stages", p.virtual_stages}})
    rule({key}, value < 1, std::string(key) + " = " + num(value) + ", expected >= 1");
  rule({"parallel.zero"}, !zero_stage_error(p.zero).empty(), zero_stage_error(p.zero));
}

// The model's and the batch's own rules (heads, experts, micro-batches, warm-up, index widths).
void model_batch_rules(Rules& rule, const model::ModelConfig& m, const model::TrainConfig& t) {
  rule({"model.heads", "model.hidden"}, m.hidden % m.heads != 0,
       "heads = " + num(m.heads) + " does not divide model.hidden = " + num(m.hidden));
  rule({"model.moe.top_k", "model.moe.experts"}, m.moe.experts > 0 && m.moe.top_k > m.moe.experts,
       "top_k = " + num(m.moe.top_k) + " exceeds model.moe.experts = " + num(m.moe.experts));
  rule({"train.micro_batch", "train.global_batch"}, t.global_batch % t.micro_batch != 0,
       "micro_batch = " + num(t.micro_batch) +
           " does not divide train.global_batch = " + num(t.global_batch));
  rule({"train.warmup_steps", "train.steps"}, t.warmup_steps >= t.steps,
       "warmup_steps = " + num(t.warmup_steps) +
           " leaves no measured step of train.steps = " + num(t.steps));
  // Token indices are ints on the device (with headroom for the kernels' index arithmetic).
  const long long tokens = static_cast<long long>(t.micro_batch) * m.seq_len;  // < 2^62
  rule({"train.micro_batch", "model.seq_len"}, tokens > INT_MAX / 4,
       "micro_batch * seq_len = " + num(t.micro_batch) + " * " + num(m.seq_len) + " = " +
           num(tokens) + " overflows the token index (at most " + num(INT_MAX / 4) + ")");
  rule({"model.moe.top_k", "train.micro_batch", "model.seq_len", "model.moe.experts"},
       m.moe.experts > 0 && tokens <= INT_MAX / 4 &&
           !checked_product({tokens, m.moe.top_k}, INT_MAX / 4),
       "micro_batch * seq_len * top_k = " + num(tokens) + " * " + num(m.moe.top_k) +
           " overflows the routing index (at most " + num(INT_MAX / 4) + ")");
}

// What tensor parallelism needs of the model (tp > 1).
void tp_rules(Rules& rule, const model::ModelConfig& m, const ParallelConfig& p) {
  rule({"parallel.tp", "model.heads"}, m.heads % p.tp != 0,
       "tp = " + num(p.tp) + " does not divide model.heads = " + num(m.heads));
  rule({"parallel.tp", "model.ffn"}, m.ffn % p.tp != 0,
       "tp = " + num(p.tp) + " does not divide model.ffn = " + num(m.ffn));
  rule({"parallel.sequence_parallel", "parallel.tp", "model.seq_len"},
       p.sequence_parallel && m.seq_len % p.tp != 0,
       "tp = " + num(p.tp) + " does not divide model.seq_len = " + num(m.seq_len) +
           " (sequence parallelism shards it)");
}

// What the pipeline needs of the model and the batch (pp > 1): layers for every chunk, the
// interleaved schedule's micro-batches, parallel.stage_layers.
void pp_rules(Rules& rule, const model::ModelConfig& m, const model::TrainConfig& t,
              const ParallelConfig& p, long long replica_batch) {
  const long long micro = t.global_batch / replica_batch;
  const long long chunks = static_cast<long long>(p.pp) * p.virtual_stages;  // < 2^62
  rule({"parallel.pp", "parallel.virtual_stages", "model.layers"}, m.layers < chunks,
       "pp * virtual_stages = " + num(chunks) + " exceeds model.layers = " + num(m.layers));
  rule({"train.micro_batch", "parallel.schedule", "parallel.pp", "train.global_batch",
        "parallel.dp"},
       p.schedule == schedule::ScheduleKind::interleaved && micro % p.pp != 0,
       "the interleaved schedule needs micro-batches per replica (" + num(micro) +
           " = global_batch / (dp * micro_batch)) divisible by parallel.pp = " + num(p.pp));
  if (!p.stage_layers.empty()) {
    long long sum = 0;  // entries <= INT_MAX: no overflow below 2^32 entries
    int smallest = 1;
    for (int l : p.stage_layers) {
      sum += l;
      smallest = std::min(smallest, l);
    }
    rule({"parallel.stage_layers", "parallel.pp", "parallel.virtual_stages", "model.layers"},
         static_cast<long long>(p.stage_layers.size()) != chunks || sum != m.layers || smallest < 1,
         "needs pp * virtual_stages = " + num(chunks) +
             " entries >= 1 summing to model.layers = " + num(m.layers));
  }
}

// The schedule's, the experts' and recomputation's rules.
void schedule_expert_recompute_rules(Rules& rule, const model::ModelConfig& m,
                                     const model::TrainConfig& t, const ParallelConfig& p) {
  rule({"parallel.virtual_stages", "parallel.schedule"},
       p.schedule != schedule::ScheduleKind::interleaved && p.virtual_stages != 1,
       "virtual_stages = " + num(p.virtual_stages) + " needs parallel.schedule: interleaved");
  rule({"parallel.ep", "model.moe.experts"}, m.moe.experts > 0 && m.moe.experts % p.ep != 0,
       "ep = " + num(p.ep) + " does not divide model.moe.experts = " + num(m.moe.experts));
  // Activation recomputation: a number of recomputed blocks only means something for full.
  rule({"train.recompute_layers", "train.recompute"},
       t.recompute_layers != 0 && t.recompute != model::Recompute::full,
       "recompute_layers = " + num(t.recompute_layers) + " needs train.recompute: full (it is " +
           model::to_string(t.recompute) + ")");
  // zb-h1's W computes a block's weight gradients after its B, from the block's saved
  // activations; full recomputation keeps them only in one working set that every block shares,
  // which the next B overwrites before the W runs (selective keeps them, and is supported).
  rule({"parallel.schedule", "train.recompute"},
       p.schedule == schedule::ScheduleKind::zb_h1 && t.recompute == model::Recompute::full,
       "zb-h1 does not run with train.recompute: full (its W needs the block's activations, "
       "which full recomputation keeps only in a working set the blocks share; selective is "
       "supported)");
  // Fused attention keeps no probabilities (it recomputes them tile by tile in its backward
  // pass): selective recomputation, which drops exactly those, would change nothing; refused
  // rather than silently run as none, so a sweep reports the point as skipped.
  rule({"train.recompute", "model.attention"},
       t.recompute == model::Recompute::selective && m.attention == model::Attention::fused,
       "selective recomputes the attention probabilities, which model.attention: fused never "
       "keeps (use train.recompute: none or full)");
  rule({"train.recompute_layers", "model.layers"},
       t.recompute_layers < 0 || t.recompute_layers > m.layers,
       "recompute_layers = " + num(t.recompute_layers) + ", expected 0 (every block) to " +
           "model.layers = " + num(m.layers));
}

}  // namespace

std::vector<RuleViolation> rule_violations(const model::ModelConfig& m, const model::TrainConfig& t,
                                           const ParallelConfig& p, int world) {
  Rules rule;
  range_rules(rule, m, t, p);
  if (!rule.found.empty()) return rule.found;  // the divisions below need every value >= 1
  model_batch_rules(rule, m, t);
  grid_rules(rule, p, world);
  const long long replica_batch = static_cast<long long>(p.dp) * t.micro_batch;  // < 2^62
  rule({"train.global_batch", "parallel.dp", "train.micro_batch"},
       t.global_batch % replica_batch != 0,
       "global_batch = " + num(t.global_batch) +
           " is not a multiple of parallel.dp * train.micro_batch = " + num(p.dp) + " * " +
           num(t.micro_batch));
  // What each axis needs of the model and the batch (checked even for axes not built yet, so
  // a deck learns everything that is wrong with it at once).
  if (p.tp > 1) tp_rules(rule, m, p);
  if (p.pp > 1) pp_rules(rule, m, t, p, replica_batch);
  schedule_expert_recompute_rules(rule, m, t, p);
  return rule.found;
}

}  // namespace paraxis::config
