// math::vexp and math::vtanh (math.hpp) against the C library in a wider type (std::exp and
// std::tanh of double for fp32, of long double for fp64) over the whole range: relative error
// in ulps of the result where it is a normal number, the flushed range (results below twice
// the smallest normal number) by absolute error, overflow to +inf, and the special values
// (+-inf, NaN, signed zeros); vexp_bounded (x <= 88 in fp32) the same way over its domain. Also run
// inside a Kokkos kernel on every execution space.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/math.hpp"

using namespace ktest;
namespace pm = paraxis::kernels::math;

namespace {

// Error bounds, in ulps of the exact result (the worst measured: vexp 0.94 fp32 / 0.86 fp64,
// vtanh 2.49 fp32 / 2.67 fp64 with GCC 12 -O3 -march=native; a margin for other compilers'
// fused multiply-add choices).
constexpr double kExpUlps = 1.5, kTanhUlps = 4.0;
// vexp_bounded (fp32: degree-5 polynomial; worst measured 1.99 ulp, GCC 12 -O3 -march=native);
// fp64 is vexp itself.
constexpr double kExpBoundedUlps = 2.5;

template <class A>
using Wide = std::conditional_t<std::is_same_v<A, float>, double, long double>;

// ulp of a value of type A near |ref| (ref normal in A).
template <class A>
double ulp_of(Wide<A> ref) {
  int e;
  std::frexp(static_cast<double>(std::fabs(ref)), &e);  // |ref| in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 1 - std::numeric_limits<A>::digits + 1);
}

// Evenly spaced bit patterns over every finite and infinite value of A (both signs), then
// uniformly spaced points over the interesting interval: each x with its error in ulps.
template <class A, class F>
void for_sample(std::uint64_t count, double lo, double hi, const F& f) {
  using U = std::conditional_t<sizeof(A) == 4, std::uint32_t, std::uint64_t>;
  const U step = static_cast<U>(std::numeric_limits<U>::max() / count);
  for (std::uint64_t k = 0; k < count; ++k) {
    const U bits = static_cast<U>(k * step);
    A x;
    std::memcpy(&x, &bits, sizeof(A));
    if (!std::isnan(x)) f(x);
  }
  for (std::uint64_t k = 0; k <= count; ++k) f(static_cast<A>(lo + (hi - lo) * k / count));
}

template <class A>
void check_exp() {
  const Wide<A> max_a = std::numeric_limits<A>::max();
  const Wide<A> flush = 2 * static_cast<Wide<A>>(std::numeric_limits<A>::min());
  double worst = 0.0;
  A at = 0;
  long checked = 0;
  for_sample<A>(1 << 20, std::is_same_v<A, float> ? -105.0 : -750.0,
                std::is_same_v<A, float> ? 90.0 : 712.0, [&](A x) {
                  const A got = pm::vexp(x);
                  const Wide<A> ref = std::exp(static_cast<Wide<A>>(x));
                  if (ref > max_a) {
                    ASSERT_TRUE(std::isinf(got) && got > 0) << x << " -> " << got;
                  } else if (ref < flush) {
                    ASSERT_LE(std::fabs(got - ref), flush) << x << " -> " << got;
                    ASSERT_GE(got, 0) << x;
                  } else {
                    const double err = static_cast<double>(std::fabs(got - ref)) / ulp_of<A>(ref);
                    if (!(err <= worst)) worst = err, at = x;
                    ++checked;
                  }
                });
  EXPECT_GT(checked, 1 << 19);
  EXPECT_LE(worst, kExpUlps) << "worst at x = " << at;
  std::cout << "vexp<" << (sizeof(A) == 4 ? "float" : "double") << ">: worst " << worst
            << " ulp at x = " << at << "\n";
}

TEST(math, vexp_fp32_within_bound_over_the_whole_range) {
  check_exp<float>();
}
TEST(math, vexp_fp64_within_bound_over_the_whole_range) {
  check_exp<double>();
}

// vexp_bounded over its domain, x <= exp_bounded_max: every binade of the negatives plus a dense
// sweep of [-90, exp_bounded_max]; below -87 (fp32) exactly 0; fp64 bitwise vexp.
template <class A>
void check_exp_bounded() {
  const Wide<A> flush = 2 * static_cast<Wide<A>>(std::numeric_limits<A>::min());
  const A top = pm::exp_bounded_max<A>();
  double worst = 0.0;
  A at = 0;
  for_sample<A>(1 << 20, std::is_same_v<A, float> ? -90.0 : -750.0, top, [&](A x) {
    if (!(x <= top)) return;
    const A got = pm::vexp_bounded(x);
    if constexpr (!std::is_same_v<A, float>) {
      ASSERT_EQ(got, pm::vexp(x)) << x;
    } else if (x < A(-87)) {
      ASSERT_EQ(got, A(0)) << x;
    }
    const Wide<A> ref = std::exp(static_cast<Wide<A>>(x));
    if (ref < flush) {
      ASSERT_LE(std::fabs(got - ref), flush) << x << " -> " << got;
      return;
    }
    const double err = static_cast<double>(std::fabs(got - ref)) / ulp_of<A>(ref);
    if (!(err <= worst)) worst = err, at = x;
  });
  const double bound = std::is_same_v<A, float> ? kExpBoundedUlps : kExpUlps;
  EXPECT_LE(worst, bound) << "worst at x = " << at;
  std::cout << "vexp_bounded<" << (sizeof(A) == 4 ? "float" : "double") << ">: worst " << worst
            << " ulp at x = " << at << "\n";
  const A inf = std::numeric_limits<A>::infinity();
  EXPECT_EQ(pm::vexp_bounded(A(0)), A(1));
  EXPECT_EQ(pm::vexp_bounded(A(-0.0)), A(1));
  EXPECT_EQ(pm::vexp_bounded(-inf), A(0));  // masked scores: probability exactly 0
  EXPECT_EQ(pm::vexp_bounded(std::numeric_limits<A>::lowest()), A(0));
  EXPECT_TRUE(std::isnan(pm::vexp_bounded(std::numeric_limits<A>::quiet_NaN())));
  EXPECT_TRUE(std::isfinite(pm::vexp_bounded(top)));
}

TEST(math, vexp_bounded_fp32_within_bound_over_its_domain) {
  check_exp_bounded<float>();
}
TEST(math, vexp_bounded_fp64_is_vexp) {
  check_exp_bounded<double>();
}

template <class A>
void check_tanh() {
  double worst = 0.0;
  A at = 0;
  for_sample<A>(1 << 20, -25.0, 25.0, [&](A x) {
    const A got = pm::vtanh(x);
    const Wide<A> ref = std::tanh(static_cast<Wide<A>>(x));
    if (std::fabs(ref) < std::numeric_limits<A>::min()) {
      ASSERT_LE(std::fabs(got - ref), std::numeric_limits<A>::denorm_min()) << x;
      return;
    }
    const double err = static_cast<double>(std::fabs(got - ref)) / ulp_of<A>(ref);
    if (!(err <= worst)) worst = err, at = x;
  });
  EXPECT_LE(worst, kTanhUlps) << "worst at x = " << at;
  std::cout << "vtanh<" << (sizeof(A) == 4 ? "float" : "double") << ">: worst " << worst
            << " ulp at x = " << at << "\n";
}

TEST(math, vtanh_fp32_within_bound_over_the_whole_range) {
  check_tanh<float>();
}
TEST(math, vtanh_fp64_within_bound_over_the_whole_range) {
  check_tanh<double>();
}

template <class A>
void check_special() {
  const A inf = std::numeric_limits<A>::infinity(), nan = std::numeric_limits<A>::quiet_NaN();
  EXPECT_EQ(pm::vexp(A(0)), A(1));
  EXPECT_EQ(pm::vexp(A(-0.0)), A(1));
  EXPECT_EQ(pm::vexp(-inf), A(0));  // a causal mask's -inf scores give probability 0
  EXPECT_EQ(pm::vexp(inf), inf);
  EXPECT_TRUE(std::isnan(pm::vexp(nan)));
  EXPECT_TRUE(std::isnan(pm::vexp(-nan)));
  EXPECT_EQ(pm::vexp(std::numeric_limits<A>::lowest()), A(0));
  EXPECT_EQ(pm::vexp(std::numeric_limits<A>::max()), inf);
  // Just below the overflow threshold the result is finite (the exponent is built in two
  // halves of the scale, so the largest binade is reachable).
  const A below = std::nextafter(std::log(std::numeric_limits<A>::max()), A(0));
  EXPECT_TRUE(std::isfinite(pm::vexp(below))) << below;
  EXPECT_EQ(pm::vtanh(A(0)), A(0));
  EXPECT_TRUE(std::signbit(pm::vtanh(A(-0.0))));
  EXPECT_EQ(pm::vtanh(inf), A(1));
  EXPECT_EQ(pm::vtanh(-inf), A(-1));
  EXPECT_EQ(pm::vtanh(A(30)), A(1));
  EXPECT_TRUE(std::isnan(pm::vtanh(nan)));
  // Tiny arguments: tanh(x) = x to the last bit (no cancellation).
  const A tiny = std::numeric_limits<A>::min() * A(3);
  EXPECT_EQ(pm::vtanh(tiny), tiny);
  EXPECT_EQ(pm::vtanh(-tiny), -tiny);
}

TEST(math, special_values_fp32) {
  check_special<float>();
}
TEST(math, special_values_fp64) {
  check_special<double>();
}

// The functions inside a kernel on every execution space (device code included in a GPU
// build): same bound against the C library.
PARAXIS_EXEC_SPACE_TEST_SUITE(math_kernel);

// A free function: CUDA's extended lambdas may not live in a test body (a private member).
template <class Space>
void exp_tanh_kernel(const V1<float, Space>& X, const V1<float, Space>& E,
                     const V1<float, Space>& T, const V1<float, Space>& B) {
  Kokkos::parallel_for(
      "test_math::kernel", Kokkos::RangePolicy<Space>(0, static_cast<int>(X.extent(0))),
      KOKKOS_LAMBDA(const int i) {
        E(i) = pm::vexp(X(i));
        T(i) = pm::vtanh(X(i) * 0.1f);
        B(i) = pm::vexp_bounded(X(i) < pm::exp_bounded_max<float>() ? X(i) : -X(i));
      });
}

TYPED_TEST(math_kernel, vexp_and_vtanh_in_a_kernel_fp32) {
  using Space = TypeParam;
  const int n = 4099;
  const auto x0 = rounded<float>(random_vec(n, 61, -90.0, 90.0));
  auto X = make1<float, Space>(x0);
  V1<float, Space> E("E", n), T("T", n), B("B", n);
  exp_tanh_kernel<Space>(X, E, T, B);
  const auto e = to_host(E), t = to_host(T), b = to_host(B);
  for (int i = 0; i < n; ++i) {
    const double re = std::exp(x0[i]);
    if (re > FLT_MAX) {
      EXPECT_TRUE(std::isinf(e[i])) << x0[i];
    } else if (re >= 2.0 * FLT_MIN) {
      EXPECT_LE(std::fabs(e[i] - re), kExpUlps * ulp_of<float>(re)) << x0[i];
    }
    const float xb = x0[i] < 88.0f ? float(x0[i]) : -float(x0[i]);
    const double rb = std::exp(static_cast<double>(xb));
    if (xb < -87.0f)
      EXPECT_EQ(b[i], 0.0f) << xb;
    else
      EXPECT_LE(std::fabs(b[i] - rb), kExpBoundedUlps * ulp_of<float>(rb)) << xb;
    const double rt = std::tanh(static_cast<double>(static_cast<float>(x0[i] * 0.1f)));
    EXPECT_LE(std::fabs(t[i] - rt), kTanhUlps * ulp_of<float>(rt)) << x0[i];
  }
}

}  // namespace
