// comm.mpi_gpu_aware through the paraxis command (docs/parallel.md, "Device buffers and MPI"):
// a value that is not auto, yes or no is refused by `paraxis check` and `paraxis run` with one
// message naming the key (exit 2); a 2-rank run of inputs/tiny.yaml forced to stage its MPI
// buffers (the host build's staging path) records mpi_staging "on" in its provenance and
// reproduces the unstaged run's losses bitwise, under tensor + sequence parallelism and under
// data + expert parallelism with ZeRO-1 in bf16.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_harness.hpp"

using paraxis_test::Result;
using paraxis_test::run;

namespace {

const std::string exe = PARAXIS_EXE;
const std::string tiny = std::string(PARAXIS_INPUTS_DIR) + "/tiny.yaml";

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

nlohmann::json summary(const std::string& dir) {
  std::ifstream in(dir + "/summary.json");
  EXPECT_TRUE(in.good()) << dir;
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json::object();
}

}  // namespace

TEST(mpi_staging_deck, a_bad_value_is_one_error_naming_the_key) {
  for (const char* bad : {"maybe", "true", "1"}) {
    const std::string set = std::string(" --set comm.mpi_gpu_aware=") + bad;
    const Result c = run(exe + " check " + tiny + set);
    EXPECT_EQ(c.code, 2) << c.output;
    EXPECT_EQ(count(c.output, "comm.mpi_gpu_aware"), 1u) << c.output;
    EXPECT_NE(c.output.find("expected one of auto yes no, got '" + std::string(bad) + "'"),
              std::string::npos)
        << c.output;
    const Result r =
        run(exe + " run " + tiny + set + " --out " + ::testing::TempDir() + "staging_bad");
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("comm.mpi_gpu_aware"), std::string::npos) << r.output;
  }
  for (const char* good : {"auto", "yes", "no"}) {
    const Result c = run(exe + " check " + tiny + " --set comm.mpi_gpu_aware=" + good);
    EXPECT_EQ(c.code, 0) << good << ": " << c.output;
  }
}

TEST(mpi_staging_run, a_staged_run_reproduces_the_unstaged_losses_bitwise) {
  const std::string mpiexec = PARAXIS_MPIEXEC;
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const char* layouts[] = {
      "--set parallel.tp=2 --set parallel.sequence_parallel=true",
      "--set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=1 --set train.precision=bf16"};
  int i = 0;
  for (const char* layout : layouts) {
    nlohmann::json runs[2];
    for (int staged = 0; staged < 2; ++staged) {
      const std::string out =
          ::testing::TempDir() + "staging_run_" + std::to_string(i) + (staged ? "_on" : "_off");
      std::filesystem::remove_all(out);
      const Result r =
          run("timeout 300 " + mpiexec + " -n 2 " + exe + " run " + tiny + " --set train.steps=4 " +
              layout + (staged ? " --set comm.mpi_gpu_aware=no" : "") + " --out " + out);
      ASSERT_EQ(r.code, 0) << layout << "\n" << r.output;
      runs[staged] = summary(out);
    }
    ++i;
    const auto& off = runs[0];
    const auto& on = runs[1];
    // A host-only build has no device memory to ask about; auto does not stage there.
    EXPECT_EQ(on["provenance"]["mpi_gpu_aware"], "n/a");
    EXPECT_EQ(off["provenance"]["mpi_staging"], "off") << layout;
    EXPECT_EQ(on["provenance"]["mpi_staging"], "on") << layout;
    EXPECT_EQ(on["points"][0]["config"]["comm"]["mpi_gpu_aware"], "no");
    const auto& a = off["points"][0]["steps"];
    const auto& b = on["points"][0]["steps"];
    ASSERT_EQ(a.size(), 4u) << layout;
    ASSERT_EQ(b.size(), a.size()) << layout;
    for (std::size_t s = 0; s < a.size(); ++s)
      EXPECT_EQ(a[s]["loss"].get<double>(), b[s]["loss"].get<double>()) << layout << ", step " << s;
  }
}
