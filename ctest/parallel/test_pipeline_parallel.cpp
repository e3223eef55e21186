// Pipeline parallelism in the training step: pp = the world size (2 or 4) under gpipe, 1f1b
// and interleaved (v = 2), dense and MoE, and (8 ranks) the 3D case tp = 2, pp = 2, dp = 2
// with ZeRO-1, reproduce the single-rank run (1e-9 fp64 / 1e-4 fp32), bitwise on rerun; the
// point-to-point bytes are one [tokens, hidden] tensor per chunk boundary, micro-batch and
// direction; activations alive per stage: gpipe m, 1f1b at most p; the bubble is measured.
#include <string>

#include "schedule/pipeline_schedule.hpp"
#include "training_run.hpp"

using namespace ptest;

namespace {

// 16 sequences in micro-batches of 2: m = 8 per replica, divisible by pp in {2, 4}.
std::vector<std::string> base(const std::string& precision, int pp, const std::string& schedule,
                              int layers) {
  std::vector<std::string> o{"train.steps=3",
                             "train.precision=" + precision,
                             "train.global_batch=16",
                             "train.micro_batch=2",
                             "model.layers=" + std::to_string(layers),
                             "parallel.pp=" + std::to_string(pp),
                             "parallel.schedule=" + schedule};
  if (schedule == "interleaved") o.push_back("parallel.virtual_stages=2");
  return o;
}

}  // namespace

TEST(pipeline_parallel, every_schedule_matches_single_rank_fp64) {
  const int pp = world_size();
  if (pp > 4) GTEST_SKIP() << "pp = world size up to 4";
  for (const char* schedule : {"gpipe", "1f1b", "interleaved"}) {
    // Interleaved needs pp * 2 chunks of at least one layer each.
    const int layers = std::string(schedule) == "interleaved" ? 2 * pp : pp;
    const auto c = tiny(base("fp64", pp, schedule, layers));
    expect_matches(run_parallel(c), run_reference(c),
                   std::string(schedule) + " pp " + std::to_string(pp));
  }
}

TEST(pipeline_parallel, dense_and_fp32_match_single_rank) {
  const int pp = world_size();
  if (pp > 4) GTEST_SKIP() << "pp = world size up to 4";
  auto dense = base("fp64", pp, "1f1b", pp);
  dense.push_back("model.moe.experts=0");
  const auto cd = tiny(dense);
  expect_matches(run_parallel(cd), run_reference(cd), "dense 1f1b");
  const auto cf = tiny(base("fp32", pp, "interleaved", 2 * pp));
  expect_matches(run_parallel(cf), run_reference(cf), "fp32 interleaved");
}

TEST(pipeline_parallel, an_explicit_stage_split_matches_single_rank) {
  const int pp = world_size();
  if (pp > 4) GTEST_SKIP() << "pp = world size up to 4";
  // One layer on every stage but the last, which takes the rest (and the head).
  auto o = base("fp64", pp, "1f1b", pp + 2);
  std::string split = "parallel.stage_layers=[";
  for (int s = 0; s < pp; ++s) split += (s ? "," : "") + std::to_string(s + 1 < pp ? 1 : 3);
  o.push_back(split + "]");
  const auto c = tiny(o);
  expect_matches(run_parallel(c), run_reference(c), split);
}

TEST(pipeline_parallel, reruns_are_bitwise_identical) {
  const int pp = world_size();
  if (pp > 4) GTEST_SKIP() << "pp = world size up to 4";
  expect_bitwise_rerun(tiny(base("fp32", pp, "1f1b", pp)), "1f1b");
  expect_bitwise_rerun(tiny(base("fp32", pp, "interleaved", 2 * pp)), "interleaved");
}

TEST(pipeline_parallel, transfers_activations_and_bubble_are_what_the_schedule_implies) {
  const int pp = world_size();
  if (pp > 4) GTEST_SKIP() << "pp = world size up to 4";
  const int stage = world_rank();
  for (const char* schedule : {"gpipe", "1f1b", "interleaved"}) {
    const bool inter = std::string(schedule) == "interleaved";
    const int v = inter ? 2 : 1, layers = v * pp;
    const auto c = tiny(base("fp32", pp, schedule, layers));
    const int m = 8;
    const auto run = run_parallel(c);
    // Sends: every forward of a chunk with a successor, every backward of a chunk with a
    // predecessor, one [micro_batch * seq_len, hidden] fp32 tensor each.
    long sends = 0;
    for (int k = 0; k < v; ++k) {
      const int chunk = k * pp + stage;
      if (chunk + 1 < v * pp) sends += m;
      if (chunk > 0) sends += m;
    }
    const std::size_t msg = 2 * 32 * 64 * 4;
    schedule::PipelineShape shape{pp, m, v};
    const auto kind = schedule::parse_schedule(schedule);
    const auto replay = schedule::replay_schedule(schedule::make_schedule(kind, shape), shape,
                                                  [](int, const schedule::Action&) { return 1.0; });
    for (const auto& st : run.steps) {
      const auto& pc = st.comm.at("pp");
      // Each send and each receive is a call; the norm's all-reduce is one more (8 bytes).
      EXPECT_EQ(pc.bytes, static_cast<std::size_t>(sends) * msg + 8) << schedule;
      EXPECT_EQ(pc.calls, 2 * sends + 1) << schedule;
      EXPECT_EQ(st.forward_actions, m * v) << schedule;
      EXPECT_EQ(st.backward_actions, m * v) << schedule;
      // Activation sets alive at once: gpipe all m; 1f1b p - stage; interleaved as replayed.
      const int want = std::string(schedule) == "gpipe" ? m : replay.peak_live[stage];
      EXPECT_EQ(st.peak_live_activations, want) << schedule << " stage " << stage;
      if (std::string(schedule) == "1f1b") {
        EXPECT_EQ(want, std::min(pp - stage, m));
      }
      // The bubble is measured (span minus fenced compute), so it lies strictly inside (0, 1).
      EXPECT_GT(st.bubble_fraction, 0.0) << schedule;
      EXPECT_LT(st.bubble_fraction, 1.0) << schedule;
      EXPECT_NEAR(st.pipeline_span_s * (1 - st.bubble_fraction), st.pipeline_busy_s, 1e-12);
    }
  }
}

TEST(pipeline_parallel, three_d_tp2_pp2_dp2_zero1_matches_single_rank) {
  if (world_size() != 8) GTEST_SKIP() << "needs 8 ranks";
  std::vector<std::string> o{"train.steps=2",       "train.precision=fp64", "train.global_batch=8",
                             "train.micro_batch=2", "parallel.tp=2",        "parallel.pp=2",
                             "parallel.dp=2",       "parallel.zero=1"};
  const auto c = tiny(o);
  expect_matches(run_parallel(c), run_reference(c), "tp 2 pp 2 dp 2 zero 1");
  o.push_back("parallel.sequence_parallel=true");
  o.push_back("parallel.schedule=gpipe");
  const auto c2 = tiny(o);
  expect_matches(run_parallel(c2), run_reference(c2), "tp 2 pp 2 dp 2 zero 1 sp gpipe");
}
