// The BLAS and CPU in a run's provenance (issue 20): the generic-kernel warning read back from
// summary.json's keys (blas_warning_of), summary validation of the new keys (a wrong type is an
// error naming its JSON path), and, on a machine with AVX2/AVX-512 and OpenBLAS, one real
// `paraxis run` forced onto OpenBLAS's generic Prescott kernels: the run warns once and the
// report states the warning with the fix.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "analysis/summary_reader.hpp"
#include "driver/provenance.hpp"
#include "paraxis/kernels/blas_info.hpp"

using nlohmann::json;

namespace {

json summary_with(const json& provenance) {
  return json{
      {"schema", "paraxis.summary/2"}, {"provenance", provenance}, {"points", json::array()}};
}

std::string validation_error(const json& summary) {
  try {
    paraxis::driver::validate_summary(summary, "summary.json");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(BlasProvenance, WarningReadBackFromTheRecordedKeys) {
  const json avx512 = {"avx", "avx2", "avx512f", "avx512bw", "avx512dq", "avx512vl"};
  const auto w =
      paraxis::driver::blas_warning_of({{"blas_core", "Prescott"}, {"cpu_vector_flags", avx512}});
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << *w;
  // AVX2 kernels on that CPU (OpenBLAS 0.3.21 on Zen 4 and 5).
  const auto h =
      paraxis::driver::blas_warning_of({{"blas_core", "Haswell"}, {"cpu_vector_flags", avx512}});
  ASSERT_TRUE(h.has_value());
  EXPECT_NE(h->find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << *h;
  // A summary recorded before avx512bw/dq/vl were: read as AVX2, still warned about generic
  // kernels, with the fix that surely runs.
  const auto old = paraxis::driver::blas_warning_of(
      {{"blas_core", "Prescott"}, {"cpu_vector_flags", {"avx", "avx2", "avx512f"}}});
  ASSERT_TRUE(old.has_value());
  EXPECT_NE(old->find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << *old;
  EXPECT_FALSE(paraxis::driver::blas_warning_of(
      {{"blas_core", "Haswell"}, {"cpu_vector_flags", {"avx", "avx2"}}}));
  EXPECT_FALSE(paraxis::driver::blas_warning_of(
      {{"blas_core", "Prescott"}, {"cpu_vector_flags", json::array()}}));
  // A summary from before these keys existed claims nothing.
  EXPECT_FALSE(paraxis::driver::blas_warning_of({{"blas_core", "Prescott"}}));
  EXPECT_FALSE(paraxis::driver::blas_warning_of(json::object()));
}

TEST(BlasProvenance, SummaryValidationChecksTheNewKeys) {
  const json good{{"blas_library", "OpenBLAS 0.3.21"},
                  {"blas_core", "SkylakeX"},
                  {"cpu_model", "AMD EPYC (family 25, model 17)"},
                  {"cpu_vector_flags", {"avx", "avx2"}}};
  EXPECT_EQ(validation_error(summary_with(good)), "");
  json bad_core = good;
  bad_core["blas_core"] = 5;
  EXPECT_NE(validation_error(summary_with(bad_core)).find("provenance.blas_core"),
            std::string::npos);
  json bad_flag = good;
  bad_flag["cpu_vector_flags"] = {"avx", 2};
  EXPECT_NE(validation_error(summary_with(bad_flag)).find("provenance.cpu_vector_flags[1]"),
            std::string::npos)
      << validation_error(summary_with(bad_flag));
  json not_array = good;
  not_array["cpu_vector_flags"] = "avx2";
  EXPECT_NE(validation_error(summary_with(not_array)).find("provenance.cpu_vector_flags"),
            std::string::npos);
}

TEST(BlasProvenance, RunOnGenericKernelsWarnsOnceAndTheReportSaysSo) {
  const auto cpu = paraxis::kernels::detect_cpu();
  const auto has = [&](const char* f) {
    return std::find(cpu.flags.begin(), cpu.flags.end(), f) != cpu.flags.end();
  };
  if (!has("avx2") && !has("avx512f")) GTEST_SKIP() << "no AVX2/AVX-512 on this CPU";
  const bool avx512 = has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl");
  const std::string fix = avx512 ? "OPENBLAS_CORETYPE=SkylakeX" : "OPENBLAS_CORETYPE=Haswell";
  const std::string out = ::testing::TempDir() + "blas_generic_run";
  const std::string log = ::testing::TempDir() + "blas_generic_run.log";
  std::filesystem::remove_all(out);
  const std::string cmd =
      std::string("OPENBLAS_CORETYPE=Prescott PARAXIS_PYTHON=/nonexistent ") + PARAXIS_EXE +
      " run " PARAXIS_INPUTS_DIR "/tiny.yaml --set train.steps=2 --out '" + out + "' > '" + log +
      "' 2>&1 && " + PARAXIS_EXE + " report '" + out + "' >> '" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_EQ(rc, 0) << text.str();
  std::ifstream summary_file(out + "/summary.json");
  const json prov = json::parse(summary_file).at("provenance");
  // The BLAS is the one the paraxis binary loads (this test binary may load none).
  if (prov.at("blas_library").get<std::string>().rfind("OpenBLAS", 0) != 0)
    GTEST_SKIP() << "paraxis's BLAS here is not OpenBLAS: " << prov.at("blas_library");
  EXPECT_EQ(count(text.str(), "paraxis: warning: the BLAS runs its generic \"Prescott\""), 1u)
      << text.str();
  EXPECT_EQ(prov.at("blas_core"), "Prescott");
  EXPECT_EQ(prov.at("cpu_model"), paraxis::kernels::cpu_model_string(cpu));
  std::ifstream report_file(out + "/report.json");
  const json warnings = json::parse(report_file).at("warnings");
  ASSERT_EQ(warnings.size(), 1u) << warnings.dump();
  EXPECT_NE(warnings[0].get<std::string>().find(fix), std::string::npos) << warnings.dump();
  std::ifstream md_file(out + "/report.md");
  std::stringstream md;
  md << md_file.rdbuf();
  EXPECT_NE(md.str().find("**Warning:** `" + out + "`: the BLAS runs its generic"),
            std::string::npos);
}

// The BLAS's threads (issue 20): left alone OpenBLAS starts one worker per core in every rank,
// so ranks sharing a node time-share its cores in every large GEMM. `paraxis run` gives the
// BLAS the host execution space's threads unless the user chose, and records both.
TEST(BlasProvenance, RunSetsTheBlasThreadsUnlessTheUserDid) {
  const auto run = [](const std::string& env, const std::string& tag) {
    const std::string out = ::testing::TempDir() + "blas_threads_" + tag;
    const std::string log = out + ".log";
    std::filesystem::remove_all(out);
    const std::string cmd =
        "env -u OPENBLAS_NUM_THREADS -u GOTO_NUM_THREADS -u MKL_NUM_THREADS "
        "-u BLIS_NUM_THREADS " +
        env + " " + PARAXIS_EXE +
        " run " PARAXIS_INPUTS_DIR "/tiny.yaml --set train.steps=2 --out '" + out + "' > '" + log +
        "' 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream summary_file(out + "/summary.json");
    return json::parse(summary_file).at("provenance");
  };
  const json mine = run("", "default");
  if (mine.at("blas_library").get<std::string>().rfind("OpenBLAS", 0) != 0)
    GTEST_SKIP() << "paraxis's BLAS here is not OpenBLAS: " << mine.at("blas_library");
  // As many as the host space has: OMP_NUM_THREADS on OpenMP, 1 on Serial.
  const int host = mine.at("execution_space") == "Serial" ? 1 : mine.at("threads").get<int>();
  EXPECT_EQ(mine.at("blas_threads"), host) << mine.dump();
  EXPECT_EQ(mine.at("blas_threads_from"), "paraxis: the host execution space's threads");
  // A user's choice is kept (2: OpenBLAS caps it at the cores it sees, at least 2 on CI).
  const json user = run("OPENBLAS_NUM_THREADS=2", "user");
  EXPECT_EQ(user.at("blas_threads_from"), "environment: OPENBLAS_NUM_THREADS=2");
  if (std::thread::hardware_concurrency() >= 2) {
    EXPECT_EQ(user.at("blas_threads"), 2);
  }
  // The summary validator knows the keys.
  json bad = mine;
  bad["blas_threads"] = "two";
  EXPECT_NE(validation_error(summary_with(bad)).find("provenance.blas_threads"), std::string::npos)
      << validation_error(summary_with(bad));
}
