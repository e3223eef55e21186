// Causal multi-head attention against a naive host attention in fp64 (fp64, fp32, bf16
// storage), backward against central differences in fp64 and against the fp64 kernel for
// fp32, workspace sizes, reproducibility and shape errors.
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/attention.hpp"

using namespace ktest;
namespace pk = paraxis::kernels;
using paraxis::bf16;

namespace {

// Every test runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(attention);

const int kB = 2, kT = 37, kHeads = 3, kD = 11, kN = kB * kT, kE = kHeads * kD;

std::vector<double> naive_attention(const std::vector<double>& q, const std::vector<double>& k,
                                    const std::vector<double>& v) {
  std::vector<double> out(kN * kE, 0.0);
  const double scale = 1.0 / std::sqrt(double(kD));
  std::vector<double> p(kT);
  for (int b = 0; b < kB; ++b)
    for (int h = 0; h < kHeads; ++h)
      for (int i = 0; i < kT; ++i) {
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= i; ++j) {
          double s = 0;
          for (int d = 0; d < kD; ++d)
            s += q[(b * kT + i) * kE + h * kD + d] * k[(b * kT + j) * kE + h * kD + d];
          p[j] = scale * s;
          mx = std::max(mx, p[j]);
        }
        for (int j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int d = 0; d < kD; ++d) {
          double o = 0;
          for (int j = 0; j <= i; ++j) o += p[j] / sum * v[(b * kT + j) * kE + h * kD + d];
          out[(b * kT + i) * kE + h * kD + d] = o;
        }
      }
  return out;
}

struct Inputs {
  std::vector<double> q, k, v;
};
template <class T>
Inputs make_inputs(std::uint64_t seed) {
  // Range +-1.5: scaled scores up to ~|q||k|/sqrt(d) ~ 2.5, a peaked but not one-hot softmax.
  return {rounded<T>(random_vec(kN * kE, seed, -1.5, 1.5)),
          rounded<T>(random_vec(kN * kE, seed + 1, -1.5, 1.5)),
          rounded<T>(random_vec(kN * kE, seed + 2, -1.5, 1.5))};
}

template <class T, class Space>
std::vector<double> run_forward(const Inputs& in, pk::AttentionWorkspace<T, Space>& ws) {
  pk::View2<T, Space> Out("Out", kN, kE);
  pk::attention_forward(Space(), make2<T, Space>(kN, kE, in.q), make2<T, Space>(kN, kE, in.k),
                        make2<T, Space>(kN, kE, in.v), ws, Out);
  return to_host(Out);
}

template <class T, class Space>
void check_forward(double atol, double rtol) {
  const auto in = make_inputs<T>(201);
  pk::AttentionWorkspace<T, Space> ws(kB, kT, kHeads, kD);
  expect_close(run_forward(in, ws), naive_attention(in.q, in.k, in.v), atol, rtol, "Out");
}

// |Out| <= 1.5. fp32: ~1e-6. bf16: scores, probabilities and context are each stored in bf16
// (2^-8 relative); a score error of 2^-8 * |S| (|S| up to ~2.5 after scaling) shifts the
// probabilities by up to ~1%, partly averaging out over the context sum: two bf16 roundings
// (2^-7 relative) plus 5e-3 absolute (observed worst: 5.3e-3 at |Out| = 1.13).
TYPED_TEST(attention, forward_matches_naive_host_fp64) {
  using Space = TypeParam;
  check_forward<double, Space>(1e-13, 0);
}
TYPED_TEST(attention, forward_matches_naive_host_fp32) {
  using Space = TypeParam;
  check_forward<float, Space>(2e-6, 0);
}
TYPED_TEST(attention, forward_matches_naive_host_bf16) {
  using Space = TypeParam;
  check_forward<bf16, Space>(5e-3, 1.0 / 128);
}

template <class T, class Space>
std::vector<std::vector<double>> run_backward(const Inputs& in, const std::vector<double>& w) {
  pk::AttentionWorkspace<T, Space> ws(kB, kT, kHeads, kD);
  run_forward(in, ws);
  pk::View2<T, Space> dQ("dQ", kN, kE), dK("dK", kN, kE), dV("dV", kN, kE);
  Kokkos::deep_copy(dQ, T(1.0f));  // overwritten
  pk::attention_backward(Space(), make2<T, Space>(kN, kE, w), ws, dQ, dK, dV);
  return {to_host(dQ), to_host(dK), to_host(dV)};
}

TYPED_TEST(attention, backward_matches_finite_differences_fp64) {
  using Space = TypeParam;
  const auto in = make_inputs<double>(202);
  const auto w = random_vec(kN * kE, 205);
  auto loss = [&](const std::vector<double>& all) {
    Inputs p{std::vector<double>(all.begin(), all.begin() + kN * kE),
             std::vector<double>(all.begin() + kN * kE, all.begin() + 2 * kN * kE),
             std::vector<double>(all.begin() + 2 * kN * kE, all.end())};
    return dot(naive_attention(p.q, p.k, p.v), w);
  };
  const auto g = run_backward<double, Space>(in, w);
  std::vector<double> all(in.q), grad(g[0]);
  for (int t = 1; t < 3; ++t) {
    const auto& src = t == 1 ? in.k : in.v;
    all.insert(all.end(), src.begin(), src.end());
    grad.insert(grad.end(), g[t].begin(), g[t].end());
  }
  // Each of Q, K, V separately, then all together.
  for (int part = 0; part <= 3; ++part) {
    auto d = random_vec(all.size(), 206 + part);
    if (part < 3)
      for (std::size_t x = 0; x < d.size(); ++x)
        if (static_cast<int>(x / (kN * kE)) != part) d[x] = 0;
    const double fd = directional_fd(loss, all, d);
    EXPECT_NEAR(dot(grad, d), fd, 1e-7 * std::fabs(fd) + 1e-8) << "part " << part;
  }
}

TYPED_TEST(attention, backward_fp32_and_bf16_match_fp64) {
  using Space = TypeParam;
  const auto in32 = make_inputs<bf16>(210);  // bf16-exact inputs serve all three precisions
  const auto w = rounded<bf16>(random_vec(kN * kE, 213));
  const auto ref = run_backward<double, Space>(in32, w);
  const auto g32 = run_backward<float, Space>(in32, w);
  const auto g16 = run_backward<bf16, Space>(in32, w);
  const char* names[3] = {"dQ", "dK", "dV"};
  // Gradients are O(1): fp32 ~1e-5; bf16 stores every intermediate in bf16 (see forward) and
  // the backward chain rounds dP, dS and the gradients again: same bound as the forward pass
  // (observed worst: 9.7e-3 at |dV| = 2.02).
  for (int t = 0; t < 3; ++t) {
    expect_close(g32[t], ref[t], 1e-5, 1e-5, std::string(names[t]) + " fp32");
    expect_close(g16[t], ref[t], 5e-3, 1.0 / 128, std::string(names[t]) + " bf16");
  }
}

TYPED_TEST(attention, workspace_sizes_and_reproducibility) {
  using Space = TypeParam;
  pk::AttentionWorkspace<float, Space> ws(kB, kT, kHeads, kD);
  const std::size_t qkv = std::size_t(kB) * kHeads * kT * kD,
                    tt = std::size_t(kB) * kHeads * kT * kT;
  EXPECT_EQ(ws.saved_bytes(), (3 * qkv + tt) * sizeof(float));
  EXPECT_EQ(ws.bytes(), (8 * qkv + 2 * tt) * sizeof(float));
  const auto in = make_inputs<float>(220);
  const auto w = random_vec(kN * kE, 223);
  EXPECT_EQ(run_forward(in, ws), run_forward(in, ws));  // bitwise, same workspace reused
  const auto first = run_backward<float, Space>(in, w);
  EXPECT_EQ(first, (run_backward<float, Space>(in, w)));
}

TYPED_TEST(attention, shape_mismatch_names_both_shapes) {
  using Space = TypeParam;
  pk::AttentionWorkspace<float, Space> ws(kB, kT, kHeads, kD);
  pk::View2<float, Space> ok("ok", kN, kE), bad("bad", kN, kE + 1);
  expect_shape_error([&] { pk::attention_forward(Space(), ok, bad, ok, ws, ok); },
                     {"attention_forward", "K", "[74,34]", "[74,33]"});
  expect_shape_error([&] { pk::attention_backward(Space(), ok, ws, ok, ok, bad); },
                     {"attention_backward", "dV", "[74,34]", "[74,33]"});
  expect_shape_error([&] { pk::AttentionWorkspace<float, Space>(1, 0, 2, 4); }, {"seq = 0"});
}

}  // namespace
