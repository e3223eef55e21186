// Training on inputs/tiny.yaml: the loss falls, reruns are bitwise identical, bf16 tracks fp32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "deck/deck.hpp"
#include "model/trainer.hpp"

using namespace paraxis;

namespace {

driver::RunConfig tiny(const std::vector<std::string>& overrides = {}) {
  const auto deck = driver::load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", overrides, 1);
  for (const auto& e : deck.errors) ADD_FAILURE() << e.to_string();
  return deck.points.at(0).config;
}

std::vector<model::StepResult> train(const driver::RunConfig& c, int steps,
                                     std::vector<double>* params = nullptr) {
  auto t = model::make_trainer(c.model, c.train);
  std::vector<model::StepResult> out;
  for (int s = 0; s < steps; ++s) out.push_back(t->step());
  if (params) *params = t->parameters();
  return out;
}

}  // namespace

TEST(training, tiny_deck_loss_falls_by_a_fifth_in_50_steps) {
  const auto c = tiny();
  ASSERT_GT(c.model.moe.experts, 0) << "tiny.yaml must exercise MoE";
  const auto steps = train(c, 50);
  ASSERT_EQ(steps.size(), 50u);
  const double first = steps.front().loss, last = steps.back().loss;
  EXPECT_NEAR(first, std::log(static_cast<double>(c.model.vocab)), 0.3)
      << "an untrained model predicts roughly uniformly";
  EXPECT_LE(last, 0.8 * first) << "first " << first << " last " << last;
  for (const auto& s : steps) EXPECT_TRUE(std::isfinite(s.loss));
}

TEST(training, reruns_are_bitwise_identical) {
  for (const char* precision : {"fp64", "fp32", "bf16"}) {
    const auto c = tiny({std::string("train.precision=") + precision});
    std::vector<double> pa, pb;
    const auto a = train(c, 4, &pa);
    const auto b = train(c, 4, &pb);
    for (std::size_t s = 0; s < a.size(); ++s) {
      EXPECT_EQ(a[s].loss, b[s].loss) << precision << " step " << s;
      EXPECT_EQ(a[s].grad_norm, b[s].grad_norm) << precision << " step " << s;
    }
    ASSERT_EQ(pa.size(), pb.size());
    std::size_t differing = 0;
    for (std::size_t i = 0; i < pa.size(); ++i) differing += pa[i] != pb[i];
    EXPECT_EQ(differing, 0u) << precision;
  }
}

TEST(training, bf16_tracks_fp32_within_two_percent) {
  const auto steps32 = train(tiny({"train.precision=fp32"}), 50);
  const auto steps16 = train(tiny({"train.precision=bf16"}), 50);
  double worst = 0;
  for (std::size_t s = 0; s < steps32.size(); ++s) {
    const double rel = std::fabs(steps16[s].loss - steps32[s].loss) / std::fabs(steps32[s].loss);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 2e-2) << "step " << s << ": fp32 " << steps32[s].loss << " bf16 "
                         << steps16[s].loss;
  }
  RecordProperty("max_rel_diff", std::to_string(worst));
}

TEST(training, fp64_and_fp32_agree_closely) {
  const auto a = train(tiny({"train.precision=fp64"}), 5);
  const auto b = train(tiny({"train.precision=fp32"}), 5);
  for (std::size_t s = 0; s < a.size(); ++s)
    EXPECT_NEAR(b[s].loss, a[s].loss, 1e-4 * std::fabs(a[s].loss)) << "step " << s;
}

TEST(training, memory_accounting_matches_parameter_count) {
  const auto c = tiny({"train.precision=bf16"});
  auto t = model::make_trainer(c.model, c.train);
  const auto m = t->memory();
  const std::size_t n = t->parameter_count();
  // bf16 parameters (2 B), fp32 gradients (4 B), fp32 master + m + v (12 B); the flat
  // buffers pad each tensor to 16 elements, so allow that much slack.
  EXPECT_GE(m.params_bytes, 2 * n);
  EXPECT_LE(m.params_bytes, 2 * (n + 16 * 64));
  EXPECT_GE(m.grads_bytes, 4 * n);
  EXPECT_GE(m.optimizer_bytes, 12 * n);
  EXPECT_LE(m.optimizer_bytes, 12 * (n + 16 * 64));
  EXPECT_GT(m.activations_peak_bytes, 0u);
  EXPECT_EQ(m.peak_bytes,
            m.params_bytes + m.grads_bytes + m.optimizer_bytes + m.activations_peak_bytes);
}

TEST(training, router_skew_tilts_the_load_towards_the_first_experts) {
  // A Zipf(1.5) prior over 8 experts: expert 0 gets the most tokens in the first step, and the
  // load imbalance (max / mean) is well above the unskewed router's.
  auto with = [](double skew) {
    auto c = tiny({"model.moe.experts=8", "model.moe.router_skew=" + std::to_string(skew)});
    auto t = model::make_trainer(c.model, c.train);
    return t->step().moe;
  };
  const auto flat = with(0), skewed = with(1.5);
  ASSERT_EQ(skewed.tokens_per_expert.size(), 8u);
  EXPECT_EQ(*std::max_element(skewed.tokens_per_expert.begin(), skewed.tokens_per_expert.end()),
            skewed.tokens_per_expert[0]);
  EXPECT_GT(skewed.tokens_per_expert[0], 2 * skewed.tokens_per_expert[7]);
  EXPECT_GT(skewed.imbalance, flat.imbalance + 0.5);
}
