// The performance models restate the parameter layout of a shard (perfmodel/shard_params.hpp:
// which tensors, their 16-element alignment, the units and their padding), because the model
// library that declares it needs Kokkos and the models must not. This test links both and
// checks that they agree exactly, so a change on either side that the other misses fails here.
// (FLOPs, the layer cut and the capacity rule are shared code: model/model_pieces.hpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "model/gpt_model.hpp"
#include "model/shard_layout.hpp"
#include "perfmodel/model_chunks.hpp"
#include "perfmodel/shard_params.hpp"
#include "perfmodel_test_util.hpp"

namespace pm = paraxis::perfmodel;
namespace md = paraxis::model;

namespace {

std::vector<md::ModelConfig> models() {
  std::vector<md::ModelConfig> out;
  auto m = perfmodel_test::tiny_model();
  out.push_back(m);
  m.layers = 7;  // uneven cuts
  out.push_back(m);
  auto moe = perfmodel_test::tiny_moe_model();
  moe.layers = 6;
  out.push_back(moe);
  moe.moe.every = 1;
  moe.moe.router_skew = 1.0;  // adds the router bias
  moe.moe.top_k = 1;
  out.push_back(moe);
  auto odd = perfmodel_test::tiny_model();  // tensors that are not multiples of 16
  odd.hidden = 40;
  odd.heads = 4;
  odd.ffn = 120;
  odd.vocab = 101;
  odd.seq_len = 12;
  odd.layers = 5;
  out.push_back(odd);
  return out;
}

}  // namespace

TEST(model_agreement, shard_units_match_parameter_specs) {
  for (const auto& m : models())
    for (int tp : {1, 2})
      for (int pp : {1, 2})
        for (int ep : {1, 2})
          for (bool sp : {false, true}) {
            if (m.moe.experts == 0 && ep > 1) continue;
            if (m.ffn % tp != 0 || m.heads % tp != 0) continue;
            pm::Scenario c = perfmodel_test::config(tp, pp, 2, 1);
            c.ep = ep;
            c.sequence_parallel = sp;
            const auto chunks = md::split_layers(m, c.chunks());
            for (int stage = 0; stage < pp; ++stage) {
              md::ShardLayout lay;
              lay.tp = tp;
              lay.sequence_parallel = sp;
              lay.ep = ep;
              for (int id : pm::stage_chunk_ids(c, stage)) lay.chunks.push_back(chunks[id]);
              const auto specs = md::parameter_specs(m, lay);
              const auto units = pm::shard_units(m, c, stage);
              int n_units = 0;
              for (const auto& s : specs) n_units = std::max(n_units, s.unit + 1);
              ASSERT_EQ(static_cast<int>(units.size()), n_units);
              for (int u = 0; u < n_units; ++u) {
                std::size_t begin = SIZE_MAX, end = 0, elements = 0;
                std::vector<std::pair<std::size_t, std::size_t>> partial;
                for (const auto& s : specs) {
                  if (s.unit != u) continue;
                  begin = std::min(begin, s.offset);
                  end = std::max(end, s.offset + (s.size() + 15) / 16 * 16);
                  elements += s.size();
                }
                for (const auto& s : specs)
                  if (s.unit == u && s.sp_partial)
                    partial.emplace_back(s.offset - begin, s.offset - begin + s.size());
                EXPECT_EQ(units[u].elements, elements) << units[u].name;
                EXPECT_EQ(units[u].aligned, end - begin) << units[u].name;
                EXPECT_EQ(units[u].sp_partial, partial) << units[u].name;
              }
            }
          }
}
