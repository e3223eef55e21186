// `--verify`, the correctness contract checked in the run itself (docs/parallel.md, "The
// correctness contract"): the single-rank reference is trained alongside and every step's loss and
// the final parameters are compared within the precision's tolerance, with no exemption. A NaN or
// Inf on either side fails. MoE routing: in fp64 a routing flip fails (rounding cannot cause one);
// in fp32 and bf16, where a near-tie may flip legitimately, the reference replays the parallel
// run's routing of every step (model::Trainer::replay_routing) so the two runs stay comparable,
// and the flips are counted and reported.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "deck/run_config.hpp"
#include "model/trainer.hpp"

namespace paraxis::driver {

struct VerifyResult {
  double max_loss_rel_diff = 0;  // over every step; NaN when a loss was not finite
  double max_param_abs_diff = 0;
  double max_param_abs = 0;                        // of the reference's final parameters
  double loss_tolerance = 0, param_tolerance = 0;  // param_tolerance: 0 when not bounded
  long routing_flips = 0;         // tokens whose top-k experts differ between the runs
  int first_flip_step = -1;       // 0-based step of the first flip (-1: none)
  double replica_divergence = 0;  // largest difference between copies of a replicated parameter
  int steps_compared = 0;         // steps whose losses were compared (every step of the run)
  bool routing_replayed = false;  // the reference followed the parallel run's routing
  bool passed = false;
  std::string reason;  // why it failed (each failed check, "; "-separated); empty when passed
};

// The contract's tolerances: loss relative, parameters relative to max |p| of the reference.
// docs/parallel.md's contract bounds bf16 on the loss only: a parameter whose gradient is zero but
// for rounding (an attention key bias: softmax ignores it) takes Adam steps of about lr from bf16
// noise, so correct bf16 runs differ there by up to steps x lr. param_rel = 0: parameters not
// bounded (still compared, reported, and failed when not finite).
struct VerifyTolerance {
  double loss_rel, param_rel;
};
VerifyTolerance verify_tolerance(model::Precision p);

// What one run leaves to compare: the loss of every step and the final parameters.
struct RunOutcome {
  std::vector<double> losses;
  std::vector<double> params;  // ParamStore order of the single-rank model
};

// The comparison itself, no training: `flips_per_step` holds the routing flips of each step
// (empty for a dense model), `routing_replayed` whether the reference followed the parallel
// run's routing. Fails on: a step count or parameter count mismatch, a NaN or Inf on either
// side, a flip in fp64, a loss beyond tolerance at any step, a parameter beyond tolerance, a
// replica divergence other than 0. `param_name` names a parameter index in the reason
// (default "#index").
VerifyResult compare_runs(model::Precision precision, const RunOutcome& reference,
                          const RunOutcome& parallel, const std::vector<long>& flips_per_step,
                          bool routing_replayed, double replica_divergence,
                          const std::function<std::string(std::size_t)>& param_name = {});

// Rank 0 only, after the parallel run of `cfg`: trains the single-rank reference (cfg with
// ParallelConfig{} and comm.overlap off) for cfg.train.steps steps, replaying `steps[s].routing`
// in fp32 and bf16 MoE runs (the parallel trainer must have recorded routing), compares with
// `steps` and `params` (the parallel run's final parameters, gathered) and prints
// "  verify: ..." lines. `replica_divergence`: model::Trainer::replica_divergence() of the run.
VerifyResult verify_against_reference(const RunConfig& cfg,
                                      const std::vector<model::StepResult>& steps,
                                      const std::vector<double>& params, double replica_divergence);

}  // namespace paraxis::driver
