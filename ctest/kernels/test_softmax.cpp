// Row and causal softmax against host loops in fp64 (fp64, fp32, bf16 storage), backward
// passes against central differences in fp64, masking, in-place use, reproducibility and
// shape errors.
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/softmax.hpp"

using namespace ktest;
namespace pk = paraxis::kernels;
using paraxis::bf16;

namespace {

// Every test runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(softmax);

// Row softmax of s[r*c + j] over j < len(r) (rest 0), scaled.
std::vector<double> softmax_ref(int rows, int c, const std::vector<double>& s, double scale,
                                bool causal) {
  std::vector<double> p(rows * c, 0.0);
  for (int r = 0; r < rows; ++r) {
    const int len = causal ? (r % c) + 1 : c;
    double mx = -1e300, sum = 0;
    for (int j = 0; j < len; ++j) mx = std::max(mx, scale * s[r * c + j]);
    for (int j = 0; j < len; ++j) sum += std::exp(scale * s[r * c + j] - mx);
    for (int j = 0; j < len; ++j) p[r * c + j] = std::exp(scale * s[r * c + j] - mx) / sum;
  }
  return p;
}

// Probabilities <= 1: fp32 ~1e-6 relative; bf16 one rounding of the output (2^-8 relative).
template <class T>
double rtol() {
  if constexpr (std::is_same_v<T, double>) return 1e-13;
  if constexpr (std::is_same_v<T, float>) return 5e-6;
  return 1.0 / 256;
}

template <class T, class Space>
void check_row_forward(int r = 53, int c = 129) {
  // Large offsets: without max subtraction exp would overflow.
  const auto s0 = rounded<T>(random_vec(r * c, 41, 80.0, 100.0));
  pk::View2<T, Space> P("P", r, c);
  pk::softmax_forward(Space(), make2<T, Space>(r, c, s0), P);
  expect_close(to_host(P), softmax_ref(r, c, s0, 1.0, false), 1e-30, rtol<T>(), "softmax");
}
TYPED_TEST(softmax, rows_match_host_fp64) {
  using Space = TypeParam;
  check_row_forward<double, Space>();
}
TYPED_TEST(softmax, rows_match_host_fp32) {
  using Space = TypeParam;
  check_row_forward<float, Space>();
}
TYPED_TEST(softmax, rows_match_host_bf16) {
  using Space = TypeParam;
  check_row_forward<bf16, Space>();
}
// bf16 rows wider than the host path's stack buffer of exponentials (softmax.hpp,
// kSoftmaxRowBuffer): the part beyond it is recomputed, and must round the same way.
TYPED_TEST(softmax, rows_wider_than_the_row_buffer_bf16) {
  using Space = TypeParam;
  check_row_forward<bf16, Space>(3, pk::detail::kSoftmaxRowBuffer + 77);
}

template <class T, class Space>
void check_causal_forward() {
  const int b = 3, t = 37;
  const double scale = 0.37;
  const auto s0 = rounded<T>(random_vec(b * t * t, 42, -8.0, 8.0));
  pk::View3<T, Space> P("P", b, t, t);
  Kokkos::deep_copy(P, T(5.0f));  // masked entries must be written as 0
  pk::causal_softmax_forward(Space(), make3<T, Space>(b, t, t, s0), scale, P);
  const auto got = to_host(P);
  expect_close(got, softmax_ref(b * t, t, s0, scale, true), 1e-30, rtol<T>(), "causal");
  for (int bb = 0; bb < b; ++bb)
    for (int i = 0; i < t; ++i)
      for (int j = i + 1; j < t; ++j) ASSERT_EQ(got[(bb * t + i) * t + j], 0.0);
}
TYPED_TEST(softmax, causal_matches_host_and_masks_fp64) {
  using Space = TypeParam;
  check_causal_forward<double, Space>();
}
TYPED_TEST(softmax, causal_matches_host_and_masks_fp32) {
  using Space = TypeParam;
  check_causal_forward<float, Space>();
}
TYPED_TEST(softmax, causal_matches_host_and_masks_bf16) {
  using Space = TypeParam;
  check_causal_forward<bf16, Space>();
}

TYPED_TEST(softmax, row_backward_matches_finite_differences_fp64) {
  using Space = TypeParam;
  const int r = 37, c = 53;
  const auto s0 = random_vec(r * c, 43, -3, 3);
  const auto w = random_vec(r * c, 44);
  const auto d = random_vec(r * c, 45);
  auto loss = [&](const std::vector<double>& s) {
    pk::View2<double, Space> P("P", r, c);
    pk::softmax_forward(Space(), make2<double, Space>(r, c, s), P);
    return dot(to_host(P), w);
  };
  pk::View2<double, Space> P("P", r, c), dS("dS", r, c);
  pk::softmax_forward(Space(), make2<double, Space>(r, c, s0), P);
  pk::softmax_backward(Space(), P, make2<double, Space>(r, c, w), dS);
  const double fd = directional_fd(loss, s0, d);
  EXPECT_NEAR(dot(to_host(dS), d), fd, 1e-7 * std::fabs(fd) + 1e-9);
}

TYPED_TEST(softmax, causal_backward_matches_finite_differences_fp64) {
  using Space = TypeParam;
  const int b = 2, t = 37;
  const double scale = 0.6;
  const auto s0 = random_vec(b * t * t, 46, -3, 3);
  const auto w = random_vec(b * t * t, 47);
  const auto d = random_vec(b * t * t, 48);
  auto loss = [&](const std::vector<double>& s) {
    pk::View3<double, Space> P("P", b, t, t);
    pk::causal_softmax_forward(Space(), make3<double, Space>(b, t, t, s), scale, P);
    return dot(to_host(P), w);
  };
  pk::View3<double, Space> P("P", b, t, t), dS("dS", b, t, t);
  pk::causal_softmax_forward(Space(), make3<double, Space>(b, t, t, s0), scale, P);
  Kokkos::deep_copy(dS, 3.0);
  pk::causal_softmax_backward(Space(), P, make3<double, Space>(b, t, t, w), scale, dS);
  const auto g = to_host(dS);
  const double fd = directional_fd(loss, s0, d);
  EXPECT_NEAR(dot(g, d), fd, 1e-7 * std::fabs(fd) + 1e-9);
  for (int r = 0; r < b * t; ++r)
    for (int j = r % t + 1; j < t; ++j) ASSERT_EQ(g[r * t + j], 0.0);
}

TYPED_TEST(softmax, in_place_equals_out_of_place_fp32) {
  using Space = TypeParam;
  const int b = 2, t = 53;
  const auto s0 = random_vec(b * t * t, 49, -4, 4);
  const auto w = random_vec(b * t * t, 50);
  auto S = make3<float, Space>(b, t, t, s0);
  pk::View3<float, Space> P("P", b, t, t), dS("dS", b, t, t);
  pk::causal_softmax_forward(Space(), S, 0.5, P);
  pk::causal_softmax_forward(Space(), S, 0.5, S);
  EXPECT_TRUE(bitwise_equal(S, P));
  auto dP = make3<float, Space>(b, t, t, w);
  pk::causal_softmax_backward(Space(), P, dP, 0.5, dS);
  pk::causal_softmax_backward(Space(), P, dP, 0.5, dP);
  EXPECT_TRUE(bitwise_equal(dP, dS));
}

TYPED_TEST(softmax, bf16_backward_close_to_fp64) {
  using Space = TypeParam;
  const int r = 53, c = 129;
  const auto s0 = rounded<bf16>(random_vec(r * c, 51, -3, 3));
  const auto w = rounded<bf16>(random_vec(r * c, 52));
  auto run = [&](auto tag) {
    using S = decltype(tag);
    pk::View2<S, Space> P("P", r, c), dS("dS", r, c);
    pk::softmax_forward(Space(), make2<S, Space>(r, c, s0), P);
    pk::softmax_backward(Space(), P, make2<S, Space>(r, c, w), dS);
    return to_host(dS);
  };
  // P stored in bf16 (2^-8 relative) enters dS = P (dP - <P,dP>) twice: |dS| <= ~0.1 here, so
  // an absolute 1e-3 plus 2^-7 relative bounds it.
  expect_close(run(bf16()), run(double()), 1e-3, 1.0 / 128, "softmax_backward bf16");
}

TYPED_TEST(softmax, repeated_calls_are_bitwise_identical) {
  using Space = TypeParam;
  const int r = 37, c = 129;
  auto S = make2<float, Space>(r, c, random_vec(r * c, 53, -5, 5));
  auto dP = make2<float, Space>(r, c, random_vec(r * c, 54));
  pk::View2<float, Space> P1("P1", r, c), P2("P2", r, c), d1("d1", r, c), d2("d2", r, c);
  pk::softmax_forward(Space(), S, P1);
  pk::softmax_forward(Space(), S, P2);
  pk::softmax_backward(Space(), P1, dP, d1);
  pk::softmax_backward(Space(), P1, dP, d2);
  EXPECT_TRUE(bitwise_equal(P1, P2));
  EXPECT_TRUE(bitwise_equal(d1, d2));
}

TYPED_TEST(softmax, shape_mismatch_names_both_shapes) {
  using Space = TypeParam;
  pk::View2<float, Space> S("S", 37, 53), P("P", 37, 52);
  expect_shape_error([&] { pk::softmax_forward(Space(), S, P); },
                     {"softmax_forward", "[37,52]", "[37,53]"});
  pk::View3<float, Space> S3("S3", 2, 37, 37), nonsq("ns", 2, 37, 36);
  expect_shape_error([&] { pk::causal_softmax_forward(Space(), nonsq, 1.0, S3); },
                     {"causal_softmax_forward", "[2,37,36]", "[2,37,37]"});
  expect_shape_error([&] { pk::causal_softmax_backward(Space(), S3, S3, 1.0, nonsq); },
                     {"causal_softmax_backward", "dS", "[2,37,36]"});
}

}  // namespace
