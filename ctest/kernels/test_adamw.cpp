// AdamW against a host loop in fp64 over several steps (fp64 and fp32 state, fp32 and bf16
// gradients), weight decay decoupled from the gradient, reproducibility and argument errors.
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/adamw.hpp"

using namespace ktest;
namespace pk = paraxis::kernels;
using paraxis::bf16;

namespace {

// Every test runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(adamw);

struct HostAdamW {
  std::vector<double> m, v, p;
  void step(const pk::AdamWHyper& h, int t, double gs, const std::vector<double>& grad) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double g = gs * grad[i];
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * g;
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * g * g;
      p[i] -= h.lr * h.weight_decay * p[i];
      const double mhat = m[i] / (1 - std::pow(h.beta1, t));
      const double vhat = v[i] / (1 - std::pow(h.beta2, t));
      p[i] -= h.lr * mhat / (std::sqrt(vhat) + h.eps);
    }
  }
};

template <class G, class M, class Space>
void check_steps(double tol) {
  const int n = 129;
  pk::AdamWHyper h{1e-2, 0.9, 0.95, 1e-8, 0.1};
  const auto p0 = random_vec(n, 91);
  HostAdamW ref{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0), rounded<M>(p0)};
  auto m = make1<M, Space>(std::vector<double>(n, 0.0));
  auto v = make1<M, Space>(std::vector<double>(n, 0.0));
  auto p = make1<M, Space>(p0);
  for (int t = 1; t <= 5; ++t) {
    const auto g = rounded<G>(random_vec(n, 100 + t, -2, 2));
    const double gs = 0.5 + 0.1 * t;
    pk::adamw_update(Space(), h, t, gs, make1<G, Space>(g), m, v, p);
    ref.step(h, t, gs, g);
  }
  // Each step moves p by ~lr; the update is well conditioned, so the state's own precision
  // sets the error: ~1e-15 in fp64, ~1e-6 relative in fp32 (|p| ~ 1).
  expect_close(to_host(p), ref.p, tol, 0, "master");
  expect_close(to_host(m), ref.m, tol, 0, "m");
  expect_close(to_host(v), ref.v, tol, 0, "v");
}

TYPED_TEST(adamw, five_steps_match_host_fp64) {
  using Space = TypeParam;
  check_steps<double, double, Space>(1e-14);
}
TYPED_TEST(adamw, five_steps_match_host_fp32_state) {
  using Space = TypeParam;
  check_steps<float, float, Space>(2e-6);
}
TYPED_TEST(adamw, five_steps_match_host_bf16_grad_fp32_state) {
  using Space = TypeParam;
  check_steps<bf16, float, Space>(2e-6);
}

TYPED_TEST(adamw, first_step_moves_by_lr_and_decay_is_decoupled) {
  using Space = TypeParam;
  // Step 1 with bias correction: mhat = g, vhat = g^2, so p -= lr * sign(g) (eps aside), and
  // weight decay adds exactly -lr * wd * p whatever the gradient.
  pk::AdamWHyper h{0.01};
  h.weight_decay = 0.5;
  auto p = make1<double, Space>({1.0, -2.0, 3.0});
  auto m = make1<double, Space>({0, 0, 0});
  auto v = make1<double, Space>({0, 0, 0});
  pk::adamw_update(Space(), h, 1, 1.0, make1<double, Space>({4.0, -1e-3, 0.0}), m, v, p);
  const auto got = to_host(p);
  EXPECT_NEAR(got[0], 1.0 - 0.01 * 0.5 * 1.0 - 0.01, 1e-9);
  EXPECT_NEAR(got[1], -2.0 + 0.01 * 0.5 * 2.0 + 0.01, 1e-7);
  EXPECT_DOUBLE_EQ(got[2], 3.0 - 0.01 * 0.5 * 3.0);  // zero gradient: decay only
}

TYPED_TEST(adamw, repeated_calls_are_bitwise_identical) {
  using Space = TypeParam;
  const int n = 53;
  auto g = make1<float, Space>(random_vec(n, 92));
  std::vector<std::vector<double>> out[2];
  for (int rep = 0; rep < 2; ++rep) {
    auto m = make1<float, Space>(random_vec(n, 93, 0, 0.1));
    auto v = make1<float, Space>(random_vec(n, 94, 0, 0.1));
    auto p = make1<float, Space>(random_vec(n, 95));
    pk::adamw_update(Space(), pk::AdamWHyper{3e-4}, 7, 0.25, g, m, v, p);
    out[rep] = {to_host(m), to_host(v), to_host(p)};
  }
  for (int k = 0; k < 3; ++k) EXPECT_EQ(out[0][k], out[1][k]);
}

TYPED_TEST(adamw, bad_arguments_throw) {
  using Space = TypeParam;
  auto a = make1<float, Space>(std::vector<double>(37, 0.0));
  auto b = make1<float, Space>(std::vector<double>(36, 0.0));
  expect_shape_error([&] { pk::adamw_update(Space(), pk::AdamWHyper{1e-3}, 1, 1.0, b, a, a, a); },
                     {"adamw_update", "grad", "[36]", "[37]"});
  expect_shape_error([&] { pk::adamw_update(Space(), pk::AdamWHyper{1e-3}, 0, 1.0, a, a, a, a); },
                     {"step = 0"});
}

}  // namespace
