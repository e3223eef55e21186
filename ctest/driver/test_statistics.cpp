// The driver's one median (analysis/statistics.hpp): odd and even counts, unsorted input, an
// empty input, and values whose mean of the middle pair is not one of them. The repeated
// action's time: the mean, not the median, of skewed samples, without those that lost a slice.
#include <gtest/gtest.h>

#include "analysis/statistics.hpp"

using paraxis::driver::median;
using paraxis::driver::repeated_action_samples;
using paraxis::driver::repeated_action_time;

TEST(median, odd_count_is_the_middle_value_of_the_sorted_values) {
  EXPECT_EQ(median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(median({7.0}), 7.0);
  EXPECT_EQ(median({2.0, 9.0, -4.0, 9.0, 0.5}), 2.0);
}

TEST(median, even_count_is_the_mean_of_the_two_middle_values) {
  EXPECT_EQ(median({4.0, 1.0}), 2.5);
  EXPECT_EQ(median({10.0, 1.0, 3.0, 8.0}), 5.5);  // sorted 1 3 8 10: (3 + 8) / 2
  EXPECT_EQ(median({0.25, 0.25, 0.5, 0.5}), 0.375);
}

TEST(median, empty_is_zero) {
  EXPECT_EQ(median({}), 0.0);
}

TEST(median, leaves_the_callers_values_alone) {
  const std::vector<double> v{3.0, 1.0, 2.0};
  EXPECT_EQ(median(v), 2.0);
  EXPECT_EQ(v, (std::vector<double>{3.0, 1.0, 2.0}));
}

TEST(repeated_action_time, is_the_mean_of_skewed_samples_not_their_median) {
  // A step adds these up: 4 actions cost 4 * 110, not 4 * 100 (the median).
  EXPECT_DOUBLE_EQ(repeated_action_time({100.0, 100.0, 100.0, 140.0}), 110.0);
  EXPECT_DOUBLE_EQ(repeated_action_time({3.0}), 3.0);
}

TEST(repeated_action_time, leaves_out_samples_above_twice_the_median) {
  // The 1000 lost a time slice; 200 is exactly twice the median and stays.
  EXPECT_DOUBLE_EQ(repeated_action_time({100.0, 100.0, 100.0, 1000.0, 100.0}), 100.0);
  EXPECT_DOUBLE_EQ(repeated_action_time({100.0, 100.0, 100.0, 200.0, 100.0}), 120.0);
}

TEST(repeated_action_time, empty_is_zero) {
  EXPECT_EQ(repeated_action_time({}), 0.0);
}

TEST(repeated_action_samples, are_the_samples_the_time_counts_in_their_order) {
  // The pipeline replay draws from these (docs/perfmodel.md, "Step time"): the lost slice out.
  EXPECT_EQ(repeated_action_samples({100.0, 1000.0, 90.0, 200.0}),
            (std::vector<double>{100.0, 90.0, 200.0}));
  EXPECT_TRUE(repeated_action_samples({}).empty());
}
