// The report's prediction when ranks that compute the same chunk do so at different speeds
// (issue 20): the calibration records per chunk the slowest holder (the step's critical path)
// and the mean; a rank computes the mean and waits the difference where the ranks meet first
// — the expert-parallel all-to-all, else the tensor-parallel collectives, else the
// data-parallel reduction. Checked on recorded summaries (ctest/fuzz/seeds/summary), the same
// point with and without a spread between slowest and mean. Also the machine's noise beside the
// model's residual (report_noise) and the recheck's verdicts (report_recheck).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/prediction.hpp"
#include "analysis/report_noise.hpp"
#include "cli_harness.hpp"

using nlohmann::json;
using paraxis_test::run;

namespace {

// report.json's point 0 for a copy of `seed` whose chunk times (slowest) exceed the means by
// `spread_s` (forward) and 2 x `spread_s` (backward).
// `no_ep`: the experts not split (ep = 1), a data-parallel pair.
json seed_summary(const std::string& seed, bool no_ep) {
  std::ifstream in(std::string(PARAXIS_SEEDS_DIR) + "/" + seed);
  json s = json::parse(in);
  if (no_ep)
    for (auto& p : s["points"]) {
      p["config"]["parallel"]["ep"] = 1;
      p["grid"]["ep"] = 1;
    }
  return s;
}

json report_json_of(const json& s, const std::string& tag) {
  const std::string dir = ::testing::TempDir() + "paraxis_report_waits_" + tag;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/summary.json") << s.dump();
  const auto r =
      run("PARAXIS_PYTHON=/nonexistent/python3 " + std::string(PARAXIS_EXE) + " report " + dir);
  EXPECT_EQ(r.code, 0) << r.output;
  std::ifstream rin(dir + "/report.json");
  return json::parse(rin);
}

json report_of(const std::string& seed, bool no_ep, double spread_s, const std::string& tag) {
  json s = seed_summary(seed, no_ep);
  for (auto& p : s["points"]) {
    if (!p.contains("calibration")) continue;
    auto& c = p["calibration"]["compute"];
    for (std::size_t k = 0; k < c["forward_s_per_chunk"].size(); ++k) {
      c["forward_s_per_chunk"][k] = c["forward_mean_s_per_chunk"][k].get<double>() + spread_s;
      c["backward_s_per_chunk"][k] = c["backward_mean_s_per_chunk"][k].get<double>() + 2 * spread_s;
    }
  }
  return report_json_of(s, tag)["points"][0];
}

double term(const json& point, const std::string& name) {
  for (const auto& t : point["terms"])
    if (t["name"] == name) return t["predicted"].get<double>();
  ADD_FAILURE() << "no term " << name;
  return 0;
}

struct Case {
  const char* seed;
  bool no_ep;
  const char* axis;  // where the wait is charged
};

class report_waits : public ::testing::TestWithParam<Case> {};

TEST_P(report_waits, the_spread_is_waited_in_the_first_axis_the_ranks_meet_in) {
  const Case c = GetParam();
  const json s = seed_summary(c.seed, c.no_ep);
  const json& p = s["points"][0];
  const int m = p["config"]["train"]["global_batch"].get<int>() /
                (p["grid"]["dp"].get<int>() * p["config"]["train"]["micro_batch"].get<int>());
  const int pp = p["grid"]["pp"].get<int>();
  const auto chunks = p["calibration"]["compute"]["forward_s_per_chunk"].size();
  const double spread = 1e-3;
  const json even = report_of(c.seed, c.no_ep, 0.0, "even"),
             uneven = report_of(c.seed, c.no_ep, spread, "uneven");
  // m micro-batches, each chunk's forward and backward: 3 x spread per chunk, over pp stages.
  const double wait = m * 3 * spread * static_cast<double>(chunks) / pp;
  EXPECT_NEAR(term(uneven, c.axis) - term(even, c.axis), wait, 1e-9) << c.seed;
  // The mean compute is the same; the step follows the slowest rank, so it grows by the wait.
  EXPECT_NEAR(term(uneven, "compute"), term(even, "compute"), 1e-12);
  EXPECT_NEAR(term(uneven, "step_time") - term(even, "step_time"), wait, 0.05 * wait);
}

INSTANTIATE_TEST_SUITE_P(seeds, report_waits,
                         ::testing::Values(Case{"tp2.json", false, "tp"},
                                           Case{"dp2-ep2-with-skipped-point.json", false, "ep"},
                                           Case{"dp2-ep2-with-skipped-point.json", true, "dp"}));

// Ranks more uneven than calibrated (docs/report.md, "Uneven ranks"): a data-parallel pair whose
// calibration saw no spread, measured with rank 1 computing 2d longer than rank 0 on every
// measured step (and 10x longer on the warm-up, which must not count): the spread is d (slowest
// minus mean), all of it beyond the calibration; named uneven when d exceeds 5 % of the step,
// and the accuracy beside the plain one adds d to that point's prediction.
TEST(report_uneven_ranks, a_spread_beyond_the_calibrated_one_is_measured_and_named) {
  for (const double fraction : {0.10, 0.02}) {
    json s = seed_summary("dp2-ep2-with-skipped-point.json", true);
    json& p = s["points"][0];
    auto& cal = p["calibration"]["compute"];  // no spread calibrated: slowest = mean
    cal["forward_s_per_chunk"] = cal["forward_mean_s_per_chunk"];
    cal["backward_s_per_chunk"] = cal["backward_mean_s_per_chunk"];
    const int warmup = p["config"]["train"]["warmup_steps"].get<int>();
    const double step = p["time"]["step_median_s"].get<double>(), d = fraction * step, c = 0.02;
    json steps = json::array(), r0 = json::array(), r1 = json::array();
    for (int k = 0; k < warmup + 4; ++k) {
      steps.push_back(k);
      r0.push_back(c);
      r1.push_back(k < warmup ? 10 * c : c + 2 * d);
    }
    p["rank_series"] = {{"steps", steps}, {"compute_s", json::array({r0, r1})}};
    const json report = report_json_of(s, "uneven_" + std::to_string(fraction));
    const json& point = report["points"][0];
    const json& spread = point["rank_spread"];
    EXPECT_NEAR(spread["measured_s"].get<double>(), d, 1e-12);
    EXPECT_NEAR(spread["calibrated_s"].get<double>(), 0.0, 1e-12);
    EXPECT_NEAR(spread["excess_s"].get<double>(), d, 1e-12);
    const bool uneven = fraction > 0.05;
    EXPECT_EQ(spread["uneven"].get<bool>(), uneven) << fraction;
    const json& acc = report["accuracy"];
    EXPECT_EQ(acc["uneven_ranks"]["points"].get<int>(), uneven ? 1 : 0);
    const double measured = point["measured_step_s"].get<double>(),
                 predicted = point["predicted_step_s"].get<double>();
    const double with = predicted + (uneven ? d : 0.0);
    EXPECT_NEAR(acc["uneven_ranks"]["max_abs_residual_pct"].get<double>(),
                100 * std::abs(measured - with) / with, 1e-9);
    EXPECT_NEAR(acc["max_abs_residual_pct"].get<double>(),
                100 * std::abs(measured - predicted) / predicted, 1e-9);
  }
}

// The machine's spread beside the model's residual (docs/report.md, "Noise"): a point whose
// measured step misses its prediction by 30 %, with its own measured steps ranging around the
// prediction (the machine's noise) or all above it (the model's miss). The warm-up step, far
// outside, must not count; each time term with a per-step series gets its steps' range.
TEST(report_noise, a_miss_names_whether_its_own_steps_reach_the_prediction) {
  const json base = seed_summary("tp2.json", false);
  const double predicted = report_json_of(base, "noise_base")["points"][0]["predicted_step_s"];
  for (const bool noise : {true, false}) {
    json s = base;
    json& p = s["points"][0];
    const int warmup = p["config"]["train"]["warmup_steps"].get<int>();
    const double lo = (noise ? 0.9 : 1.2) * predicted, hi = 1.4 * predicted;
    p["time"]["step_median_s"] = 1.3 * predicted;
    json steps = json::array(), r0 = json::array(), r1 = json::array(), c0 = json::array();
    for (int k = 0; k < warmup + 3; ++k) {
      steps.push_back(k);
      // Per measured step the ranks' mean is lo, hi, then between: rank 1 0.02 s above rank 0.
      const double mean = k < warmup        ? 10 * hi
                          : k == warmup     ? lo
                          : k == warmup + 1 ? hi
                                            : 1.3 * predicted;
      r0.push_back(mean - 0.01);
      r1.push_back(mean + 0.01);
      c0.push_back(0.5 * mean);
    }
    p["rank_series"] = {
        {"steps", steps}, {"step_s", json::array({r0, r1})}, {"compute_s", json::array({c0, c0})}};
    const json report = report_json_of(s, noise ? "noise" : "model");
    const json& st = report["points"][0]["terms"][0];
    ASSERT_EQ(st["name"], "step_time");
    EXPECT_NEAR(st["steps_range_s"][0].get<double>(), lo, 1e-12);
    EXPECT_NEAR(st["steps_range_s"][1].get<double>(), hi, 1e-12);
    EXPECT_NEAR(st["steps_spread_pct"].get<double>(), 100 * (hi - lo) / (1.3 * predicted), 1e-9);
    EXPECT_EQ(st["within_steps_range"].get<bool>(), noise);
    for (const auto& t : report["points"][0]["terms"])
      if (t["name"] == "compute") {
        EXPECT_NEAR(t["steps_range_s"][0].get<double>(), 0.5 * lo, 1e-12);
        EXPECT_NEAR(t["steps_range_s"][1].get<double>(), 0.5 * hi, 1e-12);
      }
    const json& acc = report["accuracy"];
    ASSERT_EQ(acc["misses"].size(), 1u);
    EXPECT_EQ(acc["misses"][0]["within_steps_range"].get<bool>(), noise);
    EXPECT_EQ(acc["misses_within_steps_range"].get<int>(), noise ? 1 : 0);
    std::ifstream md(::testing::TempDir() + "paraxis_report_waits_" + (noise ? "noise" : "model") +
                     "/report.md");
    const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(noise ? "the machine's noise" : "outside them: the model"),
              std::string::npos);
  }
}

}  // namespace

// The bubble has no per-step seconds, only each step's bubble fraction: its steps' range is the
// measured bubble scaled by each measured step's fraction over their mean (warm-up left out).
TEST(report_noise, the_bubble_range_scales_the_measured_bubble_by_each_steps_fraction) {
  // Two ranks, warm-up 1; measured steps' mean fractions 0.10, 0.12, 0.14 (mean 0.12).
  const json point = {{"rank_series",
                       {{"steps", {0, 1, 2, 3}},
                        {"bubble_fraction", {{0.9, 0.09, 0.11, 0.13}, {0.9, 0.11, 0.13, 0.15}}}}}};
  for (const double predicted : {0.0011, 0.0013}) {
    json terms = json::array(
        {{{"name", "bubble"}, {"unit", "s"}, {"measured", 0.0012}, {"predicted", predicted}}});
    paraxis::driver::report::add_steps_ranges(point, false, 1, terms);
    ASSERT_TRUE(terms[0].contains("steps_range_s")) << terms.dump();
    EXPECT_NEAR(terms[0]["steps_range_s"][0].get<double>(), 0.0010, 1e-12);
    EXPECT_NEAR(terms[0]["steps_range_s"][1].get<double>(), 0.0014, 1e-12);
    EXPECT_EQ(terms[0]["within_steps_range"].get<bool>(), true);
  }
  json outside = json::array(
      {{{"name", "bubble"}, {"unit", "s"}, {"measured", 0.0012}, {"predicted", 0.0009}}});
  paraxis::driver::report::add_steps_ranges(point, false, 1, outside);
  EXPECT_EQ(outside[0]["within_steps_range"].get<bool>(), false);
}

// dp's steps' range is that of its exposed time, with comm.overlap too (where the calls' time is
// mostly hidden, so `comm.dp.time_s` would give a range that is not the term's); a summary
// without the exposed series falls back to the calls' time only without overlap.
TEST(report_noise, the_dp_range_is_that_of_the_exposed_time_with_and_without_overlap) {
  // Two ranks, warm-up 1; exposed per measured step (mean over ranks) 0.2, 0.3, 0.4 ms; the
  // calls' time 1.0-1.2 ms (overlapped).
  const json with_exposed = {
      {"rank_series",
       {{"steps", {0, 1, 2, 3}},
        {"comm.dp.time_s", {{9e-3, 1.0e-3, 1.1e-3, 1.2e-3}, {9e-3, 1.0e-3, 1.1e-3, 1.2e-3}}},
        {"comm.dp.exposed_s", {{9e-3, 0.1e-3, 0.3e-3, 0.3e-3}, {9e-3, 0.3e-3, 0.3e-3, 0.5e-3}}}}}};
  for (const bool overlap : {false, true}) {
    json terms = json::array(
        {{{"name", "dp"}, {"unit", "s"}, {"measured", 0.3e-3}, {"predicted", 0.45e-3}}});
    paraxis::driver::report::add_steps_ranges(with_exposed, overlap, 1, terms);
    ASSERT_TRUE(terms[0].contains("steps_range_s")) << terms.dump();
    EXPECT_NEAR(terms[0]["steps_range_s"][0].get<double>(), 0.2e-3, 1e-12);
    EXPECT_NEAR(terms[0]["steps_range_s"][1].get<double>(), 0.4e-3, 1e-12);
    EXPECT_EQ(terms[0]["within_steps_range"].get<bool>(), false);  // 0.45 ms: above them
  }
  json old = with_exposed;
  old["rank_series"].erase("comm.dp.exposed_s");
  for (const bool overlap : {false, true}) {
    json terms = json::array(
        {{{"name", "dp"}, {"unit", "s"}, {"measured", 1.1e-3}, {"predicted", 1.05e-3}}});
    paraxis::driver::report::add_steps_ranges(old, overlap, 1, terms);
    EXPECT_EQ(terms[0].contains("steps_range_s"), !overlap) << terms.dump();
  }
}

// Repeats: points of one folder whose tp term the model cannot tell apart (same grid, same tp
// calls and per-call predictions) get the range of measured / predicted over them; a point with
// other calls, or in another folder, is not one of them.
TEST(report_noise, repeats_are_the_points_whose_term_is_the_same_to_the_model) {
  auto point = [](const std::string& dir, double measured, double per_call_s) {
    return json{
        {"dir", dir},
        {"grid", {{"tp", 2}, {"pp", 1}, {"dp", 1}}},
        {"terms", {{{"name", "tp"}, {"unit", "s"}, {"measured", measured}, {"predicted", 1e-3}}}},
        {"calls",
         {{"rows",
           {{{"axis", "tp"},
             {"op", "all_reduce"},
             {"bucket_bytes", 16384},
             {"calls", 720},
             {"predicted_s", 720 * per_call_s}}}}}}};
  };
  std::vector<json> pts{point("a", 0.6e-3, 7e-6), point("a", 1.6e-3, 7e-6),
                        point("a", 1.5e-3, 7e-6), point("a", 0.6e-3, 8e-6),
                        point("b", 0.6e-3, 7e-6)};
  std::vector<json*> ptrs;
  for (auto& p : pts) ptrs.push_back(&p);
  paraxis::driver::report::add_repeats_ranges(ptrs);
  for (int i : {0, 1, 2}) {
    const json& t = pts[i]["terms"][0];
    ASSERT_TRUE(t.contains("repeats_ratio_range")) << i;
    EXPECT_EQ(t["repeats"].get<int>(), 3);
    EXPECT_NEAR(t["repeats_ratio_range"][0].get<double>(), 0.6, 1e-12);
    EXPECT_NEAR(t["repeats_ratio_range"][1].get<double>(), 1.6, 1e-12);
    EXPECT_TRUE(t["within_repeats_range"].get<bool>());
  }
  EXPECT_FALSE(pts[3]["terms"][0].contains("repeats"));  // another per-call prediction
  EXPECT_FALSE(pts[4]["terms"][0].contains("repeats"));  // another folder
  // Repeats all above the prediction: not the machine's noise.
  std::vector<json> high{point("a", 1.5e-3, 7e-6), point("a", 1.6e-3, 7e-6)};
  paraxis::driver::report::add_repeats_ranges({&high[0], &high[1]});
  EXPECT_FALSE(high[0]["terms"][0]["within_repeats_range"].get<bool>());
}

// The recheck after a point decides whose a miss is (docs/report.md, "Recheck"): hand-made terms
// measured at 1.5 ms against a calibrated 1.0 ms (a 50 % miss), beside a prediction rebuilt from
// the recheck that agrees with the measured (the machine changed since calibration: "cal"), lies
// beyond it (the two predictions straddle it: "cal"), or misses it the same way ("model"); a term
// that meets its target gets the recheck's figures and no verdict, and the step time's target
// is 15 %, not 25 %. No timing: every figure is set.
TEST(report_recheck, the_recheck_names_a_miss_the_machines_or_the_models) {
  struct Case {
    const char* name;
    double measured, recheck;
    const char* verdict;  // "" none
  };
  const Case cases[] = {{"tp", 1.5e-3, 1.4e-3, "cal"},         {"dp", 1.5e-3, 2.5e-3, "cal"},
                        {"compute", 1.5e-3, 1.1e-3, "model"},  {"bubble", 1.2e-3, 1.6e-3, ""},
                        {"step_time", 1.2e-3, 1.19e-3, "cal"}, {"ep", 0.4e-3, 0.9e-3, "model"}};
  json terms = json::array(), predicted = json::object();
  for (const Case& c : cases) {
    terms.push_back(
        {{"name", c.name}, {"unit", "s"}, {"measured", c.measured}, {"predicted", 1e-3}});
    predicted[c.name] = c.recheck;
  }
  // A byte term and a term the recheck has no prediction for are left alone.
  terms.push_back({{"name", "bytes.tp"}, {"unit", "B"}, {"measured", 9.0}, {"predicted", 1.0}});
  terms.push_back({{"name", "pp"}, {"unit", "s"}, {"measured", 9e-3}, {"predicted", 1e-3}});
  const json point = {{"recheck", {{"predicted", predicted}}}};
  paraxis::driver::report::add_recheck(point, terms);
  for (std::size_t k = 0; k < std::size(cases); ++k) {
    const json& t = terms[k];
    ASSERT_TRUE(t.contains("recheck_predicted")) << t.dump();
    EXPECT_NEAR(t["recheck_predicted"].get<double>(), cases[k].recheck, 1e-15);
    EXPECT_NEAR(t["recheck_residual_pct"].get<double>(),
                100 * (cases[k].measured - cases[k].recheck) / cases[k].recheck, 1e-9);
    EXPECT_EQ(t.value("recheck_verdict", ""), std::string(cases[k].verdict)) << t.dump();
    const std::string why = paraxis::driver::report::recheck_reason(t);
    EXPECT_EQ(why.empty(), *cases[k].verdict == '\0') << why;
  }
  EXPECT_NE(paraxis::driver::report::recheck_reason(terms[0]).find("changed since calibration"),
            std::string::npos);
  EXPECT_NE(paraxis::driver::report::recheck_reason(terms[1]).find("straddle"), std::string::npos);
  EXPECT_NE(paraxis::driver::report::recheck_reason(terms[2]).find("the model"), std::string::npos);
  EXPECT_FALSE(terms[6].contains("recheck_predicted"));
  EXPECT_FALSE(terms[7].contains("recheck_predicted"));
  // Without a recheck (a summary from before it, an uncalibrated point): nothing added.
  json plain =
      json::array({{{"name", "tp"}, {"unit", "s"}, {"measured", 2e-3}, {"predicted", 1e-3}}});
  paraxis::driver::report::add_recheck(json::object(), plain);
  EXPECT_FALSE(plain[0].contains("recheck_predicted"));
}

// Through `paraxis report` on a recorded summary: the point's step time measured 30 % over its
// prediction, outside its own steps' range, with a recheck whose prediction agrees with the
// measured (the machine's: accuracy.misses_machine_changed 1) or misses it the same way (the
// model's); report.md's miss line and terms table say which.
TEST(report_recheck, the_report_carries_the_verdict_into_the_accuracy_and_report_md) {
  const json base = seed_summary("tp2.json", false);
  const double predicted = report_json_of(base, "recheck_base")["points"][0]["predicted_step_s"];
  for (const bool machine : {true, false}) {
    json s = base;
    json& p = s["points"][0];
    p["time"]["step_median_s"] = 1.3 * predicted;
    p.erase("rank_series");  // no steps' range: the recheck alone decides
    p["recheck"] = {{"seconds", 0.01},
                    {"retimed", json::object()},
                    {"predicted", {{"step_time", (machine ? 1.25 : 1.05) * predicted}}}};
    const std::string tag = machine ? "recheck_machine" : "recheck_model";
    const json report = report_json_of(s, tag);
    const json& acc = report["accuracy"];
    ASSERT_EQ(acc["misses"].size(), 1u) << acc.dump();
    EXPECT_EQ(acc["misses"][0]["recheck_verdict"], machine ? "cal" : "model");
    EXPECT_EQ(acc["misses_machine_changed"].get<int>(), machine ? 1 : 0);
    std::ifstream md(::testing::TempDir() + "paraxis_report_waits_" + tag + "/report.md");
    const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    const std::string why =
        machine ? "the machine changed since calibration" : "the model: the recheck";
    EXPECT_NE(text.find("is off by"), std::string::npos);
    // Once in the miss line, once in the terms table.
    const auto first = text.find(why);
    ASSERT_NE(first, std::string::npos) << text;
    EXPECT_NE(text.find(why, first + 1), std::string::npos);
  }
}

// The point run again (docs/report.md, "Rerun"): a term that missed gets "recurs" where the rerun
// misses it on the same side, "noise" where the rerun lands within the target or on the other
// side, or within the target of the recheck's prediction; a term within its target gets the
// rerun's figures and no verdict; a byte term and a term the rerun did not measure are left
// alone. No timing: every figure is set.
TEST(report_rerun, the_rerun_names_a_miss_recurring_or_noise) {
  struct Case {
    const char* name;
    double measured, again;
    const char* verdict;  // "" none
  };
  const Case cases[] = {{"dp", 1.5e-3, 1.4e-3, "recurs"},
                        {"tp", 1.5e-3, 1.1e-3, "noise"},
                        {"compute", 1.5e-3, 0.6e-3, "noise"},
                        {"bubble", 1.1e-3, 1.9e-3, ""},
                        {"step_time", 1.2e-3, 1.16e-3, "recurs"}};
  json terms = json::array(), again = json::object();
  for (const Case& c : cases) {
    terms.push_back(
        {{"name", c.name}, {"unit", "s"}, {"measured", c.measured}, {"predicted", 1e-3}});
    again[c.name] = c.again;
  }
  terms.push_back({{"name", "bytes.dp"}, {"unit", "B"}, {"measured", 9.0}, {"predicted", 1.0}});
  terms.push_back({{"name", "ep"}, {"unit", "s"}, {"measured", 9e-3}, {"predicted", 1e-3}});
  again["bytes.dp"] = 1.0;
  // The recheck's prediction, where it has one, is the model's for the rerun too: a rerun 1.3x
  // the calibration's prediction but within target of the recheck's did not repeat a 2.1x miss.
  terms.push_back({{"name", "pp"},
                   {"unit", "s"},
                   {"measured", 2.1e-3},
                   {"predicted", 1e-3},
                   {"recheck_predicted", 1.2e-3}});
  terms.push_back({{"name", "hidden"},
                   {"unit", "s"},
                   {"measured", 2.1e-3},
                   {"predicted", 1e-3},
                   {"recheck_predicted", 1.02e-3}});
  again["pp"] = again["hidden"] = 1.3e-3;
  paraxis::driver::report::add_rerun(again, terms);
  EXPECT_EQ(terms[7].value("rerun_verdict", ""), "noise") << terms[7].dump();
  EXPECT_EQ(terms[8].value("rerun_verdict", ""), "recurs") << terms[8].dump();
  EXPECT_NE(paraxis::driver::report::rerun_reason(terms[7]).find("recheck's prediction 1.2 ms"),
            std::string::npos);
  for (std::size_t k = 0; k < std::size(cases); ++k) {
    const json& t = terms[k];
    ASSERT_TRUE(t.contains("rerun_measured")) << t.dump();
    EXPECT_NEAR(t["rerun_residual_pct"].get<double>(), 100 * (cases[k].again - 1e-3) / 1e-3, 1e-9);
    EXPECT_EQ(t.value("rerun_verdict", ""), std::string(cases[k].verdict)) << t.dump();
    EXPECT_EQ(paraxis::driver::report::rerun_reason(t).empty(), *cases[k].verdict == '\0');
  }
  EXPECT_NE(paraxis::driver::report::rerun_reason(terms[0]).find("recurs"), std::string::npos);
  EXPECT_NE(paraxis::driver::report::rerun_reason(terms[1]).find("did not recur"),
            std::string::npos);
  EXPECT_FALSE(terms[5].contains("rerun_measured"));
  EXPECT_FALSE(terms[6].contains("rerun_measured"));
}

// What the run runs a point again for (report::unexplained_misses, on a recorded summary): its
// step time 30 % over the prediction (no steps' range), with a recheck that misses the same
// way, is a miss nothing in the point explains; the same with a recheck that agrees with the
// measured (the machine changed) is not, nor a step time on its prediction. Through `paraxis
// report`, the rerun's verdict reaches the accuracy and report.md.
TEST(report_rerun, a_miss_the_point_cannot_explain_is_run_again_and_reported) {
  namespace rp = paraxis::driver::report;
  const json base = seed_summary("tp2.json", false);
  const double predicted = report_json_of(base, "rerun_base")["points"][0]["predicted_step_s"];
  const auto missed = [&](double recheck) {
    json p = base["points"][0];
    p["time"]["step_median_s"] = 1.3 * predicted;
    p.erase("rank_series");  // no steps' range: the recheck alone decides
    p["recheck"] = {{"seconds", 0.01},
                    {"retimed", json::object()},
                    {"predicted", {{"step_time", recheck * predicted}}}};
    return p;
  };
  const auto has_step = [&](const json& p) {
    for (const std::string& t : rp::unexplained_misses(p))
      if (t == "step_time") return true;
    return false;
  };
  EXPECT_TRUE(has_step(missed(1.05)));
  EXPECT_FALSE(has_step(missed(1.25)));  // the recheck: the machine changed
  json on_target = missed(1.05);
  on_target["time"]["step_median_s"] = predicted;
  EXPECT_FALSE(has_step(on_target));
  for (const bool recurs : {true, false}) {
    json s = base;
    s["points"][0] = missed(1.05);
    json measured = rp::measured_time_terms(s["points"][0]);
    ASSERT_TRUE(measured.contains("tp")) << measured.dump();
    measured["step_time"] = (recurs ? 1.28 : 1.04) * predicted;
    s["points"][0]["rerun"] = {{"seconds", 0.01}, {"terms", {"step_time"}}, {"measured", measured}};
    const std::string tag = recurs ? "rerun_recurs" : "rerun_noise";
    const json acc = report_json_of(s, tag)["accuracy"];
    ASSERT_EQ(acc["misses"].size(), 1u) << acc.dump();
    EXPECT_EQ(acc["misses"][0]["rerun_verdict"], recurs ? "recurs" : "noise");
    EXPECT_EQ(acc["misses_not_recurring"].get<int>(), recurs ? 0 : 1);
    std::ifstream md(::testing::TempDir() + "paraxis_report_waits_" + tag + "/report.md");
    const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    const std::string why = recurs ? "the miss recurs" : "the miss did not recur";
    const auto at = text.find(why);  // once in the miss line, once in the terms table
    ASSERT_NE(at, std::string::npos) << text;
    EXPECT_NE(text.find(why, at + 1), std::string::npos);
  }
}
