// Elementwise kernels against host loops in fp64 on unaligned shapes, for fp64, fp32 and bf16
// storage; GELU backward against central differences; sum_squares reproducibility; shape
// errors naming both shapes.
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/elementwise.hpp"

using namespace ktest;
namespace pk = paraxis::kernels;
using paraxis::bf16;

namespace {

// Every test runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(elementwise);

// Tolerance on one stored result: fp64 and fp32 see only arithmetic rounding; bf16 rounds the
// stored result to 8 significant bits (relative error <= 2^-8 after rounding to nearest).
template <class T>
double rtol() {
  if constexpr (std::is_same_v<T, double>) return 1e-13;
  if constexpr (std::is_same_v<T, float>) return 2e-6;
  return 1.0 / 256;
}

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

template <class T, class Space>
void check_add_bias_scale() {
  const int n = 37, m = 53;
  const auto y0 = rounded<T>(random_vec(n * m, 1));
  const auto x0 = rounded<T>(random_vec(n * m, 2));
  const auto b0 = rounded<T>(random_vec(m, 3));
  auto Y = make2<T, Space>(n, m, y0);
  auto X = make2<T, Space>(n, m, x0);
  auto b = make1<T, Space>(b0);
  Space space;
  pk::add_inplace(space, Y, X);
  pk::bias_add(space, Y, b);
  pk::scale_inplace(space, Y, -0.75);
  // Reference rounds where the kernel stores (after each kernel).
  std::vector<double> ref(n * m);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      double v = static_cast<double>(static_cast<T>(y0[i * m + j] + x0[i * m + j]));
      v = static_cast<double>(static_cast<T>(v + b0[j]));
      ref[i * m + j] = -0.75 * v;
    }
  expect_close(to_host(Y), ref, 1e-30, rtol<T>(), "add+bias+scale");

  // Rank-1 variants.
  auto y1 = make1<T, Space>(b0);
  auto x1 = make1<T, Space>(rounded<T>(random_vec(m, 4)));
  const auto x1h = to_host(x1);
  pk::add_inplace(space, y1, x1);
  pk::scale_inplace(space, y1, 2.0);
  std::vector<double> ref1(m);
  for (int j = 0; j < m; ++j) ref1[j] = 2.0 * static_cast<double>(static_cast<T>(b0[j] + x1h[j]));
  expect_close(to_host(y1), ref1, 1e-30, rtol<T>(), "rank-1 add+scale");
}

TYPED_TEST(elementwise, add_bias_scale_match_host_fp64) {
  using Space = TypeParam;
  check_add_bias_scale<double, Space>();
}
TYPED_TEST(elementwise, add_bias_scale_match_host_fp32) {
  using Space = TypeParam;
  check_add_bias_scale<float, Space>();
}
TYPED_TEST(elementwise, add_bias_scale_match_host_bf16) {
  using Space = TypeParam;
  check_add_bias_scale<bf16, Space>();
}

template <class T, class Space>
void check_bias_grad() {
  using A = pk::acc_t<T>;
  const int n = 129, m = 37;
  const auto dy0 = rounded<T>(random_vec(n * m, 5));
  const auto db0 = random_vec(m, 6);
  auto dY = make2<T, Space>(n, m, dy0);
  auto db = make1<A, Space>(db0);
  pk::bias_grad_accumulate(Space(), dY, db);
  std::vector<double> ref(db0);
  for (int j = 0; j < m; ++j) {
    ref[j] = static_cast<double>(static_cast<A>(db0[j]));
    for (int i = 0; i < n; ++i) ref[j] += dy0[i * m + j];
  }
  // Sum of 129 terms of magnitude <= 1 in A: error <= n * eps(A) * max partial (~n).
  const double atol = std::is_same_v<A, double> ? 1e-12 : 129 * 6e-8 * 10;
  expect_close(to_host(db), ref, atol, 0.0, "bias_grad_accumulate");
}

TYPED_TEST(elementwise, bias_grad_accumulate_sums_rows_fp64) {
  using Space = TypeParam;
  check_bias_grad<double, Space>();
}
TYPED_TEST(elementwise, bias_grad_accumulate_sums_rows_fp32) {
  using Space = TypeParam;
  check_bias_grad<float, Space>();
}
TYPED_TEST(elementwise, bias_grad_accumulate_sums_rows_bf16) {
  using Space = TypeParam;
  check_bias_grad<bf16, Space>();
}

TYPED_TEST(elementwise, convert_rounds_float_to_bf16_and_back) {
  using Space = TypeParam;
  const int n = 53, m = 37;
  const auto x0 = random_vec(n * m, 7, -100.0, 100.0);
  auto src = make2<float, Space>(n, m, x0);
  pk::View2<bf16, Space> dst("dst", n, m);
  pk::convert(Space(), src, dst);
  const auto srch = to_host(src);
  const auto got = to_host(dst);
  for (int k = 0; k < n * m; ++k)
    ASSERT_EQ(got[k], static_cast<double>(static_cast<float>(bf16(static_cast<float>(srch[k])))));
  // Widening is exact.
  pk::View1<double, Space> wide("wide", m);
  auto row = make1<bf16, Space>(std::vector<double>(got.begin(), got.begin() + m));
  pk::convert(Space(), row, wide);
  const auto w = to_host(wide);
  for (int j = 0; j < m; ++j) ASSERT_EQ(w[j], got[j]);
}

TYPED_TEST(elementwise, sum_squares_matches_host_and_is_reproducible) {
  using Space = TypeParam;
  const std::size_t n = 10007;  // more than the fixed number of partial sums, not a multiple
  const auto x0 = rounded<float>(random_vec(n, 8));
  auto X = make1<float, Space>(x0);
  double ref = 0.0;
  for (double x : x0) ref += x * x;
  const double a = pk::sum_squares(Space(), X);
  EXPECT_NEAR(a, ref, 1e-12 * ref);
  for (int rep = 0; rep < 3; ++rep) EXPECT_EQ(pk::sum_squares(Space(), X), a);  // bitwise
  // Rank-2 form sums every element.
  auto X2 = make2<float, Space>(53, 37, std::vector<double>(x0.begin(), x0.begin() + 53 * 37));
  double ref2 = 0.0;
  for (int k = 0; k < 53 * 37; ++k) ref2 += x0[k] * x0[k];
  EXPECT_NEAR(pk::sum_squares(Space(), X2), ref2, 1e-12 * ref2);
  EXPECT_EQ(pk::sum_squares(Space(), pk::View1<float, Space>("empty", 0)), 0.0);
}

template <class T, class Space>
void check_gelu_forward() {
  const int n = 37, m = 129;
  const auto x0 = rounded<T>(random_vec(n * m, 9, -4.0, 4.0));
  auto X = make2<T, Space>(n, m, x0);
  pk::View2<T, Space> Y("Y", n, m);
  pk::gelu_forward(Space(), X, Y);
  std::vector<double> ref(n * m);
  for (int k = 0; k < n * m; ++k) ref[k] = gelu_ref(x0[k]);
  // fp32 tanh is accurate to a few ulps; values near 0 need an absolute floor.
  const double atol = std::is_same_v<T, double> ? 1e-15 : 1e-6;
  expect_close(to_host(Y), ref, atol, rtol<T>() * 4, "gelu_forward");
}

TYPED_TEST(elementwise, gelu_forward_matches_host_fp64) {
  using Space = TypeParam;
  check_gelu_forward<double, Space>();
}
TYPED_TEST(elementwise, gelu_forward_matches_host_fp32) {
  using Space = TypeParam;
  check_gelu_forward<float, Space>();
}
TYPED_TEST(elementwise, gelu_forward_matches_host_bf16) {
  using Space = TypeParam;
  check_gelu_forward<bf16, Space>();
}

TYPED_TEST(elementwise, gelu_backward_matches_finite_differences_fp64) {
  using Space = TypeParam;
  const int n = 37, m = 53;
  const auto x0 = random_vec(n * m, 10, -4.0, 4.0);
  const auto w = random_vec(n * m, 11);
  const auto d = random_vec(n * m, 12);
  auto loss = [&](const std::vector<double>& x) {
    auto X = make2<double, Space>(n, m, x);
    pk::View2<double, Space> Y("Y", n, m);
    pk::gelu_forward(Space(), X, Y);
    return dot(to_host(Y), w);
  };
  auto X = make2<double, Space>(n, m, x0);
  auto dY = make2<double, Space>(n, m, w);
  pk::View2<double, Space> dX("dX", n, m);
  Kokkos::deep_copy(dX, 123.0);  // overwritten, not accumulated
  pk::gelu_backward(Space(), X, dY, dX);
  const double analytic = dot(to_host(dX), d);
  const double fd = directional_fd(loss, x0, d);
  EXPECT_NEAR(analytic, fd, 1e-7 * std::fabs(fd) + 1e-9);
  // Elementwise too: gelu'(x) * w, against a difference quotient per element.
  const auto g = to_host(dX);
  for (int k = 0; k < n * m; k += 97) {
    const double h = 1e-6;
    const double fdk = (gelu_ref(x0[k] + h) - gelu_ref(x0[k] - h)) / (2 * h) * w[k];
    EXPECT_NEAR(g[k], fdk, 1e-8) << k;
  }
}

TYPED_TEST(elementwise, gelu_backward_bf16_close_to_fp64) {
  using Space = TypeParam;
  const int n = 37, m = 53;
  const auto x0 = rounded<bf16>(random_vec(n * m, 13, -4.0, 4.0));
  const auto w = rounded<bf16>(random_vec(n * m, 14));
  pk::View2<bf16, Space> dX("dX", n, m);
  pk::gelu_backward(Space(), make2<bf16, Space>(n, m, x0), make2<bf16, Space>(n, m, w), dX);
  std::vector<double> ref(n * m);
  for (int k = 0; k < n * m; ++k) {
    const double h = 1e-6;
    ref[k] = (gelu_ref(x0[k] + h) - gelu_ref(x0[k] - h)) / (2 * h) * w[k];
  }
  // gelu' <= 1.13, |w| <= 1: one bf16 rounding of the result plus fp32 arithmetic.
  expect_close(to_host(dX), ref, 1e-5, 1.0 / 256 + 1e-5, "gelu_backward bf16");
}

TYPED_TEST(elementwise, repeated_calls_are_bitwise_identical) {
  using Space = TypeParam;
  const int n = 53, m = 129;
  auto X = make2<float, Space>(n, m, random_vec(n * m, 15, -3, 3));
  auto dY = make2<float, Space>(n, m, random_vec(n * m, 16));
  pk::View2<float, Space> Y1("Y1", n, m), Y2("Y2", n, m), d1("d1", n, m), d2("d2", n, m);
  pk::View1<float, Space> b1("b1", m), b2("b2", m);
  pk::gelu_forward(Space(), X, Y1);
  pk::gelu_forward(Space(), X, Y2);
  pk::gelu_backward(Space(), X, dY, d1);
  pk::gelu_backward(Space(), X, dY, d2);
  pk::bias_grad_accumulate(Space(), dY, b1);
  pk::bias_grad_accumulate(Space(), dY, b2);
  EXPECT_TRUE(bitwise_equal(Y1, Y2));
  EXPECT_TRUE(bitwise_equal(d1, d2));
  EXPECT_TRUE(bitwise_equal(b1, b2));
}

TYPED_TEST(elementwise, shape_mismatch_names_both_shapes) {
  using Space = TypeParam;
  pk::View2<float, Space> Y("Y", 37, 53), X("X", 37, 52);
  pk::View1<float, Space> b("b", 54);
  expect_shape_error([&] { pk::add_inplace(Space(), Y, X); },
                     {"add_inplace", "[37,52]", "[37,53]"});
  expect_shape_error([&] { pk::bias_add(Space(), Y, b); }, {"bias_add", "[54]", "[53]"});
  expect_shape_error([&] { pk::bias_grad_accumulate(Space(), Y, b); }, {"[54]", "[53]"});
  expect_shape_error([&] { pk::gelu_forward(Space(), Y, X); },
                     {"gelu_forward", "[37,52]", "[37,53]"});
  pk::View2<bf16, Space> D("D", 36, 53);
  expect_shape_error([&] { pk::convert(Space(), Y, D); }, {"convert", "[36,53]", "[37,53]"});
}

}  // namespace
