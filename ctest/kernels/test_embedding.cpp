// Embedding forward/backward against host loops in fp64 with repeated tokens, vocabulary
// shards (offset, tokens outside the shard), no-position shards, central differences in fp64,
// bf16 storage, reproducibility and shape errors.
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "paraxis/kernels/embedding.hpp"

using namespace ktest;
namespace pk = paraxis::kernels;
using paraxis::bf16;

namespace {

// Every test runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(embedding);

const int kSeq = 37, kBatch = 3, kN = kSeq * kBatch, kH = 53, kVocab = 29, kP = 41;

// Tokens from the full vocabulary [0, 2 * kVocab): a shard at offset kVocab sees half of them.
// 111 tokens over 58 ids: many repeats.
std::vector<int> make_tokens(std::uint64_t seed) {
  Rng r(seed);
  std::vector<int> t(kN);
  for (auto& x : t) x = r.integer(2 * kVocab);
  t[3] = t[50] = t[90] = kVocab + 1;  // the same token in three sequences at least
  return t;
}

std::vector<double> fwd_ref(const std::vector<int>& tok, const std::vector<double>& wte,
                            const std::vector<double>& wpe, int off, bool pos) {
  std::vector<double> x(kN * kH, 0.0);
  for (int n = 0; n < kN; ++n)
    for (int j = 0; j < kH; ++j) {
      const int row = tok[n] - off;
      double v = (row >= 0 && row < kVocab) ? wte[row * kH + j] : 0.0;
      if (pos) v += wpe[(n % kSeq) * kH + j];
      x[n * kH + j] = v;
    }
  return x;
}

template <class T, class Space>
void check_forward(int off, bool pos, double rtol) {
  const auto tok = make_tokens(71);
  const auto wte0 = rounded<T>(random_vec(kVocab * kH, 72));
  const auto wpe0 = rounded<T>(random_vec(kP * kH, 73));
  pk::View2<T, Space> X("X", kN, kH);
  Kokkos::deep_copy(X, T(4.0f));
  pk::embedding_forward(Space(), int_view<Space>(tok), make2<T, Space>(kVocab, kH, wte0),
                        make2<T, Space>(kP, kH, wpe0), kSeq, off, X, pos);
  expect_close(to_host(X), fwd_ref(tok, wte0, wpe0, off, pos), 0, rtol, "X");
}

TYPED_TEST(embedding, forward_matches_host_fp64) {
  using Space = TypeParam;
  check_forward<double, Space>(0, true, 1e-15);
  check_forward<double, Space>(kVocab, true, 1e-15);  // shard: half the tokens outside
  check_forward<double, Space>(kVocab, false, 0);     // no positions: a pure (exact) gather
}
TYPED_TEST(embedding, forward_matches_host_fp32) {
  using Space = TypeParam;
  check_forward<float, Space>(0, true, 1e-7);
}
// bf16: the sum of two bf16 values is rounded once more (2^-8 relative).
TYPED_TEST(embedding, forward_matches_host_bf16) {
  using Space = TypeParam;
  check_forward<bf16, Space>(0, true, 1.0 / 256);
}

template <class T, class Space>
void check_backward(int off, bool pos, double atol) {
  using A = pk::acc_t<T>;
  const auto tok = make_tokens(74);
  const auto dx0 = rounded<T>(random_vec(kN * kH, 75));
  const auto dwte0 = random_vec(kVocab * kH, 76);
  const auto dwpe0 = random_vec(kP * kH, 77);
  auto dwte = make2<A, Space>(kVocab, kH, dwte0);
  auto dwpe = make2<A, Space>(kP, kH, dwpe0);
  pk::embedding_backward(Space(), int_view<Space>(tok), make2<T, Space>(kN, kH, dx0), kSeq, off,
                         dwte, dwpe, pos);
  auto rte = rounded<A>(dwte0), rpe = rounded<A>(dwpe0);
  for (int n = 0; n < kN; ++n)
    for (int j = 0; j < kH; ++j) {
      const int row = tok[n] - off;
      if (row >= 0 && row < kVocab) rte[row * kH + j] += dx0[n * kH + j];
      if (pos) rpe[(n % kSeq) * kH + j] += dx0[n * kH + j];
    }
  expect_close(to_host(dwte), rte, atol, 0, "dwte");
  expect_close(to_host(dwpe), rpe, atol, 0, "dwpe");  // rows >= kSeq untouched
}

// At most ~8 repeats of magnitude <= 1 summed in A, plus the accumulated value.
TYPED_TEST(embedding, backward_accumulates_repeated_tokens_fp64) {
  using Space = TypeParam;
  check_backward<double, Space>(0, true, 1e-14);
  check_backward<double, Space>(kVocab, true, 1e-14);
  check_backward<double, Space>(kVocab, false, 1e-14);
}
TYPED_TEST(embedding, backward_accumulates_repeated_tokens_fp32) {
  using Space = TypeParam;
  check_backward<float, Space>(0, true, 1e-6);
}
TYPED_TEST(embedding, backward_accumulates_repeated_tokens_bf16) {
  using Space = TypeParam;
  check_backward<bf16, Space>(7, true, 1e-6);
}

TYPED_TEST(embedding, backward_matches_finite_differences_fp64) {
  using Space = TypeParam;
  const auto tok = make_tokens(78);
  auto tv = int_view<Space>(tok);
  const auto wte0 = random_vec(kVocab * kH, 79);
  const auto wpe0 = random_vec(kP * kH, 80);
  const auto w = random_vec(kN * kH, 81);
  std::vector<double> all(wte0);
  all.insert(all.end(), wpe0.begin(), wpe0.end());
  auto loss = [&](const std::vector<double>& p) {
    pk::View2<double, Space> X("X", kN, kH);
    pk::embedding_forward(
        Space(), tv,
        make2<double, Space>(kVocab, kH, std::vector<double>(p.begin(), p.begin() + kVocab * kH)),
        make2<double, Space>(kP, kH, std::vector<double>(p.begin() + kVocab * kH, p.end())), kSeq,
        0, X);
    return dot(to_host(X), w);
  };
  pk::View2<double, Space> dwte("dwte", kVocab, kH), dwpe("dwpe", kP, kH);
  pk::embedding_backward(Space(), tv, make2<double, Space>(kN, kH, w), kSeq, 0, dwte, dwpe);
  auto g = to_host(dwte);
  const auto gp = to_host(dwpe);
  g.insert(g.end(), gp.begin(), gp.end());
  const auto d = random_vec(all.size(), 82);
  const double fd = directional_fd(loss, all, d);
  EXPECT_NEAR(dot(g, d), fd, 1e-8 * std::fabs(fd) + 1e-9);
}

TYPED_TEST(embedding, repeated_calls_are_bitwise_identical) {
  using Space = TypeParam;
  auto tv = int_view<Space>(make_tokens(83));
  auto dX = make2<float, Space>(kN, kH, random_vec(kN * kH, 84));
  pk::View2<float, Space> a("a", kVocab, kH), b("b", kVocab, kH), pa("pa", kP, kH),
      pb("pb", kP, kH);
  pk::embedding_backward(Space(), tv, dX, kSeq, 0, a, pa);
  pk::embedding_backward(Space(), tv, dX, kSeq, 0, b, pb);
  EXPECT_TRUE(bitwise_equal(a, b));
  EXPECT_TRUE(bitwise_equal(pa, pb));
}

// Rows wider than the host path's column chunk (embedding.hpp, kEmbChunk = 128), more tokens
// than the prefetch distance, fp64 against host loops.
TYPED_TEST(embedding, wide_rows_match_host_fp64) {
  using Space = TypeParam;
  const int n = 45, h = 300, vocab = 11, seq = 9, off = 3;
  Rng rng(86);
  std::vector<int> tok(n);
  for (auto& t : tok) t = rng.integer(vocab + off + 2);  // some outside the shard
  const auto wte = random_vec(vocab * h, 87), wpe = random_vec(seq * h, 88),
             dx = random_vec(n * h, 89), dwte0 = random_vec(vocab * h, 90),
             dwpe0 = random_vec(seq * h, 91);
  auto tv = int_view<Space>(tok);
  pk::View2<double, Space> X("X", n, h);
  pk::embedding_forward(Space(), tv, make2<double, Space>(vocab, h, wte),
                        make2<double, Space>(seq, h, wpe), seq, off, X);
  auto dwte = make2<double, Space>(vocab, h, dwte0);
  auto dwpe = make2<double, Space>(seq, h, dwpe0);
  pk::embedding_backward(Space(), tv, make2<double, Space>(n, h, dx), seq, off, dwte, dwpe);
  std::vector<double> x(n * h), rte(dwte0), rpe(dwpe0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < h; ++j) {
      const int row = tok[i] - off;
      const bool in = row >= 0 && row < vocab;
      x[i * h + j] = (in ? wte[row * h + j] : 0.0) + wpe[(i % seq) * h + j];
      if (in) rte[row * h + j] += dx[i * h + j];
      rpe[(i % seq) * h + j] += dx[i * h + j];
    }
  expect_close(to_host(X), x, 0, 1e-15, "X");
  expect_close(to_host(dwte), rte, 1e-13, 0, "dwte");
  expect_close(to_host(dwpe), rpe, 1e-13, 0, "dwpe");
}

TYPED_TEST(embedding, shape_mismatch_names_both_shapes) {
  using Space = TypeParam;
  auto tv = int_view<Space>(make_tokens(85));
  pk::View2<float, Space> wte("wte", kVocab, kH), wpe_short("wpe", kSeq - 1, kH),
      X("X", kN, kH + 1);
  pk::View2<float, Space> wpe("wpe", kP, kH), Xok("X", kN, kH);
  expect_shape_error([&] { pk::embedding_forward(Space(), tv, wte, wpe, kSeq, 0, X); },
                     {"embedding_forward", "[111,54]", "[111,53]"});
  expect_shape_error([&] { pk::embedding_forward(Space(), tv, wte, wpe_short, kSeq, 0, Xok); },
                     {"wpe", "[36,53]", "seq_len = 37"});
  expect_shape_error([&] { pk::embedding_backward(Space(), tv, X, kSeq, 0, wte, wpe); },
                     {"embedding_backward", "dX", "[111,54]", "[111,53]"});
}

}  // namespace
