// Young's and Daly's optimal checkpoint intervals, a system MTBF from a per-device rate, and
// the cadence model: Daly's expected wall time and its Monte Carlo simulation.
#include "perfmodel/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

namespace paraxis::perfmodel {

namespace {

void check(double C, double M, const char* who) {
  if (!(C >= 0) || !(M > 0) || !std::isfinite(C) || !std::isfinite(M)) {
    std::ostringstream os;
    os << who << ": checkpoint cost " << C << " s, MTBF " << M
       << " s; expected a cost >= 0 and an MTBF > 0";
    throw std::invalid_argument(os.str());
  }
}

}  // namespace

double young_interval(double C, double M) {
  check(C, M, "young_interval");
  return std::sqrt(2.0 * C * M);
}

double daly_interval(double C, double M) {
  check(C, M, "daly_interval");
  if (C >= 2.0 * M) return M;
  const double x = C / (2.0 * M);
  return std::sqrt(2.0 * C * M) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - C;
}

double system_mtbf(double rate, double devices) {
  if (!(rate > 0) || !(devices > 0)) {
    std::ostringstream os;
    os << "system_mtbf: " << rate << " failures per device-second on " << devices
       << " devices; expected both > 0";
    throw std::invalid_argument(os.str());
  }
  return 1.0 / (rate * devices);
}

double llama3_failures_per_device_s() {
  return kLlama3Interruptions / (kLlama3Days * 86400.0 * kLlama3Gpus);
}

}  // namespace paraxis::perfmodel

namespace paraxis::perfmodel {

namespace {

void check_job(const CadenceJob& j, const char* who) {
  const bool ok = j.work_s > 0 && j.interval_s > 0 && j.mtbf_s > 0 && j.checkpoint_s >= 0 &&
                  j.restart_s >= 0 && std::isfinite(j.work_s) && std::isfinite(j.interval_s) &&
                  std::isfinite(j.mtbf_s) && std::isfinite(j.checkpoint_s) &&
                  std::isfinite(j.restart_s);
  if (!ok) {
    std::ostringstream os;
    os << who << ": work " << j.work_s << " s, interval " << j.interval_s << " s, checkpoint "
       << j.checkpoint_s << " s, restart " << j.restart_s << " s, MTBF " << j.mtbf_s
       << " s; expected work, interval and MTBF > 0, checkpoint and restart >= 0";
    throw std::invalid_argument(os.str());
  }
}

// Exponential times by inversion of a 53-bit uniform in [0, 1): the same on every platform
// (std::exponential_distribution's algorithm is the library's choice).
struct Failures {
  std::mt19937_64 rng;
  double mtbf;
  double next() { return -mtbf * std::log1p(-static_cast<double>(rng() >> 11) * 0x1.0p-53); }
};

// Wall time of one attempt-until-success of `length` seconds of uninterrupted time, with a
// restart after each failure; counts the failures.
double complete(double length, double restart, Failures& f, long& failures) {
  double wall = 0;
  for (;;) {
    const double t = f.next();
    if (t >= length) return wall + length;
    wall += t;
    ++failures;
    // The restart, itself restarted by a failure during it.
    for (;;) {
      const double r = f.next();
      if (r >= restart) {
        wall += restart;
        break;
      }
      wall += r;
      ++failures;
    }
  }
}

}  // namespace

double daly_expected_wall(const CadenceJob& j) {
  check_job(j, "daly_expected_wall");
  const double M = j.mtbf_s;
  return M * std::exp(j.restart_s / M) * std::expm1((j.interval_s + j.checkpoint_s) / M) *
         j.work_s / j.interval_s;
}

double daly_expected_waste(const CadenceJob& j) {
  const double T = daly_expected_wall(j);
  return (T - j.work_s) / T;
}

CadenceSimulation simulate_cadence(const CadenceJob& j, int trials, std::uint64_t seed) {
  check_job(j, "simulate_cadence");
  if (trials < 2)
    throw std::invalid_argument("simulate_cadence: trials " + std::to_string(trials) +
                                "; expected >= 2");
  Failures f{std::mt19937_64(seed), j.mtbf_s};
  const long whole = static_cast<long>(std::floor(j.work_s / j.interval_s));
  const double last = j.work_s - static_cast<double>(whole) * j.interval_s;
  double sum = 0, sum2 = 0;
  long failures = 0;
  for (int t = 0; t < trials; ++t) {
    double wall = 0;
    for (long p = 0; p < whole; ++p)
      wall += complete(j.interval_s + j.checkpoint_s, j.restart_s, f, failures);
    if (last > 1e-12 * j.work_s) wall += complete(last + j.checkpoint_s, j.restart_s, f, failures);
    sum += wall;
    sum2 += wall * wall;
  }
  CadenceSimulation s;
  const double n = trials;
  s.mean_wall_s = sum / n;
  const double var = std::max(0.0, (sum2 - sum * sum / n) / (n - 1));
  s.stderr_wall_s = std::sqrt(var / n);
  s.waste = (s.mean_wall_s - j.work_s) / s.mean_wall_s;
  // d waste / d wall = W / wall^2.
  s.stderr_waste = j.work_s / (s.mean_wall_s * s.mean_wall_s) * s.stderr_wall_s;
  s.mean_failures = static_cast<double>(failures) / n;
  return s;
}

CadenceScan optimal_interval_by_simulation(CadenceJob job, double lo, double hi, int points,
                                           int trials, std::uint64_t seed) {
  if (!(lo > 0) || !(hi > lo) || points < 2 || !std::isfinite(hi)) {
    std::ostringstream os;
    os << "optimal_interval_by_simulation: intervals " << lo << " .. " << hi << " s in " << points
       << " points; expected 0 < lo < hi and points >= 2";
    throw std::invalid_argument(os.str());
  }
  CadenceScan scan;
  for (int i = 0; i < points; ++i) {
    job.interval_s = lo * std::pow(hi / lo, static_cast<double>(i) / (points - 1));
    const CadenceSimulation s = simulate_cadence(job, trials, seed);
    scan.interval_s.push_back(job.interval_s);
    scan.waste.push_back(s.waste);
    scan.stderr_waste.push_back(s.stderr_waste);
    if (s.waste < scan.waste[scan.best]) scan.best = scan.waste.size() - 1;
  }
  return scan;
}

WasteEstimate waste_estimate(CadenceJob job, int trials, int pieces, std::uint64_t seed) {
  job.work_s = pieces * job.interval_s;
  WasteEstimate w;
  w.daly = daly_expected_waste(job);
  const CadenceSimulation sim = simulate_cadence(job, trials, seed);
  w.simulated = sim.waste;
  w.ci_low = sim.waste - 1.96 * sim.stderr_waste;
  w.ci_high = sim.waste + 1.96 * sim.stderr_waste;
  w.trials = trials;
  return w;
}

}  // namespace paraxis::perfmodel
