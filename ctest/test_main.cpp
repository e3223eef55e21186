// GoogleTest entry point shared by every paraxis test binary: Kokkos lives for the whole run.
//
// Each test program gets a temporary folder of its own, handed to ::testing::TempDir() through
// TEST_TMPDIR. CTest runs several programs at once (and one program several times under
// different --gtest_filter), so fixed names under a shared /tmp let one test read another's
// output (a CI failure: the hang test read the CLI test's log). The folder is removed when every
// test passed and kept, with its path printed, when one failed.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "test_run_outcome.hpp"

int main(int argc, char** argv) {
  const char* base = std::getenv("TMPDIR");
  std::string dir = std::string(base && *base ? base : "/tmp") + "/paraxis-test.XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    std::perror(("paraxis tests: cannot create a temporary folder " + dir).c_str());
    return 2;
  }
  ::setenv("TEST_TMPDIR", (dir + "/").c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  int rc = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    rc = paraxis_test::run_outcome(RUN_ALL_TESTS());
  }
  std::error_code ec;
  if (rc == 0 || rc == paraxis_test::kSkipped)
    std::filesystem::remove_all(dir, ec);
  else
    std::fprintf(stderr, "paraxis tests: temporary files kept in %s\n", dir.c_str());
  return rc;
}
