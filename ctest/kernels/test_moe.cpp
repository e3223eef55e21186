// MoE kernels against plain host loops on unaligned sizes: top-k (ties to the lower index),
// routing with and without capacity, gather/combine and their backward (plus central finite
// differences in fp64), the auxiliary loss and its gradient, and bitwise repeatability.
#include "moe_test_util.hpp"

using namespace moe_test;

// Every test runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(moe_topk);
PARAXIS_EXEC_SPACE_TEST_SUITE(moe_routing);
PARAXIS_EXEC_SPACE_TEST_SUITE(moe_dispatch_shapes);
PARAXIS_EXEC_SPACE_TEST_SUITE(moe_finite_differences);
PARAXIS_EXEC_SPACE_TEST_SUITE(moe_aux_loss);
PARAXIS_EXEC_SPACE_TEST_SUITE(moe_determinism);

// ---------------------------------------------------------------- top-k

TYPED_TEST(moe_topk, matches_host_reference_with_ties_to_lower_index) {
  using Space = TypeParam;
  for (int E : {4, 5, 8})
    for (int k : {1, 2}) {
      const int N = 53;
      // Four distinct values per row: equal probs are frequent and must go to the lower e.
      std::vector<double> p(N * E);
      for (int n = 0; n < N; ++n)
        for (int e = 0; e < E; ++e) p[n * E + e] = 0.125 * (1 + (n * 3 + e * 5) % 4);
      for (int e = 0; e < E; ++e) p[0 * E + e] = 1.0 / E;  // a row of all-equal probs
      auto probs = make2<double, Space>("p", N, E, [&](int n, int e) { return p[n * E + e]; });
      V2<int, Space> idx("idx", N, k);
      V2<double, Space> gate("gate", N, k);
      pk::topk_forward(Space(), probs, k, idx, gate);
      std::vector<int> ref_idx;
      std::vector<double> ref_gate;
      ref_topk(p, N, E, k, ref_idx, ref_gate);
      EXPECT_EQ(ivec(idx, N * k), ref_idx) << "E=" << E << " k=" << k;
      EXPECT_EQ(to_vec2(gate), ref_gate);
      auto hi = host(idx);
      for (int j = 0; j < k; ++j) EXPECT_EQ(hi(0, j), j);  // all equal: experts 0, 1, ...
    }
}

TYPED_TEST(moe_topk, bf16_probs_into_float_gate) {
  using Space = TypeParam;
  const int N = 37, E = 6, k = 2;
  auto p = skewed_probs(N, E, 0.3);
  auto probs = make2<bf16, Space>("p", N, E, [&](int n, int e) { return float(p[n * E + e]); });
  auto pr = to_vec2(probs);  // the probs as stored (rounded to bf16; new ties possible)
  V2<int, Space> idx("idx", N, k);
  V2<float, Space> gate("gate", N, k);
  pk::topk_forward(Space(), probs, k, idx, gate);
  std::vector<int> ref_idx;
  std::vector<double> ref_gate;
  ref_topk(pr, N, E, k, ref_idx, ref_gate);
  EXPECT_EQ(ivec(idx, N * k), ref_idx);
  EXPECT_EQ(to_vec2(gate), ref_gate);
}

TYPED_TEST(moe_topk, rejects_k_outside_one_to_experts) {
  using Space = TypeParam;
  V2<double, Space> probs("p", 5, 4);
  V2<int, Space> idx("idx", 5, 5);
  V2<double, Space> gate("g", 5, 5);
  EXPECT_THROW(pk::topk_forward(Space(), probs, 5, idx, gate), std::invalid_argument);
  EXPECT_THROW(pk::topk_forward(Space(), probs, 0, idx, gate), std::invalid_argument);
  V2<int, Space> idx2("idx", 5, 2);
  EXPECT_THROW(pk::topk_forward(Space(), probs, 3, idx2, gate), std::invalid_argument);
}

TYPED_TEST(moe_topk, backward_scatters_dgate_and_zeroes_the_rest) {
  using Space = TypeParam;
  const int N = 37, E = 7, k = 2;
  std::vector<int> ref_idx;
  std::vector<double> ref_gate;
  ref_topk(skewed_probs(N, E, 0.5), N, E, k, ref_idx, ref_gate);
  auto idx = upload_idx<Space>(ref_idx, N, k);
  auto dgate =
      make2<double, Space>("dg", N, k, [](int n, int j) { return 0.5 * n - 3.25 * j + 1; });
  auto dprobs = make2<double, Space>("dp", N, E, [](int, int) { return 99.0; });  // overwritten
  pk::topk_backward(Space(), dgate, idx, dprobs);
  std::vector<double> ref(N * E, 0.0);
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < k; ++j) ref[n * E + ref_idx[n * k + j]] = 0.5 * n - 3.25 * j + 1;
  EXPECT_EQ(to_vec2(dprobs), ref);
}

// ---------------------------------------------------------------- routing

TYPED_TEST(moe_routing, dropless_keeps_every_assignment_in_expert_major_order) {
  using Space = TypeParam;
  for (int E : {4, 8})
    for (int k : {1, 2}) {
      const int N = 53;
      std::vector<int> ri;
      std::vector<double> rg;
      ref_topk(skewed_probs(N, E, 0.8), N, E, k, ri, rg);
      pk::MoeRouting<Space> r(64, E, k);
      pk::moe_build_routing(Space(), upload_idx<Space>(ri, N, k), 0, r);
      auto ref = ref_routing(ri, N, k, E, 0);
      EXPECT_EQ(ref.rows, N * k);
      expect_routing_matches(r, ref, N, k, E);
      EXPECT_EQ(pk::moe_load_stats(r).dropped, 0);
    }
}

TYPED_TEST(moe_routing, capacity_keeps_the_first_assignments_in_token_order) {
  using Space = TypeParam;
  for (int k : {1, 2}) {
    const int N = 53, E = 5, capacity = 9;
    std::vector<int> ri;
    std::vector<double> rg;
    ref_topk(skewed_probs(N, E, 1.5), N, E, k, ri, rg);
    pk::MoeRouting<Space> r(N, E, k);
    pk::moe_build_routing(Space(), upload_idx<Space>(ri, N, k), capacity, r);
    auto ref = ref_routing(ri, N, k, E, capacity);
    expect_routing_matches(r, ref, N, k, E);
    // Independent of the reference: per expert, kept = min(requested, capacity), and every
    // kept assignment precedes every dropped one in token-major order.
    auto ts = host(r.token_slot);
    long dropped = 0;
    for (int e = 0; e < E; ++e) {
      int seen = 0;
      bool dropping = false;
      for (int a = 0; a < N * k; ++a) {
        if (ri[a] != e) continue;
        const bool kept = ts(a / k, a % k) >= 0;
        EXPECT_FALSE(kept && dropping) << "expert " << e << " kept a later assignment";
        dropping = dropping || !kept;
        EXPECT_EQ(kept, seen < capacity);
        ++seen;
      }
      EXPECT_EQ(r.counts_host(e), std::min(seen, capacity));
      dropped += seen - std::min(seen, capacity);
    }
    EXPECT_GT(dropped, 0) << "the skew should make expert 0 overflow";
    EXPECT_EQ(pk::moe_load_stats(r).dropped, dropped);
  }
}

TYPED_TEST(moe_routing, reuse_for_a_smaller_batch_and_many_blocks) {
  using Space = TypeParam;
  // More assignments than one routing block, then a smaller batch into the same object.
  const int E = 6, k = 2;
  pk::MoeRouting<Space> r(300, E, k);
  for (int N : {300, 37}) {
    std::vector<int> ri;
    std::vector<double> rg;
    ref_topk(skewed_probs(N, E, 1.0), N, E, k, ri, rg);
    for (int cap : {0, 40}) {
      pk::moe_build_routing(Space(), upload_idx<Space>(ri, N, k), cap, r);
      expect_routing_matches(r, ref_routing(ri, N, k, E, cap), N, k, E);
    }
  }
}

TYPED_TEST(moe_routing, rejects_bad_indices_too_many_tokens_and_bad_capacity) {
  using Space = TypeParam;
  pk::MoeRouting<Space> r(10, 4, 2);
  auto bad = make2<int, Space>("idx", 10, 2, [](int n, int j) { return n == 7 && j == 1 ? 4 : j; });
  EXPECT_THROW(pk::moe_build_routing(Space(), bad, 0, r), std::invalid_argument);
  auto neg = make2<int, Space>("idx", 10, 2, [](int n, int j) { return n == 3 ? -1 : j; });
  EXPECT_THROW(pk::moe_build_routing(Space(), neg, 0, r), std::invalid_argument);
  auto big = make2<int, Space>("idx", 11, 2, [](int, int j) { return j; });
  EXPECT_THROW(pk::moe_build_routing(Space(), big, 0, r), std::invalid_argument);
  auto good = make2<int, Space>("idx", 10, 2, [](int, int j) { return j; });
  EXPECT_THROW(pk::moe_build_routing(Space(), good, -1, r), std::invalid_argument);
  auto wrong_k = make2<int, Space>("idx", 10, 1, [](int, int) { return 0; });
  EXPECT_THROW(pk::moe_build_routing(Space(), wrong_k, 0, r), std::invalid_argument);
  EXPECT_THROW(pk::MoeRouting<Space>(10, 4, 5), std::invalid_argument);
  try {
    pk::moe_build_routing(Space(), bad, 0, r);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("(7,1) = 4"), std::string::npos) << e.what();
  }
}

TYPED_TEST(moe_routing, load_stats_of_a_known_routing) {
  using Space = TypeParam;
  const int N = 37, E = 4, k = 1;
  std::vector<int> ri(N);
  for (int n = 0; n < N; ++n) ri[n] = n % E;  // 10, 9, 9, 9
  pk::MoeRouting<Space> r(N, E, k);
  pk::moe_build_routing(Space(), upload_idx<Space>(ri, N, k), 0, r);
  auto s = pk::moe_load_stats(r);
  EXPECT_EQ(s.min, 9);
  EXPECT_EQ(s.max, 10);
  EXPECT_DOUBLE_EQ(s.mean, 37.0 / 4);
  EXPECT_DOUBLE_EQ(s.imbalance, 10 / (37.0 / 4));
  EXPECT_EQ(s.dropped, 0);
  pk::moe_build_routing(Space(), upload_idx<Space>(ri, N, k), 9, r);
  s = pk::moe_load_stats(r);
  EXPECT_EQ(s.max, 9);
  EXPECT_EQ(s.dropped, 1);
  EXPECT_EQ(r.rows, 36);
}

// ---------------------------------------------------------------- gather / combine

namespace {

template <class T>
double tol();
template <>
double tol<double>() {
  return 1e-13;
}
template <>
double tol<float>() {
  return 2e-6;
}
template <>
double tol<bf16>() {
  return 1e-2;  // one rounding of the output to 8 mantissa bits, plus fp32 sums
}

void expect_near_rel(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                     const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rtol * std::max(1.0, scale)) << what << " at " << i;
}

struct Case {
  int N, E, k, H, capacity;
};

}  // namespace

// Every (execution space, storage type) pair: TypeParam is std::pair<Space, T>.
template <class P>
class moe_dispatch : public ::testing::Test {};
using StorageTypes = ::testing::Types<double, float, bf16>;
TYPED_TEST_SUITE(moe_dispatch, paraxis_test::SpaceProduct<StorageTypes>,
                 paraxis_test::SpaceProductNames);

TYPED_TEST(moe_dispatch, gather_combine_and_backward_match_host) {
  using Space = typename TypeParam::first_type;
  using T = typename TypeParam::second_type;
  for (Case c : {Case{37, 4, 2, 13, 0}, Case{53, 8, 1, 29, 0}, Case{53, 5, 2, 13, 11},
                 Case{37, 6, 1, 29, 4}}) {
    const int N = c.N, E = c.E, k = c.k, H = c.H;
    std::vector<int> ri;
    std::vector<double> rg;
    auto p = skewed_probs(N, E, 1.2);
    ref_topk(p, N, E, k, ri, rg);
    pk::MoeRouting<Space> r(N, E, k);
    pk::moe_build_routing(Space(), upload_idx<Space>(ri, N, k), c.capacity, r);
    const auto ref = ref_routing(ri, N, k, E, c.capacity);
    const int P = r.rows, Pbuf = N * k;  // buffers sized for the worst case

    auto X = make2<T, Space>("X", N, H, [](int n, int h) { return std::cos(0.3 * n + 0.11 * h); });
    auto gate = make2<T, Space>("g", N, k, [&](int n, int j) { return rg[n * k + j]; });
    auto Ye =
        make2<T, Space>("Ye", Pbuf, H, [](int p, int h) { return std::sin(0.17 * p - 0.4 * h); });
    auto dY =
        make2<T, Space>("dY", N, H, [](int n, int h) { return 0.5 - std::cos(0.23 * n * h); });
    auto dXe = make2<T, Space>("dXe", Pbuf, H, [](int p, int h) { return 0.01 * p - 0.03 * h; });
    const auto x = to_vec2(X), g = to_vec2(gate), ye = to_vec2(Ye), dy = to_vec2(dY),
               dxe = to_vec2(dXe);

    // Gather: a copy, exact in every storage type. Rows past P stay untouched (sentinel 7).
    auto Xe = make2<T, Space>("Xe", Pbuf, H, [](int, int) { return 7.0; });
    pk::moe_gather(Space(), X, r, Xe);
    std::vector<double> xe_ref(Pbuf * H, 7.0);
    for (int q = 0; q < P; ++q)
      for (int h = 0; h < H; ++h) xe_ref[q * H + h] = x[ref.slot_token[q] * H + h];
    EXPECT_EQ(to_vec2(Xe), xe_ref);

    // Gather backward accumulates onto dX.
    auto dX = make2<T, Space>("dX", N, H, [](int n, int h) { return 0.25 * ((n + h) % 3); });
    const auto dx0 = to_vec2(dX);
    pk::moe_gather_backward(Space(), dXe, r, dX);
    std::vector<double> dx_ref = dx0;
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < k; ++j) {
        const int q = ref.token_slot[n * k + j];
        if (q < 0) continue;
        for (int h = 0; h < H; ++h) dx_ref[n * H + h] += dxe[q * H + h];
      }
    expect_near_rel(to_vec2(dX), dx_ref, tol<T>(), "gather_backward");

    // Combine forward overwrites Y; fully dropped tokens get 0.
    auto Y = make2<T, Space>("Y", N, H, [](int, int) { return 5.0; });
    pk::moe_combine_forward(Space(), Ye, gate, r, Y);
    std::vector<double> y_ref(N * H, 0.0);
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < k; ++j) {
        const int q = ref.token_slot[n * k + j];
        if (q < 0) continue;
        for (int h = 0; h < H; ++h) y_ref[n * H + h] += g[n * k + j] * ye[q * H + h];
      }
    expect_near_rel(to_vec2(Y), y_ref, tol<T>(), "combine_forward");

    // Combine backward.
    auto dYe = make2<T, Space>("dYe", Pbuf, H, [](int, int) { return 7.0; });
    auto dgate = make2<T, Space>("dg", N, k, [](int, int) { return 5.0; });
    pk::moe_combine_backward(Space(), dY, Ye, gate, r, dYe, dgate);
    std::vector<double> dye_ref(Pbuf * H, 7.0), dg_ref(N * k, 0.0);
    for (int q = 0; q < P; ++q) {
      const int n = ref.slot_token[q], j = ref.slot_k[q];
      for (int h = 0; h < H; ++h) dye_ref[q * H + h] = g[n * k + j] * dy[n * H + h];
    }
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < k; ++j) {
        const int q = ref.token_slot[n * k + j];
        if (q < 0) continue;
        for (int h = 0; h < H; ++h) dg_ref[n * k + j] += dy[n * H + h] * ye[q * H + h];
      }
    expect_near_rel(to_vec2(dYe), dye_ref, tol<T>(), "combine_backward dYe");
    expect_near_rel(to_vec2(dgate), dg_ref, tol<T>(), "combine_backward dgate");
  }
}

TYPED_TEST(moe_dispatch_shapes, reject_mismatched_views) {
  using Space = TypeParam;
  const int N = 10, E = 4, k = 2, H = 3;
  pk::MoeRouting<Space> r(N, E, k);
  auto idx = make2<int, Space>("idx", N, k, [](int n, int j) { return (n + j) % E; });
  pk::moe_build_routing(Space(), idx, 0, r);
  V2<float, Space> X("X", N, H), Xshort("Xe", N * k - 1, H), Xe("Xe", N * k, H), X9("X", N - 1, H);
  V2<float, Space> gate("g", N, k), gate1("g", N, 1), Y("Y", N, H);
  EXPECT_THROW(pk::moe_gather(Space(), X, r, Xshort), std::invalid_argument);
  EXPECT_THROW(pk::moe_gather(Space(), X9, r, Xe), std::invalid_argument);
  EXPECT_THROW(pk::moe_combine_forward(Space(), Xe, gate1, r, Y), std::invalid_argument);
  EXPECT_THROW(pk::moe_combine_forward(Space(), Xshort, gate, r, Y), std::invalid_argument);
  EXPECT_NO_THROW(pk::moe_gather(Space(), X, r, Xe));
}

// Rows wider than the host path's column chunk (moe_host_rows.hpp, 256): every chunk, the
// partial last one, dropped slots (capacity) and the dot product of dgate in lanes.
TYPED_TEST(moe_dispatch_shapes, wide_rows_match_host_fp64) {
  using Space = TypeParam;
  const int N = 23, E = 4, k = 2, H = 600, capacity = 9;
  std::vector<int> ri;
  std::vector<double> rg;
  ref_topk(skewed_probs(N, E, 1.3), N, E, k, ri, rg);
  pk::MoeRouting<Space> r(N, E, k);
  pk::moe_build_routing(Space(), upload_idx<Space>(ri, N, k), capacity, r);
  const auto ref = ref_routing(ri, N, k, E, capacity);
  const int P = r.rows;
  auto X =
      make2<double, Space>("X", N, H, [](int n, int h) { return std::cos(0.3 * n + 0.11 * h); });
  auto gate = make2<double, Space>("g", N, k, [&](int n, int j) { return rg[n * k + j]; });
  auto Ye =
      make2<double, Space>("Ye", P, H, [](int p, int h) { return std::sin(0.17 * p - 0.4 * h); });
  auto dY =
      make2<double, Space>("dY", N, H, [](int n, int h) { return 0.5 - std::cos(0.23 * n * h); });
  const auto x = to_vec2(X), g = to_vec2(gate), ye = to_vec2(Ye), dy = to_vec2(dY);
  V2<double, Space> Xe("Xe", P, H), Y("Y", N, H), dYe("dYe", P, H), dg("dg", N, k);
  auto dX = make2<double, Space>("dX", N, H, [](int n, int h) { return 0.25 * ((n + h) % 3); });
  const auto dx0 = to_vec2(dX);
  pk::moe_gather(Space(), X, r, Xe);
  pk::moe_gather_backward(Space(), Ye, r, dX);
  pk::moe_combine_forward(Space(), Ye, gate, r, Y);
  pk::moe_combine_backward(Space(), dY, Ye, gate, r, dYe, dg);
  std::vector<double> xe(P * H), dxr(dx0), yr(N * H, 0.0), dyer(P * H), dgr(N * k, 0.0);
  for (int q = 0; q < P; ++q) {
    const int n = ref.slot_token[q], j = ref.slot_k[q];
    for (int h = 0; h < H; ++h) {
      xe[q * H + h] = x[n * H + h];
      dyer[q * H + h] = g[n * k + j] * dy[n * H + h];
    }
  }
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < k; ++j) {
      const int q = ref.token_slot[n * k + j];
      if (q < 0) continue;
      for (int h = 0; h < H; ++h) {
        dxr[n * H + h] += ye[q * H + h];
        yr[n * H + h] += g[n * k + j] * ye[q * H + h];
        dgr[n * k + j] += dy[n * H + h] * ye[q * H + h];
      }
    }
  EXPECT_EQ(to_vec2(Xe), xe);
  expect_near_rel(to_vec2(dX), dxr, 1e-13, "gather_backward");
  expect_near_rel(to_vec2(Y), yr, 1e-13, "combine_forward");
  expect_near_rel(to_vec2(dYe), dyer, 1e-13, "combine_backward dYe");
  expect_near_rel(to_vec2(dg), dgr, 1e-13, "combine_backward dgate");
}

// ---------------------------------------------------------------- finite differences (fp64)

namespace {

// L = sum_{n,h} w(n,h) * Y(n,h) with Y from moe_combine_forward: dL/dY = w.
template <class Space>
double combine_loss(const V2<double, Space>& Ye, const V2<double, Space>& gate,
                    const pk::MoeRouting<Space>& r, const std::vector<double>& w, int N, int H) {
  V2<double, Space> Y("Y", N, H);
  pk::moe_combine_forward(Space(), Ye, gate, r, Y);
  auto y = to_vec2(Y);
  double s = 0;
  for (int i = 0; i < N * H; ++i) s += w[i] * y[i];
  return s;
}

template <class V>
void bump(const V& v, int i, int j, double d) {
  auto h = host(v);
  h(i, j) += d;
  Kokkos::deep_copy(v, h);
}

}  // namespace

TYPED_TEST(moe_finite_differences, combine_backward_fp64) {
  using Space = TypeParam;
  const int N = 37, E = 5, k = 2, H = 13, eps_cap = 12;
  for (int capacity : {0, eps_cap}) {
    std::vector<int> ri;
    std::vector<double> rg;
    ref_topk(skewed_probs(N, E, 1.0), N, E, k, ri, rg);
    pk::MoeRouting<Space> r(N, E, k);
    pk::moe_build_routing(Space(), upload_idx<Space>(ri, N, k), capacity, r);
    const int P = r.rows;
    auto gate = make2<double, Space>("g", N, k, [&](int n, int j) { return rg[n * k + j]; });
    auto Ye = make2<double, Space>("Ye", P, H, [](int p, int h) { return std::sin(0.3 * p + h); });
    std::vector<double> w(N * H);
    for (int i = 0; i < N * H; ++i) w[i] = std::cos(0.37 * i);
    auto dY = make2<double, Space>("dY", N, H, [&](int n, int h) { return w[n * H + h]; });
    V2<double, Space> dYe("dYe", P, H), dgate("dg", N, k);
    pk::moe_combine_backward(Space(), dY, Ye, gate, r, dYe, dgate);
    const auto dye = to_vec2(dYe), dg = to_vec2(dgate);
    const double eps = 1e-6;
    double worst = 0;
    for (int q = 0; q < P; q += 3)
      for (int h = 0; h < H; h += 2) {
        bump(Ye, q, h, eps);
        const double lp = combine_loss(Ye, gate, r, w, N, H);
        bump(Ye, q, h, -2 * eps);
        const double lm = combine_loss(Ye, gate, r, w, N, H);
        bump(Ye, q, h, eps);
        worst = std::max(worst, std::abs((lp - lm) / (2 * eps) - dye[q * H + h]));
      }
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < k; ++j) {
        bump(gate, n, j, eps);
        const double lp = combine_loss(Ye, gate, r, w, N, H);
        bump(gate, n, j, -2 * eps);
        const double lm = combine_loss(Ye, gate, r, w, N, H);
        bump(gate, n, j, eps);
        worst = std::max(worst, std::abs((lp - lm) / (2 * eps) - dg[n * k + j]));
      }
    EXPECT_LT(worst, 1e-7) << "capacity " << capacity;
  }
}

TYPED_TEST(moe_finite_differences, gather_backward_fp64) {
  using Space = TypeParam;
  const int N = 37, E = 4, k = 2, H = 13;
  for (int capacity : {0, 10}) {
    std::vector<int> ri;
    std::vector<double> rg;
    ref_topk(skewed_probs(N, E, 1.0), N, E, k, ri, rg);
    pk::MoeRouting<Space> r(N, E, k);
    pk::moe_build_routing(Space(), upload_idx<Space>(ri, N, k), capacity, r);
    const int P = r.rows;
    auto X = make2<double, Space>("X", N, H, [](int n, int h) { return std::cos(0.2 * n - h); });
    std::vector<double> w(P * H);
    for (int i = 0; i < P * H; ++i) w[i] = std::sin(0.29 * i + 0.1);
    auto dXe = make2<double, Space>("dXe", P, H, [&](int q, int h) { return w[q * H + h]; });
    V2<double, Space> dX("dX", N, H);
    pk::moe_gather_backward(Space(), dXe, r, dX);
    const auto dx = to_vec2(dX);
    auto loss = [&] {
      V2<double, Space> Xe("Xe", P, H);
      pk::moe_gather(Space(), X, r, Xe);
      auto xe = to_vec2(Xe);
      double s = 0;
      for (int i = 0; i < P * H; ++i) s += w[i] * xe[i];
      return s;
    };
    const double eps = 1e-6;
    double worst = 0;
    for (int n = 0; n < N; ++n)
      for (int h = 0; h < H; h += 3) {
        bump(X, n, h, eps);
        const double lp = loss();
        bump(X, n, h, -2 * eps);
        const double lm = loss();
        bump(X, n, h, eps);
        worst = std::max(worst, std::abs((lp - lm) / (2 * eps) - dx[n * H + h]));
      }
    EXPECT_LT(worst, 1e-7) << "capacity " << capacity;
  }
}

// ---------------------------------------------------------------- auxiliary loss

namespace {

template <class Space>
double aux_from_device(const V2<double, Space>& probs, const V2<int, Space>& idx, long tokens,
                       int k, int E) {
  V1<int, Space> req("req", E);
  V1<double, Space> psum("psum", E);
  pk::moe_router_stats(Space(), probs, idx, req, psum);
  auto hr = host(req);
  auto hp = host(psum);
  return pk::moe_aux_loss_value(hr.data(), hp.data(), tokens, k, E);
}

}  // namespace

TYPED_TEST(moe_aux_loss, hand_computed_values) {
  using Space = TypeParam;
  // Uniform probs 1/E and perfectly balanced routing: f_e = Pbar_e = 1/E, L = E*E/E^2 = 1.
  {
    const int N = 8, E = 4, k = 2;
    auto probs = make2<double, Space>("p", N, E, [](int, int) { return 0.25; });
    auto idx = make2<int, Space>("idx", N, k, [](int n, int j) { return (n + j) % E; });
    EXPECT_DOUBLE_EQ(aux_from_device<Space>(probs, idx, N, k, E), 1.0);
  }
  // E=2, k=1, both tokens to expert 0 with probs (0.75, 0.25): f = (1, 0), Pbar = (.75, .25),
  // L = 2 * (1 * 0.75 + 0 * 0.25) = 1.5.
  {
    auto probs = make2<double, Space>("p", 2, 2, [](int, int e) { return e == 0 ? 0.75 : 0.25; });
    auto idx = make2<int, Space>("idx", 2, 1, [](int, int) { return 0; });
    EXPECT_DOUBLE_EQ(aux_from_device<Space>(probs, idx, 2, 1, 2), 1.5);
  }
  // Collapse: one-hot probs on expert 0, all routed there: f_0 = Pbar_0 = 1, L = E.
  {
    const int N = 37, E = 6;
    auto probs = make2<double, Space>("p", N, E, [](int, int e) { return e == 0 ? 1.0 : 0.0; });
    auto idx = make2<int, Space>("idx", N, 1, [](int, int) { return 0; });
    EXPECT_DOUBLE_EQ(aux_from_device<Space>(probs, idx, N, 1, E), 6.0);
  }
  const int req[2] = {1, 1};
  const double ps[2] = {0.5, 0.5};
  EXPECT_THROW(pk::moe_aux_loss_value(req, ps, 0, 1, 2), std::invalid_argument);
}

TYPED_TEST(moe_aux_loss, router_stats_match_host) {
  using Space = TypeParam;
  const int N = 53, E = 7, k = 2;
  auto p = skewed_probs(N, E, 0.6);
  std::vector<int> ri;
  std::vector<double> rg;
  ref_topk(p, N, E, k, ri, rg);
  auto probs = make2<float, Space>("p", N, E, [&](int n, int e) { return p[n * E + e]; });
  V1<int, Space> req("req", E);
  V1<float, Space> psum("psum", E);
  pk::moe_router_stats(Space(), probs, upload_idx<Space>(ri, N, k), req, psum);
  auto hr = host(req);
  auto hp = host(psum);
  for (int e = 0; e < E; ++e) {
    int c = 0;
    double s = 0;
    for (int n = 0; n < N; ++n) s += static_cast<float>(p[n * E + e]);
    for (int a = 0; a < N * k; ++a) c += ri[a] == e;
    EXPECT_EQ(hr(e), c);
    EXPECT_NEAR(hp(e), s, 1e-5);
  }
}

TYPED_TEST(moe_aux_loss, backward_matches_finite_differences_with_f_fixed) {
  using Space = TypeParam;
  const int N = 37, E = 5, k = 2;
  const double coef = 0.01;
  const long tokens = N + 16;  // other ranks hold 16 more tokens of the micro-batch
  auto p = skewed_probs(N, E, 0.7);
  std::vector<int> ri;
  std::vector<double> rg;
  ref_topk(p, N, E, k, ri, rg);
  auto idx = upload_idx<Space>(ri, N, k);
  auto probs = make2<double, Space>("p", N, E, [&](int n, int e) { return p[n * E + e]; });
  V1<int, Space> req("req", E);
  V1<double, Space> psum("psum", E);
  pk::moe_router_stats(Space(), probs, idx, req, psum);
  auto req_fixed = host(req);
  auto loss = [&] {  // coef * L_aux with requested (hence f) frozen
    V1<int, Space> r2("r2", E);
    V1<double, Space> ps("ps", E);
    pk::moe_router_stats(Space(), probs, idx, r2, ps);
    auto hp = host(ps);
    return coef * pk::moe_aux_loss_value(req_fixed.data(), hp.data(), tokens, k, E);
  };
  auto dprobs = make2<double, Space>("dp", N, E, [](int n, int e) { return 0.1 * n - e; });
  const auto d0 = to_vec2(dprobs);
  pk::moe_aux_loss_backward(Space(), req, tokens, k, coef, dprobs);
  const auto d = to_vec2(dprobs);
  const double eps = 1e-5;
  for (int n = 0; n < N; n += 4)
    for (int e = 0; e < E; ++e) {
      bump(probs, n, e, eps);
      const double lp = loss();
      bump(probs, n, e, -2 * eps);
      const double lm = loss();
      bump(probs, n, e, eps);
      EXPECT_NEAR(d[n * E + e] - d0[n * E + e], (lp - lm) / (2 * eps), 1e-10);
      const double f = req_fixed(e) / double(tokens * k);
      EXPECT_NEAR(d[n * E + e] - d0[n * E + e], coef * E * f / tokens, 1e-15);
    }
}

// ---------------------------------------------------------------- determinism

TYPED_TEST(moe_determinism, repeated_calls_are_bitwise_identical) {
  using Space = TypeParam;
  const int N = 53, E = 8, k = 2, H = 29;
  auto p = skewed_probs(N, E, 1.0);
  auto probs = make2<float, Space>("p", N, E, [&](int n, int e) { return p[n * E + e]; });
  auto X = make2<float, Space>("X", N, H, [](int n, int h) { return std::sin(0.1 * n * h + 0.3); });
  auto dY = make2<float, Space>("dY", N, H, [](int n, int h) { return std::cos(0.7 * n + h); });
  auto run = [&] {
    V2<int, Space> idx("idx", N, k);
    V2<float, Space> gate("g", N, k);
    pk::topk_forward(Space(), probs, k, idx, gate);
    pk::MoeRouting<Space> r(N, E, k);
    pk::moe_build_routing(Space(), idx, 10, r);
    V2<float, Space> Xe("Xe", N * k, H), Y("Y", N, H), dYe("dYe", N * k, H), dg("dg", N, k);
    V2<float, Space> dX("dX", N, H), dp("dp", N, E);
    pk::moe_gather(Space(), X, r, Xe);
    pk::moe_combine_forward(Space(), Xe, gate, r, Y);
    pk::moe_combine_backward(Space(), dY, Xe, gate, r, dYe, dg);
    pk::moe_gather_backward(Space(), dYe, r, dX);
    pk::topk_backward(Space(), dg, idx, dp);
    pk::moe_aux_loss_backward(Space(), r.requested, N, k, 0.01, dp);
    std::vector<float> out;
    for (auto v : {Y, dX, dp, dg}) {
      auto h = host(v);
      out.insert(out.end(), h.data(), h.data() + h.size());
    }
    auto ts = ivec(r.token_slot, N * k);
    return std::make_pair(out, ts);
  };
  const auto a = run();
  const auto b = run();
  ASSERT_EQ(a.first.size(), b.first.size());
  EXPECT_EQ(std::memcmp(a.first.data(), b.first.data(), a.first.size() * sizeof(float)), 0);
  EXPECT_EQ(a.second, b.second);
}

TYPED_TEST(moe_dispatch_shapes, accept_const_input_views) {
  using Space = TypeParam;
  // The model layer passes activations and indices as const Views; results must not change.
  const int N = 37, E = 4, k = 2, H = 13;
  std::vector<int> ri;
  std::vector<double> rg;
  auto p = skewed_probs(N, E, 0.4);
  ref_topk(p, N, E, k, ri, rg);
  auto idx = upload_idx<Space>(ri, N, k);
  pk::View2<const int, Space> cidx = idx;
  pk::MoeRouting<Space> r(N, E, k);
  pk::moe_build_routing(Space(), cidx, 7, r);
  expect_routing_matches(r, ref_routing(ri, N, k, E, 7), N, k, E);
  auto X = make2<float, Space>("X", N, H, [](int n, int h) { return 0.1 * n - 0.2 * h; });
  auto gate = make2<float, Space>("g", N, k, [&](int n, int j) { return rg[n * k + j]; });
  pk::View2<const float, Space> cX = X, cgate = gate;
  V2<float, Space> Xe("Xe", N * k, H), Xe2("Xe2", N * k, H), Y("Y", N, H), Y2("Y2", N, H);
  pk::moe_gather(Space(), cX, r, Xe);
  pk::moe_gather(Space(), X, r, Xe2);
  pk::View2<const float, Space> cXe = Xe;
  pk::moe_combine_forward(Space(), cXe, cgate, r, Y);
  pk::moe_combine_forward(Space(), Xe2, gate, r, Y2);
  EXPECT_EQ(to_vec2(Y), to_vec2(Y2));
  auto probs = make2<float, Space>("p", N, E, [&](int n, int e) { return p[n * E + e]; });
  pk::View2<const float, Space> cprobs = probs;
  V1<int, Space> req("req", E);
  V1<float, Space> psum("ps", E);
  pk::moe_router_stats(Space(), cprobs, cidx, req, psum);
  EXPECT_EQ(ivec(req, E), ref_routing(ri, N, k, E, 0).requested);
}
