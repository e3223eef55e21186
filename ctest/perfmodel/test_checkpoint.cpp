// Young's and Daly's checkpoint intervals against hand-computed values and their limits.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "perfmodel/checkpoint.hpp"

using namespace paraxis::perfmodel;

TEST(checkpoint, young_by_hand) {
  // C = 60 s, M = 1 day: sqrt(2 * 60 * 86400) = sqrt(10368000) = 3219.937888 s.
  EXPECT_NEAR(young_interval(60, 86400), 3219.937888, 1e-6);
  EXPECT_EQ(young_interval(0, 86400), 0.0);
}

TEST(checkpoint, daly_by_hand) {
  // x = C / (2M) = 60 / 172800; sqrt(2CM) (1 + sqrt(x)/3 + x/9) - C
  // = 3219.937888 * (1 + 0.00621130 + 0.00003858) - 60 = 3180.0619 s.
  EXPECT_NEAR(daly_interval(60, 86400), 3180.0619, 1e-3);
  // C >= 2M: checkpoint once per MTBF.
  EXPECT_EQ(daly_interval(200, 100), 100.0);
  EXPECT_EQ(daly_interval(200, 99), 99.0);
}

TEST(checkpoint, daly_is_below_young_and_meets_it_as_c_over_m_vanishes) {
  const double M = 86400;
  double previous = 1.0;
  for (double C : {1000.0, 100.0, 10.0, 1.0, 0.1}) {
    const double y = young_interval(C, M), d = daly_interval(C, M);
    EXPECT_LT(d, y) << C;  // Daly subtracts C, which the higher-order terms do not make up
    const double gap = (y - d) / y;
    EXPECT_LT(gap, previous) << C;  // the relative gap shrinks with C / M
    previous = gap;
  }
  EXPECT_LT(previous, 1e-3);
}

TEST(checkpoint, system_mtbf_from_llama3) {
  // 419 interruptions in 54 days on 16,384 GPUs: the job's MTBF is 54 * 86400 / 419 s
  // (about 3.1 hours), whatever the number of GPUs it is recomputed for.
  const double rate = llama3_failures_per_device_s();
  EXPECT_NEAR(system_mtbf(rate, 16384), 54 * 86400.0 / 419, 1e-6);
  EXPECT_NEAR(system_mtbf(rate, 1024), 16 * 54 * 86400.0 / 419, 1e-5);
  EXPECT_THROW(system_mtbf(0, 8), std::invalid_argument);
  EXPECT_THROW(young_interval(-1, 10), std::invalid_argument);
  EXPECT_THROW(daly_interval(1, 0), std::invalid_argument);
}
