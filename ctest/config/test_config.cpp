// config/: every enum's names round-trip and an unknown name is refused with the choices; the
// effective settings (ZeRO on one data-parallel rank, sequence parallelism on one tensor-parallel
// rank, micro-batches); the rules, each broken once, with the key and message callers show.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "config/config_rules.hpp"
#include "config/parallel_config.hpp"

using namespace paraxis;
using config::ParallelConfig;

namespace {

// First key and message of every violation, one per line.
std::string violations(const model::ModelConfig& m, const model::TrainConfig& t,
                       const ParallelConfig& p, int world = 0) {
  std::string s;
  for (const auto& v : config::rule_violations(m, t, p, world))
    s += v.keys.front() + ": " + v.message + "\n";
  return s;
}

}  // namespace

TEST(config_names, every_enum_round_trips_and_unknown_names_list_the_choices) {
  for (const auto& n : config::rank_order_names())
    EXPECT_EQ(config::to_string(config::parse_rank_order(n)), n);
  for (const auto& n : config::comm_backend_names())
    EXPECT_EQ(config::to_string(config::parse_comm_backend(n)), n);
  EXPECT_EQ(config::schedule_names(),
            (std::vector<std::string>{"gpipe", "1f1b", "interleaved", "zb-h1"}));
  for (const auto& n : config::schedule_names())
    EXPECT_EQ(schedule::to_string(schedule::parse_schedule(n)), n);
  EXPECT_EQ(config::rank_order_names(), (std::vector<std::string>{"tp-pp-dp", "tp-dp-pp"}));
  try {
    config::parse_comm_backend("carrier-pigeon");
    FAIL() << "an unknown backend must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown communication backend \"carrier-pigeon\" (expected mpi or nccl)");
  }
  EXPECT_THROW(config::parse_rank_order("pp-tp-dp"), std::invalid_argument);
}

TEST(config_effective, zero_and_sequence_parallelism_need_their_axis) {
  ParallelConfig p;
  p.zero = 3;
  EXPECT_EQ(p.effective_zero(), 0);  // one data-parallel rank: nothing to shard
  p.dp = 2;
  EXPECT_EQ(p.effective_zero(), 3);
  p.sequence_parallel = true;
  EXPECT_FALSE(p.sp());  // tp = 1
  p.tp = 2;
  EXPECT_TRUE(p.sp());
  EXPECT_EQ(p.world(), 4);
}

TEST(config_effective, micro_batches_and_pipeline_shape) {
  model::TrainConfig t;
  t.global_batch = 24;
  t.micro_batch = 2;
  ParallelConfig p;
  p.dp = 3;
  p.pp = 2;
  p.virtual_stages = 2;
  EXPECT_EQ(config::micro_batches(t, p), 4);  // 24 / (3 * 2)
  const auto s = config::pipeline_shape(t, p);
  EXPECT_EQ(s.stages, 2);
  EXPECT_EQ(s.micro_batches, 4);
  EXPECT_EQ(s.virtual_stages, 2);
  EXPECT_EQ(p.chunks(), 4);
}

TEST(config_rules, a_valid_configuration_breaks_none) {
  model::ModelConfig m;  // heads 4, ffn 256, layers 4, seq 32
  m.moe.experts = 4;
  model::TrainConfig t;  // global 8, micro 1
  ParallelConfig p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.ep = 2;
  p.schedule = schedule::ScheduleKind::interleaved;
  p.virtual_stages = 2;
  p.sequence_parallel = true;
  EXPECT_EQ(violations(m, t, p, 8), "");
  EXPECT_NO_THROW(config::require_valid(config::rule_violations(m, t, p, 8)));
}

TEST(config_rules, each_rule_names_its_key) {
  const model::ModelConfig m;
  const model::TrainConfig t;
  ParallelConfig p;
  p.tp = 8;  // does not divide heads = 4
  EXPECT_EQ(violations(m, t, p), "parallel.tp: tp = 8 does not divide model.heads = 4\n");
  p = {};
  p.dp = 3;  // 8 sequences over 3 replicas
  EXPECT_EQ(violations(m, t, p, 3),
            "train.global_batch: global_batch = 8 is not a multiple of parallel.dp * "
            "train.micro_batch = 3 * 1\n");
  p = {};
  p.dp = 4;
  p.ep = 3;
  EXPECT_EQ(violations(m, t, p, 2),
            "parallel: tp * pp * dp = 1 * 1 * 4 = 4 but the run has 2 ranks\n"
            "parallel.ep: ep = 3 does not divide parallel.dp = 4\n");
  p = {};
  p.pp = 3;
  p.schedule = schedule::ScheduleKind::interleaved;  // m = 8 micro-batches, not a multiple of 3
  EXPECT_NE(violations(m, t, p).find("train.micro_batch: the interleaved schedule needs"),
            std::string::npos);
  p = {};
  p.virtual_stages = 2;  // without the interleaved schedule
  EXPECT_EQ(violations(m, t, p),
            "parallel.virtual_stages: virtual_stages = 2 needs parallel.schedule: interleaved\n");
}

// Callers that build a configuration themselves (the planner, the engine's tests) get the single
// keys' ranges checked first, and nothing below divides by a zero.
TEST(config_rules, values_out_of_range_are_refused_before_any_division) {
  model::ModelConfig m;
  m.heads = 0;
  model::TrainConfig t;
  t.micro_batch = 0;
  ParallelConfig p;
  p.ep = 0;
  p.zero = 4;
  EXPECT_EQ(violations(m, t, p),
            "parallel.ep: parallel.ep = 0, expected >= 1\n"
            "model.heads: model.heads = 0, expected >= 1\n"
            "train.micro_batch: train.micro_batch = 0, expected >= 1\n"
            "parallel.zero: zero = 4, expected 0, 1, 2 or 3\n");
  try {
    config::require_valid(config::rule_violations(m, t, p, 0));
    FAIL() << "require_valid must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model.heads: model.heads = 0, expected >= 1\n"),
              std::string::npos);
  }
  EXPECT_EQ(config::grid_rule_violations(p, 1).size(), 1u);  // ep only: no product of a 0
}

// Activation recomputation: a number of recomputed blocks needs recompute full and at most the
// model's blocks; recompute none / selective / full with 0 (every block) are valid.
TEST(config_rules, recompute_layers_needs_full_and_at_most_the_model_s_blocks) {
  const model::ModelConfig m;  // 4 layers
  model::TrainConfig t;
  const ParallelConfig p;
  for (auto mode : {model::Recompute::none, model::Recompute::selective, model::Recompute::full}) {
    t.recompute = mode;
    EXPECT_EQ(violations(m, t, p), "") << model::to_string(mode);
  }
  t.recompute = model::Recompute::selective;
  t.recompute_layers = 2;
  EXPECT_EQ(violations(m, t, p),
            "train.recompute_layers: recompute_layers = 2 needs train.recompute: full (it is "
            "selective)\n");
  t.recompute = model::Recompute::full;
  EXPECT_EQ(violations(m, t, p), "");
  t.recompute_layers = 5;
  EXPECT_EQ(violations(m, t, p),
            "train.recompute_layers: recompute_layers = 5, expected 0 (every block) to "
            "model.layers = 4\n");
  EXPECT_EQ(model::recompute_names(), (std::vector<std::string>{"none", "selective", "full"}));
}

// zb-h1's W needs the block's saved activations: full recomputation is refused with it (with or
// without a pipeline: the schedule runs at pp = 1 too), selective and none are not; zb-h1 runs
// one chunk per stage.
TEST(config_rules, zb_h1_refuses_full_recomputation_and_virtual_stages) {
  const model::ModelConfig m;
  model::TrainConfig t;
  ParallelConfig p;
  p.schedule = schedule::ScheduleKind::zb_h1;
  for (int pp : {1, 2}) {
    p.pp = pp;
    for (auto mode : {model::Recompute::none, model::Recompute::selective}) {
      t.recompute = mode;
      EXPECT_EQ(violations(m, t, p), "") << model::to_string(mode) << " pp " << pp;
    }
    t.recompute = model::Recompute::full;
    const auto found = config::rule_violations(m, t, p, 0);
    ASSERT_EQ(found.size(), 1u) << "pp " << pp;
    EXPECT_EQ(found[0].keys, (std::vector<std::string>{"parallel.schedule", "train.recompute"}));
    EXPECT_EQ(found[0].message,
              "zb-h1 does not run with train.recompute: full (its W needs the block's "
              "activations, which full recomputation keeps only in a working set the blocks "
              "share; selective is supported)");
    t.recompute = model::Recompute::none;
  }
  p.schedule = schedule::ScheduleKind::one_f_one_b;  // full recomputation is fine with 1f1b
  t.recompute = model::Recompute::full;
  EXPECT_EQ(violations(m, t, p), "");
  t.recompute = model::Recompute::none;
  p.schedule = schedule::ScheduleKind::zb_h1;
  p.virtual_stages = 2;
  EXPECT_EQ(violations(m, t, p),
            "parallel.virtual_stages: virtual_stages = 2 needs parallel.schedule: interleaved\n");
}
