// The shared row reductions (row_reduce.hpp): the host row_max / row_sum_exp and the team
// range_max / range_sum / range_sum_exp against fp64 loops, on rows with -inf entries (an
// attention mask), very negative and very large values (no overflow after the max is
// subtracted), and through softmax_forward, whose every path uses them. Bounds: the max is
// exact; a sum of n positive terms, each within math.hpp's vexp_bounded bound (2.5 ulp, test_math),
// is within (2.5 + n) units of fp32 rounding of the exact sum (a loose, order-free bound).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/row_reduce.hpp"
#include "paraxis/kernels/softmax.hpp"

using namespace ktest;
namespace pk = paraxis::kernels;
namespace pd = paraxis::kernels::detail;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Row k of a test matrix: random values in [lo, hi), every 7th entry -inf (never the first).
std::vector<double> masked_rows(int rows, int c, std::uint64_t seed, double lo, double hi) {
  auto v = rounded<float>(random_vec(static_cast<std::size_t>(rows) * c, seed, lo, hi));
  for (int r = 0; r < rows; ++r)
    for (int j = 1; j < c; j += 7) v[r * c + j] = -kInf;
  return v;
}

struct RowRef {
  double max, sum_exp;
};
RowRef row_ref(const double* x, int n) {
  double m = -INFINITY, s = 0;
  for (int j = 0; j < n; ++j) m = std::max(m, x[j]);
  for (int j = 0; j < n; ++j) s += std::exp(x[j] - m);
  return {m, s};
}
double sum_bound(int n) {
  return (2.5 + n) * std::ldexp(1.0, -24);
}

TEST(row_reduce, host_max_exact_and_sum_exp_within_bound_fp32) {
  for (auto [lo, hi] : {std::pair{-1.0, 1.0}, {-1e30, -0.9e30}, {80.0, 100.0}, {-200.0, 90.0}}) {
    for (int n : {1, 5, 31, 32, 33, 1000, 4099}) {
      auto x0 = masked_rows(1, n, 7 + n, lo, hi);
      std::vector<float> x(x0.begin(), x0.end());
      const RowRef ref = row_ref(x0.data(), n);
      const float mx = pd::row_max<float>(n, pd::row_as<float>(x.data()));
      EXPECT_EQ(mx, static_cast<float>(ref.max)) << "n " << n << " lo " << lo;
      const float s = pd::row_sum_exp<float>(n, mx, pd::row_as<float>(x.data()));
      EXPECT_LE(std::fabs(s - ref.sum_exp), sum_bound(n) * ref.sum_exp)
          << "n " << n << " lo " << lo;
    }
  }
}

TEST(row_reduce, host_sum_exp_into_keeps_every_exponential_and_masked_ones_are_zero) {
  const int n = 100;
  auto x0 = masked_rows(1, n, 3, -5.0, 5.0);
  std::vector<float> x(x0.begin(), x0.end()), e(n, -1.0f);
  const float mx = pd::row_max<float>(n, pd::row_as<float>(x.data()));
  const float s = pd::row_sum_exp_into<float>(n, n, mx, pd::row_as<float>(x.data()), e.data());
  // The sum without the output: the same lanes, the same bits.
  EXPECT_EQ(s, pd::row_sum_exp<float>(n, mx, pd::row_as<float>(x.data())));
  double total = 0;
  for (int j = 0; j < n; ++j) {
    if (std::isinf(x[j]))
      EXPECT_EQ(e[j], 0.0f) << j;
    else
      EXPECT_NEAR(e[j], std::exp(double(x[j]) - mx), 2.5 * std::ldexp(1.0, -23)) << j;
    total += e[j];
  }
  EXPECT_NEAR(s, total, sum_bound(n) * total);
}

// lane_sum_masked skips the zero terms past the mask's lane block: the bits of lane_sum over
// the padded row with the select, for every valid length, with -0, +0 and cancelling terms
// (a -0 lane or sum would make a skipped +0 term matter), in fp32 and fp64.
template <class A>
void expect_masked_sum_is_lane_sum() {
  for (int n : {1, 7, 16, 31, 32, 33, 64, 65, 100, 512, 513}) {
    auto v = random_vec(static_cast<std::size_t>(n), 11 + n, -1.0, 1.0);
    std::vector<A> x(v.begin(), v.end());
    for (int j = 0; j < n; j += 5) x[j] = -A(0);
    for (int j = 3; j < n; j += 9) x[j] = A(0);
    for (int j = 2; j + 32 < n; j += 13) x[j + 32] = -x[j];
    for (int valid = 0; valid <= n; ++valid) {
      auto term = [&](int j, bool in) { return in ? x[j] : A(0); };
      const A got = pd::lane_sum_masked<A>(n, valid, term);
      const A want = pd::lane_sum<A>(n, [&](int j) { return term(j, j < valid); });
      EXPECT_EQ(std::memcmp(&got, &want, sizeof(A)), 0) << "n " << n << " valid " << valid;
    }
  }
}
TEST(row_reduce, host_masked_lane_sum_is_lane_sum_bitwise) {
  expect_masked_sum_is_lane_sum<float>();
  expect_masked_sum_is_lane_sum<double>();
}

PARAXIS_EXEC_SPACE_TEST_SUITE(row_reduce_team);

// A free function: CUDA's extended lambdas may not live in a test body (a private member).
// out(r, 0..2) = max, sum and sum of exponentials of row r, from a team per row.
template <class Space>
void team_rows(const V2<float, Space>& X, const V2<float, Space>& out) {
  using Policy = Kokkos::TeamPolicy<Space>;
  const int c = static_cast<int>(X.extent(1));
  Kokkos::parallel_for(
      "test_row_reduce::team", Policy(static_cast<int>(X.extent(0)), Kokkos::AUTO),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank();
        const auto range = Kokkos::TeamThreadRange(team, c);
        auto x = [&](const int j) { return X(r, j); };
        const float mx = pd::range_max<float>(range, x);
        const float s = pd::range_sum<float>(range, [&](const int j) {
          const float v = X(r, j);
          return v >= -FLT_MAX ? v : 0.0f;  // the -inf entries left out
        });
        const float se = pd::range_sum_exp<float>(range, mx, x);
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          out(r, 0) = mx;
          out(r, 1) = s;
          out(r, 2) = se;
        });
      });
}

TYPED_TEST(row_reduce_team, team_max_sum_and_sum_exp_match_fp64) {
  using Space = TypeParam;
  const int rows = 9, c = 517;
  const auto x0 = masked_rows(rows, c, 11, -50.0, 50.0);
  V2<float, Space> out("out", rows, 3);
  team_rows<Space>(make2<float, Space>(rows, c, x0), out);
  const auto o = to_host(out);
  for (int r = 0; r < rows; ++r) {
    const RowRef ref = row_ref(x0.data() + r * c, c);
    double sum = 0, abs_sum = 0;
    for (int j = 0; j < c; ++j)
      if (std::isfinite(x0[r * c + j])) sum += x0[r * c + j], abs_sum += std::fabs(x0[r * c + j]);
    EXPECT_EQ(o[r * 3], ref.max) << r;
    EXPECT_LE(std::fabs(o[r * 3 + 1] - sum), c * std::ldexp(1.0, -24) * abs_sum) << r;
    EXPECT_LE(std::fabs(o[r * 3 + 2] - ref.sum_exp), sum_bound(c) * ref.sum_exp) << r;
  }
}

// Softmax through the shared reductions: -inf scores get probability exactly 0, very negative
// and very large rows neither underflow to 0/0 nor overflow, a row with one finite score is 1.
TYPED_TEST(row_reduce_team, softmax_masks_inf_and_survives_extreme_rows_fp32) {
  using Space = TypeParam;
  const int c = 300;
  for (auto [lo, hi] : {std::pair{-1e30, -0.99e30}, {1e30, 1.01e30}, {-3.0, 3.0}}) {
    auto s0 = masked_rows(2, c, 5, lo, hi);
    for (int j = 1; j < c; ++j) s0[c + j] = -kInf;  // row 1: one finite score
    pk::View2<float, Space> P("P", 2, c);
    pk::softmax_forward(Space(), make2<float, Space>(2, c, s0), P);
    const auto p = to_host(P);
    EXPECT_EQ(p[c], 1.0);
    double total = 0;
    for (int j = 0; j < c; ++j) {
      ASSERT_TRUE(std::isfinite(p[j])) << j << " lo " << lo;
      if (std::isinf(s0[j])) {
        EXPECT_EQ(p[j], 0.0) << j;
      }
      total += p[j];
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << "lo " << lo;
  }
}

}  // namespace
