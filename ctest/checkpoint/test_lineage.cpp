// Runs, lineages and the lock of a checkpoint root (checkpoint/lineage.hpp, folder_lock.hpp,
// docs/checkpoint.md "Runs, lineages and the lock"), without MPI: which checkpoints a run may
// prune or must refuse, the lineage's index.json keys and the lock file's rules.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "checkpoint/folder_lock.hpp"
#include "checkpoint/index.hpp"
#include "checkpoint/lineage.hpp"
#include "checkpoint/root_layout.hpp"

using namespace paraxis::checkpoint;
namespace fs = std::filesystem;

namespace {

CheckpointRecord rec(long step, const std::string& name, const std::string& lineage,
                     const std::string& run, long parent_step = -1) {
  CheckpointRecord r;
  r.step = step;
  r.path = "/ckpt/" + name;
  r.lineage.id = lineage;
  r.lineage.run = run;
  r.lineage.parent_step = parent_step;
  return r;
}

// Run A's lineage "A": step-2 .. step-10, every 2.
std::vector<CheckpointRecord> run_a() {
  std::vector<CheckpointRecord> v;
  for (long s = 2; s <= 10; s += 2) v.push_back(rec(s, "step-" + std::to_string(s), "A", "A"));
  return v;
}

std::string temp_root(const char* name) {
  const fs::path p = fs::temp_directory_path() /
                     (std::string("paraxis-lineage-") + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

void write_lock(const std::string& root, const std::string& host, long pid) {
  std::ofstream(fs::path(root) / kLockFile)
      << "{\"host\": \"" << host << "\", \"pid\": " << pid
      << ", \"run\": \"old-run\", \"since\": \"2026-01-01T00:00:00Z\"}\n";
}

std::string hostname() {
  char h[256] = {};
  gethostname(h, sizeof h - 1);
  return h;
}

}  // namespace

// The issue's case: B resumes A's step-4 with --new-lineage beside A's step-2..10: B's saves
// (tagged step-<N>-<tag> where A has step-<N>) prune only B's own; A's and step-4 stay.
TEST(lineage_retention, new_lineage_never_prunes_another) {
  auto all = run_a();
  all.push_back(rec(6, "step-6-0000000b", "B", "B", 4));
  EXPECT_TRUE(retention_victims(all, "B", "/ckpt/step-6-0000000b", 2, "step-4").empty());
  all.push_back(rec(8, "step-8-0000000b", "B", "B", 4));
  all.push_back(rec(10, "step-10-0000000b", "B", "B", 4));
  EXPECT_EQ(retention_victims(all, "B", "/ckpt/step-10-0000000b", 2, "step-4"),
            std::vector<std::string>{"/ckpt/step-6-0000000b"});
  EXPECT_EQ(retention_victims(all, "B", "/ckpt/step-10-0000000b", 1, "step-4").size(), 2u);
}

// A resumed run continuing A's lineage from its newest (step-4 of 2, 4) prunes A's older ones:
// the lineage is one history. The folder it resumed from goes only once a newer one is there.
TEST(lineage_retention, continued_lineage_counts_the_parents_checkpoints) {
  std::vector<CheckpointRecord> all = {rec(2, "step-2", "A", "A"), rec(4, "step-4", "A", "A"),
                                       rec(6, "step-6", "A", "C", 4)};
  EXPECT_EQ(retention_victims(all, "A", "/ckpt/step-6", 2, "step-4"),
            std::vector<std::string>{"/ckpt/step-2"});
  EXPECT_EQ(retention_victims(all, "A", "/ckpt/step-6", 1, "step-4"),
            (std::vector<std::string>{"/ckpt/step-2", "/ckpt/step-4"}));
  // Nothing newer than the protected folder committed (the published one is older): kept.
  std::vector<CheckpointRecord> older = {rec(2, "step-2", "A", "A"), rec(4, "step-4", "A", "A"),
                                         rec(3, "step-3", "A", "C", 4)};
  EXPECT_EQ(retention_victims(older, "A", "/ckpt/step-3", 1, "step-4"),
            std::vector<std::string>{"/ckpt/step-2"});
}

// Checkpoints without a lineage (older paraxis) or with an unreadable index are never pruned by a
// run with a lineage; a writer that tracks no runs (empty id) prunes only those without one.
TEST(lineage_retention, untracked_and_unreadable_are_kept) {
  std::vector<CheckpointRecord> all = {rec(2, "step-2", "", ""), rec(4, "step-4", "A", "A"),
                                       rec(6, "step-6", "A", "A"), rec(8, "step-8", "A", "A")};
  all.push_back(rec(1, "step-1", "A", "A"));
  all.back().problem = "not valid JSON";
  EXPECT_EQ(retention_victims(all, "A", "/ckpt/step-8", 2, ""),
            std::vector<std::string>{"/ckpt/step-4"});
  std::vector<CheckpointRecord> untracked = {rec(2, "step-2", "", ""), rec(4, "step-4", "", ""),
                                             rec(6, "step-6", "A", "A")};
  EXPECT_EQ(retention_victims(untracked, "", "/ckpt/step-4", 1, ""),
            std::vector<std::string>{"/ckpt/step-2"});
}

// What a run must refuse: another lineage, no lineage, an unreadable index, and its own lineage's
// checkpoints after the step it resumes from (a branch it would otherwise write over).
TEST(lineage_ownership, foreign_checkpoints) {
  auto all = run_a();
  EXPECT_TRUE(foreign_checkpoints(all, {"A", -1}).empty());  // A itself (or a resume of 10)
  EXPECT_TRUE(foreign_checkpoints(all, {"A", 10}).empty());
  EXPECT_EQ(foreign_checkpoints(all, {"B", -1}).size(), 5u);  // a fresh run
  const auto branch = foreign_checkpoints(all, {"A", 4});     // A resumed from step-4
  ASSERT_EQ(branch.size(), 3u);
  EXPECT_EQ(branch.front().step, 6);
  // B started beside A (--new-lineage) and continued: A's are accepted, B's branch is not.
  auto beside = run_a();
  beside.push_back(rec(6, "step-6-0000000b", "B", "B", 4));
  beside.push_back(rec(8, "step-8-0000000b", "B", "B", 4));
  EXPECT_TRUE(foreign_checkpoints(beside, {"B", 8}).empty());
  EXPECT_EQ(foreign_checkpoints(beside, {"B", 6}).size(), 1u);
  EXPECT_EQ(foreign_checkpoints(beside, {"C", -1}).size(), 7u);
  std::vector<CheckpointRecord> legacy = {rec(12, "step-12", "", "")};
  EXPECT_EQ(foreign_checkpoints(legacy, {"A", -1}).size(), 1u);
  all.push_back(legacy.back());
  EXPECT_NE(describe(all.back()).find("older paraxis"), std::string::npos);
  EXPECT_NE(describe(all.front()).find("run A"), std::string::npos);
}

TEST(lineage_names, tagged_step_folders) {
  EXPECT_EQ(step_of_folder_name("step-6"), 6);
  EXPECT_EQ(step_of_folder_name("step-6-3fa9c2d1"), 6);
  EXPECT_FALSE(step_of_folder_name("step-6-"));
  EXPECT_FALSE(step_of_folder_name("step-6.tmp-1-2-3"));
  EXPECT_FALSE(step_of_folder_name("step--3"));
  EXPECT_FALSE(step_of_folder_name("step-6-a/b"));
  const std::string id = new_run_id();
  EXPECT_TRUE(std::regex_match(id, std::regex("[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}"))) << id;
  EXPECT_EQ(lineage_tag(id), id.substr(id.size() - 8));
  EXPECT_NE(new_run_id(), new_run_id());  // 32 random bits each
}

// index.json's `lineage`: written and read back; a version 1 index (none) still read; version 2
// without it refused naming the key.
TEST(lineage_index, round_trip_and_versions) {
  Index index;
  index.step = 4;
  index.ranks = 1;
  index.files.push_back(FileRecord{"rank-0.bin", 0, 0});
  index.lineage = Lineage{"L", "R", "P", 2};
  const Index back = parse_index(to_json(index).dump(), "index.json");
  EXPECT_EQ(back.lineage.id, "L");
  EXPECT_EQ(back.lineage.run, "R");
  EXPECT_EQ(back.lineage.parent_run, "P");
  EXPECT_EQ(back.lineage.parent_step, 2);
  nlohmann::json j = to_json(index);
  j["version"] = 1;
  j.erase("lineage");
  EXPECT_TRUE(parse_index(j.dump(), "old").lineage.id.empty());
  j["version"] = 2;
  try {
    parse_index(j.dump(), "new");
    FAIL() << "a version 2 index without its lineage was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'lineage'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(to_json(Lineage{}).is_null());
  EXPECT_TRUE(to_json(Lineage{"L", "L", "", -1}).at("parent").is_null());
}

// Two holders: the second is refused at once naming the first (run, pid, host); released, the lock
// is free again.
TEST(folder_lock, second_holder_refused_naming_the_first) {
  const std::string root = temp_root("held");
  std::string note;
  auto first = std::make_unique<FolderLock>(root, "run-one", note);
  EXPECT_TRUE(note.empty());
  try {
    FolderLock second(root, "run-two", note);
    FAIL() << "a second lock was granted";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("run run-one"), std::string::npos) << m;
    EXPECT_NE(m.find("pid " + std::to_string(::getpid())), std::string::npos) << m;
    EXPECT_NE(m.find(root), std::string::npos) << m;
  }
  first->release();
  EXPECT_FALSE(fs::exists(fs::path(root) / kLockFile));
  FolderLock third(root, "run-three", note);
  EXPECT_EQ(read_lock_holder((fs::path(root) / kLockFile).string()).run, "run-three");
  third.release();
  fs::remove_all(root);
}

// A lock left by a dead process of this host is taken over (and said so); one of a live process,
// or of another host (whose processes cannot be seen), is not.
TEST(folder_lock, stale_lock_of_this_host_taken_over) {
  const std::string root = temp_root("stale");
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // reaped: no process of that pid now
  write_lock(root, hostname(), child);
  std::string note;
  {
    FolderLock taken(root, "run-new", note);
    EXPECT_NE(note.find("stale lock of run old-run"), std::string::npos) << note;
  }
  write_lock(root, hostname(), ::getppid());  // alive
  EXPECT_THROW(FolderLock(root, "run-new", note), std::runtime_error);
  write_lock(root, "another-host.example", child);
  try {
    FolderLock other(root, "run-new", note);
    FAIL() << "another host's lock was taken over";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("remove '" + root + "/lock'"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_lock_holder(root + "/lock").host, "another-host.example");
  fs::remove_all(root);
}

namespace {

// A complete checkpoint folder as far as the root's rules read it: an index.json with a lineage.
void fake_checkpoint(const fs::path& folder, const std::string& lineage) {
  fs::create_directories(folder);
  nlohmann::json l = nullptr;
  if (!lineage.empty()) l = {{"id", lineage}, {"run", lineage}, {"parent", nullptr}};
  std::ofstream(folder / kIndexFile) << nlohmann::json{
      {"format", kFormatName},
      {"version", kFormatVersion},
      {"lineage", l}}.dump();
}

}  // namespace

// On disk: a save beside another lineage's step-<N> is published as step-<N>-<tag> and prunes
// only its own lineage; `latest` lost, the fall-back refuses to pick among several runs.
TEST(lineage_root, publish_beside_and_resolve) {
  const std::string root = temp_root("root");
  fake_checkpoint(fs::path(root) / "step-2", "A-0000000a");
  fake_checkpoint(fs::path(root) / "step-4", "A-0000000a");
  std::vector<std::string> warnings;
  for (long step : {2, 4}) {
    const fs::path tmp = fs::path(root) / temporary_folder_name(step);
    fake_checkpoint(tmp, "B-0000000b");
    publish(root, tmp.string(), step, Retention{1, "B-0000000b", ""}, warnings);
  }
  EXPECT_TRUE(warnings.empty());
  std::vector<std::string> names;
  for (const auto& r : lineage_records(root)) names.push_back(fs::path(r.path).filename());
  EXPECT_EQ(names, (std::vector<std::string>{"step-2", "step-4", "step-4-0000000b"}));
  EXPECT_EQ(fs::path(resolve_checkpoint(root)).filename(), "step-4-0000000b");  // `latest`
  fs::remove(fs::path(root) / kLatestFile);
  try {
    resolve_checkpoint(root);
    FAIL() << "fell back to one of several runs' checkpoints";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("several runs"), std::string::npos) << e.what();
  }
  fs::remove_all(fs::path(root) / "step-4-0000000b");
  EXPECT_EQ(fs::path(resolve_checkpoint(root)).filename(), "step-4");  // one lineage left
  fs::remove_all(root);
}
