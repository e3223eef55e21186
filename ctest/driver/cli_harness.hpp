// Runs the paraxis command as a user would (through a shell, output captured) for the CLI
// tests: exit code, combined output, and how long it took.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace paraxis_test {

struct Result {
  int code;            // the exit status, or -1 when killed by a signal
  std::string output;  // stdout and stderr together
  double seconds;      // wall time
};

inline Result run(const std::string& args) {
  const std::string log = ::testing::TempDir() + "paraxis_cli.log";
  const std::string cmd = args + " > " + log + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str(), s};
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace paraxis_test
