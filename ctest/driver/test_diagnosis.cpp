// The diagnosis of a point from its per-rank, per-step series (driver/diagnosis.hpp), on
// hand-made series: a slowed rank is named with its step and its place on the grid, a slow
// group with its ranks, a bubble with the micro-batch count that cures it, a tensor-parallel
// group across nodes as placement; a clean point has no finding; findings come most costly
// first; a point without series is refused.
#include "driver/diagnosis.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "driver/deck.hpp"

using namespace paraxis::driver;
using nlohmann::json;

namespace {

// A point of `world` ranks and `steps` steps (warm-up 1), every rank computing 1 s and every
// axis's collectives 0.1 s, noise of +-8 % (deterministic) on each value.
json point(int tp, int pp, int dp, int steps, const std::string& order = "tp-pp-dp") {
  RunConfig c;
  c.parallel.tp = tp;
  c.parallel.pp = pp;
  c.parallel.dp = dp;
  c.parallel.order = paraxis::config::parse_rank_order(order);
  c.train.warmup_steps = 1;
  c.train.steps = steps;
  const int world = tp * pp * dp;
  json rs;
  rs["steps"] = json::array();
  for (int s = 0; s < steps; ++s) rs["steps"].push_back(s);
  auto noisy = [](double x, int r, int s) {
    return x * (1.0 + 0.08 * (((r * 7 + s * 3) % 5) - 2) / 2);
  };
  for (const char* m :
       {"compute_s", "step_s", "comm.tp.time_s", "comm.tp.wait_s", "comm.dp.time_s",
        "comm.dp.wait_s", "comm.pp.time_s", "comm.pp.wait_s", "comm.ep.time_s", "comm.ep.wait_s"}) {
    const std::string name = m;
    const double base = name == "compute_s"                      ? 1.0
                        : name == "step_s"                       ? 1.5
                        : name.find("wait") != std::string::npos ? 0.01
                                                                 : 0.1;
    json per_rank = json::array();
    for (int r = 0; r < world; ++r) {
      json v = json::array();
      for (int s = 0; s < steps; ++s) v.push_back(noisy(base, r, s));
      per_rank.push_back(v);
    }
    rs[name] = per_rank;
  }
  return {{"config", config_to_json(c)},
          {"rank_series", rs},
          {"time", {{"step_median_s", 1.5}, {"bubble_fraction", 0.05}}}};
}

std::vector<std::string> fault_kinds(const json& findings) {
  std::vector<std::string> k;
  for (const auto& f : findings) {
    const std::string kind = f.at("kind");
    if (kind == "slow_rank" || kind == "slow_link" || kind == "dead_rank" || kind == "hang")
      k.push_back(kind);
  }
  return k;
}

}  // namespace

TEST(diagnosis, a_clean_point_has_no_finding) {
  for (auto shape : {std::vector<int>{2, 2, 1}, {1, 2, 2}, {2, 1, 2}, {1, 1, 4}}) {
    const json f = diagnosis::diagnose(point(shape[0], shape[1], shape[2], 6));
    EXPECT_TRUE(f.empty()) << f.dump(1);
  }
}

TEST(diagnosis, a_slowed_rank_is_named_with_its_step_and_place) {
  json p = point(1, 2, 2, 8);  // tp-pp-dp: rank r is stage r % 2 of replica r / 2
  auto& c = p["rank_series"]["compute_s"][2];
  for (int s = 3; s < 8; ++s) c[s] = 2.0 * c[s].get<double>();
  // Its peers wait for it in dp.
  for (int r : {0, 1, 3})
    for (int s = 3; s < 8; ++s) p["rank_series"]["comm.dp.wait_s"][r][s] = 0.9;
  const json f = diagnosis::diagnose(p);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0]["kind"], "slow_rank");
  EXPECT_EQ(f[0]["axis"], "compute");
  EXPECT_EQ(f[0]["ranks"], json::array({2}));
  EXPECT_EQ(f[0]["group"], 0);  // its pipeline stage
  EXPECT_EQ(f[0]["from_step"], 3);
  EXPECT_NEAR(f[0]["evidence"]["compute_ratio_to_peers"].get<double>(), 2.0, 0.25);
  EXPECT_NEAR(f[0]["cost_s"].get<double>(), 1.0, 0.2);
  const std::string text = f[0]["text"];
  EXPECT_NE(text.find("rank 2 computes 1.9x slower"), std::string::npos) << text;
  EXPECT_NE(text.find("pipeline stage 0 of replica 1"), std::string::npos) << text;
  EXPECT_NE(text.find("wait for in dp"), std::string::npos) << text;
  EXPECT_EQ(fault_kinds(f), std::vector<std::string>{"slow_rank"}) << f.dump(1);
}

TEST(diagnosis, one_slowed_step_is_noise_not_a_slow_rank) {
  json p = point(1, 1, 4, 8);
  p["rank_series"]["compute_s"][1][5] = 3.0;
  EXPECT_TRUE(fault_kinds(diagnosis::diagnose(p)).empty());
}

TEST(diagnosis, a_slow_group_is_named_with_its_ranks_and_nodes) {
  json p = point(2, 1, 2, 6);  // tp groups {0,1} {2,3}; dp groups {0,2} {1,3}
  for (int r : {1, 3})
    for (int s = 0; s < 6; ++s) p["rank_series"]["comm.dp.time_s"][r][s] = 0.4;
  p["topology"] = {{"node_of", {0, 0, 1, 1}}};
  const json f = diagnosis::diagnose(p);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0]["kind"], "slow_link");
  EXPECT_EQ(f[0]["axis"], "dp");
  EXPECT_EQ(f[0]["group"], 1);
  EXPECT_EQ(f[0]["ranks"], json::array({1, 3}));
  EXPECT_EQ(f[0]["evidence"]["nodes"], json::array({0, 1}));
  EXPECT_NEAR(f[0]["cost_s"].get<double>(), 0.3, 0.05);
  EXPECT_EQ(fault_kinds(f), std::vector<std::string>{"slow_link"}) << f.dump(1);
  // Waiting for a late rank is not a slow link: the same time, all of it waiting.
  for (int r : {1, 3})
    for (int s = 0; s < 6; ++s) p["rank_series"]["comm.dp.wait_s"][r][s] = 0.3;
  EXPECT_TRUE(fault_kinds(diagnosis::diagnose(p)).empty());
}

TEST(diagnosis, a_large_bubble_names_the_micro_batches_that_cure_it) {
  json p = point(1, 4, 1, 5);
  p["config"]["parallel"]["schedule"] = "1f1b";
  p["pipeline"] = {{"micro_batches", 2}};
  p["time"]["bubble_fraction"] = 0.6;
  const json f = diagnosis::diagnose(p);
  ASSERT_EQ(f.size(), 1u) << f.dump(1);
  EXPECT_EQ(f[0]["kind"], "bubble");
  EXPECT_EQ(f[0]["axis"], "pp");
  EXPECT_NEAR(f[0]["cost_s"].get<double>(), 0.6 * 1.5, 1e-12);
  // 1f1b on 4 stages: (p-1)/(m+p-1) <= 10 % from m = 27; doubling from 2 gives 32 (3/35 = 9 %).
  const std::string text = f[0]["text"];
  EXPECT_NE(text.find("m = 2 micro-batches on p = 4 stages"), std::string::npos) << text;
  EXPECT_NE(text.find("m = 32 would cut the schedule's to 9 %"), std::string::npos) << text;
}

TEST(diagnosis, tensor_parallelism_across_nodes_is_placement_and_findings_are_sorted_by_cost) {
  json p = point(2, 2, 1, 5);
  p["config"]["parallel"]["schedule"] = "1f1b";
  p["pipeline"] = {{"micro_batches", 2}};
  p["time"]["bubble_fraction"] = 0.4;  // 0.6 s
  p["time"]["comm"] = {{"tp", {{"time_s", 0.2}}}};
  p["topology"] = {{"axes", {{"tp", {{"groups", 2}, {"groups_spanning_nodes", 2}}}}}};
  const json f = diagnosis::diagnose(p);
  ASSERT_EQ(f.size(), 2u) << f.dump(1);
  EXPECT_EQ(f[0]["kind"], "bubble");
  EXPECT_EQ(f[1]["kind"], "placement");
  EXPECT_EQ(f[1]["axis"], "tp");
}

TEST(diagnosis, groups_follow_the_rank_order_and_a_point_without_series_is_refused) {
  const json tpdp = {{"tp", 2}, {"pp", 2}, {"dp", 2}, {"ep", 1}, {"order", "tp-dp-pp"}};
  // tp-dp-pp: rank = tp + 2 (dp + 2 pp).
  EXPECT_EQ(diagnosis::axis_groups(tpdp, "dp"),
            (std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(diagnosis::axis_groups(tpdp, "pp"),
            (std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  json p = point(1, 1, 2, 3);
  p.erase("rank_series");
  EXPECT_THROW(diagnosis::diagnose(p), std::invalid_argument);
}

// Slow steps scattered among normal ones (a rank time-sharing a core now and then) are not a
// slow rank: two in five from the first of them is below the persistence threshold.
TEST(diagnosis, scattered_slow_steps_are_noise) {
  json p = point(1, 1, 4, 8);  // measured steps 1..7
  p["rank_series"]["compute_s"][1][3] = 2.5;
  p["rank_series"]["compute_s"][1][6] = 2.5;
  EXPECT_TRUE(fault_kinds(diagnosis::diagnose(p)).empty());
  p["rank_series"]["compute_s"][1][4] = 2.5;
  p["rank_series"]["compute_s"][1][5] = 2.5;
  p["rank_series"]["compute_s"][1][7] = 2.5;  // every step from 3 on
  EXPECT_EQ(fault_kinds(diagnosis::diagnose(p)), std::vector<std::string>{"slow_rank"});
}

// A slow group that costs under 5 % of the step is noise, however large its ratio.
TEST(diagnosis, a_cheap_slowdown_is_noise) {
  json p = point(2, 1, 2, 6);  // step 1.5 s
  for (int r : {1, 3})
    for (int s = 0; s < 6; ++s) p["rank_series"]["comm.dp.time_s"][r][s] = 0.16;  // +0.06 s
  EXPECT_TRUE(fault_kinds(diagnosis::diagnose(p)).empty());
  for (int r : {1, 3})
    for (int s = 0; s < 6; ++s) p["rank_series"]["comm.dp.time_s"][r][s] = 0.3;  // +0.2 s
  EXPECT_EQ(fault_kinds(diagnosis::diagnose(p)), std::vector<std::string>{"slow_link"});
}

// A dead rank's diagnosis names its place and every group it stalls.
TEST(diagnosis, the_loss_of_a_rank_names_its_place_and_groups) {
  paraxis::config::ParallelConfig p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;  // tp-pp-dp: rank = tp + 2 (pp + 2 dp)
  EXPECT_EQ(diagnosis::loss_takes_out(p, 5),
            "rank 5 is pipeline stage 0 of replica 1, tensor-parallel rank 1: its tp group (ranks "
            "4 5), pp group (ranks 5 7) and dp group (ranks 1 5) stall, and with them every rank "
            "of the step");
  paraxis::config::ParallelConfig one;
  EXPECT_EQ(diagnosis::loss_takes_out(one, 0),
            "rank 0 is pipeline stage 0 of replica 0, the only rank of the run");
}

// A group that holds a slow rank is not also a slow link: the rank explains its time.
TEST(diagnosis, a_slow_ranks_group_is_not_a_slow_link) {
  json p = point(2, 1, 2, 8);  // dp groups {0,2} {1,3}
  for (int s = 1; s < 8; ++s) {
    p["rank_series"]["compute_s"][3][s] = 3.0;
    for (int r : {1, 3}) p["rank_series"]["comm.dp.time_s"][r][s] = 0.5;
  }
  const json f = diagnosis::diagnose(p);
  EXPECT_EQ(fault_kinds(f), std::vector<std::string>{"slow_rank"}) << f.dump(1);
}

// Noisy clean steps before the fault do not move its start: the onset is the step that best
// separates the steps before it from those after it.
TEST(diagnosis, the_onset_is_where_the_slowdown_starts_not_the_first_noisy_step) {
  json p = point(1, 1, 4, 9);  // measured steps 1..8
  auto& c = p["rank_series"]["compute_s"][2];
  c[1] = 1.7;                              // noise
  for (int s = 4; s < 9; ++s) c[s] = 4.0;  // the fault, from step 4
  const json f = diagnosis::diagnose(p);
  ASSERT_EQ(fault_kinds(f), std::vector<std::string>{"slow_rank"}) << f.dump(1);
  EXPECT_EQ(f[0]["from_step"], 4);
  EXPECT_EQ(f[0]["evidence"]["slowed_steps"], 5);
}

// With expert parallelism a rank's peers hold its experts: ranks of other experts compute
// what the routing sends them, and a heavier expert is not a slow rank.
TEST(diagnosis, expert_parallel_ranks_are_compared_with_ranks_holding_the_same_experts) {
  json p = point(1, 1, 4, 8);
  p["config"]["parallel"]["ep"] = 2;  // ep coordinate = dp % 2: ranks 0, 2 and 1, 3
  p["config"]["model"]["moe"]["experts"] = 4;
  for (int s = 0; s < 8; ++s)
    for (int r : {1, 3}) p["rank_series"]["compute_s"][r][s] = 2.5;  // the loaded experts
  EXPECT_TRUE(fault_kinds(diagnosis::diagnose(p)).empty());
  for (int s = 3; s < 8; ++s) p["rank_series"]["compute_s"][3][s] = 6.0;
  const json f = diagnosis::diagnose(p);
  ASSERT_EQ(fault_kinds(f), std::vector<std::string>{"slow_rank"}) << f.dump(1);
  EXPECT_EQ(f[0]["ranks"], json::array({3}));
}

// On a host with more ranks than cores the slow-rank threshold scales with the oversubscription:
// a 2.4x rank is noise with 4 ranks on 2 cores (threshold 3x), a slow rank with a core each.
TEST(diagnosis, oversubscription_scales_the_thresholds) {
  json p = point(1, 1, 4, 8);
  for (int s = 1; s < 8; ++s) p["rank_series"]["compute_s"][1][s] = 2.4;
  EXPECT_EQ(fault_kinds(diagnosis::diagnose(p, {4, 4})), std::vector<std::string>{"slow_rank"});
  EXPECT_TRUE(fault_kinds(diagnosis::diagnose(p, {4, 2})).empty());
  EXPECT_DOUBLE_EQ((diagnosis::Host{8, 2}).oversubscription(), 4.0);
  EXPECT_DOUBLE_EQ((diagnosis::Host{2, 8}).oversubscription(), 1.0);
  EXPECT_DOUBLE_EQ((diagnosis::Host{}).oversubscription(), 1.0);
  const json prov = {{"max_ranks_per_host", 4}, {"cores_per_host", 2}};
  EXPECT_DOUBLE_EQ(diagnosis::host_of(prov).oversubscription(), 2.0);
  for (int s = 1; s < 8; ++s) p["rank_series"]["compute_s"][1][s] = 3.5;
  const json f = diagnosis::diagnose(p, {4, 2});
  ASSERT_EQ(fault_kinds(f), std::vector<std::string>{"slow_rank"}) << f.dump(1);
  EXPECT_DOUBLE_EQ(f[0]["evidence"]["threshold"].get<double>(), 3.0);
}

// Pipelines are compared on their transfer time: a point-to-point wait is its exposed time,
// so nothing is taken out (a slow link between the stages of pipeline 1).
TEST(diagnosis, a_slow_pipeline_link_is_named_with_its_pp_group) {
  json p = point(2, 2, 1, 6);  // tp-pp-dp: pp groups {0,2} {1,3}
  for (int r = 0; r < 4; ++r)
    for (int s = 0; s < 6; ++s)
      p["rank_series"]["comm.pp.wait_s"][r][s] = p["rank_series"]["comm.pp.time_s"][r][s];
  EXPECT_TRUE(fault_kinds(diagnosis::diagnose(p)).empty());
  for (int r : {1, 3})
    for (int s = 0; s < 6; ++s) {
      p["rank_series"]["comm.pp.time_s"][r][s] = 0.5;
      p["rank_series"]["comm.pp.wait_s"][r][s] = 0.5;
    }
  const json f = diagnosis::diagnose(p);
  ASSERT_EQ(fault_kinds(f), std::vector<std::string>{"slow_link"}) << f.dump(1);
  EXPECT_EQ(f[0]["axis"], "pp");
  EXPECT_EQ(f[0]["group"], 1);
  EXPECT_EQ(f[0]["ranks"], json::array({1, 3}));
  EXPECT_NEAR(f[0]["cost_s"].get<double>(), 0.4, 0.05);
}

// A bubble far beyond the schedule's own is waiting, not a lack of micro-batches.
TEST(diagnosis, a_bubble_beyond_the_schedules_is_not_cured_by_micro_batches) {
  json p = point(1, 2, 1, 5);
  p["config"]["parallel"]["schedule"] = "1f1b";
  p["pipeline"] = {{"micro_batches", 8}};  // the schedule's bubble: 1/9 = 11 %
  p["time"]["bubble_fraction"] = 0.5;
  const json f = diagnosis::diagnose(p);
  ASSERT_EQ(f.size(), 1u) << f.dump(1);
  const std::string text = f[0]["text"];
  EXPECT_NE(text.find("against the schedule's 11 %"), std::string::npos) << text;
  EXPECT_EQ(text.find("would cut"), std::string::npos) << text;
}

// Expert imbalance: the token share of each ep rank's experts against 1/ep.
TEST(diagnosis, an_overloaded_expert_shard_is_expert_imbalance) {
  json p = point(1, 1, 4, 6);
  p["config"]["parallel"]["ep"] = 2;  // ep rank = dp % 2: ranks 0 2 hold experts 0-1
  p["config"]["model"]["moe"]["experts"] = 4;
  p["steps"] = json::array();
  for (int s = 0; s < 6; ++s)
    p["steps"].push_back(
        {{"measured", s >= 1}, {"moe", {{"tokens_per_expert", {10, 10, 10, 10}}}}});
  EXPECT_TRUE(diagnosis::diagnose(p).empty());  // balanced
  for (auto& st : p["steps"]) st["moe"]["tokens_per_expert"] = {50, 20, 20, 10};
  for (int r : {1, 3})
    for (int s = 0; s < 6; ++s) p["rank_series"]["comm.ep.wait_s"][r][s] = 0.2;
  const json f = diagnosis::diagnose(p);
  ASSERT_EQ(f.size(), 1u) << f.dump(1);
  EXPECT_EQ(f[0]["kind"], "expert_imbalance");
  EXPECT_EQ(f[0]["axis"], "ep");
  EXPECT_EQ(f[0]["group"], 0);
  EXPECT_EQ(f[0]["ranks"], json::array({0, 2}));
  // 70 of 100 tokens on 1 of 2 ep ranks: 1.4x the share; the others wait 0.2 s.
  EXPECT_NEAR(f[0]["evidence"]["token_share_to_fair_share"][0].get<double>(), 1.4, 1e-12);
  EXPECT_NEAR(f[0]["cost_s"].get<double>(), 0.2, 1e-12);
  for (auto& st : p["steps"]) st["moe"]["tokens_per_expert"] = {30, 30, 20, 20};  // 1.2x
  EXPECT_TRUE(diagnosis::diagnose(p).empty());
}

namespace {

json record(const std::string& kind, int rank, const std::string& axis, std::vector<int> silent,
            std::vector<int> not_arrived, double waited) {
  RunConfig c;
  c.parallel.tp = 2;
  c.parallel.pp = 2;  // tp-pp-dp: rank = tp + 2 pp
  diagnosis::Failure f;
  f.kind = kind;
  f.rank = rank;
  f.point_index = 1;
  f.step = 2;
  f.config = config_to_json(c);
  f.what = "injected";
  f.waited_s = waited;
  f.op = "all_reduce";
  f.axis = axis;
  f.silent = std::move(silent);
  f.not_arrived = std::move(not_arrived);
  return diagnosis::failure_record_json(f);
}

}  // namespace

// A dead rank's record is the finding, whatever else expired; a hang names the silent rank
// and the address of the wait that named it.
TEST(diagnosis, failure_records_are_dead_rank_and_hang_findings) {
  const json dead = diagnosis::failure_finding(
      {record("hang", 0, "tp", {}, {1}, 2.0), record("dead_rank", 3, "", {}, {}, 0)});
  EXPECT_EQ(dead["kind"], "dead_rank");
  EXPECT_EQ(dead["axis"], "compute");
  EXPECT_EQ(dead["group"], 1);  // rank 3: pipeline stage 1
  EXPECT_EQ(dead["ranks"], json::array({3}));
  EXPECT_TRUE(dead["cost_s"].is_null());
  const std::string text = dead["text"];
  EXPECT_NE(text.find("rank 3 failed at step 2 of point 2"), std::string::npos) << text;
  EXPECT_NE(text.find("tp group (ranks 2 3)"), std::string::npos) << text;
  // Rank 0 waited for rank 1 (elsewhere), rank 1 in pp for rank 3 (silent), rank 2 in the
  // world barrier for rank 3 (silent): the pp wait is the address, rank 3 the culprit.
  const json hang = diagnosis::failure_finding({record("hang", 0, "tp", {}, {1}, 2.6),
                                                record("hang", 1, "pp", {3}, {3}, 2.1),
                                                record("hang", 2, "world", {3}, {3}, 2.5)});
  EXPECT_EQ(hang["kind"], "hang");
  EXPECT_EQ(hang["axis"], "pp");
  EXPECT_EQ(hang["group"], 1);  // pp groups {0,2} {1,3}
  EXPECT_EQ(hang["ranks"], json::array({3}));
  // Only the world barrier named it: axis compute, group its stage.
  const json world = diagnosis::failure_finding({record("hang", 2, "world", {3}, {3}, 2.5)});
  EXPECT_EQ(world["axis"], "compute");
  EXPECT_EQ(world["group"], 1);
  EXPECT_THROW(diagnosis::failure_finding({record("hang", 0, "tp", {7}, {7}, 2.0)}),
               std::invalid_argument);  // rank 7 outside 4 ranks
  EXPECT_THROW(diagnosis::failure_finding({record("crash", 0, "tp", {}, {}, 0)}),
               std::invalid_argument);
  EXPECT_THROW(diagnosis::failure_finding({}), std::invalid_argument);
  EXPECT_EQ(diagnosis::failure_file_name(3), "failure-rank3.json");
}

// With a fault found, a bubble beyond the schedule's is the stages waiting for it: no finding
// of its own; the schedule's own bubble still is one.
TEST(diagnosis, a_faults_waiting_is_not_also_a_bubble) {
  json p = point(1, 2, 2, 8);  // pp groups {0,1} {2,3}; stage r % 2
  p["config"]["parallel"]["schedule"] = "1f1b";
  p["pipeline"] = {{"micro_batches", 8}};  // the schedule's bubble: 11 %
  p["time"]["bubble_fraction"] = 0.5;
  for (int s = 1; s < 8; ++s) p["rank_series"]["compute_s"][3][s] = 3.0;
  json f = diagnosis::diagnose(p);
  ASSERT_EQ(f.size(), 1u) << f.dump(1);
  EXPECT_EQ(f[0]["kind"], "slow_rank");
  p["pipeline"] = {{"micro_batches", 1}};  // the schedule's bubble: 50 %
  f = diagnosis::diagnose(p);
  ASSERT_EQ(f.size(), 2u) << f.dump(1);
}

// With the point calibrated, a finding quotes the calibrated model beside the peers.
TEST(diagnosis, findings_quote_the_calibrated_model) {
  json p = point(2, 1, 2, 8);  // dp groups {0,2} {1,3}
  for (int s = 1; s < 8; ++s) p["rank_series"]["compute_s"][2][s] = 2.0;
  for (int r : {1, 3})
    for (int s = 0; s < 8; ++s) p["rank_series"]["comm.dp.time_s"][r][s] = 0.5;
  const json model = {{"compute", 0.8}, {"dp", 0.125}};
  const json f = diagnosis::diagnose(p, {}, model);
  ASSERT_EQ(fault_kinds(f), (std::vector<std::string>{"slow_rank", "slow_link"})) << f.dump(1);
  EXPECT_NEAR(f[0]["evidence"]["ratio_to_model"].get<double>(), 2.5, 1e-9);
  EXPECT_NE(f[0]["text"].get<std::string>().find("against the calibrated model's 0.800 s (2.5x)"),
            std::string::npos)
      << f[0]["text"];
  EXPECT_NEAR(f[1]["evidence"]["ratio_to_model"].get<double>(), 4.0, 1e-9);
  // Not calibrated: no model figure.
  EXPECT_FALSE(diagnosis::diagnose(p)[0]["evidence"].contains("model_s"));
}
