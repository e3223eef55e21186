// MoE routing replay (kernels::topk_replay): forced experts with the router's own gate
// probabilities, flips counted, bad routings rejected; against the host top-k reference.
#include "moe_test_util.hpp"

using namespace moe_test;

// Every test runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(moe_topk_replay);

// Routing replay: the forced experts replace the router's own, gate = the router's own prob of
// each forced expert; flips = tokens whose own top-k (in order) differs; own choices replayed
// change nothing, bitwise.
TYPED_TEST(moe_topk_replay, follows_forced_experts_with_own_probs_and_counts_flips) {
  using Space = TypeParam;
  const int N = 37, E = 5, k = 2;
  const auto p = skewed_probs(N, E, 0.4);
  auto probs = make2<double, Space>("p", N, E, [&](int n, int e) { return p[n * E + e]; });
  std::vector<int> own;
  std::vector<double> own_gate;
  ref_topk(p, N, E, k, own, own_gate);
  // Own choices replayed: no flips, bitwise the same gate.
  {
    V2<int, Space> idx("idx", N, k);
    V2<double, Space> gate("gate", N, k);
    pk::topk_forward(Space(), probs, k, idx, gate);
    const auto before = to_vec2(gate);
    EXPECT_EQ(pk::topk_replay(Space(), probs, upload_idx<Space>(own, N, k), idx, gate), 0);
    EXPECT_EQ(ivec(idx, N * k), own);
    EXPECT_EQ(to_vec2(gate), before);
  }
  // Forced: token 0 slots swapped, tokens 5 and 36 sent to the expert they ranked last.
  std::vector<int> forced = own;
  std::swap(forced[0], forced[1]);
  for (int n : {5, 36}) {
    int last = 0;
    for (int e = 1; e < E; ++e)
      if (p[n * E + e] <= p[n * E + last]) last = e;
    forced[n * k + 1] = last;
  }
  V2<int, Space> idx("idx", N, k);
  V2<double, Space> gate("gate", N, k);
  pk::topk_forward(Space(), probs, k, idx, gate);
  EXPECT_EQ(pk::topk_replay(Space(), probs, upload_idx<Space>(forced, N, k), idx, gate), 3);
  EXPECT_EQ(ivec(idx, N * k), forced);
  const auto g = to_vec2(gate);
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < k; ++j) EXPECT_EQ(g[n * k + j], p[n * E + forced[n * k + j]]);
}

TYPED_TEST(moe_topk_replay, bf16_probs_give_the_gate_topk_forward_would) {
  using Space = TypeParam;
  const int N = 29, E = 6, k = 2;
  const auto p = skewed_probs(N, E, 0.3);
  auto probs = make2<bf16, Space>("p", N, E, [&](int n, int e) { return float(p[n * E + e]); });
  V2<int, Space> idx("idx", N, k), idx2("idx2", N, k);
  V2<bf16, Space> gate("gate", N, k), gate2("gate2", N, k);
  pk::topk_forward(Space(), probs, k, idx, gate);
  pk::topk_forward(Space(), probs, k, idx2, gate2);
  EXPECT_EQ(pk::topk_replay(Space(), probs, idx2, idx, gate), 0);
  EXPECT_EQ(to_vec2(gate), to_vec2(gate2));
}

TYPED_TEST(moe_topk_replay, rejects_experts_outside_the_range_or_repeated) {
  using Space = TypeParam;
  const int N = 7, E = 4, k = 2;
  auto probs = make2<double, Space>("p", N, E, [](int, int) { return 0.25; });
  V2<int, Space> idx("idx", N, k);
  V2<double, Space> gate("gate", N, k);
  std::vector<int> forced(N * k);
  for (int a = 0; a < N * k; ++a) forced[a] = a % 2;
  forced[9] = E;  // token 4, slot 1
  EXPECT_THROW(pk::topk_replay(Space(), probs, upload_idx<Space>(forced, N, k), idx, gate),
               std::invalid_argument);
  forced[9] = 0;  // token 4 twice to expert 0
  EXPECT_THROW(pk::topk_replay(Space(), probs, upload_idx<Space>(forced, N, k), idx, gate),
               std::invalid_argument);
  forced[9] = 1;
  EXPECT_NO_THROW(pk::topk_replay(Space(), probs, upload_idx<Space>(forced, N, k), idx, gate));
  V2<int, Space> wrong("wrong", N + 1, k);
  EXPECT_THROW(pk::topk_replay(Space(), probs, wrong, idx, gate), std::invalid_argument);
}
