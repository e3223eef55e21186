// The stages of one sweep point after its trainer is built (point_run.cpp strings them together):
// train the steps (point_train.cpp), gather every rank's figures to rank 0 (point_gather.cpp),
// and check the run against the single-rank reference (point_verify.cpp). Every wait on other
// ranks goes through the watchdog (parallel/watchdog.hpp) unless its comment says why not.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "deck/run_config.hpp"
#include "driver/results.hpp"
#include "model/trainer.hpp"

namespace paraxis::driver {

// Runs `trainer` from the steps it has done (0, or those of the checkpoint it resumed from) to
// cfg.train.steps, appending each to `steps` (rank 0 prints them), with the deck's fault
// injections for `rank`; after each step that did not diverge, after_step(completed steps)
// (the checkpoint cadence). Stops after the first step that diverges. Returns "" or why the
// run diverged (divergence_of). Throws on fault.dead_rank; never returns on fault.hang.
// With print_steps false, rank 0 prints nothing.
std::string train_steps(const RunConfig& cfg, int rank, model::Trainer& trainer,
                        std::vector<model::StepResult>& steps,
                        const std::function<void(int)>& after_step = {}, bool print_steps = true);

// Every rank's per-step metrics (rank_metrics) into r.rank_steps and, with output.trace, every
// rank's trace events (times relative to t0) into r.trace_events, on rank 0. Collective.
void gather_steps_and_trace(const RunConfig& cfg, int world, int rank, double t0, PointResult& r);

// hardware.rerun_misses, after a calibrated point's recheck (docs/report.md, "Rerun"): rank 0
// reads the point as summary.json will hold it and, where a time term missed its target with
// nothing in the point showing the miss to be the machine's (report::unexplained_misses), every
// rank runs the point's steps again on a fresh trainer from `make` (no checkpoints, no trace, no
// step lines), and rank 0 records in r.rerun which terms missed, what the rerun measured of each
// time term (report::measured_time_terms) and its seconds. Collective.
void rerun_if_missed(const RunConfig& cfg, int world, int rank,
                     const std::function<std::unique_ptr<model::Trainer>()>& make, PointResult& r);

// Every rank's memory into r.memory_per_rank on rank 0; r.memory: the rank with the largest
// peak (this rank's own report elsewhere). Collective.
void gather_memory(const model::MemoryReport& mine, int world, PointResult& r);

// --verify after a run that did not diverge: rank 0 trains the single-rank reference and
// compares (verify_against_reference) with r.steps and `params` (the run's final parameters,
// gathered); the verdict is broadcast, so every rank sets r.verify and, on a failure,
// r.status = "failed: --verify: why". Collective.
void verify_point(const RunConfig& cfg, int rank, const std::vector<double>& params,
                  double replica_divergence, PointResult& r);

}  // namespace paraxis::driver
