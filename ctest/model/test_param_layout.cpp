// The parameter layout (model/param_layout.hpp), the one description of which tensors a shard
// holds and where, against values computed independently of it: the logical parameter count of
// the model by formula, the tensor-parallel blocks tiling each logical tensor exactly once, the
// 16-element alignment, the unit padding to a multiple of dp, the ZeRO shards tiling each
// padded unit, and a ParamStore laid out from it.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/param_layout.hpp"
#include "model/param_store.hpp"
#include "model/shard_layout.hpp"

namespace md = paraxis::model;

namespace {

md::ModelConfig dense() {
  md::ModelConfig m;
  m.vocab = 256;
  m.seq_len = 32;
  m.hidden = 64;
  m.heads = 4;
  m.layers = 4;
  m.ffn = 256;
  return m;
}

// Tensors that are not multiples of 16 elements, a vocabulary no tp divides.
md::ModelConfig odd() {
  md::ModelConfig m;
  m.vocab = 101;
  m.seq_len = 12;
  m.hidden = 40;
  m.heads = 4;
  m.layers = 5;
  m.ffn = 120;
  return m;
}

md::ModelConfig moe(double skew) {
  auto m = dense();
  m.layers = 6;
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.every = 2;
  m.moe.router_skew = skew;
  return m;
}

// The logical (unsharded) parameter count of a GPT-2 block stack, by formula.
std::size_t logical_parameters(const md::ModelConfig& m) {
  const std::size_t H = m.hidden, F = m.ffn, V = m.vocab, S = m.seq_len, E = m.moe.experts;
  std::size_t n = V * H + S * H;  // token and position embeddings
  n += 2 * H + H * V;             // final LayerNorm, head
  for (int l = 0; l < m.layers; ++l) {
    n += 2 * 2 * H;        // two LayerNorms
    n += 4 * (H * H + H);  // Q, K, V, output projection with biases
    const std::size_t mlp = H * F + F + F * H + H;
    if (m.is_moe_layer(l))
      n += H * E + (m.moe.router_skew > 0 ? E : 0) + E * mlp;
    else
      n += mlp;
  }
  return n;
}

md::ShardLayout shard(const md::ModelConfig& m, int tp, int tp_rank, int ep, int ep_rank, bool sp,
                      std::vector<md::ModelChunk> chunks) {
  md::ShardLayout s;
  s.tp = tp;
  s.tp_rank = tp_rank;
  s.ep = ep;
  s.ep_rank = ep_rank;
  s.sequence_parallel = sp;
  s.chunks = std::move(chunks);
  (void)m;
  return s;
}

std::vector<md::ModelConfig> models() {
  return {dense(), odd(), moe(0.0), moe(1.0)};
}

bool is_layernorm(const std::string& name) {
  return name.find("ln1.") != std::string::npos || name.find("ln2.") != std::string::npos ||
         name.rfind("lnf.", 0) == 0;
}

}  // namespace

TEST(param_layout, whole_model_has_the_logical_parameter_count) {
  // By formula: dense tiny = 18432 + 4 * 49984 + 16512 (embedding, blocks, head).
  EXPECT_EQ(logical_parameters(dense()), 18432u + 4 * 49984u + 16512u);
  for (const auto& m : models()) {
    const auto L = md::param_layout(m, md::ShardLayout::whole(m));
    std::size_t logical = 0;
    for (const auto& t : L.tensors) {
      logical += t.logical_size();
      EXPECT_EQ(t.size(), t.logical_size()) << t.name << ": one rank holds every tensor whole";
    }
    EXPECT_EQ(logical, logical_parameters(m)) << m.layers << " layers";
    EXPECT_EQ(L.elements(), logical_parameters(m));
  }
}

TEST(param_layout, alignment_and_unit_padding) {
  for (const auto& m : models())
    for (int multiple : {1, 3, 8}) {
      const auto L = md::param_layout(m, md::ShardLayout::whole(m), multiple);
      EXPECT_EQ(L.unit_multiple, multiple);
      std::size_t at = 0;
      for (std::size_t u = 0; u < L.units.size(); ++u) {
        const auto& U = L.units[u];
        EXPECT_EQ(U.begin, at) << U.name << ": units are contiguous";
        // Tensor by tensor: each starts at the next multiple of 16 after the previous one,
        // counted from the unit's start (which a multiple of 3 leaves unaligned).
        std::size_t next = U.begin, aligned = 0;
        for (int i = U.first_tensor; i < U.end_tensor; ++i) {
          const auto& t = L.tensors[static_cast<std::size_t>(i)];
          EXPECT_EQ(t.unit, static_cast<int>(u)) << t.name;
          EXPECT_EQ((t.offset - U.begin) % 16, 0u) << t.name;
          if (multiple != 3) {
            EXPECT_EQ(t.offset % 16, 0u) << t.name;
          }
          EXPECT_EQ(t.offset, next) << t.name;
          next = t.offset + (t.size() + 15) / 16 * 16;
          aligned += (t.size() + 15) / 16 * 16;
        }
        EXPECT_EQ(U.aligned, aligned) << U.name;
        EXPECT_EQ(U.size % static_cast<std::size_t>(multiple), 0u) << U.name;
        EXPECT_GE(U.size, U.aligned) << U.name;
        EXPECT_LT(U.size - U.aligned, static_cast<std::size_t>(multiple)) << U.name;
        at = U.begin + U.size;
      }
      EXPECT_EQ(L.total, at);
    }
  // By hand: a dense block of the tiny model is 49984 elements, all multiples of 16; padded to
  // a multiple of 3 it is 49986. An odd block (H = 40, F = 120): the LayerNorms and biases of
  // 40 elements take 48, the MLP bias of 120 takes 128.
  const auto L = md::param_layout(dense(), md::ShardLayout::whole(dense()), 3);
  EXPECT_EQ(L.units[1].aligned, 49984u);
  EXPECT_EQ(L.units[1].size, 49986u);
  const auto O = md::param_layout(odd(), md::ShardLayout::whole(odd()));
  EXPECT_EQ(O.units[1].name, "layers.0");
  EXPECT_EQ(O.units[1].aligned, 4 * 48u + 4 * (1600u + 48) + 4800u + 128 + 4800u + 48);
}

TEST(param_layout, tensor_parallel_blocks_tile_each_logical_tensor_once) {
  for (const auto& m : models())
    for (int tp : {2, 4})
      for (bool sp : {false, true}) {
        // Elements of each logical tensor covered by the shards of all tp ranks (inside the
        // logical tensor only: the vocabulary padding is not a parameter).
        std::map<std::string, std::size_t> covered, logical;
        std::map<std::string, int> replicated_copies;
        std::size_t shard_elements = 0;
        for (int r = 0; r < tp; ++r) {
          const auto L =
              md::param_layout(m, shard(m, tp, r, 1, 0, sp, {{0, m.layers, true, true}}));
          if (r == 0) shard_elements = L.elements();
          EXPECT_EQ(L.elements(), shard_elements) << "every tp rank holds as many elements";
          for (const auto& t : L.tensors) {
            logical[t.name] = t.logical_size();
            EXPECT_EQ(t.sp_partial, sp && is_layernorm(t.name)) << t.name;
            if (t.tp_replicated) {
              EXPECT_EQ(t.size(), t.logical_size()) << t.name;
              ++replicated_copies[t.name];
              continue;
            }
            const std::size_t lr = t.logical_rows, lc = t.logical_cols ? t.logical_cols : 1;
            const std::size_t rows_in = t.row_offset >= t.logical_rows
                                            ? 0
                                            : std::min<std::size_t>(t.rows, lr - t.row_offset);
            const std::size_t cols_in =
                t.cols == 0 ? 1
                            : (t.col_offset >= t.logical_cols
                                   ? 0
                                   : std::min<std::size_t>(t.cols, lc - t.col_offset));
            covered[t.name] += rows_in * cols_in;
          }
        }
        for (const auto& [name, n] : logical) {
          if (replicated_copies.count(name))
            EXPECT_EQ(replicated_copies[name], tp) << name;
          else
            EXPECT_EQ(covered[name], n) << name << " tp " << tp;
        }
      }
  // By hand, tp = 2 on the odd model: the vocabulary 101 is padded to 102, 51 rows each.
  const auto L = md::param_layout(odd(), shard(odd(), 2, 1, 1, 0, false, {{0, 5, true, true}}));
  const auto& wte = L.tensors[static_cast<std::size_t>(L.find("wte"))];
  EXPECT_EQ(wte.rows, 51);
  EXPECT_EQ(wte.row_offset, 51);
  EXPECT_EQ(wte.logical_rows, 101);
}

TEST(param_layout, experts_and_chunks_partition_the_model) {
  // Over every expert-parallel rank and every pipeline chunk, each logical tensor appears
  // exactly once (tp = 1), and the total is the formula's.
  const auto m = moe(1.0);
  for (int ep : {1, 2, 4}) {
    const auto chunks = md::split_layers(m, 3);
    std::map<std::string, int> seen;
    std::size_t total = 0;
    for (int e = 0; e < ep; ++e)
      for (const auto& ch : chunks) {
        const auto L = md::param_layout(m, shard(m, 1, 0, ep, e, false, {ch}));
        for (const auto& t : L.tensors) {
          const bool expert = L.units[static_cast<std::size_t>(t.unit)].expert;
          EXPECT_EQ(expert, t.name.find(".moe.experts.") != std::string::npos) << t.name;
          // Dense tensors are on every expert-parallel rank; count them on rank 0 only.
          if (!expert && e > 0) continue;
          ++seen[t.name];
          total += t.logical_size();
        }
      }
    EXPECT_EQ(total, logical_parameters(m)) << "ep " << ep;
    for (const auto& [name, n] : seen) EXPECT_EQ(n, 1) << name;
  }
  EXPECT_THROW(md::param_layout(m, shard(m, 1, 0, 3, 0, false, {{0, 6, true, true}})),
               std::invalid_argument);
  EXPECT_THROW(md::param_layout(m, shard(m, 3, 0, 1, 0, false, {{0, 6, true, true}})),
               std::invalid_argument);  // 4 heads over 3 ranks
  EXPECT_THROW(md::param_layout(m, shard(m, 1, 0, 1, 0, false, {{0, 7, true, true}})),
               std::invalid_argument);  // a chunk past the model
}

TEST(param_layout, zero_shards_tile_each_padded_unit) {
  const auto m = moe(0.0);
  const int dp = 6, ep = 2;
  const auto L = md::param_layout(m, shard(m, 1, 0, ep, 0, false, {{0, 6, true, true}}), dp);
  for (const auto& U : L.units) {
    const int group = md::zero_group_size(U, dp, ep);
    EXPECT_EQ(group, U.expert ? 3 : 6) << U.name;
    for (int zero : {1, 2, 3}) {
      std::size_t at = U.begin;
      for (int r = 0; r < group; ++r) {
        const auto own = md::owned_range(U, zero, group, r);
        EXPECT_EQ(own.begin, at) << U.name << " rank " << r;
        EXPECT_EQ(own.size(), U.size / static_cast<std::size_t>(group)) << U.name;
        at = own.end;
      }
      EXPECT_EQ(at, U.begin + U.size) << U.name;
    }
    const auto all = md::owned_range(U, 0, group, group - 1);  // stage 0: everything
    EXPECT_EQ(all.begin, U.begin);
    EXPECT_EQ(all.end, U.begin + U.size);
  }
  EXPECT_EQ(md::zero_group_size(L.units[1], dp, 1), dp);
  // A unit not padded to the group, a rank outside it.
  md::UnitSpec u;
  u.name = "u";
  u.begin = 32;
  u.size = 10;
  EXPECT_THROW(md::owned_range(u, 1, 3, 0), std::invalid_argument);
  EXPECT_NO_THROW(md::owned_range(u, 0, 3, 0));
  EXPECT_THROW(md::owned_range(u, 1, 2, 2), std::invalid_argument);
  EXPECT_EQ(md::owned_range(u, 1, 2, 1).begin, 37u);
}

TEST(param_layout, builder_rejects_misuse) {
  md::ParamLayoutBuilder b(2);
  EXPECT_THROW(b.add("x", 3, 0, md::Init::zeros, 0, false), std::logic_error);
  b.begin_unit("u");
  EXPECT_THROW(b.begin_unit("v"), std::logic_error);
  EXPECT_THROW(b.add_shard("x", 2, 0, 4, 3, 0, 0, md::Init::zeros, 0, false),
               std::invalid_argument);  // a vector block of a matrix
  EXPECT_EQ(b.add("x", 3, 0, md::Init::zeros, 0, false), 0);
  EXPECT_THROW(b.finish(), std::logic_error);
  b.end_unit();
  const auto L = b.finish();
  EXPECT_EQ(L.total, 16u);  // 3 elements aligned to 16, a multiple of 2
  EXPECT_THROW(md::ParamLayoutBuilder(0), std::invalid_argument);
}

TEST(param_layout, param_store_is_laid_out_by_it) {
  const auto m = odd();
  auto L = md::param_layout(m, md::ShardLayout::whole(m), 4);
  const std::size_t total = L.total;
  md::ParamStore<float> ps(L);
  EXPECT_EQ(ps.elements(), total);
  ASSERT_EQ(ps.specs().size(), L.tensors.size());
  EXPECT_EQ(ps.find("layers.2.attn.wo"), L.find("layers.2.attn.wo"));
  EXPECT_EQ(ps.spec(ps.find("head")).offset,
            L.tensors[static_cast<std::size_t>(L.find("head"))].offset);
  md::ParamStore<float> other(2);
  EXPECT_THROW(other.set_layout(L), std::logic_error);  // padded for 4, the store expects 2
}

// The ZeRO-0 buckets (model::gradient_buckets), the one bucketing ZeroOptimizer reduces, the
// step model counts and the calibration times: whole units from the last, each closed when the
// next unit would take it past the cap, never across groups.
TEST(param_layout, gradient_buckets_run_from_the_last_unit_within_the_cap_and_group) {
  using paraxis::model::FlatRange;
  const std::vector<FlatRange> units = {{0, 10}, {10, 30}, {30, 60}, {60, 100}};
  const auto b = paraxis::model::gradient_buckets(units, {0, 0, 0, 0}, 50);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].begin, 60u);  // the last unit alone: 40 + 30 > 50
  EXPECT_EQ(b[0].end, 100u);
  EXPECT_EQ(b[1].begin, 10u);  // units 1 and 2: 20 + 30 = 50
  EXPECT_EQ(b[1].end, 60u);
  EXPECT_EQ(b[1].first_unit, 1);
  EXPECT_EQ(b[2].first_unit, 0);
  // Another group (expert units) opens a bucket whatever the cap.
  EXPECT_EQ(paraxis::model::gradient_buckets(units, {0, 0, 1, 1}, 1000).size(), 2u);
  EXPECT_EQ(paraxis::model::bucket_cap_elements(0.1, 4), 26214u);
  EXPECT_THROW(paraxis::model::gradient_buckets(units, {0}, 50), std::invalid_argument);
}
