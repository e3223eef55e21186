// Results that cannot be silently lost or wrong (docs/results.md, "Guarantees"): each TEST
// suite here is one class of failure, registered as its own CTest test (label reliability):
// checked writes and the output-folder policy, divergence, one deck for every rank, and the
// end-to-end watchdog. Every case runs the real `paraxis` binary as a user would.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using paraxis_test::Result;
using paraxis_test::run;
using paraxis_test::slurp;

const std::string exe = PARAXIS_EXE;
const std::string mpiexec = PARAXIS_MPIEXEC;
const std::string tiny = std::string(PARAXIS_INPUTS_DIR) + "/tiny.yaml";
// A run that takes a second or two: few steps, no calibration.
const std::string quick = " --set train.steps=2 --set hardware.calibrate=false";

std::string fresh_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + name;
  fs::remove_all(d);
  return d;
}

nlohmann::json summary_of(const std::string& dir) {
  return nlohmann::json::parse(slurp(dir + "/summary.json"));
}

bool has_temporary_files(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

}  // namespace

// A full disk, emulated with the file-size limit (RLIMIT_FSIZE: writes past it fail with
// EFBIG, which root cannot bypass, unlike permissions; no mount needed): the summary that no longer
// fits is an error naming the file, the run exits 4, and the previous complete summary stays.
TEST(checked_writes, a_failed_write_is_an_error_and_keeps_the_previous_file) {
  const std::string probe = fresh_dir("paraxis_write_probe");
  Result r = run(exe + " run " + tiny + quick +
                 " --set output.trace=false --set sweep.train.seed=[1,2] --out " + probe);
  ASSERT_EQ(r.code, 0) << r.output;
  // The summary after two points is larger than after one: a limit between the two sizes
  // lets the first point's files through and stops the second's summary.
  const auto two = fs::file_size(probe + "/summary.json");
  const std::string one_dir = fresh_dir("paraxis_write_probe1");
  r = run(exe + " run " + tiny + quick + " --set output.trace=false --set train.seed=1 --out " +
          one_dir);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto one = fs::file_size(one_dir + "/summary.json");
  ASSERT_LT(one + 2048, two);
  const auto limit_kb = (one + two) / 2 / 1024;
  const std::string out = fresh_dir("paraxis_full_disk");
  // UCX_TLS: MPICH's UCX transport maps shared-memory files larger than the limit; TCP loopback
  // needs none (other MPI libraries ignore the variable).
  r = run("bash -c \"trap '' XFSZ; ulimit -f " + std::to_string(limit_kb) +
          "; UCX_TLS=self,tcp exec " + exe + " run " + tiny + quick +
          " --set output.trace=false --set sweep.train.seed=[1,2] --out " + out + "\"");
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_NE(r.output.find(out + "/summary.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("File too large"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("results in"), std::string::npos) << r.output;
  const auto j = summary_of(out);  // still valid JSON: the first point's summary
  ASSERT_EQ(j["points"].size(), 1u);
  EXPECT_EQ(j["points"][0]["status"], "ok");
  EXPECT_FALSE(has_temporary_files(out));
}

// The output folder is probed before the first point trains, not after its compute time.
TEST(checked_writes, an_unusable_output_folder_is_refused_before_training) {
  const std::string file = fresh_dir("paraxis_not_a_folder");
  { std::ofstream(file) << "a file\n"; }
  const Result r = run(exe + " run " + tiny + " --set train.steps=50 --out " + file + "/sub");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(file + "/sub"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step"), std::string::npos) << "trained before checking: " << r.output;
}

// Earlier results are never silently replaced or mixed: refused, naming the folder, unless
// --force, which removes them first.
TEST(checked_writes, reusing_an_output_folder_needs_force_and_never_mixes) {
  const std::string out = fresh_dir("paraxis_reuse");
  Result r = run(exe + " run " + tiny + quick + " --set sweep.train.seed=[1,2,3] --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(fs::exists(out + "/trace-2.json"));
  const std::string before = slurp(out + "/summary.json");
  r = run(exe + " run " + tiny + quick + " --out " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(out), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--force"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(out + "/summary.json"), before);
  { std::ofstream(out + "/notes.txt") << "the user's own file\n"; }
  r = run(exe + " run " + tiny + quick + " --out " + out + " --force");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(summary_of(out)["points"].size(), 1u);
  EXPECT_TRUE(fs::exists(out + "/trace-0.json"));
  EXPECT_FALSE(fs::exists(out + "/trace-2.json")) << "an old trace was left beside new results";
  EXPECT_TRUE(fs::exists(out + "/notes.txt")) << "--force removed a file paraxis did not write";
}

// A rank that dies while the results are being saved (between summary.json's temporary file
// and its rename) leaves the previous summary complete and valid.
TEST(checked_writes, a_rank_dying_during_the_save_leaves_the_previous_summary) {
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = fresh_dir("paraxis_die_in_save");
  const Result r = run("timeout 120 " + mpiexec + " -n 2 " + exe + " run " + tiny + quick +
                       " --set parallel.dp=2 --set output.trace=false --set fault.dead_rank.at=save"
                       " --set sweep.fault.dead_rank.rank=[-1,0] --out " +
                       out);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.code, 124) << "timed out: a rank hung";
  EXPECT_NE(r.output.find("rank 0 dies while the results are saved"), std::string::npos)
      << r.output;
  const auto j = summary_of(out);
  ASSERT_EQ(j["points"].size(), 1u);
  EXPECT_EQ(j["points"][0]["status"], "ok");
}

// NaN or Inf in the loss or the gradient norm ends the point as diverged (the step and the
// quantity named), the sweep goes on, and the run's exit status says not every point was ok.
TEST(divergence, a_non_finite_loss_is_diverged_not_ok) {
  const std::string out = fresh_dir("paraxis_diverged");
  // adam_eps = 0 (inside the documented range) divides 0 by 0 where a moment is zero.
  const Result r = run(exe + " run " + tiny + quick +
                       " --set train.steps=3 --set sweep.train.adam_eps=[0,1e-8] --out " + out);
  EXPECT_EQ(r.code, 1) << r.output;
  const auto j = summary_of(out);
  ASSERT_EQ(j["points"].size(), 2u);
  const std::string status = j["points"][0]["status"];
  EXPECT_EQ(status.rfind("diverged: ", 0), 0u) << status;
  EXPECT_NE(status.find(" at step "), std::string::npos) << status;
  EXPECT_TRUE(status.find("loss is") != std::string::npos ||
              status.find("gradient norm is") != std::string::npos)
      << status;
  EXPECT_EQ(j["points"][1]["status"], "ok") << "the sweep did not go on";
  EXPECT_NE(slurp(out + "/points.csv").find("diverged"), std::string::npos);
}

// Ranks started with different arguments (an MPMD launch mistake) are an error naming the
// rank, on every rank, at once: before, two ranks with different train.steps hung forever.
TEST(same_deck, ranks_with_different_command_lines_are_refused) {
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = fresh_dir("paraxis_mpmd");
  const Result r = run("timeout 60 " + mpiexec + " -n 1 " + exe + " run " + tiny + quick +
                       " --set parallel.dp=2 --out " + out + " : -n 1 " + exe + " run " + tiny +
                       quick + " --set parallel.dp=2 --set train.steps=3 --out " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("rank 1 was started with arguments different from rank 0"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("train.steps=3"), std::string::npos) << r.output;
}

// The deck is read on rank 0 and broadcast: a deck that only rank 0 can see (a node-local
// path; here a relative path and a different working folder per rank) still runs.
TEST(same_deck, a_deck_only_rank_0_can_read_is_broadcast) {
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string here = fresh_dir("paraxis_deck_rank0"), there = fresh_dir("paraxis_elsewhere");
  fs::create_directories(here);
  fs::create_directories(there);
  fs::copy_file(tiny, here + "/deck.yaml");
  const std::string out = fresh_dir("paraxis_deck_rank0_out");
  const std::string args =
      " run deck.yaml" + quick + " --set parallel.dp=2 --set output.trace=false --out " + out;
  const Result r = run("timeout 120 " + mpiexec + " -n 1 -wdir " + here + " " + exe + args +
                       " : -n 1 -wdir " + there + " " + exe + args);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(summary_of(out)["points"][0]["status"], "ok");
}

// A rank that stops responding (fault.hang) ends the job within comm.timeout_s plus a small
// margin, with the stalled rank named, and the points finished before it kept.
TEST(watchdog_run, a_hung_rank_ends_the_job_naming_it) {
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = fresh_dir("paraxis_hang");
  const double timeout_s = 3;
  const Result r = run("timeout 120 " + mpiexec + " -n 2 " + exe + " run " + tiny + quick +
                       " --set train.steps=3 --set parallel.dp=2 --set output.trace=false"
                       " --set comm.timeout_s=3 --set fault.hang.step=1"
                       " --set sweep.fault.hang.rank=[-1,1] --out " +
                       out);
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_NE(r.output.find("rank 1 stops responding before step 2"), std::string::npos) << r.output;
  // The watchdog on rank 0 names the stalled member of the group it waited in.
  EXPECT_NE(r.output.find("(world rank 1): not answering"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("comm.timeout_s = 3"), std::string::npos) << r.output;
  // Two points' start-up, one hang: well under the 120 s guard (generous: shared machine).
  EXPECT_LT(r.seconds, 10 * timeout_s + 30) << r.output;
  const auto j = summary_of(out);
  ASSERT_EQ(j["points"].size(), 1u);
  EXPECT_EQ(j["points"][0]["status"], "ok");
}
