// What a paraxis test program's exit code says about the run as a whole, beyond each case's
// verdict (every main of ctest/ uses it):
//   - a program that ran no test case fails: a --gtest_filter that matches nothing (a test
//     renamed under its CTest entry) would otherwise pass while checking nothing;
//   - a program whose every case skipped exits kSkipped, which CTest shows as "Skipped" (the
//     helpers that register tests set SKIP_RETURN_CODE), not as a pass.
// GoogleTest reports failed assertions only (a TestPartResult is made for a failure, a skip or
// SUCCEED(), never for a passing EXPECT), so no listener can count the assertions a case made:
// a case that asserts nothing on some rank count must say so with GTEST_SKIP (docs/architecture.md,
// "A test").
#pragma once

#include <gtest/gtest.h>

#include <cstdio>

namespace paraxis_test {

// CTest's SKIP_RETURN_CODE for every paraxis test (the automake convention).
constexpr int kSkipped = 77;

// The exit code of a program whose RUN_ALL_TESTS() returned `rc`.
inline int run_outcome(int rc) {
  const auto& u = *::testing::UnitTest::GetInstance();
  if (u.test_to_run_count() == 0) {
    std::fprintf(stderr,
                 "paraxis tests: no test case ran (does --gtest_filter match a test of this "
                 "program?)\n");
    return 1;
  }
  if (rc == 0 && u.skipped_test_count() == u.test_to_run_count()) {
    std::fprintf(stderr, "paraxis tests: every test case skipped (see the reasons above)\n");
    return kSkipped;
  }
  return rc;
}

}  // namespace paraxis_test
