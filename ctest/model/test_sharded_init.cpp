// Sharded initialisation: a parameter's initial value depends only on (seed, name, index in
// the logical unsharded tensor), so the shards tp ranks lay out with ParamLayoutBuilder::add_shard
// and a ParamStore initialises, put back together, equal the tensor the single-rank run
// declares with add, bit for bit:
// column shards (QKV, MLP w1, the LM head), row shards (attention output, MLP w2, the token
// embedding), vector shards (column-parallel biases), for tp in {2, 3, 4}, on even (Megatron)
// and uneven splits, and on a vocabulary padded to a multiple of tp (the padding is 0).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/init_rng.hpp"
#include "model/param_store.hpp"

using namespace paraxis::model;

namespace {

constexpr std::uint64_t kSeed = 1234;
constexpr double kStd = 0.02;

struct Split {
  int offset, size;
};
// Even split (n divisible by parts) or the balanced uneven one: part k starts at k*n/parts.
// With pad, n is rounded up to a multiple of parts first (the vocabulary rule).
Split split(int n, int parts, int k, bool pad = false) {
  if (pad) n = (n + parts - 1) / parts * parts;
  const int b = static_cast<int>(static_cast<long long>(k) * n / parts);
  const int e = static_cast<int>(static_cast<long long>(k + 1) * n / parts);
  return {b, e - b};
}

// The initial values of tensor `name` in a store holding that one tensor (flat padding cut).
std::vector<double> values_of(const ParamStore<double>& ps, const std::string& name) {
  const int i = ps.find(name);
  EXPECT_GE(i, 0) << name;
  const auto& s = ps.spec(i);
  const auto flat = ps.initial_values(kSeed, s.offset, s.offset + s.size());
  return std::vector<double>(flat.begin(), flat.end());
}

std::vector<double> unsharded(const std::string& name, int rows, int cols, Init init) {
  ParamLayoutBuilder b;
  b.begin_unit("u");
  b.add(name, rows, cols, init, kStd, true);
  b.end_unit();
  const ParamStore<double> ps(b.finish());
  return values_of(ps, name);
}

enum class Cut { cols, rows };

// Shard k of tp of the rows x cols tensor (cols = 0: a vector, cut along rows), reassembled
// into a logical-shaped buffer (padding past the logical tensor checked to be 0 and dropped).
std::vector<double> reassembled(const std::string& name, int rows, int cols, Init init, int tp,
                                Cut cut, bool pad) {
  const int lc = cols ? cols : 1;
  std::vector<double> out(static_cast<std::size_t>(rows) * lc, -99.0);
  for (int k = 0; k < tp; ++k) {
    ParamLayoutBuilder b;  // one rank's layout
    b.begin_unit("u");
    int r0 = 0, nr = rows, c0 = 0, nc = cols;
    if (cut == Cut::rows || cols == 0) {
      const Split s = split(rows, tp, k, pad);
      r0 = s.offset;
      nr = s.size;
    } else {
      const Split s = split(cols, tp, k, pad);
      c0 = s.offset;
      nc = s.size;
    }
    b.add_shard(name, nr, nc, rows, cols, r0, c0, init, kStd, true);
    b.end_unit();
    const ParamStore<double> ps(b.finish());
    const auto v = values_of(ps, name);
    const int w = nc ? nc : 1;
    for (int r = 0; r < nr; ++r)
      for (int c = 0; c < w; ++c) {
        const int gr = r0 + r, gc = c0 + c;
        if (gr >= rows || gc >= lc) {
          EXPECT_EQ(v[r * w + c], 0.0) << name << " padding (" << gr << ", " << gc << ")";
          continue;
        }
        EXPECT_EQ(out[gr * lc + gc], -99.0) << name << ": element covered twice";
        out[gr * lc + gc] = v[r * w + c];
      }
  }
  return out;
}

void expect_shards_equal_unsharded(const std::string& name, int rows, int cols, Init init, Cut cut,
                                   bool pad = false) {
  const auto ref = unsharded(name, rows, cols, init);
  for (int tp : {2, 3, 4}) {
    const auto got = reassembled(name, rows, cols, init, tp, cut, pad);
    ASSERT_EQ(got.size(), ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(got[i], ref[i]) << name << " tp " << tp << " element " << i;
  }
}

TEST(sharded_init, add_keeps_the_logical_index_of_each_element) {
  const auto v = unsharded("layers.0.attn.wq", 7, 5, Init::normal);
  const auto key = stream_key(kSeed, "layers.0.attn.wq");
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], kStd * normal01(key, i)) << i;
}

// 48 and 24 are divisible by 2, 3 and 4: Megatron's even splits.
TEST(sharded_init, column_shards_equal_unsharded_even) {
  expect_shards_equal_unsharded("layers.0.attn.wq", 24, 48, Init::normal, Cut::cols);
  expect_shards_equal_unsharded("layers.0.mlp.w1", 24, 48, Init::normal, Cut::cols);
}
TEST(sharded_init, row_shards_equal_unsharded_even) {
  expect_shards_equal_unsharded("layers.0.attn.wo", 48, 24, Init::normal, Cut::rows);
  expect_shards_equal_unsharded("layers.0.mlp.w2", 48, 24, Init::normal, Cut::rows);
}
TEST(sharded_init, vector_shards_equal_unsharded_even) {
  expect_shards_equal_unsharded("layers.0.mlp.b1", 48, 0, Init::normal, Cut::rows);
  expect_shards_equal_unsharded("layers.0.ln1.gamma", 48, 0, Init::ones, Cut::rows);
}

// 37 x 53: no tp in {2, 3, 4} divides either; shards of unequal size still tile the tensor.
TEST(sharded_init, uneven_shards_equal_unsharded) {
  expect_shards_equal_unsharded("w", 37, 53, Init::normal, Cut::cols);
  expect_shards_equal_unsharded("w", 37, 53, Init::normal, Cut::rows);
  expect_shards_equal_unsharded("b", 53, 0, Init::normal, Cut::rows);
}

// The vocabulary (53) padded to a multiple of tp: token embedding rows and LM head columns;
// the padding rows/columns of the last shard are 0, the rest is the unpadded tensor.
TEST(sharded_init, padded_vocabulary_shards_equal_unpadded_tensor) {
  expect_shards_equal_unsharded("wte", 53, 16, Init::normal, Cut::rows, true);
  expect_shards_equal_unsharded("head", 16, 53, Init::normal, Cut::cols, true);
  expect_shards_equal_unsharded("ones", 53, 0, Init::ones, Cut::rows, true);
}

// A shard wholly in the padding (vocabulary 5 on 4 ranks: 8 rows, the last shard rows 6, 7).
TEST(sharded_init, shard_of_padding_only_is_zero) {
  ParamLayoutBuilder b;
  b.begin_unit("u");
  b.add_shard("wte", 2, 3, 5, 3, 6, 0, Init::normal, kStd, true);
  b.end_unit();
  const ParamStore<double> ps(b.finish());
  for (double v : values_of(ps, "wte")) EXPECT_EQ(v, 0.0);
}

// initialize() on an allocated store goes through the same path: the shard's device values are
// the unsharded tensor's slice.
TEST(sharded_init, initialize_fills_the_shard_slice) {
  const auto ref = unsharded("head", 8, 12, Init::normal);
  MemoryLedger ledger;
  ParamLayoutBuilder b;
  b.begin_unit("u");
  const int t = b.add_shard("head", 8, 4, 8, 12, 0, 4, Init::normal, kStd, true);
  b.end_unit();
  ParamStore<double> ps(b.finish());
  ps.allocate(ledger);
  ps.initialize(kSeed);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ps.w2(t));
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 4; ++c) ASSERT_EQ(h(r, c), ref[r * 12 + 4 + c]) << r << "," << c;
  EXPECT_EQ(ps.spec(t).logical_size(), 96u);
}

TEST(sharded_init, bad_geometry_throws_naming_tensor_and_values) {
  ParamLayoutBuilder b;
  b.begin_unit("u");
  auto expect_throw = [&](auto f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("layers.1.mlp.w1"), std::string::npos) << msg;
      EXPECT_NE(msg.find(part), std::string::npos) << msg << " lacks " << part;
    }
  };
  expect_throw([&] { b.add_shard("layers.1.mlp.w1", 4, 4, 4, 8, 0, -4, Init::normal, 1, 1); },
               "(0, -4)");
  expect_throw([&] { b.add_shard("layers.1.mlp.w1", 4, 0, 8, 3, 4, 0, Init::normal, 1, 1); },
               "logical 8 x 3");
  b.end_unit();
}

}  // namespace
