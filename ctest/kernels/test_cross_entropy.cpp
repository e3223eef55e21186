// Cross-entropy against a host loop in fp64 (fp64, fp32, bf16 logits): padding columns do not
// enter the softmax, gradient rows sum to ~0, backward matches central differences in fp64,
// bad targets and shapes throw with both values named, repeated calls are bitwise identical,
// the row-pointer path (contiguous rows) and the team path (LayoutLeft) agree.
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/cross_entropy.hpp"

using namespace ktest;
namespace pk = paraxis::kernels;
using paraxis::bf16;

namespace {

// Every test runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(cross_entropy);

const int kN = 37, kV = 136, kValid = 129;  // 7 padding columns

std::vector<int> make_targets(int n, int valid, std::uint64_t seed) {
  Rng r(seed);
  std::vector<int> t(n);
  for (auto& x : t) x = r.integer(valid);
  return t;
}

// Padding columns hold huge values: any leak into the softmax dominates the result.
std::vector<double> make_logits(std::uint64_t seed) {
  auto l = random_vec(kN * kV, seed, -6, 6);
  for (int i = 0; i < kN; ++i)
    for (int j = kValid; j < kV; ++j) l[i * kV + j] = 50.0;
  return l;
}

struct CeRef {
  std::vector<double> lse;
  double loss;
};
CeRef ce_ref(const std::vector<double>& l, const std::vector<int>& t) {
  CeRef r{std::vector<double>(kN), 0.0};
  for (int i = 0; i < kN; ++i) {
    double mx = -1e300, s = 0;
    for (int j = 0; j < kValid; ++j) mx = std::max(mx, l[i * kV + j]);
    for (int j = 0; j < kValid; ++j) s += std::exp(l[i * kV + j] - mx);
    r.lse[i] = mx + std::log(s);
    r.loss += r.lse[i] - l[i * kV + t[i]];
  }
  return r;
}

template <class T, class Space>
void check_forward_backward(double loss_rtol, double grad_atol) {
  using A = pk::acc_t<T>;
  const auto l0 = rounded<T>(make_logits(61));
  const auto t = make_targets(kN, kValid, 62);
  auto L = make2<T, Space>(kN, kV, l0);
  auto tv = int_view<Space>(t);
  pk::View1<A, Space> lse("lse", kN);
  const A loss = pk::cross_entropy_forward(Space(), L, tv, kValid, lse);
  const auto ref = ce_ref(l0, t);
  EXPECT_NEAR(loss, ref.loss, loss_rtol * ref.loss);
  expect_close(to_host(lse), ref.lse, 0, loss_rtol, "lse");

  const double scale = 1.0 / kN;
  pk::View2<T, Space> dL("dL", kN, kV);
  Kokkos::deep_copy(dL, T(9.0f));  // overwritten, including the padding
  pk::cross_entropy_backward(Space(), L, tv, lse, kValid, scale, dL);
  const auto g = to_host(dL);
  std::vector<double> gref(kN * kV, 0.0);
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < kValid; ++j)
      gref[i * kV + j] = scale * (std::exp(l0[i * kV + j] - ref.lse[i]) - (j == t[i] ? 1 : 0));
    double rowsum = 0;
    for (int j = 0; j < kV; ++j) rowsum += g[i * kV + j];
    EXPECT_NEAR(rowsum, 0.0, grad_atol * kValid) << "row " << i;
    for (int j = kValid; j < kV; ++j) ASSERT_EQ(g[i * kV + j], 0.0);
  }
  expect_close(g, gref, grad_atol, 0, "dlogits");
}

// Loss ~ 5 per token: fp32 lse is accurate to ~1e-6 relative. bf16 logits are exact inputs
// (the reference sees the same rounded values), so only the fp32 arithmetic and the bf16
// rounding of dlogits (|dlogits| <= scale = 1/37, 2^-8 relative) remain.
TYPED_TEST(cross_entropy, matches_host_and_excludes_padding_fp64) {
  using Space = TypeParam;
  check_forward_backward<double, Space>(1e-13, 1e-15);
}
TYPED_TEST(cross_entropy, matches_host_and_excludes_padding_fp32) {
  using Space = TypeParam;
  check_forward_backward<float, Space>(2e-6, 2e-8);
}
TYPED_TEST(cross_entropy, matches_host_and_excludes_padding_bf16) {
  using Space = TypeParam;
  check_forward_backward<bf16, Space>(2e-6, 1.0 / 37 / 256);
}

TYPED_TEST(cross_entropy, backward_matches_finite_differences_fp64) {
  using Space = TypeParam;
  const auto l0 = make_logits(63);
  const auto t = make_targets(kN, kValid, 64);
  auto tv = int_view<Space>(t);
  auto loss = [&](const std::vector<double>& l) {
    pk::View1<double, Space> lse("lse", kN);
    return pk::cross_entropy_forward(Space(), make2<double, Space>(kN, kV, l), tv, kValid, lse);
  };
  auto L = make2<double, Space>(kN, kV, l0);
  pk::View1<double, Space> lse("lse", kN);
  pk::cross_entropy_forward(Space(), L, tv, kValid, lse);
  pk::View2<double, Space> dL("dL", kN, kV);
  pk::cross_entropy_backward(Space(), L, tv, lse, kValid, 1.0, dL);
  const auto d = random_vec(kN * kV, 65);
  const double fd = directional_fd(loss, l0, d);
  EXPECT_NEAR(dot(to_host(dL), d), fd, 1e-7 * std::fabs(fd) + 1e-8);
}

TYPED_TEST(cross_entropy, repeated_calls_are_bitwise_identical) {
  using Space = TypeParam;
  auto L = make2<float, Space>(kN, kV, make_logits(66));
  auto tv = int_view<Space>(make_targets(kN, kValid, 67));
  pk::View1<float, Space> lse1("l1", kN), lse2("l2", kN);
  const float a = pk::cross_entropy_forward(Space(), L, tv, kValid, lse1);
  const float b = pk::cross_entropy_forward(Space(), L, tv, kValid, lse2);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(bitwise_equal(lse1, lse2));
  pk::View2<float, Space> d1("d1", kN, kV), d2("d2", kN, kV);
  pk::cross_entropy_backward(Space(), L, tv, lse1, kValid, 0.5, d1);
  pk::cross_entropy_backward(Space(), L, tv, lse1, kValid, 0.5, d2);
  EXPECT_TRUE(bitwise_equal(d1, d2));
}

// On a host space contiguous rows take the vectorized row loops and LayoutLeft Views (columns
// contiguous) the team path (cross_entropy.hpp); both against each other in fp64, where their
// different summation orders may differ by a few ulps only.
TYPED_TEST(cross_entropy, row_path_and_team_path_agree_fp64) {
  using Space = TypeParam;
  using Mem = typename Space::memory_space;
  const auto l0 = make_logits(70);
  const auto t = make_targets(kN, kValid, 71);
  auto tv = int_view<Space>(t);
  auto L = make2<double, Space>(kN, kV, l0);
  Kokkos::View<double**, Kokkos::LayoutLeft, Mem> LL("LL", kN, kV), dLL("dLL", kN, kV);
  Kokkos::deep_copy(LL, L);
  pk::View1<double, Space> lse("lse", kN), lse_l("lse_l", kN);
  const double a = pk::cross_entropy_forward(Space(), L, tv, kValid, lse);
  const double b = pk::cross_entropy_forward(Space(), LL, tv, kValid, lse_l);
  EXPECT_NEAR(a, b, 1e-13 * std::fabs(a));
  expect_close(to_host(lse_l), to_host(lse), 0, 1e-14, "lse");
  pk::View2<double, Space> dL("dL", kN, kV);
  Kokkos::deep_copy(dLL, 7.0);
  pk::cross_entropy_backward(Space(), L, tv, lse, kValid, 0.25, dL);
  pk::cross_entropy_backward(Space(), LL, tv, lse, kValid, 0.25, dLL);
  pk::View2<double, Space> dR("dR", kN, kV);
  Kokkos::deep_copy(dR, dLL);  // back to row-major to compare element by element
  expect_close(to_host(dR), to_host(dL), 1e-16, 1e-13, "dlogits");
}

TYPED_TEST(cross_entropy, bad_targets_and_shapes_throw) {
  using Space = TypeParam;
  auto L = make2<float, Space>(kN, kV, make_logits(68));
  auto t = make_targets(kN, kValid, 69);
  t[5] = kValid;  // a padding column is not a valid target
  pk::View1<float, Space> lse("lse", kN), lse_bad("lb", kN + 1);
  expect_shape_error(
      [&] { pk::cross_entropy_forward(Space(), L, int_view<Space>(t), kValid, lse); },
      {"cross_entropy_forward", "1 target", "129"});
  t[5] = 0;
  expect_shape_error(
      [&] { pk::cross_entropy_forward(Space(), L, int_view<Space>(t), kValid, lse_bad); },
      {"lse", "[38]", "[37]"});
  expect_shape_error(
      [&] { pk::cross_entropy_forward(Space(), L, int_view<Space>(t), kV + 1, lse); },
      {"vocab_valid = 137", "[37,136]"});
  pk::View2<float, Space> dbad("db", kN, kV - 1);
  expect_shape_error(
      [&] { pk::cross_entropy_backward(Space(), L, int_view<Space>(t), lse, kValid, 1.0, dbad); },
      {"dlogits", "[37,135]", "[37,136]"});
}

}  // namespace
