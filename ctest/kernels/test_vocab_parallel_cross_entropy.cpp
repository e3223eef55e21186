// Vocabulary-parallel cross-entropy in one process: a random logits matrix (N = 37, V = 53
// padded to a multiple of tp) is cut into tp column shards, the passes run per shard and the
// all-reduces between them are done here on the host, in rank order. Loss, lse and every
// dlogits entry must match the single-shard cross_entropy_forward/backward on the whole padded
// matrix: fp64 to rounding, fp32 loosely. Padding columns hold huge values so that a leak into
// the softmax would dominate; some targets sit in the last shard, next to the padding.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/cross_entropy.hpp"
#include "paraxis/kernels/vocab_parallel_cross_entropy.hpp"

using namespace ktest;
namespace pk = paraxis::kernels;

namespace {

// Every test runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(vocab_parallel_cross_entropy);

const int kN = 37, kV = 53;

int padded(int v, int tp) {
  return (v + tp - 1) / tp * tp;
}

std::vector<int> make_targets(int n, int vocab, int vl_last_begin, std::uint64_t seed) {
  Rng r(seed);
  std::vector<int> t(n);
  for (auto& x : t) x = r.integer(vocab);
  t[0] = vocab - 1;      // the last valid column, right before the padding
  t[1] = vl_last_begin;  // the first column of the last shard
  t[2] = 0;
  return t;
}

std::vector<double> make_logits(int vp, int vocab, std::uint64_t seed) {
  auto l = random_vec(static_cast<std::size_t>(kN) * vp, seed, -6, 6);
  for (int i = 0; i < kN; ++i)
    for (int j = vocab; j < vp; ++j) l[i * vp + j] = 50.0;
  return l;
}

// Columns [off, off + vl) of the row-major [kN, vp] matrix l.
std::vector<double> column_block(const std::vector<double>& l, int vp, int off, int vl) {
  std::vector<double> b(static_cast<std::size_t>(kN) * vl);
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < vl; ++j) b[i * vl + j] = l[i * vp + off + j];
  return b;
}

struct Sharded {
  double loss;
  std::vector<double> lse, dlogits;  // dlogits reassembled as [kN, vp]
};

// The tp ranks' passes with host "all-reduces" (max, then sums in rank order).
template <class T, class Space>
Sharded run_sharded(const std::vector<double>& l, const std::vector<int>& t, int vp, int vocab,
                    int tp, double scale) {
  using A = pk::acc_t<T>;
  const int vl = vp / tp;
  auto tv = int_view<Space>(t);
  std::vector<V2<T, Space>> shard;
  std::vector<V1<A, Space>> mx, se, tl;
  for (int r = 0; r < tp; ++r) {
    shard.push_back(make2<T, Space>(kN, vl, column_block(l, vp, r * vl, vl)));
    mx.emplace_back("max_local", kN);
    se.emplace_back("sumexp_local", kN);
    tl.emplace_back("target_logit_local", kN);
  }
  // Pass 1 and the max all-reduce.
  std::vector<double> gmax(kN, -1e300);
  for (int r = 0; r < tp; ++r) {
    pk::vocab_parallel_ce_local_max(Space(), shard[r], r * vl, vocab, mx[r]);
    const auto m = to_host(mx[r]);
    for (int i = 0; i < kN; ++i) gmax[i] = std::max(gmax[i], m[i]);
  }
  // Pass 2 with the global max, and the two sum all-reduces.
  std::vector<double> gsum(kN, 0.0), gtgt(kN, 0.0);
  for (int r = 0; r < tp; ++r) {
    fill(mx[r], gmax);
    pk::vocab_parallel_ce_local_sumexp(Space(), shard[r], tv, r * vl, vocab, mx[r], se[r], tl[r]);
    const auto s = to_host(se[r]), z = to_host(tl[r]);
    for (int i = 0; i < kN; ++i) {
      gsum[i] += s[i];
      gtgt[i] += z[i];
    }
  }
  // Finish and backward on every rank: all must agree on the loss.
  Sharded out{0.0, {}, std::vector<double>(static_cast<std::size_t>(kN) * vp, 0.0)};
  for (int r = 0; r < tp; ++r) {
    fill(se[r], gsum);
    fill(tl[r], gtgt);
    V1<A, Space> lse("lse", kN);
    const double loss = pk::vocab_parallel_ce_finish(Space(), mx[r], se[r], tl[r], lse);
    if (r == 0) {
      out.loss = loss;
      out.lse = to_host(lse);
    } else {
      EXPECT_EQ(loss, out.loss) << "rank " << r << " disagrees on the loss";
    }
    V2<T, Space> d("dlogits", kN, vl);
    Kokkos::deep_copy(d, T(9.0f));  // overwritten, padding included
    pk::vocab_parallel_ce_backward(Space(), shard[r], tv, lse, r * vl, vocab, scale, d);
    const auto g = to_host(d);
    for (int i = 0; i < kN; ++i)
      for (int j = 0; j < vl; ++j) out.dlogits[i * vp + r * vl + j] = g[i * vl + j];
  }
  return out;
}

template <class T, class Space>
void check_against_single_shard(int tp, double loss_rtol, double grad_atol) {
  using A = pk::acc_t<T>;
  const int vp = padded(kV, tp), vl = vp / tp;
  const auto l = rounded<T>(make_logits(vp, kV, 70 + tp));
  const auto t = make_targets(kN, kV, (tp - 1) * vl, 80 + tp);
  const double scale = 1.0 / kN;

  auto L = make2<T, Space>(kN, vp, l);
  auto tv = int_view<Space>(t);
  V1<A, Space> lse("lse", kN);
  const double ref_loss = pk::cross_entropy_forward(Space(), L, tv, kV, lse);
  V2<T, Space> dref("dref", kN, vp);
  pk::cross_entropy_backward(Space(), L, tv, lse, kV, scale, dref);

  const auto got = run_sharded<T, Space>(l, t, vp, kV, tp, scale);
  const std::string what = "tp " + std::to_string(tp);
  EXPECT_NEAR(got.loss, ref_loss, loss_rtol * std::fabs(ref_loss)) << what;
  expect_close(got.lse, to_host(lse), 0, loss_rtol, what + " lse");
  expect_close(got.dlogits, to_host(dref), grad_atol, 0, what + " dlogits");
  for (int i = 0; i < kN; ++i)
    for (int j = kV; j < vp; ++j) ASSERT_EQ(got.dlogits[i * vp + j], 0.0) << what << " padding";
}

TYPED_TEST(vocab_parallel_cross_entropy, shards_match_single_shard_fp64) {
  using Space = TypeParam;
  for (int tp : {2, 3, 4}) check_against_single_shard<double, Space>(tp, 1e-13, 1e-15);
}

// Loss ~ 4 per token; fp32 sums of 53 exponentials in a different order differ by a few ulps.
TYPED_TEST(vocab_parallel_cross_entropy, shards_match_single_shard_fp32) {
  using Space = TypeParam;
  for (int tp : {2, 3, 4}) check_against_single_shard<float, Space>(tp, 2e-6, 2e-8);
}

// V = 5 on 4 ranks: padded to 8, the last shard holds only padding (columns 6, 7). Its local
// max is the identity of max and its sums are 0, so the others' results stand unchanged.
TYPED_TEST(vocab_parallel_cross_entropy, shard_of_padding_only_contributes_nothing_fp64) {
  using Space = TypeParam;
  const int vocab = 5, tp = 4, vp = padded(vocab, tp);
  const auto l = make_logits(vp, vocab, 90);
  Rng r(91);
  std::vector<int> t(kN);
  for (auto& x : t) x = r.integer(vocab);
  t[0] = vocab - 1;
  auto L = make2<double, Space>(kN, vp, l);
  auto tv = int_view<Space>(t);
  V1<double, Space> lse("lse", kN);
  const double ref_loss = pk::cross_entropy_forward(Space(), L, tv, vocab, lse);
  V2<double, Space> dref("dref", kN, vp);
  pk::cross_entropy_backward(Space(), L, tv, lse, vocab, 0.5, dref);

  V2<double, Space> last = make2<double, Space>(kN, 2, column_block(l, vp, 6, 2));
  V1<double, Space> mx("mx", kN);
  pk::vocab_parallel_ce_local_max(Space(), last, 6, vocab, mx);
  for (double m : to_host(mx)) EXPECT_EQ(m, pk::math::lowest<double>());

  const auto got = run_sharded<double, Space>(l, t, vp, vocab, tp, 0.5);
  EXPECT_NEAR(got.loss, ref_loss, 1e-13 * ref_loss);
  expect_close(got.dlogits, to_host(dref), 1e-15, 0, "dlogits");
}

TYPED_TEST(vocab_parallel_cross_entropy, repeated_calls_are_bitwise_identical) {
  using Space = TypeParam;
  const auto l = make_logits(54, kV, 92);
  const auto t = make_targets(kN, kV, 27, 93);
  const auto a = run_sharded<float, Space>(l, t, 54, kV, 2, 1.0);
  const auto b = run_sharded<float, Space>(l, t, 54, kV, 2, 1.0);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.dlogits, b.dlogits);
}

TYPED_TEST(vocab_parallel_cross_entropy, bad_targets_and_shapes_throw) {
  using Space = TypeParam;
  auto L = make2<double, Space>(kN, 27, column_block(make_logits(54, kV, 94), 54, 27, 27));
  auto t = make_targets(kN, kV, 27, 95);
  V1<double, Space> mx("mx", kN), se("se", kN), tl("tl", kN), bad("bad", kN + 1);
  pk::vocab_parallel_ce_local_max(Space(), L, 27, kV, mx);
  t[4] = kV;  // a padding column is not a valid target
  expect_shape_error(
      [&] {
        pk::vocab_parallel_ce_local_sumexp(Space(), L, int_view<Space>(t), 27, kV, mx, se, tl);
      },
      {"vocab_parallel_ce_local_sumexp", "1 target", "53"});
  t[4] = 0;
  expect_shape_error([&] { pk::vocab_parallel_ce_local_max(Space(), L, 27, kV, bad); },
                     {"max_local", "[38]", "[37]"});
  expect_shape_error([&] { pk::vocab_parallel_ce_local_max(Space(), L, -1, kV, mx); },
                     {"vocab_offset = -1"});
  V2<double, Space> dbad("db", kN, 26);
  expect_shape_error(
      [&] {
        pk::vocab_parallel_ce_backward(Space(), L, int_view<Space>(t), mx, 27, kV, 1.0, dbad);
      },
      {"dlogits", "[37,26]", "[37,27]"});
}

}  // namespace
