// What the multi-rank training tests share: a deck (inputs/tiny.yaml with overrides), a run of
// the parallel trainer on a grid over MPI_COMM_WORLD, the single-rank reference run, and the
// correctness contract's comparison (docs/parallel.md). The comparison is --verify's own
// (driver::compare_runs, driver/verify.hpp): one statement of what "reproduces the single-rank
// run" means, with the precision's tolerances (driver::verify_tolerance), for the program and
// its tests alike.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "deck/deck.hpp"
#include "driver/verify.hpp"
#include "model/trainer.hpp"
#include "parallel/parallel_trainer.hpp"
#include "parallel/process_grid.hpp"

namespace ptest {

using namespace paraxis;

inline int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// inputs/tiny.yaml with the overrides ("key=value").
inline driver::RunConfig tiny(const std::vector<std::string>& overrides) {
  const auto deck = driver::load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", overrides, 0);
  for (const auto& e : deck.errors) ADD_FAILURE() << e.to_string();
  return deck.points.at(0).config;
}

struct TrainedRun {
  model::Precision precision = model::Precision::fp64;  // the run's train.precision
  std::vector<double> loss, params;
  std::vector<model::StepResult> steps;
  model::MemoryReport memory;
  double replica_divergence = -1;
  // Per step and axis: bytes and calls this rank recorded.
  std::vector<std::map<std::string, model::CommTotals>> comm;
};

// The parallel run of `c` (its parallel section must fit the world size).
inline TrainedRun run_parallel(const driver::RunConfig& c, bool record_routing = false) {
  const auto& p = c.parallel;
  parallel::ProcessGrid grid(MPI_COMM_WORLD, p);
  auto t = parallel::make_parallel_trainer(c.model, c.train, p, c.comm, grid);
  if (record_routing) t->record_routing(true);
  TrainedRun r;
  r.precision = c.train.precision;
  for (int s = 0; s < c.train.steps; ++s) {
    r.steps.push_back(t->step());
    r.loss.push_back(r.steps.back().loss);
    r.comm.push_back(r.steps.back().comm);
  }
  r.memory = t->memory();
  r.params = t->parameters();
  r.replica_divergence = t->replica_divergence();
  return r;
}

inline TrainedRun run_reference(const driver::RunConfig& c, bool record_routing = false) {
  auto t = model::make_trainer(c.model, c.train);
  if (record_routing) t->record_routing(true);
  TrainedRun r;
  r.precision = c.train.precision;
  for (int s = 0; s < c.train.steps; ++s) {
    r.steps.push_back(t->step());
    r.loss.push_back(r.steps.back().loss);
  }
  r.params = t->parameters();
  return r;
}

// `par` reproduces `ref` as --verify judges it (driver::compare_runs with the precision's
// tolerances: every step's loss, the final parameters, nothing non-finite, copies of a
// replicated parameter identical); the failure names what differs and by how much.
inline void expect_matches(const TrainedRun& par, const TrainedRun& ref, const std::string& what) {
  ASSERT_EQ(par.precision, ref.precision) << what << ": runs of different precisions";
  const driver::VerifyResult v =
      driver::compare_runs(ref.precision, {ref.loss, ref.params}, {par.loss, par.params}, {}, false,
                           par.replica_divergence);
  EXPECT_TRUE(v.passed) << what << ": " << v.reason;
  EXPECT_EQ(v.steps_compared, static_cast<int>(ref.loss.size())) << what;
  // A run whose parameters are all 0 would match anything within 0 x max|p|.
  EXPECT_GT(v.max_param_abs, 0) << what;
}

// Runs `c` twice and checks both runs are bitwise identical.
inline void expect_bitwise_rerun(const driver::RunConfig& c, const std::string& what) {
  const TrainedRun a = run_parallel(c), b = run_parallel(c);
  EXPECT_EQ(a.loss, b.loss) << what;
  EXPECT_EQ(a.params, b.params) << what;
}

}  // namespace ptest
