// Issue 29, "messages that name the wrong thing", in the checkpoint layer: an index.json that
// cannot be read is reported with the system's reason, not as missing; an index whose `ranks`
// disagrees with its data files is refused.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "checkpoint/format.hpp"
#include "checkpoint/index.hpp"
#include "checkpoint/reader.hpp"

using namespace paraxis::checkpoint;

namespace {

// A consistent index of `ranks` ranks: one f32 tensor of 2 x 4, a row per rank (ranks <= 2).
Index two_rank_index() {
  Index index;
  index.step = 3;
  index.ranks = 2;
  index.files = {{"rank-0.bin", 0, 16}, {"rank-1.bin", 1, 16}};
  TensorRecord t;
  t.info = TensorInfo{"w", {2, 4}, "f32"};
  t.shards = {ShardRecord{normalized(Shard{t.info, {0, 0}, {1, 4}}), 0, "rank-0.bin", 0, 16, "00"},
              ShardRecord{normalized(Shard{t.info, {1, 0}, {1, 4}}), 1, "rank-1.bin", 0, 16, "00"}};
  index.tensors = {t};
  return index;
}

std::string refusal(const Index& i) {
  try {
    parse_index(to_json(i).dump(), "x/index.json");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

std::string reader_error(const std::string& folder) {
  try {
    Reader r(folder);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Before: an index saying 3 ranks over the files of 2 (or 1 rank with two files) was accepted.
TEST(checkpoint_messages, index_ranks_must_agree_with_its_data_files) {
  ASSERT_EQ(refusal(two_rank_index()), "");
  Index more = two_rank_index();
  more.ranks = 3;
  EXPECT_NE(refusal(more).find("ranks 3, but data files of 2 rank(s)"), std::string::npos)
      << refusal(more);
  Index twice = two_rank_index();
  twice.files[1].rank = 0;
  twice.tensors[0].shards[1].rank = 0;
  EXPECT_NE(refusal(twice).find("rank 0 has two data files"), std::string::npos) << refusal(twice);
}

// Before: "'.../index.json' is missing: an incomplete checkpoint" for a file that exists but
// cannot be read. Root reads every file: the read is tried as the unprivileged user `nobody`.
TEST(checkpoint_messages, an_unreadable_index_says_why_not_missing) {
  namespace fs = std::filesystem;
  const std::string folder = ::testing::TempDir() + "paraxis_unreadable_ckpt/step-3";
  fs::remove_all(fs::path(folder).parent_path());
  fs::create_directories(folder);
  // The folders searchable by anyone (the test's own temporary folder is 0700): only the index
  // itself is unreadable.
  for (const std::string& d :
       {::testing::TempDir(), fs::path(folder).parent_path().string(), folder})
    fs::permissions(d, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  { std::ofstream(folder + "/index.json") << to_json(two_rank_index()).dump(); }
  ::chmod((folder + "/index.json").c_str(), 0);
  const uid_t uid = ::geteuid();
  if (uid == 0 && ::seteuid(65534) != 0) {
    GTEST_SKIP() << "cannot drop root to test a read error";
  }
  const std::string unreadable = reader_error(folder);
  if (uid == 0) {
    ASSERT_EQ(::seteuid(0), 0);
  }
  EXPECT_NE(unreadable.find("Permission denied"), std::string::npos) << unreadable;
  EXPECT_NE(unreadable.find(folder + "/index.json"), std::string::npos) << unreadable;
  EXPECT_EQ(unreadable.find("missing"), std::string::npos) << unreadable;
  // A missing index is still called missing.
  fs::remove(folder + "/index.json");
  EXPECT_NE(reader_error(folder).find("is missing"), std::string::npos) << reader_error(folder);
  fs::remove_all(fs::path(folder).parent_path());
}
