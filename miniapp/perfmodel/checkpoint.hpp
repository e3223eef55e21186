// How often to checkpoint a long run: the interval that minimises the expected time lost to
// writing checkpoints plus the work redone after a failure, from the checkpoint's cost C and
// the system's mean time between failures M (seconds, both).
//   Young 1974 (CACM 17(9)), first order:   tau = sqrt(2 C M)
//   Daly 2006 (FGCS 22(3), doi:10.1016/j.future.2004.11.016), higher order:
//       tau = sqrt(2 C M) [1 + (1/3) sqrt(C / (2M)) + (1/9) (C / (2M))] - C   for C < 2M
//       tau = M                                                               for C >= 2M
// Both assume exponentially distributed failures (a constant rate); Daly's also counts the
// restart, which Young's first-order expansion drops.
//
// Daly's model of the expected wall time of W seconds of work checkpointed every tau seconds of
// work, each checkpoint costing C, each failure followed by a restart of R (which can itself be
// interrupted) and redoing the work since the last checkpoint:
//       T(tau) = M e^{R/M} (e^{(tau + C)/M} - 1) W / tau
// and a Monte Carlo simulation of the same process with Poisson failures, which checks the
// formula and the intervals (docs/checkpoint.md, "Cadence").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace paraxis::perfmodel {

// Throw std::invalid_argument unless C >= 0 and M > 0.
double young_interval(double checkpoint_s, double mtbf_s);
double daly_interval(double checkpoint_s, double mtbf_s);

// The job of the cadence model: work_s of work, a checkpoint every interval_s of work costing
// checkpoint_s (also after the last piece of work), restart_s after each failure, failures at
// the constant rate 1 / mtbf_s.
struct CadenceJob {
  double work_s = 0, interval_s = 0, checkpoint_s = 0, restart_s = 0, mtbf_s = 0;
};

// Daly's expected wall time T(tau) above and the fraction of it that is not work, (T - W) / T.
// Throw std::invalid_argument unless W, tau, M > 0 and C, R >= 0.
double daly_expected_wall(const CadenceJob& job);
double daly_expected_waste(const CadenceJob& job);

struct CadenceSimulation {
  double mean_wall_s = 0;    // over the trials
  double stderr_wall_s = 0;  // the standard error of mean_wall_s
  double waste = 0;          // (mean_wall_s - W) / mean_wall_s
  double stderr_waste = 0;   // its standard error (propagated from stderr_wall_s)
  double mean_failures = 0;  // per trial
};

// Simulates `trials` runs of the job: the work in pieces of interval_s (the last one shorter when
// it does not divide W), each followed by a checkpoint; a failure (exponential times with mean
// mtbf_s, drawn by inversion from std::mt19937_64 seeded with `seed`, so the result is the same
// on every platform) during a piece or its checkpoint loses both, then a restart of restart_s
// (a failure during it restarts it) and the piece again. Throws std::invalid_argument as
// daly_expected_wall does, and unless trials >= 2.
CadenceSimulation simulate_cadence(const CadenceJob& job, int trials, std::uint64_t seed);

// Daly's expected waste of `job` at its interval beside the Monte Carlo's (simulate_cadence
// over `trials` runs of `pieces` intervals of work, job.work_s ignored), with the simulation's
// 95 % confidence interval (waste +- 1.96 standard errors): what `report` and `plan` show.
struct WasteEstimate {
  double daly = 0, simulated = 0, ci_low = 0, ci_high = 0;
  int trials = 0;
};
WasteEstimate waste_estimate(CadenceJob job, int trials = 2000, int pieces = 100,
                             std::uint64_t seed = 1);

// The simulated waste over a log-spaced scan of `points` intervals from lo_s to hi_s (every
// interval with the same seed: common random numbers make neighbours comparable), and the
// interval with the least waste.
struct CadenceScan {
  std::vector<double> interval_s, waste, stderr_waste;
  std::size_t best = 0;
};
CadenceScan optimal_interval_by_simulation(CadenceJob job, double lo_s, double hi_s, int points,
                                           int trials, std::uint64_t seed);

// Mean time between failures of a system of `devices` devices failing independently at
// `failures_per_device_s` each: 1 / (rate * devices).
double system_mtbf(double failures_per_device_s, double devices);

// Llama 3 (arXiv 2407.21783): 419 unexpected interruptions in 54 days of
// training on 16,384 H100 GPUs — about one every 3 hours for the job, or
// 419 / (54 * 86400 s * 16384) per GPU-second: the planner's default failure rate.
inline constexpr double kLlama3Interruptions = 419;
inline constexpr double kLlama3Days = 54;
inline constexpr double kLlama3Gpus = 16384;
double llama3_failures_per_device_s();

}  // namespace paraxis::perfmodel
