// LayerNorm forward against a host loop in fp64 (fp64, fp32, bf16 storage), backward against
// central differences in fp64 and against the fp64 kernel for fp32/bf16, reproducibility and
// shape errors.
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/layernorm.hpp"

using namespace ktest;
namespace pk = paraxis::kernels;
using paraxis::bf16;

namespace {

// Every test runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(layernorm);

const double kEps = 1e-5;

struct LnRef {
  std::vector<double> y, mean, rstd;
};

LnRef ln_ref(int n, int h, const std::vector<double>& x, const std::vector<double>& g,
             const std::vector<double>& b) {
  LnRef r{std::vector<double>(n * h), std::vector<double>(n), std::vector<double>(n)};
  for (int i = 0; i < n; ++i) {
    double mu = 0, var = 0;
    for (int j = 0; j < h; ++j) mu += x[i * h + j];
    mu /= h;
    for (int j = 0; j < h; ++j) var += (x[i * h + j] - mu) * (x[i * h + j] - mu);
    var /= h;
    const double rs = 1.0 / std::sqrt(var + kEps);
    for (int j = 0; j < h; ++j) r.y[i * h + j] = (x[i * h + j] - mu) * rs * g[j] + b[j];
    r.mean[i] = mu;
    r.rstd[i] = rs;
  }
  return r;
}

template <class T, class Space>
void check_forward(double atol, double rtol) {
  using A = pk::acc_t<T>;
  const int n = 37, h = 129;
  // Offset mean: the two-pass variance must not cancel.
  const auto x0 = rounded<T>(random_vec(n * h, 21, 2.0, 4.0));
  const auto g0 = rounded<T>(random_vec(h, 22, 0.5, 1.5));
  const auto b0 = rounded<T>(random_vec(h, 23));
  auto X = make2<T, Space>(n, h, x0);
  pk::View2<T, Space> Y("Y", n, h);
  pk::View1<A, Space> mean("mean", n), rstd("rstd", n);
  pk::layernorm_forward(Space(), X, make1<T, Space>(g0), make1<T, Space>(b0), kEps, Y, mean, rstd);
  const auto ref = ln_ref(n, h, x0, g0, b0);
  expect_close(to_host(Y), ref.y, atol, rtol, "Y");
  expect_close(to_host(mean), ref.mean, 0, std::is_same_v<A, double> ? 1e-14 : 1e-6, "mean");
  expect_close(to_host(rstd), ref.rstd, 0, std::is_same_v<A, double> ? 1e-12 : 1e-4, "rstd");
}

// |Y| <~ 4: fp64 is exact to ~1e-14; fp32 loses ~1e-6 relative in the statistics (inputs with
// std ~0.6 around mean 3); bf16 adds one output rounding (2^-8 relative).
TYPED_TEST(layernorm, forward_matches_host_fp64) {
  using Space = TypeParam;
  check_forward<double, Space>(1e-12, 1e-12);
}
TYPED_TEST(layernorm, forward_matches_host_fp32) {
  using Space = TypeParam;
  check_forward<float, Space>(2e-5, 1e-5);
}
TYPED_TEST(layernorm, forward_matches_host_bf16) {
  using Space = TypeParam;
  check_forward<bf16, Space>(1e-3, 1.0 / 256);
}

TYPED_TEST(layernorm, backward_matches_finite_differences_fp64) {
  using Space = TypeParam;
  const int n = 37, h = 53;
  const auto x0 = random_vec(n * h, 24, -2, 2);
  const auto g0 = random_vec(h, 25, 0.5, 1.5);
  const auto b0 = random_vec(h, 26);
  const auto w = random_vec(n * h, 27);
  // One direction through all inputs: [dx | dgamma | dbeta].
  std::vector<double> all(x0);
  all.insert(all.end(), g0.begin(), g0.end());
  all.insert(all.end(), b0.begin(), b0.end());
  const auto dir = random_vec(all.size(), 28);
  auto loss = [&](const std::vector<double>& p) {
    std::vector<double> x(p.begin(), p.begin() + n * h),
        g(p.begin() + n * h, p.begin() + n * h + h), b(p.begin() + n * h + h, p.end());
    pk::View2<double, Space> Y("Y", n, h);
    pk::View1<double, Space> m("m", n), r("r", n);
    pk::layernorm_forward(Space(), make2<double, Space>(n, h, x), make1<double, Space>(g),
                          make1<double, Space>(b), kEps, Y, m, r);
    return dot(to_host(Y), w);
  };
  auto X = make2<double, Space>(n, h, x0);
  auto G = make1<double, Space>(g0);
  pk::View2<double, Space> Y("Y", n, h), dX("dX", n, h);
  pk::View1<double, Space> m("m", n), r("r", n);
  pk::layernorm_forward(Space(), X, G, make1<double, Space>(b0), kEps, Y, m, r);
  Kokkos::deep_copy(dX, 7.0);  // overwritten
  // dgamma/dbeta accumulate onto existing values.
  const auto dg0 = random_vec(h, 29), db0 = random_vec(h, 30);
  auto dG = make1<double, Space>(dg0), dB = make1<double, Space>(db0);
  pk::layernorm_backward(Space(), make2<double, Space>(n, h, w), X, G, m, r, dX, dG, dB);
  auto dg = to_host(dG), db = to_host(dB);
  for (int j = 0; j < h; ++j) {
    dg[j] -= dg0[j];
    db[j] -= db0[j];
  }
  std::vector<double> grad = to_host(dX);
  grad.insert(grad.end(), dg.begin(), dg.end());
  grad.insert(grad.end(), db.begin(), db.end());
  const double fd = directional_fd(loss, all, dir);
  EXPECT_NEAR(dot(grad, dir), fd, 1e-7 * std::fabs(fd) + 1e-8);
  // The X part alone (the row-coupling terms are easy to get wrong independently).
  std::vector<double> dir_x(dir);
  for (std::size_t k = n * h; k < dir_x.size(); ++k) dir_x[k] = 0;
  EXPECT_NEAR(dot(grad, dir_x), directional_fd(loss, all, dir_x), 1e-7 * std::fabs(fd) + 1e-8);
}

template <class T, class Space>
void check_backward_vs_fp64(double atol, double rtol) {
  const int n = 53, h = 129;
  const auto x0 = rounded<T>(random_vec(n * h, 31, -2, 2));
  const auto g0 = rounded<T>(random_vec(h, 32, 0.5, 1.5));
  const auto b0 = rounded<T>(random_vec(h, 33));
  const auto w0 = rounded<T>(random_vec(n * h, 34));
  auto run = [&](auto tag) {
    using S = decltype(tag);
    using SA = pk::acc_t<S>;
    auto X = make2<S, Space>(n, h, x0);
    auto G = make1<S, Space>(g0);
    pk::View2<S, Space> Y("Y", n, h), dX("dX", n, h);
    pk::View1<SA, Space> m("m", n), r("r", n), dG("dG", h), dB("dB", h);
    pk::layernorm_forward(Space(), X, G, make1<S, Space>(b0), kEps, Y, m, r);
    pk::layernorm_backward(Space(), make2<S, Space>(n, h, w0), X, G, m, r, dX, dG, dB);
    return std::vector<std::vector<double>>{to_host(dX), to_host(dG), to_host(dB)};
  };
  const auto ref = run(double());
  const auto got = run(T());
  expect_close(got[0], ref[0], atol, rtol, "dX");
  // dgamma/dbeta sum 53 rows in A (fp32): error ~ n * 6e-8 * |terms| ~ 1e-5.
  expect_close(got[1], ref[1], 1e-4, 1e-5, "dgamma");
  expect_close(got[2], ref[2], 1e-4, 1e-5, "dbeta");
}

// dX magnitudes ~1: fp32 ~1e-6; bf16 one output rounding plus fp32 arithmetic.
TYPED_TEST(layernorm, backward_fp32_matches_fp64) {
  using Space = TypeParam;
  check_backward_vs_fp64<float, Space>(1e-5, 1e-5);
}
TYPED_TEST(layernorm, backward_bf16_matches_fp64) {
  using Space = TypeParam;
  check_backward_vs_fp64<bf16, Space>(1e-3, 1.0 / 256);
}

// More rows than one block of the host backward pass (layernorm.hpp, kLnRowBlock = 64; the
// last block partial) and a width with a lane tail: dX, dgamma and dbeta against host loops in
// fp64 (dgamma/dbeta accumulate onto their inputs).
TYPED_TEST(layernorm, backward_over_row_blocks_matches_host_fp64) {
  using Space = TypeParam;
  const int n = 150, h = 70;
  const auto x0 = random_vec(n * h, 39, -2, 2), g0 = random_vec(h, 40, 0.5, 1.5),
             dy0 = random_vec(n * h, 41), dg0 = random_vec(h, 42), db0 = random_vec(h, 43);
  const auto ref = ln_ref(n, h, x0, g0, std::vector<double>(h, 0.0));
  auto X = make2<double, Space>(n, h, x0);
  auto G = make1<double, Space>(g0);
  pk::View2<double, Space> dX("dX", n, h);
  auto dG = make1<double, Space>(dg0), dB = make1<double, Space>(db0);
  pk::layernorm_backward(Space(), make2<double, Space>(n, h, dy0), X, G,
                         make1<double, Space>(ref.mean), make1<double, Space>(ref.rstd), dX, dG,
                         dB);
  std::vector<double> dx(n * h), dg(dg0), db(db0);
  for (int i = 0; i < n; ++i) {
    double mg = 0, mgx = 0;
    for (int j = 0; j < h; ++j) {
      const double xhat = (x0[i * h + j] - ref.mean[i]) * ref.rstd[i];
      mg += dy0[i * h + j] * g0[j] / h;
      mgx += dy0[i * h + j] * g0[j] * xhat / h;
      dg[j] += dy0[i * h + j] * xhat;
      db[j] += dy0[i * h + j];
    }
    for (int j = 0; j < h; ++j) {
      const double xhat = (x0[i * h + j] - ref.mean[i]) * ref.rstd[i];
      dx[i * h + j] = ref.rstd[i] * (dy0[i * h + j] * g0[j] - mg - xhat * mgx);
    }
  }
  expect_close(to_host(dX), dx, 1e-12, 1e-12, "dX");
  expect_close(to_host(dG), dg, 1e-11, 1e-12, "dgamma");
  expect_close(to_host(dB), db, 1e-11, 1e-12, "dbeta");
}

TYPED_TEST(layernorm, repeated_calls_are_bitwise_identical) {
  using Space = TypeParam;
  const int n = 37, h = 129;
  auto X = make2<float, Space>(n, h, random_vec(n * h, 35));
  auto G = make1<float, Space>(random_vec(h, 36));
  auto B = make1<float, Space>(random_vec(h, 37));
  auto dY = make2<float, Space>(n, h, random_vec(n * h, 38));
  std::vector<std::vector<double>> out[2];
  for (int rep = 0; rep < 2; ++rep) {
    pk::View2<float, Space> Y("Y", n, h), dX("dX", n, h);
    pk::View1<float, Space> m("m", n), r("r", n), dG("dG", h), dB("dB", h);
    pk::layernorm_forward(Space(), X, G, B, kEps, Y, m, r);
    pk::layernorm_backward(Space(), dY, X, G, m, r, dX, dG, dB);
    out[rep] = {to_host(Y), to_host(m), to_host(r), to_host(dX), to_host(dG), to_host(dB)};
  }
  for (int k = 0; k < 6; ++k) EXPECT_EQ(out[0][k], out[1][k]) << k;
}

TYPED_TEST(layernorm, shape_mismatch_names_both_shapes) {
  using Space = TypeParam;
  pk::View2<float, Space> X("X", 37, 53), Y("Y", 37, 53), Ybad("Yb", 36, 53);
  pk::View1<float, Space> g("g", 53), gbad("gb", 52), m("m", 37), r("r", 37);
  expect_shape_error([&] { pk::layernorm_forward(Space(), X, gbad, g, kEps, Y, m, r); },
                     {"layernorm_forward", "gamma", "[52]", "[53]"});
  expect_shape_error([&] { pk::layernorm_forward(Space(), X, g, g, kEps, Ybad, m, r); },
                     {"Y", "[36,53]", "[37,53]"});
  expect_shape_error([&] { pk::layernorm_backward(Space(), Ybad, X, g, m, r, Y, g, g); },
                     {"layernorm_backward", "dY", "[36,53]", "[37,53]"});
}

}  // namespace
