// --verify's oracle (driver/verify.hpp): the comparison checks every step and every final
// parameter, NaN-aware, fails a routing flip in fp64, and keeps comparing after a flip in fp32
// (where the reference replays the run's routing). The end-to-end checks run a single-rank
// "parallel" run and tamper with what it hands to verify_against_reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "deck/deck.hpp"
#include "driver/verify.hpp"
#include "model/trainer.hpp"

using namespace paraxis;
using driver::compare_runs;
using driver::RunOutcome;
using model::Precision;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

RunOutcome outcome() {
  return RunOutcome{{4.8, 4.6, 4.3, 4.1, 3.9}, {0.02, -0.5, 1.0, 0.25, -0.75, 0.125}};
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

driver::RunConfig tiny(const std::vector<std::string>& overrides) {
  const auto deck = driver::load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", overrides, 1);
  for (const auto& e : deck.errors) ADD_FAILURE() << e.to_string();
  return deck.points.at(0).config;
}

struct TrainedRun {
  std::vector<model::StepResult> steps;
  std::vector<double> params;
};

TrainedRun train(const driver::RunConfig& c) {
  auto t = model::make_trainer(c.model, c.train);
  t->record_routing(true);
  TrainedRun r;
  for (int s = 0; s < c.train.steps; ++s) r.steps.push_back(t->step());
  r.params = t->parameters();
  return r;
}

}  // namespace

// ---------------------------------------------------------------- compare_runs

TEST(verify_compare, identical_runs_pass_with_every_step_compared) {
  const auto v = compare_runs(Precision::fp64, outcome(), outcome(), {0, 0, 0, 0, 0}, false, 0);
  EXPECT_TRUE(v.passed) << v.reason;
  EXPECT_EQ(v.steps_compared, 5);
  EXPECT_EQ(v.max_loss_rel_diff, 0.0);
  EXPECT_EQ(v.max_param_abs_diff, 0.0);
  EXPECT_EQ(v.max_param_abs, 1.0);
  EXPECT_EQ(v.param_tolerance, 1e-9);
  EXPECT_TRUE(v.reason.empty());
}

TEST(verify_compare, tolerances_are_the_contracts_per_precision) {
  // fp32: loss within 1e-4 relative, parameters within 1e-4 x max|p| (= 1e-4 here).
  auto par = outcome();
  par.losses[2] *= 1 + 5e-5;
  par.params[4] += 9e-5;
  EXPECT_TRUE(compare_runs(Precision::fp32, outcome(), par, {}, true, 0).passed);
  EXPECT_FALSE(compare_runs(Precision::fp64, outcome(), par, {}, false, 0).passed);
  par.losses[2] = outcome().losses[2] * (1 + 2e-4);
  const auto v = compare_runs(Precision::fp32, outcome(), par, {}, true, 0);
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(has(v.reason, "loss of step 3 differs")) << v.reason;
  EXPECT_TRUE(compare_runs(Precision::bf16, outcome(), par, {}, true, 0).passed);
  // bf16 is bounded on the loss (docs/parallel.md); its parameters are reported, and fail only when
  // not finite.
  par = outcome();
  par.params[0] += 0.1;
  const auto b = compare_runs(Precision::bf16, outcome(), par, {}, true, 0);
  EXPECT_TRUE(b.passed) << b.reason;
  EXPECT_NEAR(b.max_param_abs_diff, 0.1, 1e-12);
  EXPECT_EQ(b.param_tolerance, 0.0);
  par.params[0] = kNaN;
  EXPECT_FALSE(compare_runs(Precision::bf16, outcome(), par, {}, true, 0).passed);
}

TEST(verify_compare, a_nan_or_inf_loss_on_either_side_fails) {
  for (bool reference_side : {false, true})
    for (double bad : {kNaN, kInf, -kInf}) {
      auto ref = outcome(), par = outcome();
      (reference_side ? ref : par).losses[2] = bad;
      const auto v = compare_runs(Precision::fp32, ref, par, {}, false, 0);
      EXPECT_FALSE(v.passed) << bad;
      EXPECT_TRUE(std::isnan(v.max_loss_rel_diff)) << "the NaN is kept, not maxed away";
      EXPECT_TRUE(has(v.reason, "loss of step 3 is")) << v.reason;
      EXPECT_TRUE(has(v.reason, reference_side ? "the reference" : "the parallel run")) << v.reason;
      EXPECT_EQ(v.steps_compared, 5);
    }
}

TEST(verify_compare, a_nan_or_inf_parameter_on_either_side_fails) {
  for (bool reference_side : {false, true})
    for (double bad : {kNaN, kInf}) {
      auto ref = outcome(), par = outcome();
      (reference_side ? ref : par).params[3] = bad;
      const auto v = compare_runs(Precision::fp64, ref, par, {}, false, 0,
                                  [](std::size_t i) { return "p" + std::to_string(i); });
      EXPECT_FALSE(v.passed);
      EXPECT_TRUE(std::isnan(v.max_param_abs_diff));
      EXPECT_TRUE(has(v.reason, "the first, p3, is")) << v.reason;
    }
}

TEST(verify_compare, a_late_loss_divergence_after_a_flip_fails_in_fp32) {
  // A flip at step 2 (replayed, so legitimate in fp32) does not exempt later steps.
  auto par = outcome();
  par.losses[4] *= 1 + 1e-3;
  const auto v = compare_runs(Precision::fp32, outcome(), par, {0, 3, 0, 1, 0}, true, 0);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.routing_flips, 4);
  EXPECT_EQ(v.first_flip_step, 1);
  EXPECT_TRUE(v.routing_replayed);
  EXPECT_TRUE(has(v.reason, "loss of step 5 differs")) << v.reason;
  // Parameters too.
  auto par2 = outcome();
  par2.params[1] += 1e-2;
  const auto w = compare_runs(Precision::fp32, outcome(), par2, {0, 3, 0, 1, 0}, true, 0);
  EXPECT_FALSE(w.passed);
  EXPECT_TRUE(has(w.reason, "max param abs diff 1.000e-02 at #1")) << w.reason;
  // Flips alone, with everything within tolerance, pass in fp32 and are reported.
  const auto ok = compare_runs(Precision::fp32, outcome(), outcome(), {0, 3, 0, 1, 0}, true, 0);
  EXPECT_TRUE(ok.passed) << ok.reason;
  EXPECT_EQ(ok.routing_flips, 4);
}

TEST(verify_compare, a_routing_flip_in_fp64_fails_even_when_the_figures_match) {
  const auto v = compare_runs(Precision::fp64, outcome(), outcome(), {0, 0, 2, 0, 0}, false, 0);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.first_flip_step, 2);
  EXPECT_TRUE(has(v.reason, "routing flip in fp64 at step 3")) << v.reason;
}

TEST(verify_compare, mismatched_counts_and_replica_divergence_fail) {
  auto par = outcome();
  par.losses.pop_back();
  EXPECT_FALSE(compare_runs(Precision::fp32, outcome(), par, {}, false, 0).passed);
  auto par2 = outcome();
  par2.params.push_back(0);
  EXPECT_FALSE(compare_runs(Precision::fp32, outcome(), par2, {}, false, 0).passed);
  const auto v = compare_runs(Precision::fp32, outcome(), outcome(), {}, false, 1e-7);
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(has(v.reason, "replicated parameter")) << v.reason;
  EXPECT_FALSE(compare_runs(Precision::fp32, outcome(), outcome(), {}, false, kNaN).passed);
}

// ---------------------------------------------------------------- verify_against_reference

TEST(verify_against_reference, a_faithful_run_passes_in_every_precision) {
  for (const char* p : {"fp64", "fp32", "bf16"}) {
    const auto c = tiny({"train.steps=3", std::string("train.precision=") + p});
    const TrainedRun run = train(c);
    const auto v = driver::verify_against_reference(c, run.steps, run.params, 0);
    EXPECT_TRUE(v.passed) << p << ": " << v.reason;
    EXPECT_EQ(v.steps_compared, 3);
    EXPECT_EQ(v.routing_flips, 0);
    EXPECT_EQ(v.routing_replayed, std::string(p) != "fp64") << p;
    EXPECT_EQ(v.max_param_abs_diff, 0.0) << p << ": the same computation, bitwise";
  }
}

TEST(verify_against_reference, catches_a_nan_loss_and_a_perturbed_parameter) {
  const auto c = tiny({"train.steps=3", "train.precision=fp64"});
  TrainedRun run = train(c);
  run.steps[1].loss = kNaN;
  auto v = driver::verify_against_reference(c, run.steps, run.params, 0);
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(has(v.reason, "loss of step 2 is nan in the parallel run")) << v.reason;
  run = train(c);
  run.params[5] += 1e-6;  // wte(0,5): beyond 1e-9 x max|p|
  v = driver::verify_against_reference(c, run.steps, run.params, 0);
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(has(v.reason, "at wte(0,5)")) << v.reason;
}

TEST(verify_against_reference, fp32_replays_the_runs_routing_and_counts_its_flips) {
  const auto c = tiny({"train.steps=2", "train.precision=fp32"});
  const int K = c.model.moe.top_k;
  TrainedRun run = train(c);
  // Pretend the run sent every fourth token of its last step to another expert, with the same
  // figures: the reference follows, counts exactly those flips, and then disagrees with the
  // figures: the comparison goes on after the flip (the final parameters) and fails.
  auto& r = run.steps[1].routing;
  long changed = 0;
  for (std::size_t n = 0; n < r.size() / K; n += 4, ++changed) {
    int e = 0;
    while (e == r[n * K] || e == r[n * K + 1]) ++e;
    r[n * K + 1] = e;
  }
  const auto v = driver::verify_against_reference(c, run.steps, run.params, 0);
  EXPECT_TRUE(v.routing_replayed);
  EXPECT_EQ(v.routing_flips, changed);
  EXPECT_EQ(v.first_flip_step, 1);
  EXPECT_EQ(v.steps_compared, 2);
  EXPECT_FALSE(v.passed) << "max loss rel diff " << v.max_loss_rel_diff;
}

TEST(verify_against_reference, fp64_fails_on_a_flip_and_on_a_missing_routing_record) {
  const auto c = tiny({"train.steps=2", "train.precision=fp64"});
  const int K = c.model.moe.top_k;
  TrainedRun run = train(c);
  std::swap(run.steps[0].routing[7 * K], run.steps[0].routing[7 * K + 1]);
  auto v = driver::verify_against_reference(c, run.steps, run.params, 0);
  EXPECT_FALSE(v.passed);
  EXPECT_FALSE(v.routing_replayed);
  EXPECT_EQ(v.routing_flips, 1);
  EXPECT_TRUE(has(v.reason, "routing flip in fp64 at step 1")) << v.reason;
  run = train(c);
  run.steps[1].routing.clear();
  v = driver::verify_against_reference(c, run.steps, run.params, 0);
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(has(v.reason, "recorded 0 routing choices for step 2")) << v.reason;
}
