// --verify: the comparison of a parallel run with the single-rank reference (verify.hpp).
#include "driver/verify.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "model/shard_layout.hpp"

namespace paraxis::driver {

namespace {

// Three significant digits, as the "  verify:" lines print them.
std::string sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3e", x);
  return buf;
}

// max that keeps a NaN (std::max(a, NaN) drops it, which would let a NaN run pass).
double max_keep_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return std::max(a, b);
}

const char* side(bool reference) {
  return reference ? "the reference" : "the parallel run";
}

// Parameter index -> "name[i]" or "name(r,c)" in the single-rank layout.
std::string name_in(const std::vector<model::TensorSpec>& specs, std::size_t index) {
  std::size_t first = 0;
  for (const auto& s : specs) {
    if (index < first + s.size()) {
      const std::size_t i = index - first;
      if (s.cols == 0) return s.name + "[" + std::to_string(i) + "]";
      return s.name + "(" + std::to_string(i / s.cols) + "," + std::to_string(i % s.cols) + ")";
    }
    first += s.size();
  }
  return "#" + std::to_string(index);
}

// Tokens whose top-k (in order) differ between two recordings of one step's routing.
long count_flips(const std::vector<int>& a, const std::vector<int>& b, int k) {
  long flips = 0;
  for (std::size_t t = 0; t + k <= a.size() && t + k <= b.size(); t += k)
    flips += std::equal(a.begin() + t, a.begin() + t + k, b.begin() + t) ? 0 : 1;
  return flips;
}

}  // namespace

VerifyTolerance verify_tolerance(model::Precision p) {
  switch (p) {
    case model::Precision::fp64:
      return {1e-9, 1e-9};
    case model::Precision::fp32:
      return {1e-4, 1e-4};
    case model::Precision::bf16:
      return {2e-2, 0};
  }
  throw std::invalid_argument("verify_tolerance: unknown precision " +
                              std::to_string(static_cast<int>(p)));
}

namespace {

using Reasons = std::vector<std::string>;

// Every step's loss: a non-finite loss on either side, and the first step beyond the tolerance.
void compare_losses(const RunOutcome& reference, const RunOutcome& parallel, double tolerance,
                    VerifyResult& v, Reasons& reasons) {
  if (reference.losses.size() != parallel.losses.size())
    reasons.push_back("the parallel run has " + std::to_string(parallel.losses.size()) +
                      " steps, the reference " + std::to_string(reference.losses.size()));
  const std::size_t steps = std::min(reference.losses.size(), parallel.losses.size());
  int first_bad_step = -1;
  double first_bad_rel = 0;
  for (std::size_t s = 0; s < steps; ++s) {
    const double a = parallel.losses[s], b = reference.losses[s];
    ++v.steps_compared;
    if (!std::isfinite(a) || !std::isfinite(b)) {
      v.max_loss_rel_diff = std::numeric_limits<double>::quiet_NaN();
      std::ostringstream os;
      os << "loss of step " << s + 1 << " is " << (std::isfinite(a) ? b : a) << " in "
         << side(std::isfinite(a));
      reasons.push_back(os.str());
      continue;
    }
    const double rel = std::fabs(a - b) / std::max(std::fabs(b), 1e-300);
    v.max_loss_rel_diff = max_keep_nan(v.max_loss_rel_diff, rel);
    if (!(rel <= tolerance) && first_bad_step < 0) {
      first_bad_step = static_cast<int>(s);
      first_bad_rel = rel;
    }
  }
  if (first_bad_step >= 0)
    reasons.push_back("loss of step " + std::to_string(first_bad_step + 1) + " differs by " +
                      sci(first_bad_rel) + " relative > tolerance " + sci(tolerance) +
                      " (the first such step; max " + sci(v.max_loss_rel_diff) + ")");
}

// The routing flips per step; in fp64 any flip fails.
void compare_routing(model::Precision precision, const std::vector<long>& flips_per_step,
                     VerifyResult& v, Reasons& reasons) {
  for (std::size_t s = 0; s < flips_per_step.size(); ++s) {
    if (flips_per_step[s] > 0 && v.first_flip_step < 0) v.first_flip_step = static_cast<int>(s);
    v.routing_flips += flips_per_step[s];
  }
  if (precision == model::Precision::fp64 && v.routing_flips > 0)
    reasons.push_back("routing flip in fp64 at step " + std::to_string(v.first_flip_step + 1) +
                      " (" + std::to_string(v.routing_flips) +
                      " token(s) in all; fp64 rounding cannot flip a routing decision)");
}

// The final parameters, of equal count: the non-finite ones, and the largest absolute
// difference against the tolerance relative to the reference's largest |p|.
void compare_params(const RunOutcome& reference, const RunOutcome& parallel, double param_rel,
                    const std::function<std::string(std::size_t)>& name, VerifyResult& v,
                    Reasons& reasons) {
  std::size_t worst = 0;
  long non_finite = 0;
  std::size_t first_non_finite = 0;
  for (std::size_t k = 0; k < reference.params.size(); ++k) {
    const double a = parallel.params[k], b = reference.params[k];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (non_finite++ == 0) first_non_finite = k;
      v.max_param_abs_diff = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    v.max_param_abs = std::max(v.max_param_abs, std::fabs(b));
    const double d = std::fabs(a - b);
    if (!std::isnan(v.max_param_abs_diff) && d > v.max_param_abs_diff) {
      v.max_param_abs_diff = d;
      worst = k;
    }
  }
  v.param_tolerance = param_rel * v.max_param_abs;
  if (non_finite > 0) {
    const double a = parallel.params[first_non_finite], b = reference.params[first_non_finite];
    std::ostringstream os;
    os << non_finite << " final parameter(s) not finite; the first, " << name(first_non_finite)
       << ", is " << (std::isfinite(a) ? b : a) << " in " << side(std::isfinite(a));
    reasons.push_back(os.str());
  } else if (param_rel > 0 && !(v.max_param_abs_diff <= v.param_tolerance)) {
    reasons.push_back("max param abs diff " + sci(v.max_param_abs_diff) + " at " + name(worst) +
                      " > tolerance " + sci(v.param_tolerance) + " (" + sci(param_rel) +
                      " x max |p| " + sci(v.max_param_abs) + ")");
  }
}

}  // namespace

VerifyResult compare_runs(model::Precision precision, const RunOutcome& reference,
                          const RunOutcome& parallel, const std::vector<long>& flips_per_step,
                          bool routing_replayed, double replica_divergence,
                          const std::function<std::string(std::size_t)>& param_name) {
  VerifyResult v;
  Reasons reasons;
  const VerifyTolerance tol = verify_tolerance(precision);
  v.loss_tolerance = tol.loss_rel;
  v.routing_replayed = routing_replayed;
  v.replica_divergence = replica_divergence;
  const auto name = [&](std::size_t i) {
    return param_name ? param_name(i) : "#" + std::to_string(i);
  };
  compare_losses(reference, parallel, tol.loss_rel, v, reasons);
  compare_routing(precision, flips_per_step, v, reasons);
  if (reference.params.size() != parallel.params.size())
    reasons.push_back("the parallel run has " + std::to_string(parallel.params.size()) +
                      " parameters, the reference " + std::to_string(reference.params.size()));
  else
    compare_params(reference, parallel, tol.param_rel, name, v, reasons);
  if (replica_divergence != 0)
    reasons.push_back("copies of a replicated parameter differ across ranks by " +
                      sci(replica_divergence));
  v.passed = reasons.empty();
  for (std::size_t i = 0; i < reasons.size(); ++i) v.reason += (i ? "; " : "") + reasons[i];
  return v;
}

namespace {

// How the reference follows the parallel run's MoE routing.
struct Routing {
  bool routed = false;      // the model routes tokens
  bool replay = false;      // the reference replays the run's choices (fp32, bf16)
  std::size_t choices = 0;  // the choices a step records
};

Routing routing_of(const RunConfig& cfg) {
  Routing r;
  const auto& moe = cfg.model.moe;
  r.routed = moe.experts > 0 && cfg.model.moe_layer_count() > 0;
  // In fp64 the reference routes itself and any flip fails; in fp32/bf16 it follows the run.
  r.replay = r.routed && cfg.train.precision != model::Precision::fp64;
  r.choices = r.routed ? static_cast<std::size_t>(cfg.train.global_batch) * cfg.model.seq_len *
                             moe.top_k * cfg.model.moe_layer_count()
                       : 0;
  return r;
}

// Trains the reference over the run's steps, recording both sides' losses and each step's
// routing flips. Returns "" or why the run's record cannot be compared.
std::string train_reference(const RunConfig& cfg, const std::vector<model::StepResult>& steps,
                            const Routing& routing, model::Trainer& reference, RunOutcome& par,
                            RunOutcome& out, std::vector<long>& flips) {
  std::string record_error;
  const int n = std::min<int>(cfg.train.steps, static_cast<int>(steps.size()));
  for (int s = 0; s < n; ++s) {
    if (routing.routed && steps[s].routing.size() != routing.choices) {
      record_error = "the parallel run recorded " + std::to_string(steps[s].routing.size()) +
                     " routing choices for step " + std::to_string(s + 1) + ", expected " +
                     std::to_string(routing.choices) + " (was routing recorded?)";
      break;
    }
    reference.replay_routing(routing.replay ? &steps[s].routing : nullptr);
    const model::StepResult rs = reference.step();
    par.losses.push_back(steps[s].loss);
    out.losses.push_back(rs.loss);
    if (routing.routed)
      flips.push_back(routing.replay
                          ? rs.routing_flips
                          : count_flips(steps[s].routing, rs.routing, cfg.model.moe.top_k));
  }
  reference.replay_routing(nullptr);
  if (record_error.empty() && steps.size() != static_cast<std::size_t>(cfg.train.steps))
    record_error = "the parallel run has " + std::to_string(steps.size()) +
                   " steps, train.steps = " + std::to_string(cfg.train.steps);
  return record_error;
}

// The "  verify:" lines.
void print_verdict(const VerifyResult& v, const Routing& routing, double replica_divergence) {
  if (replica_divergence != 0)
    std::printf("  verify: copies of a replicated parameter differ across ranks by %.3e\n",
                replica_divergence);
  if (routing.routed) {
    if (v.routing_flips == 0)
      std::printf("  verify: routing %s, no flips\n",
                  routing.replay ? "replayed from the parallel run" : "compared step by step");
    else
      std::printf("  verify: %ld routing flip(s), the first in step %d (%s)\n", v.routing_flips,
                  v.first_flip_step + 1,
                  routing.replay ? "the reference replayed the parallel run's routing: near ties"
                                 : "fp64: a deviation, not rounding");
  }
  char param_bound[64] = "not bounded in bf16";
  if (v.param_tolerance > 0)
    std::snprintf(param_bound, sizeof(param_bound), "tolerance %.3e", v.param_tolerance);
  std::printf(
      "  verify: %d steps, max loss rel diff %.3e (tolerance %.1e), max param abs diff %.3e "
      "(%s): %s\n",
      v.steps_compared, v.max_loss_rel_diff, v.loss_tolerance, v.max_param_abs_diff, param_bound,
      v.passed ? "PASSED" : "FAILED");
  if (!v.passed) std::printf("  verify: failed: %s\n", v.reason.c_str());
  std::fflush(stdout);
}

}  // namespace

VerifyResult verify_against_reference(const RunConfig& cfg,
                                      const std::vector<model::StepResult>& steps,
                                      const std::vector<double>& params,
                                      double replica_divergence) {
  RunConfig ref = cfg;
  ref.parallel = ParallelConfig{};
  ref.comm.overlap = false;
  auto reference = model::make_trainer(ref.model, ref.train);
  reference->record_routing(true);
  const Routing routing = routing_of(cfg);
  RunOutcome par, out;
  std::vector<long> flips;
  const std::string record_error =
      train_reference(cfg, steps, routing, *reference, par, out, flips);
  out.params = reference->parameters();
  par.params = params;
  const auto specs = model::parameter_specs(cfg.model, model::ShardLayout::whole(cfg.model));
  VerifyResult v =
      compare_runs(cfg.train.precision, out, par, flips, routing.replay, replica_divergence,
                   [&](std::size_t i) { return name_in(specs, i); });
  if (!record_error.empty()) {
    // The reference stopped where the record did: the rest of the comparison means nothing.
    v.passed = false;
    v.reason = record_error;
  }
  print_verdict(v, routing, replica_divergence);
  return v;
}

}  // namespace paraxis::driver
