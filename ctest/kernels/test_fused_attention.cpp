// Fused causal attention (fused_attention.hpp) against the unfused path (attention.hpp): forward
// and backward in fp64 to 1e-10, fp32 and bf16 against the fp64 reference (bf16 no worse than
// the unfused bf16 path), the backward against central differences of the fused forward in
// fp64, the causal mask, tile-boundary shapes (seq not a multiple of the tile, one row, one
// tile), heads computed alike in any shard of the heads, the split backward's in-place
// gradients, and the O(seq) workspace.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/attention.hpp"
#include "paraxis/kernels/fused_attention.hpp"

using namespace ktest;
namespace pk = paraxis::kernels;
using paraxis::bf16;

namespace {

PARAXIS_EXEC_SPACE_TEST_SUITE(fused_attention);

struct Shape {
  int batch, seq, heads, hd, tile;  // tile 0: chosen by the kernel
  int n() const { return batch * seq; }
  int e() const { return heads * hd; }
  std::size_t size() const { return std::size_t(n()) * e(); }
};

struct Inputs {
  std::vector<double> q, k, v, w;  // w: the output gradient
};
template <class T>
Inputs make_inputs(const Shape& s, std::uint64_t seed) {
  // +-1.5 as test_attention.cpp: a peaked but not one-hot softmax.
  return {rounded<T>(random_vec(s.size(), seed, -1.5, 1.5)),
          rounded<T>(random_vec(s.size(), seed + 1, -1.5, 1.5)),
          rounded<T>(random_vec(s.size(), seed + 2, -1.5, 1.5)),
          rounded<T>(random_vec(s.size(), seed + 3))};
}

// Out, dQ, dK, dV of the unfused path.
template <class T, class Space>
std::vector<std::vector<double>> unfused(const Shape& s, const Inputs& in) {
  pk::AttentionWorkspace<T, Space> ws(s.batch, s.seq, s.heads, s.hd);
  pk::View2<T, Space> Out("Out", s.n(), s.e()), dQ("dQ", s.n(), s.e()), dK("dK", s.n(), s.e()),
      dV("dV", s.n(), s.e());
  pk::attention_forward(Space(), make2<T, Space>(s.n(), s.e(), in.q),
                        make2<T, Space>(s.n(), s.e(), in.k), make2<T, Space>(s.n(), s.e(), in.v),
                        ws, Out);
  pk::attention_backward(Space(), make2<T, Space>(s.n(), s.e(), in.w), ws, dQ, dK, dV);
  return {to_host(Out), to_host(dQ), to_host(dK), to_host(dV)};
}

// Out, dQ, dK, dV of the fused path (backward skipped when with_backward is false).
template <class T, class Space>
std::vector<std::vector<double>> fused(const Shape& s, const Inputs& in,
                                       bool with_backward = true) {
  pk::FusedAttentionWorkspace<T, Space> ws(s.batch, s.seq, s.heads, s.hd, s.tile);
  pk::View2<T, Space> Out("Out", s.n(), s.e()), dQ("dQ", s.n(), s.e()), dK("dK", s.n(), s.e()),
      dV("dV", s.n(), s.e());
  Kokkos::deep_copy(dQ, T(1.0f));  // overwritten
  pk::fused_attention_forward(Space(), make2<T, Space>(s.n(), s.e(), in.q),
                              make2<T, Space>(s.n(), s.e(), in.k),
                              make2<T, Space>(s.n(), s.e(), in.v), ws, Out);
  if (!with_backward) return {to_host(Out)};
  pk::fused_attention_backward(Space(), make2<T, Space>(s.n(), s.e(), in.w), Out, ws, dQ, dK, dV);
  return {to_host(Out), to_host(dQ), to_host(dK), to_host(dV)};
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::fabs(v));
  return m;
}
double max_err(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

const char* kNames[4] = {"Out", "dQ", "dK", "dV"};

// Several tiles, the last one partial (37 = 4 x 8 + 5); one partial tile; a whole tile; one
// row; the kernel's own tile with seq above it (70 > 64 on a host, > 32 on a device).
const Shape kShapes[] = {
    {2, 37, 3, 11, 8}, {1, 13, 2, 8, 16}, {1, 16, 2, 4, 16}, {2, 1, 2, 5, 8}, {1, 70, 2, 16, 0}};

// fp64: the fused and unfused paths compute the same sums in another order (and the softmax
// from a running max): 1e-10 relative to the largest element (at least 1: with one row the
// gradients of K are 0 up to rounding) is far above rounding (1e-15).
TYPED_TEST(fused_attention, fp64_forward_and_backward_equal_unfused) {
  using Space = TypeParam;
  for (const Shape& s : kShapes) {
    const auto in = make_inputs<double>(s, 301);
    const auto ref = unfused<double, Space>(s, in);
    const auto got = fused<double, Space>(s, in);
    for (int t = 0; t < 4; ++t)
      expect_close(got[t], ref[t], 1e-10 * std::max(1.0, max_abs(ref[t])), 0,
                   std::string(kNames[t]) + " seq " + std::to_string(s.seq) + " tile " +
                       std::to_string(s.tile));
  }
}

// The backward pass against central differences of the fused forward itself (loss = <Out, w>).
TYPED_TEST(fused_attention, fp64_backward_matches_finite_differences) {
  using Space = TypeParam;
  const Shape s{1, 11, 2, 5, 4};
  const auto in = make_inputs<double>(s, 310);
  const auto g = fused<double, Space>(s, in);
  const std::size_t n = s.size();
  auto loss = [&](const std::vector<double>& all) {
    Inputs p{std::vector<double>(all.begin(), all.begin() + n),
             std::vector<double>(all.begin() + n, all.begin() + 2 * n),
             std::vector<double>(all.begin() + 2 * n, all.end()), in.w};
    return dot(fused<double, Space>(s, p, false)[0], in.w);
  };
  std::vector<double> all(in.q), grad(g[1]);
  for (int t = 1; t < 3; ++t) {
    const auto& src = t == 1 ? in.k : in.v;
    all.insert(all.end(), src.begin(), src.end());
    grad.insert(grad.end(), g[t + 1].begin(), g[t + 1].end());
  }
  for (int part = 0; part <= 3; ++part) {  // Q, K, V separately, then together
    auto d = random_vec(all.size(), 311 + part);
    if (part < 3)
      for (std::size_t x = 0; x < d.size(); ++x)
        if (static_cast<int>(x / n) != part) d[x] = 0;
    const double fd = directional_fd(loss, all, d);
    EXPECT_NEAR(dot(grad, d), fd, 1e-7 * std::fabs(fd) + 1e-8) << "part " << part;
  }
}

// fp32 against the fp64 unfused reference: the fused pass accumulates in fp32 and rounds once
// at the end; outputs and gradients are O(1): 1e-5 absolute (fp32's 6e-8 times sums of ~40
// terms, with margin). bf16: inputs bf16-exact; the fused pass keeps every intermediate in fp32
// and rounds the output once (half a bf16 ulp, 2^-9 relative), the backward reads the rounded
// Out in delta: each element within 2^-7 relative + 2e-3 absolute of fp64, and the worst error
// of each output no larger than the unfused bf16 path's (which rounds scores, probabilities
// and their gradients to bf16 too), with 5 % slack for where the two land within an ulp.
TYPED_TEST(fused_attention, fp32_and_bf16_match_fp64_unfused) {
  using Space = TypeParam;
  for (const Shape& s : {kShapes[0], kShapes[4]}) {
    const auto in = make_inputs<bf16>(s, 320);
    const auto ref = unfused<double, Space>(s, in);
    const auto f32 = fused<float, Space>(s, in);
    const auto f16 = fused<bf16, Space>(s, in);
    const auto u16 = unfused<bf16, Space>(s, in);
    for (int t = 0; t < 4; ++t) {
      expect_close(f32[t], ref[t], 1e-5, 0, std::string(kNames[t]) + " fp32");
      expect_close(f16[t], ref[t], 2e-3, 1.0 / 128, std::string(kNames[t]) + " bf16");
      EXPECT_LE(max_err(f16[t], ref[t]), 1.05 * max_err(u16[t], ref[t]) + 1e-6)
          << kNames[t] << " bf16: fused worse than unfused";
    }
  }
}

// A change at position p (its q, k and v) changes no output before p, bitwise.
TYPED_TEST(fused_attention, causal_mask_future_token_changes_no_earlier_output) {
  using Space = TypeParam;
  const Shape s{1, 29, 2, 6, 8};
  const int p = 17;
  auto in = make_inputs<float>(s, 330);
  const auto before = fused<float, Space>(s, in, false)[0];
  for (int e = 0; e < s.e(); ++e)
    for (auto* x : {&in.q, &in.k, &in.v}) (*x)[std::size_t(p) * s.e() + e] += 0.75;
  const auto after = fused<float, Space>(s, in, false)[0];
  for (int row = 0; row < s.seq; ++row)
    for (int e = 0; e < s.e(); ++e) {
      const std::size_t x = std::size_t(row) * s.e() + e;
      if (row < p) {
        EXPECT_EQ(before[x], after[x]) << "row " << row;
      } else if (row == p && e == 0) {
        EXPECT_NE(before[x], after[x]) << "row " << row << " (the changed token)";
      }
    }
}

// A rank holding heads [1, 3) of 3 (tensor parallelism) computes them bitwise as the whole.
TYPED_TEST(fused_attention, heads_of_a_shard_equal_those_of_the_whole) {
  using Space = TypeParam;
  const Shape all{2, 21, 3, 7, 0}, part{2, 21, 2, 7, 0};
  const auto in = make_inputs<float>(all, 340);
  auto slice = [&](const std::vector<double>& x) {
    std::vector<double> r;
    for (int n = 0; n < all.n(); ++n)
      r.insert(r.end(), x.begin() + std::size_t(n) * all.e() + all.hd,
               x.begin() + std::size_t(n + 1) * all.e());
    return r;
  };
  const auto whole = fused<float, Space>(all, in);
  const auto shard =
      fused<float, Space>(part, {slice(in.q), slice(in.k), slice(in.v), slice(in.w)});
  for (int t = 0; t < 4; ++t) EXPECT_EQ(slice(whole[t]), shard[t]) << kNames[t];
  EXPECT_EQ(whole, (fused<float, Space>(all, in)));  // and two runs are bitwise equal
}

// The split backward keeps the gradients in the workspace's own q, k, v: the same values.
TYPED_TEST(fused_attention, gradients_into_the_workspace_buffers_and_aliasing_refused) {
  using Space = TypeParam;
  const Shape s{1, 19, 2, 6, 8};
  const auto in = make_inputs<float>(s, 350);
  const auto ref = fused<float, Space>(s, in);
  pk::FusedAttentionWorkspace<float, Space> ws(s.batch, s.seq, s.heads, s.hd, s.tile);
  pk::View2<float, Space> Out("Out", s.n(), s.e());
  const auto dO = make2<float, Space>(s.n(), s.e(), in.w);
  pk::fused_attention_forward(Space(), make2<float, Space>(s.n(), s.e(), in.q),
                              make2<float, Space>(s.n(), s.e(), in.k),
                              make2<float, Space>(s.n(), s.e(), in.v), ws, Out);
  expect_shape_error([&] { pk::fused_attention_backward(Space(), dO, Out, ws, ws.k, ws.q, ws.v); },
                     {"fused_attention_backward", "dQ", "k or v"});
  pk::fused_attention_backward(Space(), dO, Out, ws, ws.q, ws.k, ws.v);
  EXPECT_EQ(to_host(ws.q), ref[1]);
  EXPECT_EQ(to_host(ws.k), ref[2]);
  EXPECT_EQ(to_host(ws.v), ref[3]);
}

// Saved: q, k, v and one log-sum-exp per row and head; no seq x seq term anywhere: doubling
// seq doubles the workspace (the unfused one grows by ~4x at seq >> head_dim).
TYPED_TEST(fused_attention, workspace_is_linear_in_seq) {
  using Space = TypeParam;
  const std::size_t B = 2, S = 64, H = 4, D = 16;
  pk::FusedAttentionWorkspace<float, Space> ws(B, S, H, D), ws2(B, 2 * S, H, D);
  EXPECT_EQ(ws.saved_bytes(), (3 * B * S * H * D + B * H * S) * sizeof(float));
  EXPECT_EQ(ws.bytes(), (5 * B * S * H * D + 2 * B * H * S) * sizeof(float));
  EXPECT_EQ(ws2.bytes(), 2 * ws.bytes());
  pk::FusedAttentionWorkspace<double, Space> w64(B, S, H, D);
  EXPECT_EQ(w64.saved_bytes(), (3 * B * S * H * D + B * H * S) * sizeof(double));
  pk::FusedAttentionWorkspace<bf16, Space> w16(B, S, H, D);  // the statistics stay fp32
  EXPECT_EQ(w16.saved_bytes(), 3 * B * S * H * D * 2 + B * H * S * 4);
  pk::FusedAttentionWorkspace<float, Space> shared(ws, true);
  EXPECT_EQ(shared.dk.data(), ws.dk.data());
  EXPECT_NE(shared.q.data(), ws.q.data());
  pk::AttentionWorkspace<float, Space> u(B, S, H, D), u2(B, 2 * S, H, D);
  EXPECT_GT(double(u2.bytes()) / u.bytes(), 2.5);
}

TYPED_TEST(fused_attention, shape_mismatch_names_both_shapes) {
  using Space = TypeParam;
  pk::FusedAttentionWorkspace<float, Space> ws(2, 37, 3, 11);
  pk::View2<float, Space> ok("ok", 74, 33), bad("bad", 74, 34);
  expect_shape_error([&] { pk::fused_attention_forward(Space(), ok, bad, ok, ws, ok); },
                     {"fused_attention_forward", "K", "[74,34]", "[74,33]"});
  expect_shape_error([&] { pk::fused_attention_backward(Space(), ok, bad, ws, ok, ok, ok); },
                     {"fused_attention_backward", "Out", "[74,34]", "[74,33]"});
  expect_shape_error([&] { pk::FusedAttentionWorkspace<float, Space>(1, 0, 2, 4); }, {"seq = 0"});
  expect_shape_error([&] { pk::FusedAttentionWorkspace<float, Space>(1, 4, 2, 4, -1); },
                     {"tile = -1"});
}

}  // namespace
