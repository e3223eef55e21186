// The paraxis command as a user runs it: bad decks exit non-zero with a message naming the
// key (on every rank, no hang); a run of the tiny deck writes a summary that follows the schema.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

struct Result {
  int code;
  std::string output;
};

Result run(const std::string& args) {
  const std::string log = ::testing::TempDir() + "paraxis_cli.log";
  const std::string cmd = args + " > " + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

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
  EXPECT_EQ(j["schema"], "paraxis.summary/1");
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
