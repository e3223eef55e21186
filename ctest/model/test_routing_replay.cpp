// Routing replay in the single-rank trainer (the reference of --verify): replaying a run's own
// recorded routing is bitwise the free run; a modified routing changes the loss, is what the
// step records, and its flips are counted exactly; capacity applies to replayed choices, with
// the capacity rule's ceil checked against hand-computed values (a fractional capacity_factor
// where ceil and floor differ).
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "model/trainer.hpp"

using namespace paraxis;

namespace {

// A small MoE model: 2 blocks, the second MoE (4 experts, top-2); micro-batches of 2 x 16
// tokens, 2 micro-batches per step.
model::ModelConfig moe_model() {
  model::ModelConfig m;
  m.vocab = 64;
  m.seq_len = 16;
  m.hidden = 32;
  m.heads = 2;
  m.layers = 2;
  m.ffn = 64;
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.every = 2;
  return m;
}

model::TrainConfig train_config(model::Precision p) {
  model::TrainConfig t;
  t.global_batch = 4;
  t.micro_batch = 2;
  t.steps = 3;
  t.lr = 3e-3;
  t.precision = p;
  return t;
}

struct TrainedRun {
  std::vector<model::StepResult> steps;
  std::vector<double> params;
};

// `replay[s]` (when given) is replayed at step s.
TrainedRun train(const model::ModelConfig& m, const model::TrainConfig& t,
                 const std::vector<std::vector<int>>* replay = nullptr) {
  auto trainer = model::make_trainer(m, t);
  trainer->record_routing(true);
  TrainedRun r;
  for (int s = 0; s < t.steps; ++s) {
    trainer->replay_routing(replay ? &(*replay)[s] : nullptr);
    r.steps.push_back(trainer->step());
  }
  r.params = trainer->parameters();
  return r;
}

}  // namespace

TEST(routing_replay, replaying_a_runs_own_routing_is_bitwise_the_free_run) {
  for (auto p : {model::Precision::fp64, model::Precision::fp32, model::Precision::bf16}) {
    const auto m = moe_model();
    const auto t = train_config(p);
    const TrainedRun free = train(m, t);
    std::vector<std::vector<int>> routing;
    for (const auto& st : free.steps) routing.push_back(st.routing);
    ASSERT_EQ(routing[0].size(), static_cast<std::size_t>(t.global_batch) * m.seq_len * 2);
    const TrainedRun replayed = train(m, t, &routing);
    for (int s = 0; s < t.steps; ++s) {
      EXPECT_EQ(replayed.steps[s].loss, free.steps[s].loss) << to_string(p) << " step " << s;
      EXPECT_EQ(replayed.steps[s].grad_norm, free.steps[s].grad_norm) << to_string(p);
      EXPECT_EQ(replayed.steps[s].routing_flips, 0) << to_string(p) << " step " << s;
      EXPECT_EQ(replayed.steps[s].routing, routing[s]) << to_string(p) << " step " << s;
    }
    EXPECT_EQ(replayed.params, free.params) << to_string(p);
  }
}

TEST(routing_replay, a_modified_routing_is_followed_and_its_flips_counted_exactly) {
  const auto m = moe_model();
  const auto t = train_config(model::Precision::fp64);
  const int K = m.moe.top_k, E = m.moe.experts;
  const TrainedRun free = train(m, t);
  std::vector<std::vector<int>> routing;
  for (const auto& st : free.steps) routing.push_back(st.routing);
  // Step 2 (index 1): swap the two slots of 5 tokens (an order flip: the same experts, other
  // gate order) and send 6 other tokens to an expert they did not choose (a set flip).
  auto& r = routing[1];
  for (int n : {0, 3, 17, 40, 63}) std::swap(r[n * K], r[n * K + 1]);
  for (int n : {1, 8, 20, 33, 50, 60}) {
    int e = 0;
    while (e == r[n * K] || e == r[n * K + 1]) ++e;
    ASSERT_LT(e, E);
    r[n * K + 1] = e;
  }
  const TrainedRun replayed = train(m, t, &routing);
  EXPECT_EQ(replayed.steps[0].loss, free.steps[0].loss) << "step 1 replays the free routing";
  EXPECT_EQ(replayed.steps[0].routing_flips, 0);
  EXPECT_EQ(replayed.steps[1].routing_flips, 5 + 6);
  EXPECT_EQ(replayed.steps[1].routing, routing[1]) << "the step records the routing it followed";
  EXPECT_NE(replayed.steps[1].loss, free.steps[1].loss);
  // The parameters after step 2 differ, so step 3's routing (replayed from the free run) is
  // followed from other router probabilities: its flips are whatever they are, but the loss moves.
  EXPECT_NE(replayed.steps[2].loss, free.steps[2].loss);
  EXPECT_NE(replayed.params, free.params);
}

TEST(routing_replay, rejects_a_routing_of_the_wrong_size_or_with_bad_experts) {
  const auto m = moe_model();
  const auto t = train_config(model::Precision::fp32);
  auto trainer = model::make_trainer(m, t);
  std::vector<int> short_routing(10, 0);
  trainer->replay_routing(&short_routing);
  EXPECT_THROW(trainer->step(), std::invalid_argument);
  const std::size_t n = static_cast<std::size_t>(t.global_batch) * m.seq_len * m.moe.top_k;
  std::vector<int> outside(n, 0), repeated(n, 1);
  for (std::size_t i = 1; i < n; i += 2) outside[i] = 1;
  outside[7] = m.moe.experts;  // token 3, slot 1: no such expert
  trainer->replay_routing(&outside);
  EXPECT_THROW(trainer->step(), std::invalid_argument);
  trainer->replay_routing(&repeated);  // every token twice to expert 1
  EXPECT_THROW(trainer->step(), std::invalid_argument);
}

// capacity = ceil(capacity_factor * tokens * top_k / experts) per micro-batch and expert
// (docs/model.md): hand-computed values where ceil and floor differ.
TEST(expert_capacity, rounds_a_fractional_capacity_up) {
  auto m = moe_model();  // 4 experts, top-2
  m.moe.capacity_factor = 1.01;
  EXPECT_EQ(model::expert_capacity(m, 32), 17);   // 1.01 * 32 * 2 / 4 = 16.16
  EXPECT_EQ(model::expert_capacity(m, 128), 65);  // 64.64
  m.moe.capacity_factor = 1.25;
  EXPECT_EQ(model::expert_capacity(m, 10), 7);  // 6.25
  m.moe.capacity_factor = 0.5;
  EXPECT_EQ(model::expert_capacity(m, 32), 8);  // 8 exactly
  m.moe.capacity_factor = 0;
  EXPECT_EQ(model::expert_capacity(m, 32), 0);  // dropless
}

// The model applies that capacity: every token forced to experts (0, 1), micro-batches of
// 32 tokens, capacity_factor 1.01: each of the two experts keeps 17 of its 32 assignments
// (ceil(16.16); floor would keep 16), per micro-batch.
TEST(expert_capacity, the_model_keeps_the_first_ceil_assignments_of_a_replayed_routing) {
  auto m = moe_model();
  m.moe.capacity_factor = 1.01;
  const auto t = train_config(model::Precision::fp64);
  const std::size_t tokens = static_cast<std::size_t>(t.global_batch) * m.seq_len;
  std::vector<int> forced(tokens * 2);
  for (std::size_t n = 0; n < tokens; ++n) {
    forced[2 * n] = n % 2 ? 1 : 0;  // both slots, in either order
    forced[2 * n + 1] = n % 2 ? 0 : 1;
  }
  auto trainer = model::make_trainer(m, t);
  trainer->replay_routing(&forced);
  const auto st = trainer->step();
  const int micro = t.global_batch / t.micro_batch;  // 2 micro-batches of 32 tokens
  const std::vector<long long> kept{17LL * micro, 17LL * micro, 0, 0};
  const std::vector<long long> dropped{15LL * micro, 15LL * micro, 0, 0};
  EXPECT_EQ(st.moe.tokens_per_expert, kept);
  EXPECT_EQ(st.moe.dropped_per_expert, dropped);
  EXPECT_EQ(st.moe.dropped, 2 * 15 * micro);
}
