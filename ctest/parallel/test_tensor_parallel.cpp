// The tensor-parallel layers GptModel runs (model/tensor_parallel.hpp) on 2 and 4 ranks in fp64:
// every rank cuts its shard out of the same random full tensors (same seed) and the results
// must match a single-rank computation of the full layer done in this process with the same
// kernels: forward output, input gradient, weight and bias gradient shards. Also the Megatron
// MLP pair (column then row), plain and with sequence parallelism (all-gather + reduce-scatter
// instead of all-reduce, the LayerNorm output gathered again for the weight gradient, as the
// block does), the deferred reduction of Q, K, V sharing one input, the vocabulary-parallel
// embedding + LM head + cross-entropy with a padded vocabulary (plain and sequence-parallel),
// the one-rank group (no call, the single-rank computation bit for bit), and the CommLog
// against Megatron's traffic: one all-reduce of tokens x hidden elements forward and one
// backward per column/row pair.
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
using ktest::random_vec;
using ktest::to_host;
using pk::Trans;

namespace {

// The space GptModel runs its layers on.
using Space = Kokkos::DefaultExecutionSpace;
template <class T>
using W1 = pk::View1<T, Space>;
template <class T>
using W2 = pk::View2<T, Space>;
using V1 = W1<double>;
using V2 = W2<double>;

template <class T>
W1<T> make1(const std::vector<double>& d) {
  W1<T> v("v1", d.size());
  ktest::fill(v, d);
  return v;
}
template <class T>
W2<T> make2(std::size_t r, std::size_t c, const std::vector<double>& d) {
  W2<T> v("v2", r, c);
  ktest::fill(v, d);
  return v;
}

// 14 tokens (2 sequences of 7), hidden 8, ffn 16 (divisible by tp = 2 and 4), vocabulary 53
// (padded to 54 or 56).
const int kN = 14, kS = 7, kH = 8, kF = 16, kV = 53;
const double kTol = 1e-13;

// Megatron's traffic, as the CommLog records it (nccl-tests S, bytes per call): a column/row
// pair does one all-reduce of tokens x hidden elements forward and one backward (with sequence
// parallelism an all-gather and a reduce-scatter of the same S instead: all-gather, the
// gathered output; reduce-scatter, the full input); the vocabulary-parallel embedding one
// all-reduce of tokens x hidden; the vocabulary-parallel cross-entropy a max all-reduce of
// tokens accumulators and one sum all-reduce of 2 x tokens (the sum of exponentials and the
// target logit, fused).
std::size_t tokens_hidden_bytes(std::size_t tokens, int hidden, std::size_t elem) {
  return tokens * static_cast<std::size_t>(hidden) * elem;
}
std::size_t ce_max_bytes(std::size_t tokens, std::size_t acc) {
  return tokens * acc;
}
std::size_t ce_sum_bytes(std::size_t tokens, std::size_t acc) {
  return 2 * tokens * acc;
}

struct Tp {
  CommLog log;
  std::unique_ptr<Communicator> c =
      make_communicator(paraxis::config::CommBackend::mpi, MPI_COMM_WORLD, Axis::tp, &log);
  int r = c->rank(), n = c->size();
  TpGroup plain() const { return {c.get(), false}; }
  TpGroup sp() const { return {c.get(), true}; }
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

// The unsharded linear layer, the reference: y = x w + b; backward dx, dw, db.
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
void expect_invalid_argument_contains(const F& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// The tp events from `from` on: each op (all_reduce unless given) with its bytes.
void expect_events(const CommLog& log, std::size_t from, const std::vector<std::size_t>& bytes,
                   const std::string& what, const std::vector<std::string>& ops = {}) {
  const auto& e = log.events();
  ASSERT_EQ(e.size() - from, bytes.size()) << what << ": number of tp collectives";
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    EXPECT_EQ(std::string(e[from + k].op), ops.empty() ? "all_reduce" : ops[k])
        << what << " call " << k;
    EXPECT_EQ(e[from + k].axis, Axis::tp) << what << " call " << k;
    EXPECT_EQ(e[from + k].bytes, bytes[k]) << what << " call " << k;
  }
}

TEST(tensor_parallel, column_parallel_matches_full_layer_fp64) {
  Tp tp;
  const TpGroup g = tp.plain();
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
  const V2 Xin = tp_gather_tokens(Space(), g, X, V2());
  EXPECT_EQ(Xin.data(), X.data()) << "without sequence parallelism the input is not gathered";
  column_parallel_forward(Space(), Xin, Wl, Bl, Yl);
  expect_events(tp.log, 0, {}, "column forward");
  column_parallel_backward(Space(), g, DYl, Xin, Wl, tp_partial_target(g, DXt, V2()), 0.0, DXt, DWl,
                           DBl);
  expect_events(tp.log, 0, {tokens_hidden_bytes(kN, kH, 8)}, "column backward");

  expect_close(to_host(Yl), col_block(to_host(Y), kN, kF, sh.offset, sh.size), kTol, kTol, "y");
  expect_close(to_host(DXt), to_host(DX), kTol, kTol, "dx");
  expect_close(to_host(DWl), col_block(to_host(DW), kH, kF, sh.offset, sh.size), kTol, kTol, "dw");
  expect_close(to_host(DBl), vec_block(to_host(DB), sh.offset, sh.size), kTol, kTol, "db");
  // A partial sum is reduced in place without sequence parallelism: another target is refused.
  V2 elsewhere("elsewhere", kN, kH);
  expect_invalid_argument_contains([&] { tp_reduce_partial(Space(), g, elsewhere, DXt); },
                                   "expected partial == out");
}

TEST(tensor_parallel, row_parallel_matches_full_layer_fp64) {
  Tp tp;
  const TpGroup g = tp.plain();
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
  row_parallel_forward(Space(), g, Xl, Wl, B, tp_partial_target(g, Yt, V2()), Yt);
  expect_events(tp.log, 0, {tokens_hidden_bytes(kN, kH, 8)}, "row forward");
  row_parallel_backward(Space(), tp_gather_tokens(Space(), g, DY, V2()), Xl, Wl, DXl, 0.0, DWl,
                        DBt);
  expect_events(tp.log, 0, {tokens_hidden_bytes(kN, kH, 8)}, "row backward");

  expect_close(to_host(Yt), to_host(Y), kTol, kTol, "y");
  expect_close(to_host(DXl), col_block(to_host(DX), kN, kF, sh.offset, sh.size), kTol, kTol, "dx");
  expect_close(to_host(DWl), row_block(to_host(DW), kF, kH, sh.offset, sh.size), kTol, kTol, "dw");
  expect_close(to_host(DBt), to_host(DB), kTol, kTol, "db");

  // The partial form (the MoE experts' W2): the bias on tp rank 0 only, so that the later sum
  // adds it once; summed over the group it is the unsharded output.
  V2 Yp("y_partial", kN, kH);
  row_parallel_partial_forward(Space(), g, Xl, Wl, B, Yp);
  expect_events(tp.log, 0, {tokens_hidden_bytes(kN, kH, 8)}, "partial forward: no call");
  tp_all_reduce(Space(), *tp.c, Yp);
  expect_close(to_host(Yp), to_host(Y), kTol, kTol, "sum of the partial outputs");
}

// Megatron's MLP: w1 column-parallel, GeLU on the local columns, w2 row-parallel; and the same
// with sequence parallelism on 16 tokens, each rank holding 16 / tp of them outside the pair:
// all-gather in front of w1, reduce-scatter behind w2, then backward the all-gather of the
// output gradient, the input gathered again for w1's gradient (the block keeps only its
// LayerNorm output's sequence shard) and the reduce-scatter of the input gradient.
void mlp_pair_matches_unsharded_mlp(bool sequence_parallel) {
  Tp tp;
  const TpGroup g = sequence_parallel ? tp.sp() : tp.plain();
  const int n = 16;  // 2 sequences of 8: divisible by tp = 2 and 4
  const auto sh = even_shard("model.ffn", kF, tp.n, tp.r);
  const auto sq = sequence_parallel ? even_shard("tokens", n, tp.n, tp.r) : ShardRange{0, n};
  const auto x = random_vec(n * kH, 61), w1 = random_vec(kH * kF, 62), b1 = random_vec(kF, 63);
  const auto w2 = random_vec(kF * kH, 64), b2 = random_vec(kH, 65), dy = random_vec(n * kH, 66);
  // Unsharded.
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
  // Tensor-parallel: this rank's tokens outside the pair, its ffn columns inside.
  V2 Xs = make2<double>(sq.size, kH, row_block(x, n, kH, sq.offset, sq.size));
  V2 DYs = make2<double>(sq.size, kH, row_block(dy, n, kH, sq.offset, sq.size));
  V2 W1l = make2<double>(kH, sh.size, col_block(w1, kH, kF, sh.offset, sh.size));
  V1 B1l = make1<double>(vec_block(b1, sh.offset, sh.size));
  V2 W2l = make2<double>(sh.size, kH, row_block(w2, kF, kH, sh.offset, sh.size));
  V2 full("full", n, kH), dfull("dfull", n, kH), part("partial", n, kH);
  V2 Ul("ul", n, sh.size), Gl("gl", n, sh.size), Ys("y_tp", sq.size, kH);
  V2 DGl("dgl", n, sh.size), DUl("dul", n, sh.size), DXs("dx_tp", sq.size, kH);
  V2 DW1l("dw1l", kH, sh.size), DW2l("dw2l", sh.size, kH);
  V1 DB1l("db1l", sh.size), DB2t("db2_tp", kH);
  column_parallel_forward(Space(), tp_gather_tokens(Space(), g, Xs, full), W1l, B1l, Ul);
  pk::gelu_forward(Space(), Ul, Gl);
  row_parallel_forward(Space(), g, Gl, W2l, B2, tp_partial_target(g, Ys, part), Ys);
  row_parallel_backward(Space(), tp_gather_tokens(Space(), g, DYs, dfull), Gl, W2l, DGl, 0.0, DW2l,
                        DB2t);
  pk::gelu_backward(Space(), Ul, DGl, DUl);
  column_parallel_backward(Space(), g, DUl, tp_gather_tokens(Space(), g, Xs, full), W1l,
                           tp_partial_target(g, DXs, part), 0.0, DXs, DW1l, DB1l);

  const std::size_t s = tokens_hidden_bytes(n, kH, 8);
  if (sequence_parallel) {
    // The same bytes as the two all-reduces of the plain pair, as gathers and scatters.
    expect_events(tp.log, 0, {s, s, s, s, s}, "sequence-parallel MLP",
                  {"all_gather", "reduce_scatter", "all_gather", "all_gather", "reduce_scatter"});
  } else {
    expect_events(tp.log, 0, {s, s}, "MLP forward + backward");
    EXPECT_EQ(tp.log.totals()[static_cast<std::size_t>(Axis::tp)].bytes,
              2u * n * kH * sizeof(double));
  }
  expect_close(to_host(Ys), row_block(to_host(Y), n, kH, sq.offset, sq.size), kTol, kTol, "y");
  expect_close(to_host(DXs), row_block(to_host(DX), n, kH, sq.offset, sq.size), kTol, kTol, "dx");
  expect_close(to_host(DW1l), col_block(to_host(DW1), kH, kF, sh.offset, sh.size), kTol, kTol,
               "dw1");
  expect_close(to_host(DB1l), vec_block(to_host(DB1), sh.offset, sh.size), kTol, kTol, "db1");
  expect_close(to_host(DW2l), row_block(to_host(DW2), kF, kH, sh.offset, sh.size), kTol, kTol,
               "dw2");
  EXPECT_EQ(to_host(DB2t), to_host(DB2))
      << "db2 from the full-token gradient on every rank: the single-rank sum";
  if (sequence_parallel) {
    V2 too_short("too_short", 3, kH);  // rejected on every rank before any communication
    expect_invalid_argument_contains([&] { tp_gather_tokens(Space(), g, Xs, too_short); },
                                     "tokens divisible by tp");
  }
}

TEST(tensor_parallel, mlp_pair_matches_unsharded_mlp_with_one_all_reduce_each_way_fp64) {
  mlp_pair_matches_unsharded_mlp(false);
}

TEST(tensor_parallel, sequence_parallel_mlp_pair_matches_unsharded_mlp_fp64) {
  mlp_pair_matches_unsharded_mlp(true);
}

// Q, K, V: three column-parallel linears (heads split: hidden / tp columns each) reading the
// same input; their input gradients are summed locally and reduced once.
TEST(tensor_parallel, qkv_input_gradient_is_reduced_once_fp64) {
  Tp tp;
  const TpGroup g = tp.plain();
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
    column_parallel_backward(Space(), g, DYl, X, Wl, DXt, p == 0 ? 0.0 : 1.0, DXt, DWl, V1(),
                             p == 2 ? TpReduce::now : TpReduce::deferred);
    expect_close(to_host(DWl), col_block(to_host(DW), kH, kH, sh.offset, sh.size), kTol, kTol,
                 "dw " + std::to_string(p));
  }
  expect_events(tp.log, 0, {tokens_hidden_bytes(kN, kH, 8)}, "QKV backward");
  expect_close(to_host(DXt), to_host(DX), kTol, kTol, "dx");
}

struct VocabRun {
  double loss;
  std::vector<double> x, dx, dhead_local, dwte_local, dwpe;
};

// Embedding -> LM head -> cross-entropy -> back on this rank's vocabulary shard, as
// GptModel's chunk does it (x and dx: this rank's tokens).
VocabRun vocab_parallel_run(const TpGroup& g, int n, int seq_len, const std::vector<int>& tokens,
                            const std::vector<int>& targets, const std::vector<double>& wte,
                            const std::vector<double>& wpe, const std::vector<double>& head) {
  const auto sh = vocab_shard(kV, g.size(), g.rank());
  const int nl = g.sp() ? n / g.size() : n;
  V2 WTEl = make2<double>(sh.size, kH, row_block(wte, kV, kH, sh.offset, sh.size));
  V2 WPE = make2<double>(seq_len, kH, wpe);
  V2 HEADl = make2<double>(kH, sh.size, col_block(head, kH, kV, sh.offset, sh.size));
  auto tok = int_view(tokens), tgt = int_view(targets);
  V2 X("x", nl, kH), L("logits_local", n, sh.size), DL("dlogits_local", n, sh.size);
  V2 DX("dx", nl, kH), DHEADl("dhead_local", kH, sh.size), DWTEl("dwte_local", sh.size, kH);
  V2 DWPE("dwpe", seq_len, kH), full("full", n, kH), dfull("dfull", n, kH), part("part", n, kH);
  V1 lse("lse", n);
  vocab_parallel_embedding_forward(Space(), g, tok, WTEl, WPE, seq_len, sh.offset,
                                   tp_partial_target(g, X, part), X);
  column_parallel_forward(Space(), tp_gather_tokens(Space(), g, X, full), HEADl, V1(), L);
  const VocabParallelCrossEntropy<double> ce =
      g.size() > 1 ? VocabParallelCrossEntropy<double>(n) : VocabParallelCrossEntropy<double>();
  const double loss = ce.forward(Space(), g, L, tgt, sh.offset, kV, lse);
  ce.backward(Space(), g, L, tgt, lse, sh.offset, kV, 1.0 / n, DL);
  column_parallel_backward(Space(), g, DL, tp_gather_tokens(Space(), g, X, full), HEADl,
                           tp_partial_target(g, DX, part), 0.0, DX, DHEADl, V1());
  vocab_parallel_embedding_backward(Space(), tok, tp_gather_tokens(Space(), g, DX, dfull), seq_len,
                                    sh.offset, DWTEl, DWPE);
  return {loss, to_host(X), to_host(DX), to_host(DHEADl), to_host(DWTEl), to_host(DWPE)};
}

// The unsharded embedding -> head -> cross-entropy -> back, with the single-rank kernels.
VocabRun unsharded_vocab_run(int n, int seq_len, const std::vector<int>& tokens,
                             const std::vector<int>& targets, const std::vector<double>& wte,
                             const std::vector<double>& wpe, const std::vector<double>& head) {
  auto tok = int_view(tokens), tgt = int_view(targets);
  V2 WTE = make2<double>(kV, kH, wte), WPE = make2<double>(seq_len, kH, wpe);
  V2 HEAD = make2<double>(kH, kV, head), X("x", n, kH), L("logits", n, kV), DL("dl", n, kV);
  V2 DX("dx", n, kH), DHEAD("dhead", kH, kV), DWTE("dwte", kV, kH), DWPE("dwpe", seq_len, kH);
  V1 lse("lse", n);
  pk::embedding_forward(Space(), tok, WTE, WPE, seq_len, 0, X);
  full_forward(X, HEAD, V1(), L);
  const double loss = pk::cross_entropy_forward(Space(), L, tgt, kV, lse);
  pk::cross_entropy_backward(Space(), L, tgt, lse, kV, 1.0 / n, DL);
  full_backward(DL, X, HEAD, DX, DHEAD, V1());
  pk::embedding_backward(Space(), tok, DX, seq_len, 0, DWTE, DWPE);
  return {loss, to_host(X), to_host(DX), to_host(DHEAD), to_host(DWTE), to_host(DWPE)};
}

struct VocabCase {
  std::vector<int> tokens, targets;
  std::vector<double> wte, wpe, head;
};

VocabCase vocab_case(int n, int seq_len) {
  VocabCase c;
  ktest::Rng rng(51);
  c.tokens.resize(n);
  c.targets.resize(n);
  for (auto& t : c.tokens) t = rng.integer(kV);
  for (auto& t : c.targets) t = rng.integer(kV);
  c.tokens[0] = c.targets[1] = kV - 1;  // next to the padding, in the last shard
  c.tokens[2] = c.targets[3] = 0;
  c.wte = random_vec(kV * kH, 52);
  c.wpe = random_vec(seq_len * kH, 53);
  c.head = random_vec(kH * kV, 54, -3, 3);
  return c;
}

TEST(tensor_parallel, vocab_parallel_embedding_head_and_cross_entropy_match_unsharded_fp64) {
  Tp tp;
  const auto sh = vocab_shard(kV, tp.n, tp.r);
  EXPECT_EQ(sh.size * tp.n, padded_vocab(kV, tp.n));
  const VocabCase c = vocab_case(kN, kS);
  const auto ref = unsharded_vocab_run(kN, kS, c.tokens, c.targets, c.wte, c.wpe, c.head);
  const auto got =
      vocab_parallel_run(tp.plain(), kN, kS, c.tokens, c.targets, c.wte, c.wpe, c.head);
  // Embedding: one all-reduce of tokens x hidden; cross-entropy: max (N), sums (2N); head
  // backward: the column-parallel input gradient (tokens x hidden).
  const std::size_t nh = tokens_hidden_bytes(kN, kH, 8);
  expect_events(tp.log, 0, {nh, ce_max_bytes(kN, 8), ce_sum_bytes(kN, 8), nh},
                "vocab-parallel step");
  EXPECT_EQ(got.x, ref.x) << "the embedding is exact: rank 0 adds positions, others 0";
  EXPECT_NEAR(got.loss, ref.loss, 1e-13 * ref.loss);
  double loss0 = got.loss;
  tp.c->broadcast(&loss0, 1, DType::f64, 0);
  EXPECT_EQ(got.loss, loss0) << "every tp rank returns the same loss";
  expect_close(got.dx, ref.dx, kTol, kTol, "dx");
  expect_close(got.dhead_local, col_block(ref.dhead_local, kH, kV, sh.offset, sh.size), kTol, kTol,
               "dhead (padding columns 0)");
  expect_close(got.dwte_local, row_block(ref.dwte_local, kV, kH, sh.offset, sh.size), kTol, kTol,
               "dwte (padding rows 0)");
  expect_close(got.dwpe, ref.dwpe, kTol, kTol, "dwpe");

  // A rerun of the same configuration is bitwise identical.
  const auto again =
      vocab_parallel_run(tp.plain(), kN, kS, c.tokens, c.targets, c.wte, c.wpe, c.head);
  EXPECT_EQ(again.loss, got.loss);
  EXPECT_EQ(again.dx, got.dx);
  EXPECT_EQ(again.dhead_local, got.dhead_local);
  EXPECT_EQ(again.dwte_local, got.dwte_local);
}

// With sequence parallelism the embedding's reduction is a reduce-scatter (each rank keeps its
// tokens), the LM head's input is gathered, and its input gradient reduce-scattered.
TEST(tensor_parallel, sequence_parallel_vocab_embedding_head_and_loss_match_unsharded_fp64) {
  Tp tp;
  const int n = 16, seq = 8;  // divisible by tp = 2 and 4
  const auto sh = vocab_shard(kV, tp.n, tp.r);
  const auto sq = even_shard("tokens", n, tp.n, tp.r);
  const VocabCase c = vocab_case(n, seq);
  const auto ref = unsharded_vocab_run(n, seq, c.tokens, c.targets, c.wte, c.wpe, c.head);
  const auto got = vocab_parallel_run(tp.sp(), n, seq, c.tokens, c.targets, c.wte, c.wpe, c.head);
  const std::size_t nh = tokens_hidden_bytes(n, kH, 8);
  expect_events(tp.log, 0, {nh, nh, ce_max_bytes(n, 8), ce_sum_bytes(n, 8), nh, nh, nh},
                "sequence-parallel vocab step",
                {"reduce_scatter", "all_gather", "all_reduce", "all_reduce", "all_gather",
                 "reduce_scatter", "all_gather"});
  EXPECT_EQ(got.x, row_block(ref.x, n, kH, sq.offset, sq.size)) << "this rank's tokens, exact";
  EXPECT_NEAR(got.loss, ref.loss, 1e-13 * ref.loss);
  expect_close(got.dx, row_block(ref.dx, n, kH, sq.offset, sq.size), kTol, kTol, "dx");
  expect_close(got.dhead_local, col_block(ref.dhead_local, kH, kV, sh.offset, sh.size), kTol, kTol,
               "dhead");
  expect_close(got.dwte_local, row_block(ref.dwte_local, kV, kH, sh.offset, sh.size), kTol, kTol,
               "dwte");
  expect_close(got.dwpe, ref.dwpe, kTol, kTol, "dwpe");
}

// A group of one rank (none given, as on a single-rank model): the layers make no call and are
// the single-rank computation bit for bit, the loss from the single-rank cross-entropy kernels;
// sequence parallelism asks nothing of one rank.
TEST(tensor_parallel, one_rank_group_is_the_unsharded_computation_bitwise_fp64) {
  for (const bool sp : {false, true}) {
    const TpGroup one{nullptr, sp};
    EXPECT_EQ(one.size(), 1);
    EXPECT_FALSE(one.sp());
    const VocabCase c = vocab_case(kN, kS);
    const auto ref = unsharded_vocab_run(kN, kS, c.tokens, c.targets, c.wte, c.wpe, c.head);
    const auto got = vocab_parallel_run(one, kN, kS, c.tokens, c.targets, c.wte, c.wpe, c.head);
    EXPECT_EQ(got.loss, ref.loss) << "sp " << sp;
    EXPECT_EQ(got.x, ref.x) << "sp " << sp;
    EXPECT_EQ(got.dx, ref.dx) << "sp " << sp;
    EXPECT_EQ(got.dhead_local, ref.dhead_local) << "sp " << sp;
    EXPECT_EQ(got.dwte_local, ref.dwte_local) << "sp " << sp;
    EXPECT_EQ(got.dwpe, ref.dwpe) << "sp " << sp;

    const auto x = random_vec(kN * kF, 81), w = random_vec(kF * kH, 82), b = random_vec(kH, 83);
    V2 X = make2<double>(kN, kF, x), W = make2<double>(kF, kH, w), Y("y", kN, kH), Y1("y1", kN, kH);
    V1 B = make1<double>(b);
    full_forward(X, W, B, Y);
    row_parallel_forward(Space(), one, X, W, B, tp_partial_target(one, Y1, V2()), Y1);
    EXPECT_EQ(to_host(Y1), to_host(Y)) << "row-parallel on one rank, sp " << sp;
  }
  // A loss built for one rank refuses a larger group rather than reduce without its workspace.
  Tp tp;
  if (tp.n > 1) {
    V2 L("logits", kN, 4);
    V1 lse("lse", kN);
    auto tgt = int_view(std::vector<int>(kN, 0));
    expect_invalid_argument_contains(
        [&] {
          VocabParallelCrossEntropy<double>().forward(Space(), tp.plain(), L, tgt, 0, kV, lse);
        },
        "built for one rank");
    EXPECT_TRUE(tp.log.events().empty());
  }
}

// fp32 storage (fp32 accumulators, fp32 collectives): the row-parallel output and the
// vocabulary-parallel loss and logit gradients agree with the unsharded fp32 kernels loosely.
TEST(tensor_parallel, row_parallel_and_vocab_cross_entropy_match_unsharded_fp32) {
  using F2 = W2<float>;
  using F1 = W1<float>;
  Tp tp;
  const TpGroup g = tp.plain();
  const auto sh = even_shard("model.ffn", kF, tp.n, tp.r);
  const auto x = random_vec(kN * kF, 71), w = random_vec(kF * kH, 72), b = random_vec(kH, 73);
  F2 X = make2<float>(kN, kF, x), W = make2<float>(kF, kH, w), Y("y", kN, kH), Yt("yt", kN, kH);
  F1 B = make1<float>(b);
  pk::gemm(Space(), Trans::N, Trans::N, 1.0, X, W, 0.0, Y);
  pk::bias_add(Space(), Y, B);
  F2 Xl = make2<float>(kN, sh.size, col_block(x, kN, kF, sh.offset, sh.size));
  F2 Wl = make2<float>(sh.size, kH, row_block(w, kF, kH, sh.offset, sh.size));
  row_parallel_forward(Space(), g, Xl, Wl, B, Yt, Yt);
  expect_events(tp.log, 0, {tokens_hidden_bytes(kN, kH, 4)}, "row forward fp32");
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
  const float loss_tp = ce.forward(Space(), g, Ll, tgt, vs.offset, kV, lse_tp);
  ce.backward(Space(), g, Ll, tgt, lse_tp, vs.offset, kV, 1.0 / kN, DLl);
  expect_events(tp.log, before, {ce_max_bytes(kN, 4), ce_sum_bytes(kN, 4)}, "cross-entropy fp32");
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
