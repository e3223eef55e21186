// Hostile or malformed inputs to `paraxis report` and `paraxis plan` (issue 21): a damaged
// summary.json is an error naming the file and the field, never a crash; points that are not
// ok are listed, not analysed; a folder name with quotes runs nothing; scaling compares like
// with like; the same folder twice is refused; machine files are validated as decks are; a
// report or plan that cannot be written exits 4 naming the file, the previous file intact.
// The result folders come from one real run of the tiny deck, edited copy by copy.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/summary_reader.hpp"
#include "deck/machine_file.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Result {
  int code;  // -1: killed by a signal (a crash)
  std::string output;
};

// The binary under test; PARAXIS_TEST_EXE points these tests at another build (e.g. an older
// one, to see them fail there).
std::string exe() {
  const char* e = std::getenv("PARAXIS_TEST_EXE");
  return e ? e : PARAXIS_EXE;
}

// Runs `args` without a shell (folder names here hold quotes and $(...)), in `cwd` when given,
// stdout and stderr captured. `no_plots`: no interpreter, so the report skips its plots fast.
Result run(const std::vector<std::string>& args, const std::string& cwd = "",
           bool no_plots = true) {
  const std::string log = ::testing::TempDir() + "paraxis_report_inputs.log";
  const pid_t pid = fork();
  if (pid == 0) {
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    FILE* f = std::fopen(log.c_str(), "w");
    if (!f) _exit(126);
    dup2(fileno(f), 1);
    dup2(fileno(f), 2);
    if (no_plots) setenv("PARAXIS_PYTHON", "/nonexistent/python3", 1);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HostileResults : public ::testing::Test {
 protected:
  static inline std::string root, base;
  static inline json summary;

  // One real run per test binary (a second or so).
  static void SetUpTestSuite() {
    root = ::testing::TempDir() + "paraxis_hostile_results/";
    fs::remove_all(root);
    fs::create_directories(root);
    base = root + "base";
    const Result r = run_tiny(base);
    ASSERT_EQ(r.code, 0) << r.output;
    summary = json::parse(slurp(base + "/summary.json"));
  }
  static Result run_tiny(const std::string& out) {
    std::vector<std::string> args;
    const std::string mpiexec = PARAXIS_MPIEXEC;
    if (!mpiexec.empty()) args = {mpiexec, "-n", "1"};
    // Calibrated (a tenth of a second on one rank): the report's predictions are read too.
    for (const std::string& a :
         {exe(), std::string("run"), std::string(PARAXIS_INPUTS_DIR "/tiny.yaml"),
          std::string("--set"), std::string("train.steps=2"), std::string("--out"), out})
      args.push_back(a);
    return run(args);
  }
  void SetUp() override { ASSERT_FALSE(summary.is_null()) << "the tiny run failed"; }

  // A results folder `name` holding `s` as its summary.json.
  static std::string folder(const std::string& name, const json& s) {
    const std::string dir = root + name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir + "/summary.json") << s.dump(1);
    return dir;
  }
  static Result report(const std::vector<std::string>& dirs, bool no_plots = true) {
    std::vector<std::string> args{exe(), "report"};
    args.insert(args.end(), dirs.begin(), dirs.end());
    return run(args, "", no_plots);
  }
  // The summary with one field replaced (JSON pointer).
  static json with(const std::string& pointer, const json& value) {
    json s = summary;
    s[json::json_pointer(pointer)] = value;
    return s;
  }
  static json without(const std::string& pointer) {
    json s = summary;
    const json::json_pointer p(pointer);
    s[p.parent_pointer()].erase(p.back());
    return s;
  }
  // The tiny point with another data-parallel degree (the grid kept consistent).
  static json with_dp(json s, int dp) {
    auto& p = s["points"][0];
    p["config"]["parallel"]["dp"] = dp;
    p["grid"]["dp"] = dp;
    p["grid"]["world"] = dp;
    // Every rank's series, one per rank of the new grid (the validator checks their count).
    for (auto& [name, per_rank] : p["rank_series"].items())
      if (name != "steps") per_rank = json::array_t(static_cast<std::size_t>(dp), per_rank[0]);
    return s;
  }
  // The report of `s` must fail with status 2 and name the file and `field`.
  static void expect_rejected(const json& s, const std::string& field, const std::string& what) {
    const std::string dir = folder("bad", s);
    const Result r = report({dir});
    EXPECT_EQ(r.code, 2) << what << ": " << r.output;
    EXPECT_NE(r.output.find(dir + "/summary.json: " + field), std::string::npos)
        << what << ": " << r.output;
  }
};

TEST_F(HostileResults, zero_or_negative_counts_are_errors_naming_file_and_field) {
  const struct {
    const char* pointer;
    int value;
    const char* field;
  } cases[] = {
      {"/points/0/config/train/micro_batch", 0, "points[0].config.train.micro_batch"},
      {"/points/0/config/train/global_batch", -8, "points[0].config.train.global_batch"},
      {"/points/0/config/parallel/dp", 0, "points[0].config.parallel.dp"},
      {"/points/0/config/parallel/pp", -2, "points[0].config.parallel.pp"},
      {"/points/0/config/parallel/virtual_stages", 0, "points[0].config.parallel.virtual_stages"},
      {"/points/0/config/model/heads", 0, "points[0].config.model.heads"},
      {"/points/0/grid/world", 0, "points[0].grid.world"},
      {"/points/0/grid/dp", 0, "points[0].grid.dp"}};
  for (const auto& c : cases) expect_rejected(with(c.pointer, c.value), c.field, c.pointer);
  // The message says what was expected and what was found.
  try {
    paraxis::driver::validate_summary(with("/points/0/grid/dp", 0), "runs/x/summary.json");
    ADD_FAILURE() << "grid.dp = 0 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(),
                 "runs/x/summary.json: points[0].grid.dp: expected an integer >= 1, got 0");
  }
}

TEST_F(HostileResults, wrong_types_missing_fields_and_invalid_json_name_file_and_field) {
  expect_rejected(with("/points/0/time/step_median_s", "fast"), "points[0].time.step_median_s",
                  "string step time");
  expect_rejected(with("/points/0/time/step_median_s", nullptr), "points[0].time.step_median_s",
                  "null (NaN written by a writer) step time");
  expect_rejected(with("/points/0/config/model/layers", 2.5), "points[0].config.model.layers",
                  "fractional layers");
  expect_rejected(with("/points/0/config/train/precision", "fp8"),
                  "points[0].config.train.precision", "unknown precision");
  expect_rejected(with("/points/0/config/parallel/tp", 3), "points[0].config.parallel.tp",
                  "tp not dividing heads");
  expect_rejected(with("/points/0/grid/tp", 2), "points[0].grid.tp", "grid against config");
  expect_rejected(without("/points/0/grid"), "points[0].grid: missing", "no grid");
  expect_rejected(without("/points/0/config/train/precision"),
                  "points[0].config.train.precision: missing", "no precision");
  expect_rejected(with("/points/0/time/comm/tp", 7), "points[0].time.comm.tp", "comm not a map");
  expect_rejected(with("/points/0/throughput/hfu", -0.5), "points[0].throughput.hfu",
                  "negative HFU");
  expect_rejected(with("/points/0/throughput/mfu", "high"), "points[0].throughput.mfu",
                  "MFU not a number");
  expect_rejected(with("/provenance/hosts", json::array({1})), "provenance.hosts[0]",
                  "host not a string");
  expect_rejected(with("/points", json::object()), "points: expected an array", "points a map");
  expect_rejected(with("/schema", "paraxis.summary/1"),
                  "schema: this summary is \"paraxis.summary/1\"; this paraxis reads "
                  "\"paraxis.summary/2\"",
                  "an older schema, both versions named");
  expect_rejected(with("/schema", "paraxis.summary/3"), "schema", "a newer schema");
  // Calibration arrays: one entry per model chunk, each mean beside its slowest.
  ASSERT_TRUE(summary["points"][0].contains("calibration"));
  expect_rejected(with("/points/0/calibration/compute/forward_s_per_chunk", json::array()),
                  "points[0].calibration.compute.forward_s_per_chunk", "no chunk times");
  expect_rejected(with("/points/0/calibration/compute/forward_mean_s_per_chunk", json::array()),
                  "points[0].calibration.compute.forward_mean_s_per_chunk", "short means");
  expect_rejected(with("/points/0/calibration/comm", json{{"tp",
                                                           {{"all_reduce",
                                                             {{"ranks", 0},
                                                              {"alpha_s", 1e-6},
                                                              {"beta_s_per_byte", 1e-9},
                                                              {"samples", json::array()}}}}}}),
                  "points[0].calibration.comm.tp.all_reduce.ranks", "zero ranks");
  expect_rejected(with("/points/0/calibration/comm", json{{"dp",
                                                           {{"all_reduce",
                                                             {{"ranks", 2},
                                                              {"alpha_s", 1e-6},
                                                              {"beta_s_per_byte", 1e-9},
                                                              {"async_progress", 1.5},
                                                              {"samples", json::array()}}}}}}),
                  "points[0].calibration.comm.dp.all_reduce.async_progress", "progress > 1");
  // Per-call accounting (issue 30): each row's fields named by their path.
  ASSERT_TRUE(summary["points"][0].contains("calls"));
  const json row = {
      {"axis", "tp"},    {"op", "all_reduce"}, {"bucket_bytes", 1024},      {"calls", 4},
      {"bytes", 4096.0}, {"measured_s", 1e-4}, {"measured_median_s", 2e-5}, {"predicted_s", 1e-4},
      {"wait_s", 0.0}};
  auto calls_with = [&](const char* key, const json& v) {
    json r = row;
    r[key] = v;
    return with("/points/0/calls", json{{"rank", 0}, {"steps", 1}, {"rows", json::array({r})}});
  };
  EXPECT_NO_THROW(paraxis::driver::validate_summary(calls_with("wait_s", 0.0), "f"));
  EXPECT_NO_THROW(paraxis::driver::validate_summary(calls_with("predicted_s", nullptr), "f"));
  expect_rejected(calls_with("calls", 0), "points[0].calls.rows[0].calls", "a row of no calls");
  expect_rejected(calls_with("predicted_s", -1e-6), "points[0].calls.rows[0].predicted_s",
                  "a negative prediction");
  expect_rejected(calls_with("axis", "zz"), "points[0].calls.rows[0].axis", "an unknown axis");
  expect_rejected(calls_with("measured_s", "slow"), "points[0].calls.rows[0].measured_s",
                  "a measured time that is not a number");
  expect_rejected(with("/points/0/calls/rows", json::object()), "points[0].calls.rows",
                  "rows not an array");
  // rank_series (the diagnosis and the report's "Noise" index it by rank and step): its shape.
  ASSERT_TRUE(summary["points"][0].contains("rank_series"));
  const json rs = summary["points"][0]["rank_series"];
  const std::size_t n_steps = rs["steps"].size(), world = rs["step_s"].size();
  EXPECT_NO_THROW(paraxis::driver::validate_summary(with("/points/0/rank_series", rs), "f"));
  expect_rejected(with("/points/0/rank_series/step_s", json::array()),
                  "points[0].rank_series.step_s", "no rank's series");
  expect_rejected(with("/points/0/rank_series/step_s/0", json::array()),
                  "points[0].rank_series.step_s[0]", "a rank with fewer values than steps");
  expect_rejected(with("/points/0/rank_series/compute_s/0/0", -1.0),
                  "points[0].rank_series.compute_s[0][0]", "a negative compute time");
  expect_rejected(with("/points/0/rank_series/step_s/0/0", "slow"),
                  "points[0].rank_series.step_s[0][0]", "a step time that is not a number");
  expect_rejected(with("/points/0/rank_series/steps", json::array({"one"})),
                  "points[0].rank_series.steps[0]", "a step number that is not an integer");
  expect_rejected(with("/points/0/rank_series/speed", json::array()), "points[0].rank_series.speed",
                  "a series paraxis does not write");
  EXPECT_GT(n_steps, 0u);
  EXPECT_GT(world, 0u);
  // Checkpoint figures (issue 16): the field named.
  const json save = {{"step", 2},         {"bytes", {{"min", 1.0}, {"mean", 1.0}, {"max", 1.0}}},
                     {"write_s", "fast"}, {"total_bytes", 2.0},
                     {"total_s", 0.1},    {"aggregate_bytes_per_s", 1e9}};
  expect_rejected(with("/points/0/checkpoints", json::array({save})),
                  "points[0].checkpoints[0].write_s", "a save's write time not a spread");
  expect_rejected(with("/points/0/resumed", json{{"step", -1}}), "points[0].resumed.step",
                  "a negative resumed step");
  expect_rejected(with("/points/0/checkpoint_auto", json{{"checkpoint_s", 1.0},
                                                         {"step_s", 1.0},
                                                         {"system_mtbf_s", 1.0},
                                                         {"daly_interval_s", 1.0},
                                                         {"every", 0}}),
                  "points[0].checkpoint_auto.every", "an automatic cadence of 0 steps");
  // fault.slow_axis's record (issue 17's sensitivity).
  expect_rejected(
      with("/points/0/slow_axis", json{{"axis", "dp"}, {"factor", "x"}, {"links", json::object()}}),
      "points[0].slow_axis.factor", "a slowdown factor that is not a number");
  expect_rejected(
      with("/points/0/slow_axis", json{{"axis", "zz"}, {"factor", 2.0}, {"links", json::object()}}),
      "points[0].slow_axis.axis", "an unknown axis");
  // Not JSON at all: the file is named.
  const std::string dir = root + "truncated";
  fs::create_directories(dir);
  std::ofstream(dir + "/summary.json") << summary.dump().substr(0, 200);
  const Result r = report({dir});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(dir + "/summary.json: not valid JSON"), std::string::npos) << r.output;
}

TEST_F(HostileResults, validation_throws_only_runtime_errors_on_any_json) {
  // What a fuzzer feeds: any value where any field is expected.
  const json values[] = {
      nullptr, true, -1, 0, 1e308, "x", json::array(), json::object(), json::array({1, 2})};
  auto only_runtime_errors = [](const json& j) {
    try {
      paraxis::driver::validate_summary(j, "f");
    } catch (const std::runtime_error&) {
    }
  };
  for (const auto& v : values) {
    EXPECT_THROW(paraxis::driver::validate_summary(v, "f"), std::runtime_error) << v;
    for (const char* p : {"/schema",
                          "/points/0",
                          "/points/0/index",
                          "/points/0/status",
                          "/points/0/config",
                          "/points/0/config/model",
                          "/points/0/config/model/moe",
                          "/points/0/config/parallel/stage_layers",
                          "/points/0/grid",
                          "/points/0/time",
                          "/points/0/time/ranks",
                          "/points/0/time/comm",
                          "/points/0/memory",
                          "/points/0/throughput",
                          "/points/0/throughput/hfu",
                          "/points/0/calibration",
                          "/points/0/calibration/comm",
                          "/points/0/calibration/compute",
                          "/points/0/calls",
                          "/points/0/calls/rows",
                          "/provenance",
                          "/provenance/hosts",
                          "/provenance/world"})
      EXPECT_NO_THROW(only_runtime_errors(with(p, v))) << p << " = " << v;
  }
  EXPECT_NO_THROW(paraxis::driver::validate_summary(summary, "f"));
}

TEST_F(HostileResults, points_that_are_not_ok_are_listed_never_analysed) {
  json s = summary;
  json diverged = s["points"][0];
  diverged["index"] = 1;
  diverged["status"] = "diverged: loss is NaN at step 1";
  diverged["steps"][1]["loss"] = nullptr;  // NaN, as JSON writes it
  diverged["time"]["step_median_s"] = nullptr;
  diverged["grid"]["dp"] = 0;
  s["points"].push_back(diverged);
  json failed = json{{"index", 2}, {"status", "failed: rank 0 out of memory"}};
  s["points"].push_back(failed);
  const std::string dir = folder("diverged", s);
  const Result r = report({dir});
  ASSERT_EQ(r.code, 0) << r.output;
  const json rep = json::parse(slurp(dir + "/report.json"));
  ASSERT_EQ(rep["points"].size(), 1u);
  ASSERT_EQ(rep["points_not_analysed"].size(), 2u) << rep.dump();
  EXPECT_EQ(rep["points_not_analysed"][0]["status"], "diverged: loss is NaN at step 1");
  EXPECT_EQ(rep["points_not_analysed"][1]["index"], 2);
  EXPECT_NE(slurp(dir + "/report.md").find("diverged: loss is NaN at step 1"), std::string::npos);
}

TEST_F(HostileResults, folder_name_with_quotes_runs_nothing_and_gets_its_plots) {
  const std::string dir = root + "it's \"a\" $(touch pwned) dir";
  fs::remove_all(dir);
  ASSERT_EQ(run_tiny(dir).code, 0);
  const std::string cwd = root + "cwd";
  fs::create_directories(cwd);
  const Result r = run({exe(), "report", dir}, cwd, false);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(cwd + "/pwned")) << "the folder name was run as a command";
  EXPECT_FALSE(fs::exists(dir + "/pwned"));
  EXPECT_TRUE(fs::exists(dir + "/report.json"));
  const std::string md = slurp(dir + "/report.md");
  if (md.find("plots skipped") != std::string::npos) GTEST_SKIP() << "no python3 with matplotlib";
  for (const char* f : {"step_breakdown", "measured_vs_predicted"})
    EXPECT_TRUE(fs::exists(dir + "/plots/" + f + ".png")) << f << "\n" << r.output;
}

TEST_F(HostileResults, scaling_compares_one_model_only) {
  const std::string one = folder("model_a_dp1", summary);
  json other = with_dp(summary, 2);
  other["points"][0]["config"]["model"]["hidden"] = 128;
  const std::string two = folder("model_b_dp2", other);
  Result r = report({one, two});
  ASSERT_EQ(r.code, 0) << r.output;
  json rep = json::parse(slurp(one + "/report.json"));
  EXPECT_EQ(rep["points"].size(), 2u);
  EXPECT_TRUE(rep["scaling"]["strong"].empty()) << "two models compared: " << rep["scaling"];
  EXPECT_TRUE(rep["scaling"]["weak"].empty()) << rep["scaling"];
  // The same model on 2 ranks: strong scaling at global batch 8; the same model with 16
  // sequences on 2 replicas: weak scaling at 8 per replica.
  const std::string same = folder("model_a_dp2", with_dp(summary, 2));
  json weak = with_dp(summary, 2);
  weak["points"][0]["config"]["train"]["global_batch"] = 16;
  const std::string twice = folder("model_a_dp2_gb16", weak);
  r = report({one, same, twice});
  ASSERT_EQ(r.code, 0) << r.output;
  rep = json::parse(slurp(one + "/report.json"));
  ASSERT_EQ(rep["scaling"]["strong"].size(), 2u) << rep["scaling"];
  EXPECT_EQ(rep["scaling"]["strong"][1]["world"], 2);
  ASSERT_EQ(rep["scaling"]["weak"].size(), 2u) << rep["scaling"];
  EXPECT_EQ(rep["scaling"]["weak"][0]["batch_per_replica"], 8);
}

TEST_F(HostileResults, the_same_folder_twice_is_refused) {
  const std::string dir = folder("twice", summary);
  for (const std::string& again : {dir, dir + "/", dir + "/../twice"}) {
    const Result r = report({dir, again});
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("given twice"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(dir), std::string::npos) << r.output;
  }
}

TEST_F(HostileResults, failed_report_write_exits_4_naming_file_and_keeps_the_old_one) {
  const std::string dir = folder("unwritable", summary);
  ASSERT_EQ(report({dir}).code, 0);
  const std::string old_md = slurp(dir + "/report.md");
  ASSERT_FALSE(old_md.empty());
  fs::remove(dir + "/report.json");
  fs::create_directories(dir + "/report.json/occupied");
  Result r = report({dir});
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_NE(r.output.find(dir + "/report.json"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(dir + "/report.md"), old_md);
  // A plot that cannot be written fails the report too (where plots can be made at all).
  fs::remove_all(dir + "/report.json");
  fs::create_directories(dir + "/plots/step_breakdown.png/occupied");
  r = report({dir}, false);
  if (r.output.find("plots skipped") != std::string::npos)
    GTEST_SKIP() << "no python3 with matplotlib";
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_NE(r.output.find(dir + "/plots/step_breakdown.png"), std::string::npos) << r.output;
  EXPECT_NE(slurp(dir + "/report.md").find("plots failed"), std::string::npos);
}

TEST_F(HostileResults, failed_plan_json_write_exits_4_naming_the_file) {
  const std::string occupied = root + "plan.json";
  fs::create_directories(occupied + "/occupied");
  const Result r =
      run({exe(), "plan", PARAXIS_INPUTS_DIR "/tiny.yaml",
           PARAXIS_INPUTS_DIR "/machines/cpu-node.yaml", "--top", "1", "--json", occupied});
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_NE(r.output.find(occupied), std::string::npos) << r.output;
}

// Machine descriptions: every problem named with key and file:line, all in one pass.
std::string machine_error(const std::string& text) {
  try {
    paraxis::driver::load_machine_text(text, "m.yaml");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

const char* const kMachine =
    "name: test\n"                                       // 1
    "devices_per_node: 8\n"                              // 2
    "nodes: 4\n"                                         // 3
    "peak_flops: 1.0e12\n"                               // 4
    "memory_gb: 80\n"                                    // 5
    "intra_node: {latency_us: 3, bandwidth_gbs: 450}\n"  // 6
    "inter_node: {latency_us: 8, bandwidth_gbs: 50}\n";  // 7

std::string replaced(const std::string& from, const std::string& to) {
  std::string s = kMachine;
  s.replace(s.find(from), from.size(), to);
  return s;
}

TEST(machine_file, bad_values_and_unknown_keys_name_key_and_line) {
  EXPECT_EQ(machine_error(kMachine), "");
  const struct {
    std::string text, expected;
  } cases[] = {
      {replaced("nodes: 4", "nodes: -4"), "m.yaml:3: 'nodes': expected an integer"},
      {replaced("devices_per_node: 8", "devices_per_node: 8.5"),
       "m.yaml:2: 'devices_per_node': expected an integer"},
      {replaced("peak_flops: 1.0e12", "peak_flops: .nan"),
       "m.yaml:4: 'peak_flops': expected a "
       "finite number > 0"},
      {replaced("peak_flops: 1.0e12", "peak_flops: nan"), "m.yaml:4: 'peak_flops'"},
      {replaced("memory_gb: 80", "memory_gb: -80"), "m.yaml:5: 'memory_gb'"},
      {replaced("memory_gb: 80", "memroy_gb: 80"), "m.yaml:5: 'memroy_gb': unknown key"},
      {replaced("bandwidth_gbs: 450", "bandwith_gbs: 450"),
       "m.yaml:6: 'intra_node.bandwith_gbs': unknown key"},
      {replaced("latency_us: 8", "latency_us: 0"), "m.yaml:7: 'inter_node.latency_us'"},
      {replaced("nodes: 4", "nodes: 1000000000"),
       "'nodes': nodes * devices_per_node = 1000000000 * 8 exceeds"},
      {std::string(kMachine) + "nodes: 2\n", "m.yaml:8: 'nodes': duplicate key"},
      {"devices_per_node: [8\n", "m.yaml"},
      {replaced("nodes: 4", "nodes:"), "m.yaml:3: 'nodes': has no value"},
  };
  for (const auto& c : cases) {
    const std::string e = machine_error(c.text);
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.text << "\n-> " << e;
  }
  // Every problem in one pass.
  const std::string two = machine_error(replaced("nodes: 4", "nodes: x\nsockets: 2"));
  EXPECT_NE(two.find("m.yaml:3: 'nodes'"), std::string::npos) << two;
  EXPECT_NE(two.find("m.yaml:4: 'sockets': unknown key"), std::string::npos) << two;
  // A required key missing.
  EXPECT_NE(machine_error(replaced("peak_flops: 1.0e12\n", "")).find("'peak_flops': missing"),
            std::string::npos);
}

TEST(machine_file, shipped_descriptions_load_as_written) {
  const auto m = paraxis::driver::load_machine_file(PARAXIS_INPUTS_DIR "/machines/dgx-h100.yaml");
  EXPECT_EQ(m.name, "dgx-h100-x128");
  EXPECT_EQ(m.machine.devices_per_node, 8);
  EXPECT_EQ(m.machine.nodes, 128);
  EXPECT_DOUBLE_EQ(m.machine.peak_flops, 989.0e12);
  EXPECT_DOUBLE_EQ(m.machine.memory_bytes, 80e9);
  EXPECT_DOUBLE_EQ(m.machine.intra_node.alpha, 3e-6);
  EXPECT_DOUBLE_EQ(m.machine.inter_node.beta, 1.0 / 50e9);
  EXPECT_DOUBLE_EQ(m.checkpoint_s, 60);
  EXPECT_NO_THROW(paraxis::driver::load_machine_file(PARAXIS_INPUTS_DIR "/machines/cpu-node.yaml"));
}

TEST(machine_file, plan_names_file_and_line_of_a_bad_machine) {
  const std::string path = ::testing::TempDir() + "paraxis_bad_machine_line.yaml";
  std::ofstream(path) << replaced("memory_gb: 80", "memory_gb: 80\nmemory_bw: 3");
  const Result r = run({exe(), "plan", PARAXIS_INPUTS_DIR "/tiny.yaml", path});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(path + ":6: 'memory_bw': unknown key"), std::string::npos) << r.output;
}

TEST(machine_file, work_dependent_compute_keys_validated_and_optional) {
  // Without memory_bandwidth_gbs: the flat model (compute.enabled() false).
  const auto flat = paraxis::driver::load_machine_text(kMachine, "m.yaml");
  EXPECT_FALSE(flat.machine.compute.enabled());
  const auto on = paraxis::driver::load_machine_text(
      std::string(kMachine) +
          "memory_bandwidth_gbs: 2039\nmemory_efficiency: 0.9\ngemm_efficiency: 0.64\n"
          "gemm_tile: [256, 128]\ngradient_accumulation_bytes: 18\n",
      "m.yaml");
  EXPECT_TRUE(on.machine.compute.enabled());
  EXPECT_DOUBLE_EQ(on.machine.compute.memory_bytes_per_s, 2039e9);
  EXPECT_DOUBLE_EQ(on.machine.compute.memory_efficiency, 0.9);
  EXPECT_DOUBLE_EQ(on.machine.compute.gemm_efficiency, 0.64);
  EXPECT_DOUBLE_EQ(on.machine.compute.peak_flops, 1.0e12);
  EXPECT_EQ(on.machine.compute.tile_m, 256);
  EXPECT_EQ(on.machine.compute.tile_n, 128);
  EXPECT_DOUBLE_EQ(on.machine.compute.gradient_accumulation_bytes, 18);
  // Defaults when only the bandwidth is given.
  const auto dflt = paraxis::driver::load_machine_text(
      std::string(kMachine) + "memory_bandwidth_gbs: 3350\n", "m.yaml");
  EXPECT_DOUBLE_EQ(dflt.machine.compute.gemm_efficiency, 0.8);
  EXPECT_DOUBLE_EQ(dflt.machine.compute.memory_efficiency, 0.8);
  EXPECT_EQ(dflt.machine.compute.tile_m, 128);
  EXPECT_DOUBLE_EQ(dflt.machine.compute.gradient_accumulation_bytes, 0);
  const struct {
    std::string extra, expected;
  } cases[] = {
      {"memory_bandwidth_gbs: 0\n", "m.yaml:8: 'memory_bandwidth_gbs': expected a finite number"},
      {"memory_bandwidth_gbs: 2039\ngemm_efficiency: 1.2\n",
       "m.yaml:9: 'gemm_efficiency': expected a finite number > 0 and <= 1, got '1.2'"},
      {"memory_bandwidth_gbs: 2039\nmemory_efficiency: 0\n", "m.yaml:9: 'memory_efficiency'"},
      {"gemm_efficiency: 0.6\n", "m.yaml:8: 'gemm_efficiency': needs memory_bandwidth_gbs"},
      {"memory_bandwidth_gbs: 2039\ngemm_tile: [128]\n",
       "m.yaml:9: 'gemm_tile': expected [rows, columns]"},
      {"memory_bandwidth_gbs: 2039\ngemm_tile: [128, 0]\n", "'gemm_tile[1]': expected an integer"},
      {"memory_bandwith_gbs: 2039\n", "m.yaml:8: 'memory_bandwith_gbs': unknown key"},
      {"memory_bandwidth_gbs: 2039\ngradient_accumulation_bytes: -2\n",
       "m.yaml:9: 'gradient_accumulation_bytes': expected a finite number >= 0 and <= 1000"},
      {"gradient_accumulation_bytes: 6\n",
       "m.yaml:8: 'gradient_accumulation_bytes': needs memory_bandwidth_gbs"},
  };
  for (const auto& c : cases) {
    const std::string e = machine_error(std::string(kMachine) + c.extra);
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.extra << "\n-> " << e;
  }
  // The shipped descriptions carry the model, each with its datasheet bandwidth.
  const auto selene =
      paraxis::driver::load_machine_file(PARAXIS_INPUTS_DIR "/machines/selene.yaml");
  EXPECT_DOUBLE_EQ(selene.machine.compute.memory_bytes_per_s, 2039e9);
  const auto h100 =
      paraxis::driver::load_machine_file(PARAXIS_INPUTS_DIR "/machines/dgx-h100.yaml");
  EXPECT_DOUBLE_EQ(h100.machine.compute.memory_bytes_per_s, 3350e9);
}

}  // namespace
