// Issue 29: the command line's own errors are bad input, and messages name the right thing.
// Each TEST suite is one CTest test (label reliability; ctest -L reliability lists them); every
// case failed on the code before the fix (the comment above each says how). Most run the real
// `paraxis` binary as a user would; the hang wording is checked on hand-made failure records.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "analysis/diagnosis.hpp"
#include "cli_harness.hpp"
#include "deck/deck.hpp"
#include "parallel/watchdog.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using paraxis_test::Result;
using paraxis_test::run;
using paraxis_test::slurp;

const std::string exe = PARAXIS_EXE;
const std::string mpiexec = PARAXIS_MPIEXEC;
const std::string inputs = PARAXIS_INPUTS_DIR;
const std::string tiny = inputs + "/tiny.yaml";
const std::string quick = " --set train.steps=2 --set hardware.calibrate=false";

std::string fresh(const std::string& name) {
  const std::string d = ::testing::TempDir() + name;
  fs::remove_all(d);
  return d;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = fresh(name);
  std::ofstream(path) << text;
  return path;
}

// The non-empty lines of a command's output.
std::vector<std::string> lines_of(const std::string& output) {
  std::vector<std::string> out;
  std::size_t b = 0;
  while (b < output.size()) {
    std::size_t e = output.find('\n', b);
    if (e == std::string::npos) e = output.size();
    if (e > b) out.push_back(output.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

// Before: CLI11's own exit codes (104-114: "extras", "argument mismatch", "validation", ...),
// which slurm/restart.sbatch retried; `paraxis bogus` said "A subcommand is required" and
// `--ranks 0` printed a 309-digit range.
TEST(cli_errors, every_parse_error_exits_2_with_one_line_naming_the_option) {
  const std::string machine = inputs + "/machines/cpu-node.yaml";
  const struct {
    std::string args, names;
  } cases[] = {
      {"run " + tiny + " --bogus", "--bogus"},
      {"run " + tiny + " --out", "--out"},
      {"run", "deck is required"},
      {"check " + tiny + " --ranks 0", "--ranks"},
      {"check " + tiny + " --ranks x", "--ranks"},
      {"plan " + tiny + " " + machine + " --top 0", "--top"},
      {"bogus", "unknown command 'bogus'"},
      {"", "a command is required"},
  };
  for (const auto& c : cases) {
    const Result r = run(exe + " " + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    const auto lines = lines_of(r.output);
    ASSERT_EQ(lines.size(), 1u) << c.args << "\n" << r.output;
    EXPECT_TRUE(has(lines[0], c.names)) << c.args << "\n" << r.output;
    EXPECT_EQ(lines[0].rfind("paraxis: error: ", 0), 0u) << r.output;
    EXPECT_LT(lines[0].size(), 200u) << r.output;
  }
  // --help is not an error.
  EXPECT_EQ(run(exe + " run --help").code, 0);
}

// Before: `--resume ""` (an unset variable in a batch script) was ignored and the run trained
// from step 0; `--out ''` made a new timestamped folder.
TEST(cli_errors, empty_path_options_are_errors) {
  const std::string machine = inputs + "/machines/cpu-node.yaml";
  const std::string out = fresh("paraxis_empty_paths");
  const struct {
    std::string args, option;
  } cases[] = {
      {"run " + tiny + quick + " --out " + out + " --resume ''", "--resume"},
      {"run " + tiny + quick + " --out " + out + " --resume ' '", "--resume"},
      {"run " + tiny + quick + " --out ''", "--out"},
      {"run " + tiny + quick + " --out '  '", "--out"},
      {"run ''" + quick, "deck"},
      {"check ' '", "deck"},
      {"plan " + tiny + " " + machine + " --json ''", "--json"},
      {"report ''", "dirs"},
  };
  for (const auto& c : cases) {
    const Result r = run("cd " + ::testing::TempDir() + " && " + exe + " " + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, c.option + ": ")) << c.args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "empty path")) << c.args << "\n" << r.output;
    EXPECT_FALSE(has(r.output, "step")) << "trained: " << c.args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(out)) << "the run started";
  // Blank folder names in the deck too ("" keeps its documented meaning: the default).
  const Result blank = run(exe + " check " + tiny + " --set 'checkpoint.dir=\"  \"'");
  EXPECT_EQ(blank.code, 2) << blank.output;
  EXPECT_TRUE(has(blank.output, "checkpoint.dir")) << blank.output;
}

// Before: a directory trained the default deck (check said ok), a link to /dev/zero ended in
// std::bad_alloc (exit 1), a FIFO blocked for ever; a second YAML document was ignored.
TEST(deck_file, a_deck_must_be_one_document_in_a_regular_file_of_bounded_size) {
  const std::string dir = fresh("paraxis_deck_dir");
  fs::create_directories(dir);
  const std::string zero = fresh("paraxis_deck_zero");
  fs::create_symlink("/dev/zero", zero);
  const std::string fifo = fresh("paraxis_deck_fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = fresh("paraxis_deck_big");
  { std::ofstream(big) << "model: {layers: 2}\n"; }
  fs::resize_file(big, (std::size_t(16) << 20) + 1);  // sparse: no 16 MiB written
  const std::string two =
      write_file("paraxis_deck_two.yaml", "model: {layers: 2}\n---\nbogus_section: {x: 1}\n");
  const struct {
    std::string path, why;
  } cases[] = {{dir, "is a directory"},
               {zero, "is a character device"},
               {fifo, "FIFO"},
               {big, "16 MiB"},
               {two, "one YAML document"}};
  for (const auto& c : cases)
    for (const std::string& cmd :
         {" check " + c.path, " run " + c.path + quick + " --out " + fresh("paraxis_deck_out")}) {
      // timeout: a FIFO used to block the read for ever.
      const Result r = run("timeout 60 " + exe + cmd);
      EXPECT_EQ(r.code, 2) << cmd << "\n" << r.output;
      EXPECT_TRUE(has(r.output, c.path)) << r.output;
      EXPECT_TRUE(has(r.output, c.why)) << r.output;
    }
  EXPECT_TRUE(has(run(exe + " check " + two).output, two + ":2")) << "the second document's line";
  // The same rules for a machine description.
  const Result m = run(exe + " plan " + tiny + " " + dir);
  EXPECT_EQ(m.code, 2) << m.output;
  EXPECT_TRUE(has(m.output, "is a directory")) << m.output;
}

// Before: yaml-cpp's "bad file" for a deck nested too deep, and "got a map" for a key given no
// value.
TEST(deck_file, parse_errors_say_what_went_wrong) {
  const std::string deep = write_file(
      "paraxis_deck_deep.yaml", "model: " + std::string(3000, '[') + std::string(3000, ']') + "\n");
  Result r = run(exe + " check " + deep);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "levels deep")) << r.output;
  EXPECT_FALSE(has(r.output, "bad file")) << r.output;
  const std::string null_value = write_file("paraxis_deck_null.yaml", "model: {layers: }\n");
  r = run(exe + " check " + null_value);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "model.layers")) << r.output;
  EXPECT_TRUE(has(r.output, "got nothing (a null value)")) << r.output;
  EXPECT_FALSE(has(r.output, "map")) << r.output;
  // An out-of-range factor is one error, not also "factor 1 slows nothing".
  const auto d = paraxis::driver::load_deck(
      tiny, {"parallel.dp=2", "fault.slow_rank.rank=0", "fault.slow_rank.factor=0.5"}, 2);
  ASSERT_EQ(d.errors.size(), 1u) << d.errors.back().to_string();
  EXPECT_TRUE(has(d.errors[0].to_string(), "0.5 out of range")) << d.errors[0].to_string();
}

// Before: SIGINT killed the process by its signal (and mpiexec reported it as exit 2, "bad
// input"); now the run ends with its own code, 130, and one line saying why.
TEST(cli_errors, sigint_exits_130) {
  const std::string log = fresh("paraxis_sigint.log");
  const std::string out = fresh("paraxis_sigint_out");
  posix_spawn_file_actions_t io;
  posix_spawn_file_actions_init(&io);
  posix_spawn_file_actions_addopen(&io, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&io, 1, 2);
  std::vector<std::string> args = {
      exe,     "run", tiny, "--set", "train.steps=1000000", "--set", "hardware.calibrate=false",
      "--out", out};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, exe.c_str(), &io, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&io);
  // The handler is installed before the point's header is printed (right after MPI_Init).
  for (int i = 0; i < 600 && !has(slurp(log), "point 1/1"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << "\n" << slurp(log);
  if (WIFEXITED(status)) {
    EXPECT_EQ(WEXITSTATUS(status), 130) << slurp(log);
  }
  EXPECT_TRUE(has(slurp(log), "interrupted (SIGINT); exit code 130")) << slurp(log);
}

// Before: `paraxis plan` on a machine of 2,147,483,647 devices counted divisors up to INT_MAX in
// an int, which wrapped: SIGFPE (n % 0) after 15-19 s. Now the shapes are found in O(sqrt(n)):
// the prime count has three, every one refused or ranked, and the command ends normally.
TEST(plan_input, a_machine_of_int_max_devices_is_planned_not_crashed) {
  std::string machine = slurp(inputs + "/machines/cpu-node.yaml");
  const auto at = machine.find("devices_per_node: 2");
  ASSERT_NE(at, std::string::npos);
  machine.replace(at, std::string("devices_per_node: 2").size(), "devices_per_node: 2147483647");
  machine.replace(machine.find("nodes: 4"), std::string("nodes: 4").size(), "nodes: 1");
  const std::string path = write_file("paraxis_int_max_machine.yaml", machine);
  const Result r = run("timeout 120 " + exe + " plan " + tiny + " " + path);
  EXPECT_TRUE(r.code == 0 || r.code == 2) << r.code << "\n" << r.output;
  EXPECT_NE(r.code, 124) << "timed out";
  EXPECT_TRUE(has(r.output, "2147483647")) << r.output;
}

// Before: a deadline of 1e-300 s passed `check`, and a hang report with no silent rank read
// "ranks  stopped responding" (an empty list).
TEST(hang_words, a_hang_with_no_silent_rank_is_a_slow_collective) {
  const Result r = run(exe + " check " + tiny + " --set comm.timeout_s=1e-300");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "comm.timeout_s")) << r.output;
  EXPECT_TRUE(has(r.output, "[0.1, 1e+06]")) << r.output;
  auto d = paraxis::driver::load_deck(tiny, {"parallel.dp=2"}, 2);
  ASSERT_TRUE(d.errors.empty());
  nlohmann::json record = {{"kind", "hang"},
                           {"rank", 0},
                           {"point_index", 0},
                           {"step", 1},
                           {"what", "watchdog"},
                           {"config", paraxis::driver::config_to_json(d.points[0].config)},
                           {"settings", nlohmann::json::object()},
                           {"waited_s", 3.2},
                           {"op", "all_reduce"},
                           {"axis", "dp"},
                           {"silent", nlohmann::json::array()},
                           {"not_arrived", nlohmann::json::array()}};
  const auto f = paraxis::driver::diagnosis::failure_finding({record});
  const std::string text = f.at("text");
  EXPECT_TRUE(has(text, "a collective slower than the deadline")) << text;
  EXPECT_TRUE(has(text, "dp all_reduce")) << text;
  EXPECT_FALSE(has(text, "stopped responding")) << text;
  EXPECT_TRUE(has(f.at("advice").get<std::string>(), "raise comm.timeout_s")) << f.dump();
  // A rank that is not an integer (1e300) is refused naming the field, not read as -2^31.
  record["silent"] = {1e300};
  try {
    paraxis::driver::diagnosis::failure_finding({record});
    ADD_FAILURE() << "silent: [1e300] accepted";
  } catch (const std::exception& e) {
    EXPECT_TRUE(has(e.what(), "silent[0] = 1e+300")) << e.what();
    EXPECT_FALSE(has(e.what(), "-2147483648")) << e.what();
  }
}

// The watchdog's own message says the same when every member arrived (before: only the list of
// members, every one "arrived", and no word on what that means).
TEST(hang_words, the_watchdog_calls_an_expiry_with_every_member_arrived_a_slow_operation) {
  namespace wd = paraxis::parallel::watchdog;
  wd::Diagnosis d;
  d.op = "all_reduce";
  d.axis = "dp";
  d.seq = 7;
  d.comm_size = 2;
  d.elapsed_s = 3.2;
  d.timeout_s = 3;
  d.members = {wd::Member{1, 1, wd::Arrival::arrived, "all_reduce #7 on dp"}};
  const std::string all_arrived = d.message();
  EXPECT_TRUE(has(all_arrived, "every member arrived: no rank is silent")) << all_arrived;
  EXPECT_TRUE(has(all_arrived, "raise comm.timeout_s")) << all_arrived;
  d.members[0].arrival = wd::Arrival::not_answering;
  EXPECT_FALSE(has(d.message(), "every member arrived")) << d.message();
}

// Before: the pipeline group's barrier was labelled world: a hang there said "on world", its
// record `axis: world`, and the report `compute`.
TEST(hang_words, a_hang_in_the_pipeline_barrier_names_pp) {
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = fresh("paraxis_pp_barrier_hang");
  // Rank 1 stops before step 1; rank 0's next wait is its pipeline group's barrier.
  const Result r = run("timeout 120 " + mpiexec + " -n 2 " + exe + " run " + tiny + quick +
                       " --set parallel.pp=2 --set output.trace=false --set comm.timeout_s=2"
                       " --set fault.hang.rank=1 --set fault.hang.step=1 --out " +
                       out);
  EXPECT_EQ(r.code, 5) << r.output;
  const auto record = nlohmann::json::parse(slurp(out + "/failure-rank0.json"));
  EXPECT_EQ(record.at("axis"), "pp") << record.dump();
  EXPECT_TRUE(has(record.at("op").get<std::string>(), "barrier")) << record.dump();
  EXPECT_TRUE(has(r.output, " on pp")) << r.output;
}

// Before: points.csv was written first: after exit 4 (summary.json not written) it listed a
// point summary.json lacked.
TEST(results_agree, a_failed_save_leaves_points_csv_and_summary_agreeing) {
  const std::string probe = fresh("paraxis_agree_probe");
  Result r = run(exe + " run " + tiny + quick +
                 " --set output.trace=false --set sweep.train.seed=[1,2] --out " + probe);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto two = fs::file_size(probe + "/summary.json");
  const std::string one_dir = fresh("paraxis_agree_probe1");
  r = run(exe + " run " + tiny + quick + " --set output.trace=false --out " + one_dir);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto one = fs::file_size(one_dir + "/summary.json");
  ASSERT_LT(one + 2048, two);
  const std::string out = fresh("paraxis_agree_full_disk");
  r = run("bash -c \"trap '' XFSZ; ulimit -f " + std::to_string((one + two) / 2 / 1024) +
          "; UCX_TLS=self,tcp exec " + exe + " run " + tiny + quick +
          " --set output.trace=false --set sweep.train.seed=[1,2] --out " + out + "\"");
  ASSERT_EQ(r.code, 4) << r.output;
  const auto summary = nlohmann::json::parse(slurp(out + "/summary.json"));
  const auto rows = lines_of(slurp(out + "/points.csv"));
  ASSERT_EQ(summary.at("points").size(), 1u);
  EXPECT_EQ(rows.size(), 1u + summary.at("points").size()) << slurp(out + "/points.csv");
}

// Before: a rank killed while the results were saved left no failure record, so a job that
// ended in its first point left `paraxis report` nothing to read ("no summary.json", exit 2).
TEST(results_agree, a_rank_dying_in_the_save_leaves_its_record) {
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = fresh("paraxis_die_in_first_save");
  const Result r = run("timeout 120 " + mpiexec + " -n 2 " + exe + " run " + tiny + quick +
                       " --set parallel.dp=2 --set output.trace=false --set fault.dead_rank.at=save"
                       " --set fault.dead_rank.rank=0 --out " +
                       out);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.code, 124) << "timed out: a rank hung";
  EXPECT_FALSE(fs::exists(out + "/summary.json"));
  EXPECT_FALSE(fs::exists(out + "/points.csv")) << "points.csv lists a point summary.json lacks";
  ASSERT_TRUE(fs::exists(out + "/failure-rank0.json")) << r.output;
  const auto record = nlohmann::json::parse(slurp(out + "/failure-rank0.json"));
  EXPECT_EQ(record.at("kind"), "dead_rank");
  EXPECT_TRUE(has(record.at("what").get<std::string>(), "saved")) << record.dump();
  const Result rep = run(exe + " report " + out);
  EXPECT_EQ(rep.code, 0) << rep.output;
  const auto report = nlohmann::json::parse(slurp(out + "/report.json"));
  EXPECT_TRUE(has(report.at("points_not_analysed").dump(), "dead_rank")) << report.dump();
}

// Before: a rank killed while a checkpoint was written (fault.dead_rank, at: checkpoint) left no
// failure record either.
TEST(results_agree, a_rank_dying_in_a_checkpoint_save_leaves_its_record) {
  if (mpiexec.empty()) GTEST_SKIP() << "no mpiexec";
  const std::string out = fresh("paraxis_die_in_checkpoint");
  const Result r = run("timeout 120 " + mpiexec + " -n 2 " + exe + " run " + tiny + quick +
                       " --set parallel.dp=2 --set output.trace=false --set checkpoint.every=1"
                       " --set fault.dead_rank.at=checkpoint --set fault.dead_rank.rank=1"
                       " --set fault.dead_rank.step=1 --out " +
                       out);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.code, 124) << "timed out: a rank hung";
  ASSERT_TRUE(fs::exists(out + "/failure-rank1.json")) << r.output;
  const auto record = nlohmann::json::parse(slurp(out + "/failure-rank1.json"));
  EXPECT_EQ(record.at("kind"), "dead_rank");
  EXPECT_EQ(record.at("step"), 1) << record.dump();
  EXPECT_TRUE(has(record.at("what").get<std::string>(), "checkpoint step-1")) << record.dump();
  const Result rep = run(exe + " report " + out);
  EXPECT_EQ(rep.code, 0) << rep.output;
}

// Before: the checkpoint folder was first written after step 1 (its compute time lost before
// the refusal; now the run's claim creates and locks it first, checkpoint_claim.hpp), and a
// failed first save said "the previous one is kept" of none.
TEST(results_agree, the_checkpoint_folder_is_checked_with_the_output_folder) {
  const std::string file = write_file("paraxis_ckpt_not_a_folder", "a file\n");
  Result r =
      run(exe + " run " + tiny + quick + " --set checkpoint.every=1 --set checkpoint.dir=" + file +
          "/sub --out " + fresh("paraxis_ckpt_probe_out"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, file + "/sub")) << r.output;
  EXPECT_FALSE(has(r.output, "step 1")) << "trained before checking: " << r.output;
  // A first save that fails (the file-size limit: the probe fits, the checkpoint does not).
  const std::string out = fresh("paraxis_ckpt_first_save_fails");
  r = run("bash -c \"trap '' XFSZ; ulimit -f 16; UCX_TLS=self,tcp exec " + exe + " run " + tiny +
          quick + " --set checkpoint.every=1 --set output.trace=false --out " + out + "\"");
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_TRUE(has(r.output, "there is no earlier checkpoint to keep")) << r.output;
  EXPECT_FALSE(has(r.output, "the previous one is kept")) << r.output;
}
