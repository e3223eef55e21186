// Expert parallelism in the training step: ep in {2, 4} (= dp = the world size), dropless and
// with a capacity factor that drops tokens, at every ZeRO stage; (4 ranks) ep = 2 with tp = 2;
// (8 ranks) all four axes tp = 2, pp = 2, dp = 2, ep = 2. Each reproduces the single-rank run
// (1e-9 fp64), bitwise on rerun; the all-to-all bytes are exactly what the routing that
// happened implies.
#include <string>

#include "model/model_config.hpp"
#include "training_run.hpp"

using namespace ptest;

namespace {

std::vector<std::string> base(int ep, int dp, double capacity_factor) {
  return {"train.steps=3",
          "train.precision=fp64",
          "train.global_batch=8",
          "train.micro_batch=2",
          "parallel.ep=" + std::to_string(ep),
          "parallel.dp=" + std::to_string(dp),
          "model.moe.capacity_factor=" + std::to_string(capacity_factor)};
}

// Capacity 1.0 on tiny.yaml (64 tokens, top-2, 4 experts: 32 per expert) drops tokens as
// soon as the router is uneven.
constexpr double kDropping = 1.0;

}  // namespace

TEST(expert_parallel, ep_matches_single_rank_dropless_and_with_capacity) {
  const int ep = world_size();
  if (ep > 4) GTEST_SKIP() << "ep = world size up to 4";
  for (double cf : {0.0, kDropping}) {
    const auto c = tiny(base(ep, ep, cf));
    const auto ref = run_reference(c);
    expect_matches(run_parallel(c), ref, "ep " + std::to_string(ep) + " cf " + std::to_string(cf));
    if (cf > 0) {
      long dropped = 0;
      for (const auto& st : ref.steps) dropped += st.moe.dropped;
      EXPECT_GT(dropped, 0) << "the capacity case must drop tokens to test anything";
    }
  }
}

TEST(expert_parallel, every_zero_stage_with_expert_parallelism) {
  const int ep = world_size();
  if (ep > 4) GTEST_SKIP() << "ep = world size up to 4";
  const auto ref = run_reference(tiny(base(ep, ep, kDropping)));
  for (int zero = 0; zero <= 3; ++zero)
    for (bool overlap : {false, true}) {
      auto o = base(ep, ep, kDropping);
      o.push_back("parallel.zero=" + std::to_string(zero));
      o.push_back(std::string("comm.overlap=") + (overlap ? "true" : "false"));
      expect_matches(run_parallel(tiny(o)), ref,
                     "zero " + std::to_string(zero) + (overlap ? " overlap" : ""));
    }
}

TEST(expert_parallel, ep2_with_tp2_matches_single_rank) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks (tp = 2, dp = ep = 2)";
  for (bool sp : {false, true}) {
    auto o = base(2, 2, kDropping);
    o.push_back("parallel.tp=2");
    o.push_back(std::string("parallel.sequence_parallel=") + (sp ? "true" : "false"));
    const auto c = tiny(o);
    expect_matches(run_parallel(c), run_reference(c), sp ? "ep 2 tp 2 sp" : "ep 2 tp 2");
  }
}

TEST(expert_parallel, four_axes_tp2_pp2_dp2_ep2_match_single_rank) {
  if (world_size() != 8) GTEST_SKIP() << "needs 8 ranks";
  for (double cf : {0.0, kDropping}) {
    auto o = base(2, 2, cf);
    o.push_back("parallel.tp=2");
    o.push_back("parallel.pp=2");
    o.push_back("train.steps=2");
    const auto c = tiny(o);
    expect_matches(run_parallel(c), run_reference(c), "4 axes cf " + std::to_string(cf));
  }
}

TEST(expert_parallel, reruns_are_bitwise_identical) {
  const int ep = std::min(world_size(), 4);
  if (world_size() > 4) GTEST_SKIP() << "ep = world size up to 4";
  auto o = base(ep, ep, kDropping);
  o.push_back("train.precision=fp32");
  o.push_back("parallel.zero=2");
  expect_bitwise_rerun(tiny(o), "ep zero 2");
}

TEST(expert_parallel, all_to_all_bytes_follow_the_routing_that_happened) {
  const int ep = world_size();
  if (ep > 4) GTEST_SKIP() << "ep = world size up to 4";
  const auto c = tiny(base(ep, ep, kDropping));
  const auto run = run_parallel(c, /*record_routing=*/true);
  const auto& m = c.model;
  const int E = m.moe.experts, K = m.moe.top_k, El = E / ep, H = m.hidden;
  const int N = c.train.micro_batch * m.seq_len;
  const int micro = c.train.global_batch / (ep * c.train.micro_batch);  // per rank
  const int cap = model::expert_capacity(m, N);
  const int me = world_rank();  // dp = ep = world: rank r is expert-parallel rank r
  for (const auto& st : run.steps) {
    // Recount, from the recorded top-k choices (single-rank order: micro-batch, then MoE
    // layer), the rows every rank keeps for every expert under the capacity rule (first come,
    // in token order, per micro-batch).
    const std::size_t per = static_cast<std::size_t>(N) * K;
    ASSERT_EQ(st.routing.size(), per * static_cast<std::size_t>(micro * ep * m.moe_layer_count()));
    std::size_t want = 0;
    for (int local_mb = 0; local_mb < micro; ++local_mb)
      for (int layer = 0; layer < m.moe_layer_count(); ++layer) {
        std::vector<std::vector<int>> kept(ep, std::vector<int>(E, 0));  // [source][expert]
        for (int src = 0; src < ep; ++src) {
          const int global_mb = src * micro + local_mb;
          const int* choice =
              st.routing.data() + (static_cast<std::size_t>(global_mb) * m.moe_layer_count() +
                                   static_cast<std::size_t>(layer)) *
                                      per;
          for (std::size_t a = 0; a < per; ++a) {
            int& k = kept[src][choice[a]];
            if (cap == 0 || k < cap) ++k;
          }
        }
        long sent = 0, received = 0;
        for (int e = 0; e < E; ++e) sent += kept[me][e];
        for (int src = 0; src < ep; ++src)
          for (int e = me * El; e < (me + 1) * El; ++e) received += kept[src][e];
        // Counts exchange (E ints), then tokens out and results back, in forward and again
        // (gradients) in backward.
        want += static_cast<std::size_t>(E) * 4 +
                2 * static_cast<std::size_t>(sent + received) * static_cast<std::size_t>(H) * 8;
      }
    EXPECT_EQ(st.comm.at("ep").bytes, want);
    EXPECT_EQ(st.comm.at("ep").calls, 5L * micro * m.moe_layer_count());
  }
}
