// The paraxis command as a user runs it: bad decks exit non-zero with a message naming the
// key (on every rank, no hang); a run of the tiny deck writes a summary that follows the schema.
#include <gtest/gtest.h>

#include "cli_harness.hpp"
#include "deck/deck.hpp"
#include "model/param_layout.hpp"
#include "model/shard_layout.hpp"

#include <sys/wait.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

namespace {

using paraxis_test::Result;
using paraxis_test::run;

const std::string exe = PARAXIS_EXE;
std::string deck(const char* f) {
  return std::string(PARAXIS_DECKS_DIR) + "/" + f;
}

}  // namespace

TEST(cli, check_rejects_bad_decks_naming_the_key) {
  struct Case {
    const char* file;
    const char* key;
  } cases[] = {{"unknown_key.yaml", "model.hiden"},
               {"negative_layers.yaml", "model.layers"},
               {"heads_not_dividing.yaml", "model.heads"}};
  for (const auto& c : cases) {
    const Result r = run(exe + " check " + deck(c.file));
    EXPECT_NE(r.code, 0) << c.file;
    EXPECT_NE(r.output.find(c.key), std::string::npos) << r.output;
    const Result rr = run(exe + " run " + deck(c.file) + " --out " + ::testing::TempDir() + "bad");
    EXPECT_NE(rr.code, 0) << c.file;
    EXPECT_NE(rr.output.find(c.key), std::string::npos) << rr.output;
  }
}

TEST(cli, check_accepts_shipped_decks) {
  for (const char* d : {"tiny.yaml", "small.yaml"}) {
    const Result r = run(exe + " check " + std::string(PARAXIS_INPUTS_DIR) + "/" + d);
    EXPECT_EQ(r.code, 0) << r.output;
  }
}

TEST(cli, wrong_world_size_fails_on_every_rank_without_hanging) {
  const std::string mpiexec = PARAXIS_MPIEXEC;
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const Result r =
      run("timeout 120 " + mpiexec + " -n 2 " + exe + " run " + std::string(PARAXIS_INPUTS_DIR) +
          "/tiny.yaml --set train.steps=2 --out " + ::testing::TempDir() + "w2");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.code, 124) << "timed out: a rank hung";
  EXPECT_NE(r.output.find("but the run has 2 ranks"), std::string::npos) << r.output;
}

TEST(cli, run_tiny_writes_summary_per_schema) {
  const std::string out = ::testing::TempDir() + "paraxis_tiny_run";
  std::filesystem::remove_all(out);
  const Result r = run(exe + " run " + std::string(PARAXIS_INPUTS_DIR) +
                       "/tiny.yaml --set train.steps=3 --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tokens/s"), std::string::npos) << r.output;
  std::ifstream in(out + "/summary.json");
  ASSERT_TRUE(in.good());
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["schema"], "paraxis.summary/2");
  ASSERT_EQ(j["points"].size(), 1u);
  const auto& p = j["points"][0];
  EXPECT_EQ(p["status"], "ok");
  EXPECT_EQ(p["config"]["model"]["vocab"], 128);
  EXPECT_EQ(p["grid"]["world"], 1);
  ASSERT_EQ(p["steps"].size(), 3u);
  for (const auto& s : p["steps"]) {
    EXPECT_TRUE(s["loss"].is_number());
    EXPECT_GT(s["time_s"].get<double>(), 0.0);
  }
  EXPECT_GT(p["memory"]["params_bytes"].get<double>(), 0.0);
  EXPECT_GT(p["memory"]["activations_peak_bytes"].get<double>(), 0.0);
  EXPECT_GT(p["throughput"]["tokens_per_s"].get<double>(), 0.0);
  EXPECT_LT(p["corpus"]["entropy_floor"].get<double>(), std::log(128.0));
  EXPECT_TRUE(p["time"]["comm"].contains("dp"));
  EXPECT_TRUE(j["provenance"].contains("kokkos_version"));
  EXPECT_TRUE(std::filesystem::exists(out + "/points.csv"));
  EXPECT_TRUE(std::filesystem::exists(out + "/trace-0.json"));
}

// MFU counts model FLOPs, HFU adds what train.recompute runs again: equal without recompute, and
// with recompute: full on the tiny deck (every block of its one chunk recomputed) the difference
// is the blocks' forward FLOPs per token times the step's tokens.
TEST(cli, hardware_flops_add_the_recomputed_forward) {
  const std::string out = ::testing::TempDir() + "paraxis_hfu";
  std::filesystem::remove_all(out);
  const Result r = run(exe + " run " + std::string(PARAXIS_INPUTS_DIR) +
                       "/tiny.yaml --set train.steps=2 --set hardware.calibrate=false"
                       " --set output.trace=false --set hardware.peak_flops=1e12"
                       " --set sweep.train.recompute=[none,full] --out " +
                       out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(out + "/summary.json");
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j["points"].size(), 2u);
  const auto& none = j["points"][0]["throughput"];
  const auto& full = j["points"][1]["throughput"];
  EXPECT_EQ(none["hardware_flops_per_step"], none["model_flops_per_step"]);
  EXPECT_EQ(none["hfu"], none["mfu"]);
  const auto& cfg = j["points"][1]["config"]["model"];
  const double H = cfg["hidden"], F = cfg["ffn"], S = cfg["seq_len"];
  const double L = cfg["layers"], E = cfg["moe"]["experts"], K = cfg["moe"]["top_k"];
  const double every = cfg["moe"]["every"];
  const double tokens = j["points"][1]["config"]["train"]["global_batch"].get<double>() * S;
  // Forward FLOPs per token of the blocks (docs/model.md): attention projections 8 H^2, scores
  // and weighted sum 4 S H (causal counted in full), MLP 4 H F dense or 4 H F top_k + router 2 H E
  // in an MoE block.
  double blocks = 0;
  for (int l = 0; l < L; ++l) {
    const bool moe = E > 0 && (l + 1) % static_cast<int>(every) == 0;
    blocks += 8 * H * H + 4 * S * H + (moe ? 4 * H * F * K + 2 * H * E : 4 * H * F);
  }
  const double extra =
      full["hardware_flops_per_step"].get<double>() - full["model_flops_per_step"].get<double>();
  EXPECT_NEAR(extra, blocks * tokens, 1e-9 * blocks * tokens);
  EXPECT_GT(full["hfu"].get<double>(), full["mfu"].get<double>());
}

TEST(cli, verify_on_two_ranks_reports_deviations_and_dp_traffic) {
  const std::string mpiexec = PARAXIS_MPIEXEC;
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = ::testing::TempDir() + "paraxis_verify_run";
  std::filesystem::remove_all(out);
  const Result r =
      run("timeout 300 " + mpiexec + " -n 2 " + exe + " run " + std::string(PARAXIS_INPUTS_DIR) +
          "/tiny.yaml --set train.steps=3 --set parallel.dp=2 --set parallel.zero=2"
          " --set train.precision=fp64 --verify --out " +
          out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("verify:"), std::string::npos) << r.output;
  std::ifstream in(out + "/summary.json");
  const auto j = nlohmann::json::parse(in);
  const auto& p = j["points"][0];
  EXPECT_EQ(p["status"], "ok");
  EXPECT_EQ(p["grid"]["dp"], 2);
  EXPECT_EQ(p["verify"]["passed"], true);
  EXPECT_LE(p["verify"]["max_loss_rel_diff"].get<double>(), 1e-9);
  EXPECT_LE(p["verify"]["max_param_abs_diff"].get<double>(),
            1e-9 * p["verify"]["max_param_abs"].get<double>());
  EXPECT_GT(p["time"]["comm"]["dp"]["bytes"].get<double>(), 0.0);
  EXPECT_GT(p["time"]["comm"]["dp"]["calls"].get<double>(), 0.0);
  EXPECT_EQ(p["memory_per_rank"].size(), 2u);
  // ZeRO-2 keeps only the owned gradient shard (fp64: 8 bytes each) between steps: about half.
  EXPECT_LT(p["memory"]["grads_bytes"].get<double>(),
            0.6 * 8.0 * p["model"]["parameters"].get<double>());
}

namespace {
// The documented schema of one point (docs/results.md): key -> JSON type.
void expect_point_schema(const nlohmann::json& p) {
  using T = nlohmann::json::value_t;
  auto has = [&](const nlohmann::json& o, const char* key, std::initializer_list<T> types) {
    ASSERT_TRUE(o.contains(key)) << "missing '" << key << "' in " << o.dump().substr(0, 200);
    bool ok = false;
    for (auto t : types) ok = ok || o[key].type() == t;
    EXPECT_TRUE(ok) << "'" << key << "' has type " << o[key].type_name();
  };
  const auto num = {T::number_float, T::number_integer, T::number_unsigned};
  has(p, "index", num);
  has(p, "status", {T::string});
  has(p, "config", {T::object});
  for (const char* s : {"model", "train", "parallel", "comm", "hardware", "output"})
    has(p["config"], s, {T::object});
  has(p, "grid", {T::object});
  for (const char* k : {"world", "tp", "pp", "dp", "ep"}) has(p["grid"], k, num);
  if (p["status"] != "ok") return;
  has(p, "steps", {T::array});
  for (const auto& s : p["steps"])
    for (const char* k : {"step", "loss", "lm_loss", "aux_loss", "grad_norm", "time_s"})
      has(s, k, num);
  has(p, "time", {T::object});
  for (const char* k : {"step_median_s", "compute_s", "bubble_fraction", "bubble_fraction_model",
                        "bubble_fraction_ideal"})
    has(p["time"], k, num);
  for (const char* axis : {"tp", "pp", "dp", "ep"})
    for (const char* k : {"time_s", "exposed_s", "bytes", "calls"})
      has(p["time"]["comm"][axis], k, num);
  has(p["time"], "ranks", {T::object});
  for (const auto& [name, stat] : p["time"]["ranks"].items())
    for (const char* k : {"min", "mean", "max"}) has(stat, k, num);
  for (const char* k :
       {"params_bytes", "grads_bytes", "optimizer_bytes", "activations_peak_bytes", "peak_bytes"})
    has(p["memory"], k, num);
  has(p, "memory_per_rank", {T::array});
  EXPECT_EQ(p["memory_per_rank"].size(), p["grid"]["world"].get<std::size_t>());
  for (const char* k : {"tokens_per_s", "model_flops_per_s"}) has(p["throughput"], k, num);
  has(p["throughput"], "mfu", {T::null, T::number_float});
}
}  // namespace

TEST(cli, auto_sweep_on_four_ranks_runs_every_factorisation) {
  const std::string mpiexec = PARAXIS_MPIEXEC;
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = ::testing::TempDir() + "paraxis_auto_sweep";
  std::filesystem::remove_all(out);
  const Result r =
      run("timeout 300 " + mpiexec + " -n 4 " + exe + " run " + std::string(PARAXIS_INPUTS_DIR) +
          "/demo.yaml --set train.steps=2 --set model.layers=4 --set sweep.parallel.zero=[0,3]"
          " --set sweep.comm.overlap=[false] --out " +
          out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(out + "/summary.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_TRUE(j["provenance"].contains("command_line"));
  // 4 = tp*pp*dp has 6 factorisations; times 2 ZeRO stages. pp = 4 needs 4 layers (the
  // deck has them after the override below) — every point runs.
  ASSERT_EQ(j["points"].size(), 12u);
  int ok = 0;
  std::set<std::string> shapes;
  for (const auto& p : j["points"]) {
    const std::string status = p["status"];
    const auto& g = p["config"]["parallel"];
    EXPECT_EQ(g["tp"].get<int>() * g["pp"].get<int>() * g["dp"].get<int>(), 4);
    EXPECT_EQ(status, "ok");
    if (status == "ok") ++ok;
    shapes.insert(std::to_string(g["tp"].get<int>()) + "x" + std::to_string(g["pp"].get<int>()) +
                  "x" + std::to_string(g["dp"].get<int>()));
    expect_point_schema(p);
    // Pipelined points report their bubble next to the formula's.
    if (g["pp"].get<int>() > 1) {
      EXPECT_GT(p["time"]["bubble_fraction_ideal"].get<double>(), 0.0);
      EXPECT_EQ(p["time"]["bubble_fraction_per_rank"].size(), 4u);
    }
  }
  EXPECT_EQ(ok, 12);
  EXPECT_EQ(shapes.size(), 6u);
  // A trace per run point, one process per rank.
  for (const auto& p : j["points"]) {
    if (p["status"] != "ok") continue;
    std::ifstream t(out + "/trace-" + std::to_string(p["index"].get<int>()) + ".json");
    ASSERT_TRUE(t.good());
    const auto trace = nlohmann::json::parse(t);
    std::set<int> pids;
    bool comm = false;
    for (const auto& e : trace["traceEvents"]) {
      pids.insert(e["pid"].get<int>());
      comm = comm || (e.contains("cat") && e["cat"] == "comm");
    }
    EXPECT_EQ(pids, (std::set<int>{0, 1, 2, 3}));
    EXPECT_TRUE(comm);
  }
  // points.csv: a header and one row per point.
  std::ifstream csv(out + "/points.csv");
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 13);
}

TEST(cli, a_failing_point_ends_the_job_and_keeps_earlier_points) {
  const std::string mpiexec = PARAXIS_MPIEXEC;
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = ::testing::TempDir() + "paraxis_fault";
  std::filesystem::remove_all(out);
  const Result r =
      run("timeout 300 " + mpiexec + " -n 2 " + exe + " run " + std::string(PARAXIS_INPUTS_DIR) +
          "/tiny.yaml --set train.steps=3 --set parallel.dp=2 --set fault.dead_rank.step=1"
          " --set sweep.fault.dead_rank.rank=[-1,1,-1] --out " +
          out);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.code, 124) << "timed out: a rank hung";
  EXPECT_NE(r.output.find("rank 1 failed in point 2/3"), std::string::npos) << r.output;
  std::ifstream in(out + "/summary.json");
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j["points"].size(), 1u);  // the point before the fault, written before it
  EXPECT_EQ(j["points"][0]["status"], "ok");
  // On one rank the failed point is recorded too, and the sweep stops there.
  const std::string out1 = out + "1";
  const Result r1 = run(exe + " run " + std::string(PARAXIS_INPUTS_DIR) +
                        "/tiny.yaml --set train.steps=3 --set fault.dead_rank.step=1"
                        " --set sweep.fault.dead_rank.rank=[-1,0,-1] --out " +
                        out1);
  EXPECT_NE(r1.code, 0) << r1.output;
  std::ifstream in1(out1 + "/summary.json");
  const auto j1 = nlohmann::json::parse(in1);
  ASSERT_EQ(j1["points"].size(), 2u);
  EXPECT_EQ(j1["points"][1]["status"].get<std::string>().rfind("failed: injected fault", 0), 0u);
}

TEST(cli, shipped_decks_are_valid_for_their_rank_counts) {
  for (auto [deck, ranks] : {std::pair{"node-8gpu.yaml", 8},
                             {"cluster-3d.yaml", 1024},
                             {"demo.yaml", 4},
                             {"moe-sweep.yaml", 2},
                             {"moe-report.yaml", 2},
                             {"report-sweep.yaml", 2},
                             {"tiny.yaml", 1},
                             {"small.yaml", 1}}) {
    const Result r = run(exe + " check " + std::string(PARAXIS_INPUTS_DIR) + "/" + deck +
                         " --ranks " + std::to_string(ranks));
    EXPECT_EQ(r.code, 0) << deck << ": " << r.output;
    EXPECT_EQ(r.output.find("paraxis: error:"), std::string::npos) << deck << ": " << r.output;
    EXPECT_EQ(r.output.find("would be skipped:"), std::string::npos) << deck << ": " << r.output;
  }
}

TEST(cli, report_compares_every_point_with_its_calibrated_prediction) {
  const std::string mpiexec = PARAXIS_MPIEXEC;
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = ::testing::TempDir() + "paraxis_report";
  std::filesystem::remove_all(out);
  const Result r =
      run("timeout 300 " + mpiexec + " -n 2 " + exe + " run " + std::string(PARAXIS_INPUTS_DIR) +
          "/tiny.yaml --set train.steps=3 --set sweep.parallel.tp=[1,2] "
          "--set sweep.parallel.dp=[2,1] --set parallel.zero=1 --set hardware.peak_flops=1e11"
          " --set train.recompute=selective --out " +
          out);
  ASSERT_EQ(r.code, 0) << r.output;
  const Result rep = run(exe + " report " + out);
  ASSERT_EQ(rep.code, 0) << rep.output;
  std::ifstream in(out + "/report.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["schema"], "paraxis.report/1");
  ASSERT_EQ(j["points"].size(), 2u);  // tp 1 x dp 2 and tp 2 x dp 1; the others skipped
  for (const auto& p : j["points"]) {
    std::map<std::string, nlohmann::json> terms;
    for (const auto& t : p["terms"]) {
      for (const char* k : {"name", "measured", "predicted", "residual_pct"})
        EXPECT_TRUE(t.contains(k)) << t.dump();
      terms[t["name"]] = t;
    }
    // Calibrated: a positive predicted step time and its residual.
    ASSERT_TRUE(terms.count("step_time"));
    EXPECT_GT(terms["step_time"]["predicted"].get<double>(), 0);
    EXPECT_TRUE(terms["step_time"]["residual_pct"].is_number());
    // The traffic and memory models are exact for these configurations.
    for (const char* exact : {"bytes.tp", "bytes.dp", "memory.params", "memory.grads",
                              "memory.optimizer", "memory.activations", "memory.peak"})
      if (terms.count(exact)) {
        EXPECT_EQ(terms[exact]["measured"].get<double>(), terms[exact]["predicted"].get<double>())
            << p["label"] << " " << exact;
      }
    EXPECT_TRUE(p.contains("rank_measured") && p.contains("rank_predicted"));
    // The Calls table (docs/report.md, "Calls"): rank 0's calls of the measured steps, each row
    // predicted (the point is calibrated); per measured step they carry exactly the bytes the
    // byte terms give for rank 0 (receives are the senders' bytes, not counted again).
    ASSERT_TRUE(p.contains("calls")) << p["label"];
    const auto& calls = p["calls"];
    ASSERT_EQ(calls["steps"], 2) << p["label"];  // 3 steps, 1 warm-up
    std::map<std::string, double> bytes;
    for (const auto& row : calls["rows"]) {
      EXPECT_TRUE(row["predicted_s"].is_number()) << row.dump();
      EXPECT_GE(row["calls"].get<long>(), 1) << row.dump();
      if (row["op"] != "receive") bytes[row["axis"]] += row["bytes"].get<double>();
    }
    EXPECT_FALSE(calls["rows"].empty()) << p["label"];
    for (const auto& [axis, b] : bytes)
      EXPECT_EQ(b / 2, terms["bytes." + axis]["measured"].get<double>()) << p["label"] << axis;
    // The step model's wire time of rank 0's calls is the sum of the recorded calls'
    // predictions (the same per-call statement, the same calls).
    ASSERT_FALSE(calls["per_step"].empty()) << p["label"];
    for (const auto& [axis, v] : calls["per_step"].items()) {
      const double model = v["model_s"], recorded = v["calls_predicted_s"];
      EXPECT_GT(model, 0) << p["label"] << axis;
      EXPECT_NEAR(recorded, model, 1e-9 * model) << p["label"] << axis;
    }
    // MFU and HFU as the run measured them; selective recomputation makes HFU the larger.
    ASSERT_TRUE(p["mfu"].is_number() && p["hfu"].is_number()) << p.dump();
    EXPECT_GT(p["hfu"].get<double>(), p["mfu"].get<double>());
  }
  EXPECT_TRUE(j["accuracy"].contains("max_abs_residual_pct"));
  EXPECT_FALSE(j["calibration"].empty());
  std::ifstream md(out + "/report.md");
  std::stringstream text;
  text << md.rdbuf();
  EXPECT_NE(text.str().find("## Step time, measured and predicted"), std::string::npos);
  EXPECT_NE(text.str().find("Calls (rank 0, 2 measured steps)"), std::string::npos);
  // A folder without results: one message, non-zero exit.
  const Result none = run(exe + " report " + ::testing::TempDir());
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_NE(none.output.find("no summary.json"), std::string::npos) << none.output;
  // The plots, last: without matplotlib (tools/install-deps.sh installs it, so CI has it) the
  // test says so as a skip instead of passing over them.
  if (text.str().find("plots skipped") != std::string::npos)
    GTEST_SKIP() << "the report made no plots (python3 without matplotlib): everything else was "
                    "checked, the plots were not";
  for (const char* f : {"step_breakdown", "measured_vs_predicted", "busbw", "calls"})
    EXPECT_TRUE(std::filesystem::exists(out + "/plots/" + f + ".png")) << f;
}

TEST(cli, calibration_holds_no_more_memory_than_the_step_it_predicts) {
  // The compute calibration runs the step's engine on the rank's shard before the trainer
  // exists; it must fit wherever the step fits: ZeRO-3 parameters and ZeRO-2/3 gradients in
  // one unit's workspace, only this rank's experts (ep = 2). Allocating the whole store or
  // every expert (bf16: 18 bytes per parameter) exceeds the step here.
  const std::string mpiexec = PARAXIS_MPIEXEC;
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = ::testing::TempDir() + "paraxis_calibration_memory";
  std::filesystem::remove_all(out);
  const Result r =
      run("timeout 300 " + mpiexec + " -n 2 " + exe + " run " + std::string(PARAXIS_INPUTS_DIR) +
          "/tiny.yaml --set train.steps=2 --set train.precision=bf16 "
          "--set parallel.dp=2 --set parallel.ep=2 --set model.moe.router_skew=1.5 "
          "--set sweep.parallel.zero=[0,2,3] --set hardware.calibrate=true --out " +
          out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(out + "/summary.json");
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j["points"].size(), 3u);
  for (const auto& p : j["points"]) {
    const auto& c = p["calibration"]["compute"];
    const auto calib = c["peak_bytes"].get<double>();
    double step = 0;
    for (const auto& m : p["memory_per_rank"]) step = std::max(step, m["peak_bytes"].get<double>());
    EXPECT_GT(calib, 0) << p["settings"];
    EXPECT_LE(calib, step) << p["settings"];
    // What comm.overlap can hide, measured on the data-parallel all-reduce: a fraction.
    const auto& dp_ar = p["calibration"]["comm"]["dp"]["all_reduce"];
    ASSERT_TRUE(dp_ar.contains("async_progress")) << dp_ar.dump();
    EXPECT_GE(dp_ar["async_progress"].get<double>(), 0.0);
    EXPECT_LE(dp_ar["async_progress"].get<double>(), 1.0);
    // The slowest rank holding each chunk and the mean over them: never above the slowest.
    ASSERT_EQ(c["forward_s_per_chunk"].size(), c["forward_mean_s_per_chunk"].size());
    EXPECT_GT(c["forward_mean_s_per_chunk"][0].get<double>(), 0);
    for (const char* k : {"forward", "backward"})
      for (std::size_t i = 0; i < c["forward_s_per_chunk"].size(); ++i)
        EXPECT_LE(c[std::string(k) + "_mean_s_per_chunk"][i].get<double>(),
                  c[std::string(k) + "_s_per_chunk"][i].get<double>() * (1 + 1e-12));
  }
  const Result rep = run(exe + " report " + out);
  ASSERT_EQ(rep.code, 0) << rep.output;
  std::ifstream rin(out + "/report.json");
  const auto rj = nlohmann::json::parse(rin);
  for (const auto& p : rj["points"]) {
    bool ep = false;
    for (const auto& t : p["terms"])
      if (t["name"] == "ep") ep = t["predicted"].get<double>() > 0;
    EXPECT_TRUE(ep) << p["label"];
  }
}

TEST(cli, calibration_replays_the_zero_parameter_gathers) {
  // ZeRO-1/2 in fp32 update the parameters in place and all-gather them; the calibration runs
  // the step's engine with those gathers through MPI, as the step does
  // (parallel/local_communicator.hpp): expert and dense units, each rank at its own offsets. It
  // must run, time something, and hold no more than the step.
  const std::string mpiexec = PARAXIS_MPIEXEC;
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = ::testing::TempDir() + "paraxis_calibration_replay";
  std::filesystem::remove_all(out);
  const Result r =
      run("timeout 300 " + mpiexec + " -n 2 " + exe + " run " + std::string(PARAXIS_INPUTS_DIR) +
          "/tiny.yaml --set train.steps=2 --set train.precision=fp32 --set parallel.dp=2 "
          "--set sweep.parallel.zero=[0,1,2] --set hardware.calibrate=true --out " +
          out);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(out + "/summary.json");
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j["points"].size(), 3u);
  for (const auto& p : j["points"]) {
    EXPECT_EQ(p["status"], "ok") << p["settings"];
    const auto& c = p["calibration"]["compute"];
    double step = 0;
    for (const auto& m : p["memory_per_rank"]) step = std::max(step, m["peak_bytes"].get<double>());
    EXPECT_GT(c["optimizer_s"].get<double>(), 0) << p["settings"];
    EXPECT_LE(c["peak_bytes"].get<double>(), step) << p["settings"];
  }
}

TEST(cli, plan_ranks_configurations_and_names_rejections) {
  const std::string json = ::testing::TempDir() + "paraxis_plan.json";
  const Result r =
      run(exe + " plan " + std::string(PARAXIS_INPUTS_DIR) + "/small.yaml " +
          std::string(PARAXIS_INPUTS_DIR) + "/machines/cpu-node.yaml --top 5 --json " + json);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  ASSERT_FALSE(j["ranked"].empty());
  double previous = 0;
  for (const auto& e : j["ranked"]) {
    EXPECT_GE(e["step_time_s"].get<double>(), previous);
    previous = e["step_time_s"];
    EXPECT_LE(e["peak_memory_bytes"].get<double>(), 12e9);
  }
  ASSERT_FALSE(j["rejected"].empty());
  for (const auto& e : j["rejected"]) EXPECT_FALSE(e["reason"].get<std::string>().empty());
  // A machine description without a required key: one message naming it.
  const std::string bad = ::testing::TempDir() + "paraxis_bad_machine.yaml";
  std::ofstream(bad) << "devices_per_node: 8\nnodes: 2\nmemory_gb: 80\n"
                        "intra_node: {latency_us: 3, bandwidth_gbs: 450}\n"
                        "inter_node: {latency_us: 8, bandwidth_gbs: 50}\n";
  const Result rb = run(exe + " plan " + std::string(PARAXIS_INPUTS_DIR) + "/small.yaml " + bad);
  EXPECT_EQ(rb.code, 2);
  EXPECT_NE(rb.output.find("peak_flops"), std::string::npos) << rb.output;
  // The pipeline engine's transfers: overlapped or blocking, nothing else.
  std::ofstream(bad) << "devices_per_node: 8\nnodes: 2\nmemory_gb: 80\npeak_flops: 1e12\n"
                        "intra_node: {latency_us: 3, bandwidth_gbs: 450}\n"
                        "inter_node: {latency_us: 8, bandwidth_gbs: 50}\n"
                        "pipeline_transfers: sometimes\n";
  const Result rp = run(exe + " plan " + std::string(PARAXIS_INPUTS_DIR) + "/small.yaml " + bad);
  EXPECT_EQ(rp.code, 2);
  EXPECT_NE(
      rp.output.find("'pipeline_transfers': expected overlapped or blocking, got 'sometimes'"),
      std::string::npos)
      << rp.output;
  // A blocking engine's pp term is its actions' waits, not a fill and drain: so labelled.
  const std::string blocking = ::testing::TempDir() + "paraxis_blocking_machine.yaml";
  std::ofstream(blocking) << "devices_per_node: 8\nnodes: 2\nmemory_gb: 80\npeak_flops: 1e12\n"
                             "intra_node: {latency_us: 3, bandwidth_gbs: 450}\n"
                             "inter_node: {latency_us: 8, bandwidth_gbs: 50}\n"
                             "pipeline_transfers: blocking\n";
  const std::string layout = " --layout tp=2,pp=2,dp=4,mb=1";
  const Result rw =
      run(exe + " plan " + std::string(PARAXIS_INPUTS_DIR) + "/small.yaml " + blocking + layout);
  EXPECT_EQ(rw.code, 0) << rw.output;
  EXPECT_NE(rw.output.find("pp (transfer waits)"), std::string::npos) << rw.output;
  EXPECT_EQ(rw.output.find("pp (fill, drain)"), std::string::npos) << rw.output;
}

namespace {

// A ranked configuration's name ("tp=2 pp=2 dp=2 ep=1 mb=1 zero=0 interleaved v=2 sp") as a
// --layout string ("tp=2,pp=2,...,schedule=interleaved,v=2,sp").
std::string layout_of(const std::string& configuration) {
  std::istringstream words(configuration);
  std::string out;
  for (std::string w; words >> w;) {
    if (w.find('=') == std::string::npos && w != "sp") w = "schedule=" + w;
    out += (out.empty() ? "" : ",") + w;
  }
  return out;
}

// The number after `label` at the start of a line of `text` (NaN when there is none).
double value_after(const std::string& text, const std::string& label) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find_first_not_of(' ');
    if (at != std::string::npos && line.compare(at, label.size(), label) == 0)
      return std::strtod(line.c_str() + at + label.size(), nullptr);
  }
  return std::nan("");
}

const std::string plan_small = exe + " plan " + std::string(PARAXIS_INPUTS_DIR) + "/small.yaml " +
                               std::string(PARAXIS_INPUTS_DIR) + "/machines/cpu-node.yaml";

}  // namespace

TEST(cli, plan_layout_prints_every_term_and_equals_its_ranked_row) {
  const std::string json = ::testing::TempDir() + "paraxis_plan_layout.json";
  ASSERT_EQ(run(plan_small + " --top 1 --json " + json).code, 0);
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  // The best row, and the best with a pipeline, interleaving, sp or recomputation (more of
  // the grammar), each evaluated alone.
  std::vector<nlohmann::json> rows{j["ranked"].front()};
  for (const auto& e : j["ranked"]) {
    const std::string name = e["configuration"];
    if (name.find("interleaved") != std::string::npos && name.find(" sp") != std::string::npos) {
      rows.push_back(e);
      break;
    }
  }
  for (const auto& e : j["ranked"])
    if (e["configuration"].get<std::string>().find("recompute=") != std::string::npos) {
      rows.push_back(e);
      break;
    }
  ASSERT_GE(rows.size(), 2u);
  for (const auto& e : rows) {
    const std::string layout = layout_of(e["configuration"]);
    const Result r = run(plan_small + " --layout " + layout);
    ASSERT_EQ(r.code, 0) << layout << "\n" << r.output;
    EXPECT_NE(r.output.find("layout: " + e["configuration"].get<std::string>()), std::string::npos)
        << r.output;
    const double step = value_after(r.output, "step time");
    EXPECT_NEAR(step, e["step_time_s"].get<double>(), 1e-5 * e["step_time_s"].get<double>())
        << layout << "\n"
        << r.output;
    const std::pair<const char*, const char*> terms[] = {
        {"compute", "compute"}, {"bubble", "bubble"},       {"tp (exposed)", "tp"},
        {"ep (exposed)", "ep"}, {"pp (fill, drain)", "pp"}, {"dp (exposed)", "dp"}};
    for (const auto& [label, key] : terms)
      EXPECT_NEAR(value_after(r.output, label), e["terms"][key].get<double>(), 1e-5 * step)
          << label << "\n"
          << r.output;
    EXPECT_NEAR(value_after(r.output, "peak"), e["peak_memory_bytes"].get<double>() / 1e9, 1e-3);
    for (const char* part : {"parameters", "gradients", "optimizer state", "activations (peak)",
                             "tokens/s", "MFU", "HFU", "tp ", "dp ", "ranks"})
      EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  }
  // dp left out: the machine's 8 devices / (tp * pp).
  const Result d = run(plan_small + " --layout tp=2,pp=2,mb=1");
  EXPECT_EQ(d.code, 0) << d.output;
  EXPECT_NE(d.output.find("layout: tp=2 pp=2 dp=2 "), std::string::npos) << d.output;
  // A product other than the machine's devices is said.
  const Result p = run(plan_small + " --layout tp=1,pp=1,dp=2,mb=1");
  EXPECT_NE(p.output.find("but the machine has 8 devices"), std::string::npos) << p.output;
}

TEST(cli, plan_layout_that_does_not_fit_says_why) {
  // small.yaml has 4 layers: 2 stages x 3 chunks breaks the chunk rule, which is named.
  const Result r = run(plan_small + " --layout tp=1,pp=2,schedule=interleaved,v=3,mb=1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("pp * virtual_stages = 6 exceeds model.layers = 4"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("parallel.virtual_stages"), std::string::npos) << r.output;
  // Over the device's memory: the figure and the device's, with the breakdown.
  const std::string small_machine = ::testing::TempDir() + "paraxis_small_machine.yaml";
  std::ofstream(small_machine) << "devices_per_node: 2\nnodes: 4\npeak_flops: 1.0e11\n"
                                  "memory_gb: 0.05\n"
                                  "intra_node: {latency_us: 20, bandwidth_gbs: 3}\n"
                                  "inter_node: {latency_us: 50, bandwidth_gbs: 1.2}\n";
  const Result m = run(exe + " plan " + std::string(PARAXIS_INPUTS_DIR) + "/small.yaml " +
                       small_machine + " --layout tp=2,pp=1,mb=1");
  EXPECT_EQ(m.code, 1) << m.output;
  EXPECT_NE(m.output.find("does not fit: memory"), std::string::npos) << m.output;
  EXPECT_NE(m.output.find("device:"), std::string::npos) << m.output;
  EXPECT_NE(m.output.find("activations (peak)"), std::string::npos) << m.output;
}

TEST(cli, plan_refuses_malformed_layouts_naming_the_field) {
  const struct {
    const char* layout;
    const char* named;
  } cases[] = {{"tp=2,foo=3", "'foo': unknown field"},
               {"tp=two", "'tp=two'"},
               {"tp=2,pp=1,tp=4", "'tp': given twice"},
               {"mb=1,micro_batch=2", "'micro_batch': given twice (also as 'mb')"},
               {"zero=4", "'zero=4'"},
               {"schedule=zigzag", "'schedule=zigzag'"},
               {"recompute=selective:2", "'recompute=selective:2'"},
               {"sp=maybe", "'sp=maybe'"},
               {"tp", "'tp': expected tp=VALUE"},
               {"tp=2,,pp=2", "has no name"},
               {"tp=2,", "an empty field"}};
  for (const auto& c : cases) {
    const Result r = run(plan_small + " --layout '" + c.layout + "'");
    EXPECT_EQ(r.code, 2) << c.layout << "\n" << r.output;
    EXPECT_NE(r.output.find(c.named), std::string::npos) << c.layout << "\n" << r.output;
    EXPECT_EQ(r.output.find("plan: plan:"), std::string::npos) << r.output;
  }
}

TEST(cli, plan_refuses_parallel_overrides_without_layout) {
  for (const char* key : {"parallel.tp=2", "parallel.schedule=gpipe", "train.micro_batch=2"}) {
    const Result r = run(plan_small + " --set " + key);
    EXPECT_EQ(r.code, 2) << key << "\n" << r.output;
    EXPECT_NE(r.output.find("--layout"), std::string::npos) << r.output;
  }
  // A model key still applies (4 layers -> 8: pp=8 no longer breaks the chunk rule).
  const Result ok = run(plan_small + " --set model.layers=8 --layout tp=1,pp=8,mb=1");
  EXPECT_EQ(ok.code, 0) << ok.output;
  // With --layout a parallel override is the deck's value the layout falls back on.
  const Result fallback = run(plan_small + " --set parallel.tp=2 --layout pp=1,mb=1");
  EXPECT_EQ(fallback.code, 0) << fallback.output;
  EXPECT_NE(fallback.output.find("layout: tp=2 pp=1 dp=4"), std::string::npos) << fallback.output;
}

TEST(cli, plan_help_shows_its_own_options_first) {
  const Result r = run(exe + " plan --help");
  EXPECT_EQ(r.code, 0) << r.output;
  const auto layout = r.output.find("--layout");
  ASSERT_NE(layout, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Kokkos command line arguments"), std::string::npos) << r.output;
  EXPECT_LT(r.output.find("Usage:"), 200u) << r.output;
  // Kokkos' own page is still there for who asks.
  const Result k = run(exe + " plan --kokkos-help");
  EXPECT_NE(k.output.find("--kokkos-"), std::string::npos) << k.output;
}

TEST(cli, plan_table_columns_stay_aligned_for_long_names) {
  const Result r = run(plan_small + " --top 200");
  ASSERT_EQ(r.code, 0) << r.output;
  // Every row's "step s" figure ends in the same column as the header's.
  std::istringstream lines(r.output);
  std::size_t header_end = std::string::npos, rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("rank  configuration", 0) == 0) {
      header_end = line.find("step s") + 6;
      continue;
    }
    if (header_end == std::string::npos || line.empty()) {
      if (header_end != std::string::npos && rows > 0) break;
      continue;
    }
    ++rows;
    ASSERT_GT(line.size(), header_end) << line;
    EXPECT_NE(line[header_end - 1], ' ') << line;
    EXPECT_EQ(line[header_end], ' ') << line;
  }
  EXPECT_GT(rows, 50u);
  // Rejections: every reason in full, with one example each.
  EXPECT_NE(r.output.find("e.g."), std::string::npos);
}

// Without checkpoint_s, a storage bandwidth models the checkpoint: 12 bytes a parameter (fp32
// master weights and both AdamW moments) over nodes x the bandwidth; Young's interval follows.
TEST(cli, plan_models_the_checkpoint_from_the_storage_bandwidth) {
  const std::string machine = ::testing::TempDir() + "paraxis_storage_machine.yaml";
  {
    std::ifstream in(std::string(PARAXIS_INPUTS_DIR) + "/machines/cpu-node.yaml");
    std::ofstream out(machine);
    out << in.rdbuf() << "\nstorage_gbs_per_node: 0.5\nmtbf_hours_per_device: 1000\n";
  }
  const Result r =
      run(exe + " plan " + std::string(PARAXIS_INPUTS_DIR) + "/small.yaml " + machine + " --top 1");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto deck = paraxis::driver::load_deck(PARAXIS_INPUTS_DIR "/small.yaml", {}, 0);
  const auto& m = deck.points.at(0).config.model;
  double params = 0;
  for (const auto& s : paraxis::model::parameter_specs(m, paraxis::model::ShardLayout::whole(m)))
    params += static_cast<double>(s.logical_size());
  const double c = 12 * params / (4 * 0.5e9);  // 4 nodes
  const double mtbf = 1000.0 * 3600 / 8;       // 8 devices
  char want[96];
  std::snprintf(want, sizeof want, "checkpoint every %.0f s (Young)", std::sqrt(2 * c * mtbf));
  EXPECT_NE(r.output.find(want), std::string::npos) << want << "\n" << r.output;
  std::snprintf(want, sizeof want, "modelled: %.3g GB of state at 0.5 GB/s per node",
                12 * params / 1e9);
  EXPECT_NE(r.output.find(want), std::string::npos) << want << "\n" << r.output;
  EXPECT_NE(r.output.find("% of the machine's time lost"), std::string::npos) << r.output;
}
