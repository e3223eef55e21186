// The planner on a small machine, checked by brute force: an independent enumeration of the
// valid configurations gives the same set, ranked in the same order of predicted time, and
// every other configuration is rejected with its reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "perfmodel/planner.hpp"
#include "perfmodel_test_util.hpp"

using namespace paraxis::perfmodel;
using paraxis::model::Precision;
using paraxis::schedule::ScheduleKind;

namespace {

using Key = std::tuple<int, int, int, int, int, int, int, int, bool, int>;

Key key_of(const Scenario& c) {
  return {c.tp,
          c.pp,
          c.dp,
          c.ep,
          c.micro_batch,
          c.zero,
          static_cast<int>(c.schedule),
          c.virtual_stages,
          c.sp(),
          static_cast<int>(c.recompute)};
}

// 4 devices, 2 per node; the tiny model (heads 4, ffn 256, 4 layers, seq 32), batch 8.
Machine small_machine(double memory_bytes) {
  Machine mc;
  mc.devices_per_node = 2;
  mc.nodes = 2;
  mc.peak_flops = 1e12;
  mc.memory_bytes = memory_bytes;
  mc.achievable_fraction = 0.5;
  mc.intra_node = {1e-6, 1e-10, 0};
  mc.inter_node = {5e-6, 1e-9, 0};
  return mc;
}

PlanRequest small_request() {
  PlanRequest r;
  r.model = perfmodel_test::tiny_model();
  r.global_batch = 8;
  r.precision = Precision::fp32;
  return r;
}

// The valid configurations, enumerated here from the rules alone (not the planner's loops).
std::vector<Scenario> brute_force(const PlanRequest& r, int devices) {
  std::vector<Scenario> out;
  const auto& m = r.model;
  for (int tp = 1; tp <= devices; ++tp)
    for (int pp = 1; pp <= devices; ++pp)
      for (int dp = 1; dp <= devices; ++dp) {
        if (tp * pp * dp != devices) continue;
        if (m.heads % tp || m.ffn % tp || r.global_batch % dp) continue;
        for (int mb = 1; mb <= r.global_batch / dp; ++mb) {
          if ((r.global_batch / dp) % mb) continue;
          const int micro = r.global_batch / (dp * mb);
          for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
            if (sp && m.seq_len % tp) continue;
            for (int k = 0; k < 4; ++k)  // gpipe, 1f1b, interleaved, zb-h1
              for (int v = 1; v <= 4; ++v) {
                const auto kind = static_cast<ScheduleKind>(k);
                if ((kind == ScheduleKind::interleaved) != (v > 1)) continue;
                if (kind == ScheduleKind::interleaved && (pp == 1 || micro % pp)) continue;
                if (pp * v > m.layers) continue;
                // Without a pipeline the schedules coincide: 1f1b stands for them all.
                if (pp == 1 && kind != ScheduleKind::one_f_one_b) continue;
                for (int zero = 0; zero <= 3; ++zero)
                  for (int rc = 0; rc < 3; ++rc) {       // none, selective, full (every block)
                    if (dp == 1 && zero != 0) continue;  // nothing to shard: stage 0
                    // zb-h1's W needs every block's activations: full recomputation refused.
                    if (kind == ScheduleKind::zb_h1 && rc == 2) continue;
                    Scenario c;
                    c.recompute = static_cast<paraxis::model::Recompute>(rc);
                    c.tp = tp;
                    c.pp = pp;
                    c.dp = dp;
                    c.micro_batch = mb;
                    c.global_batch = r.global_batch;
                    c.sequence_parallel = sp;
                    c.schedule = kind;
                    c.virtual_stages = v;
                    c.zero = zero;
                    c.precision = r.precision;
                    out.push_back(c);
                  }
              }
          }
        }
      }
  return out;
}

// The links this test expects for rank order tp-pp-dp with 2 devices per node: a group is
// inside a node when its span (stride * size) is 1 or 2.
AxisLinks expected_links(const Scenario& c, const Machine& mc) {
  auto pick = [&](int span, int size) {
    return size == 1 || span <= 2 ? mc.intra_node : mc.inter_node;
  };
  return {pick(c.tp, c.tp), pick(c.tp * c.pp, c.pp), pick(c.tp * c.pp * c.dp, c.dp),
          pick(c.tp * c.pp * c.ep, c.ep)};
}

}  // namespace

TEST(planner, small_case_matches_brute_force) {
  const PlanRequest r = small_request();
  const Machine mc = small_machine(1e12);  // everything fits
  const Plan p = plan(r, mc);
  const auto valid = brute_force(r, 4);
  ASSERT_FALSE(valid.empty());

  std::set<Key> expected, got;
  for (const auto& c : valid) expected.insert(key_of(c));
  for (const auto& e : p.ranked) got.insert(key_of(e.config));
  EXPECT_EQ(got, expected);
  EXPECT_EQ(p.ranked.size(), valid.size());  // no duplicates

  // The same predicted times, from links chosen by this test, in the same ascending order.
  std::vector<double> times;
  for (const auto& c : valid) {
    StepTimeInputs in;
    in.flops_per_s = mc.peak_flops * mc.achievable_fraction;
    in.links = expected_links(c, mc);
    times.push_back(predict_step_time(r.model, c, in).step_time);
  }
  std::sort(times.begin(), times.end());
  ASSERT_EQ(times.size(), p.ranked.size());
  for (std::size_t i = 0; i < times.size(); ++i)
    EXPECT_EQ(p.ranked[i].time.step_time, times[i]) << i << ": " << describe(p.ranked[i].config);
  for (std::size_t i = 1; i < p.ranked.size(); ++i) {
    const auto& a = p.ranked[i - 1];
    const auto& b = p.ranked[i];
    EXPECT_TRUE(a.time.step_time < b.time.step_time ||
                (a.time.step_time == b.time.step_time && a.memory.peak <= b.memory.peak));
  }
  // Every rejection names a broken rule (the machine has memory to spare).
  for (const auto& rej : p.rejected)
    EXPECT_EQ(rej.reason.find("memory"), std::string::npos) << rej.reason;
  for (const auto& e : p.ranked) {
    EXPECT_GT(e.tokens_per_s, 0);
    EXPECT_NEAR(e.mfu, e.model_flops_per_s / (4 * 1e12), 1e-15);
  }
}

TEST(planner, rejects_with_reasons) {
  PlanRequest r = small_request();
  r.model.heads = 2;   // tp = 4 cannot split 2 heads
  r.global_batch = 6;  // dp = 4 cannot split 6 sequences
  const Plan p = plan(r, small_machine(1e12));
  std::map<std::string, int> reasons;
  for (const auto& rej : p.rejected) ++reasons[rej.reason];
  EXPECT_GT(reasons["tp = 4 does not divide model.heads = 2"], 0);
  EXPECT_EQ(
      reasons["global_batch = 6 is not a multiple of parallel.dp * train.micro_batch = 4 * 1"], 1);
  EXPECT_GT(reasons["pp * virtual_stages = 8 exceeds model.layers = 4"], 0);  // pp = 4 with v = 2
  for (const auto& e : p.ranked) {
    EXPECT_NE(e.config.tp, 4);
    EXPECT_NE(e.config.dp, 4);
  }
  // pp = 2, dp = 1: 6 micro-batch sequences; mb = 2 gives m = 3, not a multiple of pp.
  EXPECT_GT(reasons["the interleaved schedule needs micro-batches per replica (3 = global_batch / "
                    "(dp * micro_batch)) divisible by parallel.pp = 2"],
            0);
}

TEST(planner, rejects_what_does_not_fit_in_memory) {
  const PlanRequest r = small_request();
  // Between the smallest and the largest need of the valid configurations.
  const Plan all = plan(r, small_machine(1e12));
  double lo = 1e300, hi = 0;
  for (const auto& e : all.ranked) {
    lo = std::min(lo, e.memory.peak);
    hi = std::max(hi, e.memory.peak);
  }
  const double capacity = (lo + hi) / 2;
  const Plan p = plan(r, small_machine(capacity));
  ASSERT_FALSE(p.ranked.empty());
  int memory_rejections = 0;
  for (const auto& e : p.ranked) EXPECT_LE(e.memory.peak, capacity);
  for (const auto& rej : p.rejected) {
    if (rej.reason.rfind("memory ", 0) != 0) continue;
    ++memory_rejections;
    EXPECT_GT(largest_rank_memory(r.model, rej.config).peak, capacity) << rej.reason;
    EXPECT_NE(rej.reason.find(" > " + format_gb(capacity)), std::string::npos) << rej.reason;
  }
  EXPECT_EQ(static_cast<std::size_t>(memory_rejections) + p.ranked.size(), all.ranked.size());
}

TEST(planner, tiers_follow_the_rank_order) {
  // 8 devices per node: tp 4 inside; pp 2 over tp 4 spans 8 (inside); dp then spans 16.
  Scenario c;
  c.tp = 4;
  c.pp = 2;
  c.dp = 4;
  c.ep = 2;
  const AxisTiers t = axis_tiers(c, 8);
  EXPECT_TRUE(t.tp);
  EXPECT_TRUE(t.pp);
  EXPECT_FALSE(t.dp);
  EXPECT_FALSE(t.ep);
  EXPECT_TRUE(group_is_intra_node(1, 8, 8));
  EXPECT_FALSE(group_is_intra_node(1, 16, 8));
  EXPECT_FALSE(group_is_intra_node(1, 3, 8));  // groups of 3 straddle nodes of 8
  EXPECT_TRUE(group_is_intra_node(64, 1, 8));  // one rank: no network at all
  // Megatron-LM's order, tp-dp-pp: dp (and ep within it) next to tp, the pipeline outermost.
  const auto tp_dp_pp = [](int tp, int pp, int dp, int ep) {
    Scenario x;
    x.tp = tp;
    x.pp = pp;
    x.dp = dp;
    x.ep = ep;
    x.order = paraxis::config::RankOrder::tp_dp_pp;
    return x;
  };
  // Mixtral's layout of inputs/published/mixtral-8x7b.yaml: tp 1, ep 8 of dp 16, pp 4.
  Scenario m = tp_dp_pp(1, 4, 16, 8);
  const AxisTiers u = axis_tiers(m, 8);
  EXPECT_TRUE(u.ep);   // ranks 0-7: one node
  EXPECT_FALSE(u.dp);  // 16 ranks
  EXPECT_FALSE(u.pp);  // stride 16
  m.order = paraxis::config::RankOrder::tp_pp_dp;
  EXPECT_FALSE(axis_tiers(m, 8).ep);  // stride 4, span 32
  // tp 2 x dp 4 = one node under tp-dp-pp, so dp is inside and pp (stride 8) outside.
  const AxisTiers v = axis_tiers(tp_dp_pp(2, 2, 4, 4), 8);
  EXPECT_TRUE(v.dp);
  EXPECT_TRUE(v.ep);
  EXPECT_FALSE(v.pp);
}

TEST(planner, helpers) {
  EXPECT_EQ(format_gb(93.1e9), "93.1 GB");
  EXPECT_EQ(format_gb(80e9), "80 GB");
  EXPECT_EQ(micro_batch_candidates(12, 16), (std::vector<int>{1, 2, 3, 4, 6, 12}));
  const auto many = micro_batch_candidates(720720, 16);  // 240 divisors
  EXPECT_EQ(many.size(), 16u);
  EXPECT_EQ(many.front(), 1);
  EXPECT_EQ(many.back(), 720720);
  EXPECT_TRUE(std::is_sorted(many.begin(), many.end()));
  Machine bad = small_machine(1e9);
  bad.peak_flops = 0;
  EXPECT_THROW(plan(small_request(), bad), std::invalid_argument);
}

TEST(planner, recompute_is_an_axis_of_the_search) {
  // Every ranked shape comes once per mode asked for (zb-h1 but full); one mode asked, one
  // entry; none, refused.
  PlanRequest r = small_request();
  const Machine mc = small_machine(1e12);
  const Plan all = plan(r, mc);
  r.recomputes = {paraxis::model::Recompute::none};
  const Plan none = plan(r, mc);
  // zb-h1 refuses full recomputation (its W needs every block's activations).
  const auto zb = std::count_if(none.ranked.begin(), none.ranked.end(), [](const PlanEntry& e) {
    return e.config.schedule == ScheduleKind::zb_h1;
  });
  EXPECT_GT(zb, 0);
  EXPECT_EQ(all.ranked.size(), 3 * none.ranked.size() - zb);
  for (const auto& e : none.ranked) EXPECT_EQ(e.config.recompute, paraxis::model::Recompute::none);
  for (const auto& e : all.ranked) EXPECT_EQ(e.config.recompute_layers, 0);
  r.recomputes.clear();
  EXPECT_THROW(plan(r, mc), std::invalid_argument);
}
