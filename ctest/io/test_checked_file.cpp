// Checked, atomic writes (miniapp/io/checked_file.hpp): content lands whole, a failure names
// the file and the system's reason, and the previous file survives every failure.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "io/checked_file.hpp"

namespace {

namespace fs = std::filesystem;
using paraxis::io::check_writable_dir;
using paraxis::io::write_file_checked;
using paraxis::io::WriteError;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string fresh_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

int files_in(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const WriteError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(checked_file, writes_the_whole_content_and_replaces_the_old_file) {
  const std::string dir = fresh_dir("io_whole");
  const std::string path = dir + "/a.json";
  write_file_checked(path, "old\n");
  std::string big(3u << 20, 'x');  // several write(2) calls' worth
  big.back() = '\n';
  write_file_checked(path, big);
  EXPECT_EQ(slurp(path), big);
  EXPECT_EQ(files_in(dir), 1) << "a temporary file was left behind";
}

TEST(checked_file, a_missing_folder_names_the_file_and_the_reason) {
  const std::string path = fresh_dir("io_missing") + "/no/such/folder/summary.json";
  const std::string e = error_of([&] { write_file_checked(path, "x"); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("No such file or directory"), std::string::npos) << e;
}

// RLIMIT_FSIZE makes write(2) fail with EFBIG past the limit, as a full disk fails with ENOSPC:
// the error names the file and the reason, and the previous file is intact.
TEST(checked_file, a_failed_write_keeps_the_previous_file) {
  const std::string dir = fresh_dir("io_efbig");
  const std::string path = dir + "/summary.json";
  write_file_checked(path, "{\"points\": []}\n");
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string e = error_of([&] { write_file_checked(path, std::string(10000, 'y')); });
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("File too large"), std::string::npos) << e;
  EXPECT_EQ(slurp(path), "{\"points\": []}\n");
  EXPECT_EQ(files_in(dir), 1) << "the temporary file was not removed";
}

// A rank that fails between the temporary file and the rename leaves the old file.
TEST(checked_file, a_failure_before_the_rename_keeps_the_previous_file) {
  const std::string dir = fresh_dir("io_before_rename");
  const std::string path = dir + "/points.csv";
  write_file_checked(path, "index\n0\n");
  EXPECT_THROW(write_file_checked(path, "index\n0\n1\n",
                                  [] { throw WriteError("interrupted before the rename"); }),
               WriteError);
  EXPECT_EQ(slurp(path), "index\n0\n");
  EXPECT_EQ(files_in(dir), 1);
}

TEST(checked_file, a_folder_is_probed_for_writability) {
  const std::string dir = fresh_dir("io_probe");
  EXPECT_NO_THROW(check_writable_dir(dir));
  EXPECT_EQ(files_in(dir), 0) << "the probe was left behind";
  const std::string file = dir + "/plain";
  write_file_checked(file, "x");
  const std::string e = error_of([&] { check_writable_dir(file); });
  EXPECT_NE(e.find(file), std::string::npos) << e;
}
