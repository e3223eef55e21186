// Tensor-parallel layers on 2 and 4 ranks in fp64: every rank cuts its shard out of the same
// random full tensors (same seed) and the results must match a single-rank computation of
// the full layer done in this process with the same kernels: forward output, input gradient,
// weight and bias gradient shards. Also the Megatron MLP pair (column then row), plain and
// with sequence parallelism (all-gather + reduce-scatter instead of all-reduce), the deferred
// reduction of Q, K, V sharing one input, the vocabulary-parallel embedding + LM head +
// cross-entropy with a padded vocabulary, and the CommLog against Megatron's traffic: one
// all-reduce of tokens x hidden elements forward and one backward per column/row pair.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "../kernels/kernel_test_util.hpp"
#include "model/tensor_parallel.hpp"
#include "parallel/communicator.hpp"
#include "paraxis/kernels/cross_entropy.hpp"

using namespace paraxis::parallel;
using namespace paraxis::model;
namespace pk = paraxis::kernels;
using ktest::expect_close;
using ktest::make1;
using ktest::make2;
using ktest::random_vec;
using ktest::Space;
using ktest::to_host;
using V1 = ktest::V1<double>;
using V2 = ktest::V2<double>;
using pk::Trans;

namespace {

// 14 tokens (2 sequences of 7), hidden 8, ffn 16 (divisible by tp = 2 and 4), vocabulary 53
// (padded to 54 or 56).
const int kN = 14, kS = 7, kH = 8, kF = 16, kV = 53;
const double kTol = 1e-13;

struct Tp {
  CommLog log;
  std::unique_ptr<Communicator> c = make_communicator("mpi", MPI_COMM_WORLD, Axis::tp, &log);
  int r = c->rank(), n = c->size();
};

// Columns [off, off + n) of a row-major rows x cols matrix; columns past `cols` are 0 (padding).
std::vector<double> col_block(const std::vector<double>& m, int rows, int cols, int off, int n) {
  std::vector<double> b(static_cast<std::size_t>(rows) * n, 0.0);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < n; ++j)
      if (off + j < cols) b[i * n + j] = m[i * cols + off + j];
  return b;
}
// Rows [off, off + n); rows past `rows` are 0 (padding).
std::vector<double> row_block(const std::vector<double>& m, int rows, int cols, int off, int n) {
  std::vector<double> b(static_cast<std::size_t>(n) * cols, 0.0);
  for (int i = 0; i < n && off + i < rows; ++i)
    for (int j = 0; j < cols; ++j) b[i * cols + j] = m[(off + i) * cols + j];
  return b;
}
std::vector<double> vec_block(const std::vector<double>& v, int off, int n) {
  return std::vector<double>(v.begin() + off, v.begin() + off + n);
}

pk::View1<int, Space> int_view(const std::vector<int>& t) {
  pk::View1<int, Space> v("ints", t.size());
  auto h = Kokkos::create_mirror_view(v);
  for (std::size_t k = 0; k < t.size(); ++k) h(k) = t[k];
  Kokkos::deep_copy(v, h);
  return v;
}

// The single-rank linear layer (what GptModel does): y = x w + b; backward dx, dw, db.
void full_forward(const V2& x, const V2& w, const V1& b, const V2& y) {
  pk::gemm(Space(), Trans::N, Trans::N, 1.0, x, w, 0.0, y);
  if (b.data()) pk::bias_add(Space(), y, b);
}
void full_backward(const V2& dy, const V2& x, const V2& w, const V2& dx, const V2& dw,
                   const V1& db) {
  pk::gemm(Space(), Trans::N, Trans::T, 1.0, dy, w, 0.0, dx);
  pk::gemm(Space(), Trans::T, Trans::N, 1.0, x, dy, 1.0, dw);
  if (db.data()) pk::bias_grad_accumulate(Space(), dy, db);
}

template <class F>
void expect_shape_error_contains(const F& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

void expect_events(const CommLog& log, std::size_t from, const std::vector<std::size_t>& bytes,
                   const std::string& what) {
  const auto& e = log.events();
  ASSERT_EQ(e.size() - from, bytes.size()) << what << ": number of tp collectives";
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    EXPECT_STREQ(e[from + k].op, "all_reduce") << what << " call " << k;
    EXPECT_EQ(e[from + k].axis, Axis::tp) << what << " call " << k;
    EXPECT_EQ(e[from + k].bytes, bytes[k]) << what << " call " << k;
  }
}

TEST(tensor_parallel, column_parallel_matches_full_layer_fp64) {
  Tp tp;
  const auto sh = even_shard("model.ffn", kF, tp.n, tp.r);
  const auto x = random_vec(kN * kH, 1), w = random_vec(kH * kF, 2), b = random_vec(kF, 3);
  const auto dy = random_vec(kN * kF, 4);
  // Single-rank reference.
  V2 X = make2<double>(kN, kH, x), W = make2<double>(kH, kF, w), Y("y", kN, kF);
  V2 DY = make2<double>(kN, kF, dy), DX("dx", kN, kH), DW("dw", kH, kF);
  V1 B = make1<double>(b), DB("db", kF);
  full_forward(X, W, B, Y);
  full_backward(DY, X, W, DX, DW, DB);
  // This rank's columns.
  V2 Wl = make2<double>(kH, sh.size, col_block(w, kH, kF, sh.offset, sh.size));
  V1 Bl = make1<double>(vec_block(b, sh.offset, sh.size));
  V2 Yl("yl", kN, sh.size),
      DYl = make2<double>(kN, sh.size, col_block(dy, kN, kF, sh.offset, sh.size));
  V2 DXt("dx_tp", kN, kH), DWl("dwl", kH, sh.size);
  V1 DBl("dbl", sh.size);
  column_parallel_forward(Space(), X, Wl, Bl, Yl);
  expect_events(tp.log, 0, {}, "column forward");
  column_parallel_backward(Space(), *tp.c, DYl, X, Wl, DXt, 0.0, DWl, DBl);
  expect_events(tp.log, 0, {tp_pair_all_reduce_bytes(kN, kH, 8)}, "column backward");

  expect_close(to_host(Yl), col_block(to_host(Y), kN, kF, sh.offset, sh.size), kTol, kTol, "y");
  expect_close(to_host(DXt), to_host(DX), kTol, kTol, "dx");
  expect_close(to_host(DWl), col_block(to_host(DW), kH, kF, sh.offset, sh.size), kTol, kTol, "dw");
  expect_close(to_host(DBl), vec_block(to_host(DB), sh.offset, sh.size), kTol, kTol, "db");
}

TEST(tensor_parallel, row_parallel_matches_full_layer_fp64) {
  Tp tp;
  const auto sh = even_shard("model.ffn", kF, tp.n, tp.r);
  const auto x = random_vec(kN * kF, 11), w = random_vec(kF * kH, 12), b = random_vec(kH, 13);
  const auto dy = random_vec(kN * kH, 14);
  V2 X = make2<double>(kN, kF, x), W = make2<double>(kF, kH, w), Y("y", kN, kH);
  V2 DY = make2<double>(kN, kH, dy), DX("dx", kN, kF), DW("dw", kF, kH);
  V1 B = make1<double>(b), DB("db", kH);
  full_forward(X, W, B, Y);
  full_backward(DY, X, W, DX, DW, DB);
  // This rank's input columns and weight rows; bias and output replicated.
  V2 Xl = make2<double>(kN, sh.size, col_block(x, kN, kF, sh.offset, sh.size));
  V2 Wl = make2<double>(sh.size, kH, row_block(w, kF, kH, sh.offset, sh.size));
  V2 Yt("y_tp", kN, kH), DXl("dxl", kN, sh.size), DWl("dwl", sh.size, kH);
  V1 DBt("db_tp", kH);
  row_parallel_forward(Space(), *tp.c, Xl, Wl, B, Yt);
  expect_events(tp.log, 0, {tp_pair_all_reduce_bytes(kN, kH, 8)}, "row forward");
  row_parallel_backward(Space(), DY, Xl, Wl, DXl, 0.0, DWl, DBt);
  expect_events(tp.log, 0, {tp_pair_all_reduce_bytes(kN, kH, 8)}, "row backward");

  expect_close(to_host(Yt), to_host(Y), kTol, kTol, "y");
  expect_close(to_host(DXl), col_block(to_host(DX), kN, kF, sh.offset, sh.size), kTol, kTol, "dx");
  expect_close(to_host(DWl), row_block(to_host(DW), kF, kH, sh.offset, sh.size), kTol, kTol, "dw");
  expect_close(to_host(DBt), to_host(DB), kTol, kTol, "db");
}

// Megatron's MLP: w1 column-parallel, GeLU on the local columns, w2 row-parallel.
TEST(tensor_parallel, mlp_pair_matches_unsharded_mlp_with_one_all_reduce_each_way_fp64) {
  Tp tp;
  const auto sh = even_shard("model.ffn", kF, tp.n, tp.r);
  const auto x = random_vec(kN * kH, 21), w1 = random_vec(kH * kF, 22), b1 = random_vec(kF, 23);
  const auto w2 = random_vec(kF * kH, 24), b2 = random_vec(kH, 25), dy = random_vec(kN * kH, 26);
  // Unsharded.
  V2 X = make2<double>(kN, kH, x), W1 = make2<double>(kH, kF, w1), W2 = make2<double>(kF, kH, w2);
  V1 B1 = make1<double>(b1), B2 = make1<double>(b2);
  V2 U("u", kN, kF), G("g", kN, kF), Y("y", kN, kH), DY = make2<double>(kN, kH, dy);
  V2 DG("dg", kN, kF), DU("du", kN, kF), DX("dx", kN, kH), DW1("dw1", kH, kF), DW2("dw2", kF, kH);
  V1 DB1("db1", kF), DB2("db2", kH);
  full_forward(X, W1, B1, U);
  pk::gelu_forward(Space(), U, G);
  full_forward(G, W2, B2, Y);
  full_backward(DY, G, W2, DG, DW2, DB2);
  pk::gelu_backward(Space(), U, DG, DU);
  full_backward(DU, X, W1, DX, DW1, DB1);
  // Tensor-parallel.
  V2 W1l = make2<double>(kH, sh.size, col_block(w1, kH, kF, sh.offset, sh.size));
  V1 B1l = make1<double>(vec_block(b1, sh.offset, sh.size));
  V2 W2l = make2<double>(sh.size, kH, row_block(w2, kF, kH, sh.offset, sh.size));
  V2 Ul("ul", kN, sh.size), Gl("gl", kN, sh.size), Yt("y_tp", kN, kH);
  V2 DGl("dgl", kN, sh.size), DUl("dul", kN, sh.size), DXt("dx_tp", kN, kH);
  V2 DW1l("dw1l", kH, sh.size), DW2l("dw2l", sh.size, kH);
  V1 DB1l("db1l", sh.size), DB2t("db2_tp", kH);
  column_parallel_forward(Space(), X, W1l, B1l, Ul);
  pk::gelu_forward(Space(), Ul, Gl);
  row_parallel_forward(Space(), *tp.c, Gl, W2l, B2, Yt);
  const std::size_t pair = tp_pair_all_reduce_bytes(kN, kH, 8);
  expect_events(tp.log, 0, {pair}, "MLP forward");
  row_parallel_backward(Space(), DY, Gl, W2l, DGl, 0.0, DW2l, DB2t);
  pk::gelu_backward(Space(), Ul, DGl, DUl);
  column_parallel_backward(Space(), *tp.c, DUl, X, W1l, DXt, 0.0, DW1l, DB1l);
  expect_events(tp.log, 0, {pair, pair}, "MLP forward + backward");
  EXPECT_EQ(tp.log.totals()[static_cast<std::size_t>(Axis::tp)].bytes,
            2u * kN * kH * sizeof(double));

  expect_close(to_host(Yt), to_host(Y), kTol, kTol, "y");
  expect_close(to_host(DXt), to_host(DX), kTol, kTol, "dx");
  expect_close(to_host(DW1l), col_block(to_host(DW1), kH, kF, sh.offset, sh.size), kTol, kTol,
               "dw1");
  expect_close(to_host(DB1l), vec_block(to_host(DB1), sh.offset, sh.size), kTol, kTol, "db1");
  expect_close(to_host(DW2l), row_block(to_host(DW2), kF, kH, sh.offset, sh.size), kTol, kTol,
               "dw2");
  expect_close(to_host(DB2t), to_host(DB2), kTol, kTol, "db2");
}

// The same MLP with sequence parallelism: each rank holds its block of 16 / tp tokens outside
// the pair; all-gather in front of w1, reduce-scatter behind w2, and the reverse backward.
TEST(tensor_parallel, sequence_parallel_mlp_pair_matches_unsharded_mlp_fp64) {
  Tp tp;
  const int n = 16;  // 2 sequences of 8: divisible by tp = 2 and 4
  const auto sh = even_shard("model.ffn", kF, tp.n, tp.r);
  const auto sq = even_shard("model.seq_len", n, tp.n, tp.r);
  const auto x = random_vec(n * kH, 61), w1 = random_vec(kH * kF, 62), b1 = random_vec(kF, 63);
  const auto w2 = random_vec(kF * kH, 64), b2 = random_vec(kH, 65), dy = random_vec(n * kH, 66);
  V2 X = make2<double>(n, kH, x), W1 = make2<double>(kH, kF, w1), W2 = make2<double>(kF, kH, w2);
  V1 B1 = make1<double>(b1), B2 = make1<double>(b2);
  V2 U("u", n, kF), G("g", n, kF), Y("y", n, kH), DY = make2<double>(n, kH, dy);
  V2 DG("dg", n, kF), DU("du", n, kF), DX("dx", n, kH), DW1("dw1", kH, kF), DW2("dw2", kF, kH);
  V1 DB1("db1", kF), DB2("db2", kH);
  full_forward(X, W1, B1, U);
  pk::gelu_forward(Space(), U, G);
  full_forward(G, W2, B2, Y);
  full_backward(DY, G, W2, DG, DW2, DB2);
  pk::gelu_backward(Space(), U, DG, DU);
  full_backward(DU, X, W1, DX, DW1, DB1);

  V2 Xs = make2<double>(sq.size, kH, row_block(x, n, kH, sq.offset, sq.size));
  V2 DYs = make2<double>(sq.size, kH, row_block(dy, n, kH, sq.offset, sq.size));
  V2 W1l = make2<double>(kH, sh.size, col_block(w1, kH, kF, sh.offset, sh.size));
  V1 B1l = make1<double>(vec_block(b1, sh.offset, sh.size));
  V2 W2l = make2<double>(sh.size, kH, row_block(w2, kF, kH, sh.offset, sh.size));
  V2 Xf("x_full", n, kH), Ul("ul", n, sh.size), Gl("gl", n, sh.size), Yp("y_partial", n, kH);
  V2 Ys("y_seq", sq.size, kH), DYf("dy_full", n, kH), DGl("dgl", n, sh.size);
  V2 DUl("dul", n, sh.size), DXp("dx_partial", n, kH), DXs("dx_seq", sq.size, kH);
  V2 DW1l("dw1l", kH, sh.size), DW2l("dw2l", sh.size, kH);
  V1 DB1l("db1l", sh.size), DB2t("db2_tp", kH);
  column_parallel_forward_sp(Space(), *tp.c, Xs, Xf, W1l, B1l, Ul);
  pk::gelu_forward(Space(), Ul, Gl);
  row_parallel_forward_sp(Space(), *tp.c, Gl, W2l, B2, Yp, Ys);
  row_parallel_backward_sp(Space(), *tp.c, DYs, DYf, Gl, W2l, DGl, 0.0, DW2l, DB2t);
  pk::gelu_backward(Space(), Ul, DGl, DUl);
  column_parallel_backward_sp(Space(), *tp.c, DUl, Xf, W1l, DXp, 0.0, DXs, DW1l, DB1l);

  // Same bytes as the two all-reduces of the plain pair, as gather + scatter pairs.
  const std::size_t s = tp_pair_all_reduce_bytes(n, kH, 8);
  const char* ops[] = {"all_gather", "reduce_scatter", "all_gather", "reduce_scatter"};
  const auto& e = tp.log.events();
  ASSERT_EQ(e.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_STREQ(e[k].op, ops[k]) << "call " << k;
    EXPECT_EQ(e[k].bytes, s) << "call " << k;
  }
  expect_close(to_host(Ys), row_block(to_host(Y), n, kH, sq.offset, sq.size), kTol, kTol, "y");
  expect_close(to_host(DXs), row_block(to_host(DX), n, kH, sq.offset, sq.size), kTol, kTol, "dx");
  expect_close(to_host(DW1l), col_block(to_host(DW1), kH, kF, sh.offset, sh.size), kTol, kTol,
               "dw1");
  expect_close(to_host(DB1l), vec_block(to_host(DB1), sh.offset, sh.size), kTol, kTol, "db1");
  expect_close(to_host(DW2l), row_block(to_host(DW2), kF, kH, sh.offset, sh.size), kTol, kTol,
               "dw2");
  EXPECT_EQ(to_host(DB2t), to_host(DB2)) << "db2 from the gathered gradient: the single-rank sum";
  V2 too_short("too_short", 3, kH);  // rejected on every rank before any communication
  expect_shape_error_contains([&] { tp_all_gather(Space(), *tp.c, Xs, too_short); },
                              "tokens divisible by tp");
}

// Q, K, V: three column-parallel linears (heads split: hidden / tp columns each) reading the
// same input; their input gradients are summed locally and reduced once.
TEST(tensor_parallel, qkv_input_gradient_is_reduced_once_fp64) {
  Tp tp;
  const auto sh = even_shard("model.hidden", kH, tp.n, tp.r);
  const auto x = random_vec(kN * kH, 31);
  V2 X = make2<double>(kN, kH, x), DX("dx", kN, kH), tmp("tmp", kN, kH), DXt("dx_tp", kN, kH);
  for (int p = 0; p < 3; ++p) {
    const auto w = random_vec(kH * kH, 32 + p), dy = random_vec(kN * kH, 40 + p);
    V2 W = make2<double>(kH, kH, w), DY = make2<double>(kN, kH, dy), DW("dw", kH, kH);
    full_backward(DY, X, W, tmp, DW, V1());
    pk::add_inplace(Space(), DX, tmp);
    V2 Wl = make2<double>(kH, sh.size, col_block(w, kH, kH, sh.offset, sh.size));
    V2 DYl = make2<double>(kN, sh.size, col_block(dy, kN, kH, sh.offset, sh.size));
    V2 DWl("dwl", kH, sh.size);
    column_parallel_backward(Space(), *tp.c, DYl, X, Wl, DXt, p == 0 ? 0.0 : 1.0, DWl, V1(),
                             p == 2 ? TpReduce::now : TpReduce::deferred);
    expect_close(to_host(DWl), col_block(to_host(DW), kH, kH, sh.offset, sh.size), kTol, kTol,
                 "dw " + std::to_string(p));
  }
  expect_events(tp.log, 0, {tp_pair_all_reduce_bytes(kN, kH, 8)}, "QKV backward");
  expect_close(to_host(DXt), to_host(DX), kTol, kTol, "dx");
}

struct VocabRun {
  double loss;
  std::vector<double> x, dx, dhead_local, dwte_local, dwpe;
};

// Embedding -> LM head -> cross-entropy -> back, on this rank's vocabulary shard.
VocabRun vocab_parallel_run(Tp& tp, const std::vector<int>& tokens, const std::vector<int>& targets,
                            const std::vector<double>& wte, const std::vector<double>& wpe,
                            const std::vector<double>& head) {
  const auto sh = vocab_shard(kV, tp.n, tp.r);
  V2 WTEl = make2<double>(sh.size, kH, row_block(wte, kV, kH, sh.offset, sh.size));
  V2 WPE = make2<double>(kS, kH, wpe);
  V2 HEADl = make2<double>(kH, sh.size, col_block(head, kH, kV, sh.offset, sh.size));
  auto tok = int_view(tokens), tgt = int_view(targets);
  V2 X("x", kN, kH), L("logits_local", kN, sh.size), DL("dlogits_local", kN, sh.size);
  V2 DX("dx", kN, kH), DHEADl("dhead_local", kH, sh.size), DWTEl("dwte_local", sh.size, kH);
  V2 DWPE("dwpe", kS, kH);
  V1 lse("lse", kN);
  vocab_parallel_embedding_forward(Space(), *tp.c, tok, WTEl, WPE, kS, sh.offset, X);
  column_parallel_forward(Space(), X, HEADl, V1(), L);
  VocabParallelCrossEntropy<double> ce(kN);
  const double loss = ce.forward(Space(), *tp.c, L, tgt, sh.offset, kV, lse);
  ce.backward(Space(), L, tgt, lse, sh.offset, kV, 1.0 / kN, DL);
  column_parallel_backward(Space(), *tp.c, DL, X, HEADl, DX, 0.0, DHEADl, V1());
  vocab_parallel_embedding_backward(Space(), tok, DX, kS, sh.offset, DWTEl, DWPE);
  return {loss, to_host(X), to_host(DX), to_host(DHEADl), to_host(DWTEl), to_host(DWPE)};
}

TEST(tensor_parallel, vocab_parallel_embedding_head_and_cross_entropy_match_unsharded_fp64) {
  Tp tp;
  const auto sh = vocab_shard(kV, tp.n, tp.r);
  EXPECT_EQ(sh.size * tp.n, padded_vocab(kV, tp.n));
  ktest::Rng rng(51);
  std::vector<int> tokens(kN), targets(kN);
  for (auto& t : tokens) t = rng.integer(kV);
  for (auto& t : targets) t = rng.integer(kV);
  tokens[0] = targets[1] = kV - 1;  // next to the padding, in the last shard
  tokens[2] = targets[3] = 0;
  const auto wte = random_vec(kV * kH, 52), wpe = random_vec(kS * kH, 53);
  const auto head = random_vec(kH * kV, 54, -3, 3);

  // Unsharded.
  auto tok = int_view(tokens), tgt = int_view(targets);
  V2 WTE = make2<double>(kV, kH, wte), WPE = make2<double>(kS, kH, wpe);
  V2 HEAD = make2<double>(kH, kV, head), X("x", kN, kH), L("logits", kN, kV), DL("dl", kN, kV);
  V2 DX("dx", kN, kH), DHEAD("dhead", kH, kV), DWTE("dwte", kV, kH), DWPE("dwpe", kS, kH);
  V1 lse("lse", kN);
  pk::embedding_forward(Space(), tok, WTE, WPE, kS, 0, X);
  full_forward(X, HEAD, V1(), L);
  const double loss = pk::cross_entropy_forward(Space(), L, tgt, kV, lse);
  pk::cross_entropy_backward(Space(), L, tgt, lse, kV, 1.0 / kN, DL);
  full_backward(DL, X, HEAD, DX, DHEAD, V1());
  pk::embedding_backward(Space(), tok, DX, kS, 0, DWTE, DWPE);

  const auto got = vocab_parallel_run(tp, tokens, targets, wte, wpe, head);
  // Embedding: one all-reduce of tokens x hidden; cross-entropy: max (N), sums (2N); head
  // backward: the column-parallel input gradient (tokens x hidden).
  const std::size_t nh = tp_pair_all_reduce_bytes(kN, kH, 8);
  expect_events(tp.log, 0,
                {nh, vocab_parallel_ce_max_bytes(kN, 8), vocab_parallel_ce_sum_bytes(kN, 8), nh},
                "vocab-parallel step");
  EXPECT_EQ(got.x, to_host(X)) << "the embedding is exact: rank 0 adds positions, others 0";
  EXPECT_NEAR(got.loss, loss, 1e-13 * loss);
  double loss0 = got.loss;
  tp.c->broadcast(&loss0, 1, DType::f64, 0);
  EXPECT_EQ(got.loss, loss0) << "every tp rank returns the same loss";
  expect_close(got.dx, to_host(DX), kTol, kTol, "dx");
  expect_close(got.dhead_local, col_block(to_host(DHEAD), kH, kV, sh.offset, sh.size), kTol, kTol,
               "dhead (padding columns 0)");
  expect_close(got.dwte_local, row_block(to_host(DWTE), kV, kH, sh.offset, sh.size), kTol, kTol,
               "dwte (padding rows 0)");
  expect_close(got.dwpe, to_host(DWPE), kTol, kTol, "dwpe");

  // A rerun of the same configuration is bitwise identical.
  const auto again = vocab_parallel_run(tp, tokens, targets, wte, wpe, head);
  EXPECT_EQ(again.loss, got.loss);
  EXPECT_EQ(again.dx, got.dx);
  EXPECT_EQ(again.dhead_local, got.dhead_local);
  EXPECT_EQ(again.dwte_local, got.dwte_local);
}

// fp32 storage (fp32 accumulators, fp32 collectives): the row-parallel output and the
// vocabulary-parallel loss and logit gradients agree with the unsharded fp32 kernels loosely.
TEST(tensor_parallel, row_parallel_and_vocab_cross_entropy_match_unsharded_fp32) {
  using F2 = ktest::V2<float>;
  using F1 = ktest::V1<float>;
  Tp tp;
  const auto sh = even_shard("model.ffn", kF, tp.n, tp.r);
  const auto x = random_vec(kN * kF, 71), w = random_vec(kF * kH, 72), b = random_vec(kH, 73);
  F2 X = make2<float>(kN, kF, x), W = make2<float>(kF, kH, w), Y("y", kN, kH), Yt("yt", kN, kH);
  F1 B = make1<float>(b);
  pk::gemm(Space(), Trans::N, Trans::N, 1.0, X, W, 0.0, Y);
  pk::bias_add(Space(), Y, B);
  F2 Xl = make2<float>(kN, sh.size, col_block(x, kN, kF, sh.offset, sh.size));
  F2 Wl = make2<float>(sh.size, kH, row_block(w, kF, kH, sh.offset, sh.size));
  row_parallel_forward(Space(), *tp.c, Xl, Wl, B, Yt);
  expect_events(tp.log, 0, {tp_pair_all_reduce_bytes(kN, kH, 4)}, "row forward fp32");
  expect_close(to_host(Yt), to_host(Y), 2e-6, 2e-6, "y fp32");

  const auto vs = vocab_shard(kV, tp.n, tp.r);
  const int vp = padded_vocab(kV, tp.n);
  const auto l = random_vec(kN * kV, 74, -6, 6);
  ktest::Rng rng(75);
  std::vector<int> targets(kN);
  for (auto& t : targets) t = rng.integer(kV);
  targets[0] = kV - 1;
  auto tgt = int_view(targets);
  F2 L = make2<float>(kN, kV, l), DL("dl", kN, kV);
  F1 lse("lse", kN), lse_tp("lse_tp", kN);
  const float loss = pk::cross_entropy_forward(Space(), L, tgt, kV, lse);
  pk::cross_entropy_backward(Space(), L, tgt, lse, kV, 1.0 / kN, DL);
  F2 Ll = make2<float>(kN, vs.size, col_block(l, kN, kV, vs.offset, vs.size));
  F2 DLl("dll", kN, vs.size);
  VocabParallelCrossEntropy<float> ce(kN);
  const std::size_t before = tp.log.events().size();
  const float loss_tp = ce.forward(Space(), *tp.c, Ll, tgt, vs.offset, kV, lse_tp);
  ce.backward(Space(), Ll, tgt, lse_tp, vs.offset, kV, 1.0 / kN, DLl);
  expect_events(tp.log, before,
                {vocab_parallel_ce_max_bytes(kN, 4), vocab_parallel_ce_sum_bytes(kN, 4)},
                "cross-entropy fp32");
  EXPECT_LE(vs.offset + vs.size, vp);
  EXPECT_NEAR(loss_tp, loss, 2e-6 * loss);
  expect_close(to_host(lse_tp), to_host(lse), 0, 2e-6, "lse fp32");
  expect_close(to_host(DLl), col_block(to_host(DL), kN, kV, vs.offset, vs.size), 2e-8, 0,
               "dlogits fp32 (padding columns 0)");
}

TEST(tensor_parallel, split_rules_name_the_key_and_values) {
  try {
    even_shard("model.heads", 6, 4, 1);
    FAIL() << "6 heads on 4 ranks must throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model.heads = 6"), std::string::npos) << msg;
    EXPECT_NE(msg.find("parallel.tp = 4"), std::string::npos) << msg;
  }
  EXPECT_EQ(padded_vocab(53, 4), 56);
  EXPECT_EQ(padded_vocab(54, 3), 54);
  const auto last = vocab_shard(53, 4, 3);
  EXPECT_EQ(last.offset, 42);
  EXPECT_EQ(last.size, 14);
  const auto h = even_shard("model.ffn", 16, 4, 2);
  EXPECT_EQ(h.offset, 8);
  EXPECT_EQ(h.size, 4);
}

}  // namespace
