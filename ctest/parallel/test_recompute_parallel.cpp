// Activation recomputation under every axis (docs/model.md, "Activation recomputation"):
// selective, full and full over the first block of each chunk give bitwise the losses, gradient
// norms and parameters of recompute none on the same grid, under tp (with and without sequence
// parallelism), pp (gpipe, 1f1b, interleaved), dp with ZeRO 0-3, and ep, in fp64, fp32 and
// bf16. A recomputed forward issues its tensor-parallel collectives again and they are counted:
// per recomputed block and micro-batch, 2 all-reduces of one [micro_batch * seq_len, hidden]
// tensor (sp: 2 all-gathers and 2 reduce-scatters of that size); with ep, its 3 all-to-alls
// again (the counts and the rows both ways); pp and dp traffic are unchanged. The activation
// bytes the ledger measures drop by docs/model.md's formula (tp 2, with and without sp).
//
// Tests named recompute_parallel.* are the CI subset (2 ranks, tiny decks, 2 steps);
// recompute_matrix.* is every precision x axis x schedule (CTest label "slow").
#include <string>
#include <vector>

#include "schedule/pipeline_schedule.hpp"
#include "training_run.hpp"

using namespace ptest;

namespace {

struct Mode {
  std::string recompute;
  int layers;
};
const std::vector<Mode> kModes{{"selective", 0}, {"full", 0}, {"full", 1}};

std::string name(const Mode& m) {
  return m.recompute + (m.layers ? " (" + std::to_string(m.layers) + " per chunk)" : "");
}

// inputs/tiny.yaml, 2 steps of 4 micro-batches of 2 sequences, with the case's settings.
driver::RunConfig deck(const std::string& precision, std::vector<std::string> set,
                       const Mode* mode) {
  std::vector<std::string> o{"train.steps=2", "train.precision=" + precision,
                             "train.global_batch=8", "train.micro_batch=2"};
  o.insert(o.end(), set.begin(), set.end());
  if (mode) {
    o.push_back("train.recompute=" + mode->recompute);
    o.push_back("train.recompute_layers=" + std::to_string(mode->layers));
  }
  return tiny(o);
}

// Blocks this rank recomputes in full (its chunks as the trainer cuts them).
int recomputed_blocks(const driver::RunConfig& c) {
  const auto& p = c.parallel;
  const int chunks = p.pp * p.virtual_stages;
  const auto all = model::split_layers(c.model, chunks, p.stage_layers);
  int stage = 0;
  if (p.pp > 1) {
    // The pipeline stage of this rank: the grid's pp coordinate.
    parallel::ProcessGrid grid(MPI_COMM_WORLD, p);
    stage = grid.coords().pp;
  }
  int n = 0;
  for (int id = 0; id < chunks; ++id) {
    if (schedule::chunk_stage({p.pp, 1, p.virtual_stages}, id) != stage) continue;
    for (int l = 0; l < all[id].layers(); ++l)
      n += model::recomputes_block(c.train.recompute, c.train.recompute_layers, l) ? 1 : 0;
  }
  return n;
}

int recomputed_moe_blocks(const driver::RunConfig& c) {
  int n = 0;  // single-stage cases only (the ep cases have pp = 1)
  for (int l = 0; l < c.model.layers; ++l)
    n += c.model.is_moe_layer(l) &&
                 model::recomputes_block(c.train.recompute, c.train.recompute_layers, l)
             ? 1
             : 0;
  return n;
}

std::size_t elem_bytes(const driver::RunConfig& c) {
  switch (c.train.precision) {
    case model::Precision::fp64:
      return 8;
    case model::Precision::fp32:
      return 4;
    case model::Precision::bf16:
      return 2;
  }
  return 0;
}

// Every mode against none on the same grid: bitwise, and the communication as stated above.
void expect_recompute_is_invisible(const std::string& precision,
                                   const std::vector<std::string>& set, const std::string& what) {
  const auto c0 = deck(precision, set, nullptr);
  const TrainedRun ref = run_parallel(c0);
  ASSERT_FALSE(ref.params.empty());
  const long micro = c0.train.global_batch / (c0.parallel.dp * c0.train.micro_batch);
  const std::size_t act = static_cast<std::size_t>(c0.train.micro_batch) * c0.model.seq_len *
                          c0.model.hidden * elem_bytes(c0);
  for (const Mode& mode : kModes) {
    const auto c = deck(precision, set, &mode);
    const std::string w = precision + " " + what + ", " + name(mode);
    const TrainedRun r = run_parallel(c);
    EXPECT_EQ(r.loss, ref.loss) << w;
    EXPECT_EQ(r.params, ref.params) << w;
    ASSERT_EQ(r.steps.size(), ref.steps.size());
    const int blocks = recomputed_blocks(c), moe_blocks = recomputed_moe_blocks(c);
    for (std::size_t s = 0; s < r.steps.size(); ++s) {
      EXPECT_EQ(r.steps[s].grad_norm, ref.steps[s].grad_norm) << w << " step " << s;
      const auto &got = r.comm[s], &was = ref.comm[s];
      for (const char* axis : {"pp", "dp"}) {
        EXPECT_EQ(got.at(axis).calls, was.at(axis).calls) << w << " " << axis;
        EXPECT_EQ(got.at(axis).bytes, was.at(axis).bytes) << w << " " << axis;
      }
      if (c.parallel.tp > 1) {
        const long again = (c.parallel.sp() ? 4L : 2L) * blocks * micro;
        EXPECT_EQ(got.at("tp").calls - was.at("tp").calls, again) << w << " tp calls";
        EXPECT_EQ(got.at("tp").bytes - was.at("tp").bytes, static_cast<std::size_t>(again) * act)
            << w << " tp bytes";
      } else {
        EXPECT_EQ(got.at("tp").calls, 0) << w;
      }
      if (c.parallel.ep > 1) {
        EXPECT_EQ(got.at("ep").calls - was.at("ep").calls, 3L * moe_blocks * micro) << w;
        // The recomputed forward sends its rows again (as many as the backward sends) and the
        // counts (4 bytes per expert): 2 (full - none) = none + counts.
        const std::size_t counts = 4 * static_cast<std::size_t>(c.model.moe.experts) *
                                   static_cast<std::size_t>(moe_blocks * micro);
        if (mode.recompute == "full" && mode.layers == 0) {
          EXPECT_EQ(2 * (got.at("ep").bytes - was.at("ep").bytes), was.at("ep").bytes + counts)
              << w << " ep bytes";
        }
      }
      if (mode.recompute == "selective") {
        EXPECT_EQ(got.at("tp").calls, was.at("tp").calls) << w << " (selective: no collective)";
      }
    }
  }
}

}  // namespace

// ---- the CI subset: 2 ranks, each axis once, every precision once.
TEST(recompute_parallel, tp2_with_and_without_sp) {
  if (world_size() != 2) GTEST_SKIP() << "2 ranks";
  expect_recompute_is_invisible("fp32", {"parallel.tp=2", "parallel.sequence_parallel=true"},
                                "tp2 sp");
  expect_recompute_is_invisible("fp64", {"parallel.tp=2"}, "tp2");
}

TEST(recompute_parallel, pp2_interleaved) {
  if (world_size() != 2) GTEST_SKIP() << "2 ranks";
  expect_recompute_is_invisible("bf16",
                                {"parallel.pp=2", "parallel.schedule=interleaved",
                                 "parallel.virtual_stages=2", "model.layers=4"},
                                "pp2 interleaved");
}

TEST(recompute_parallel, dp2_zero3_and_ep2) {
  if (world_size() != 2) GTEST_SKIP() << "2 ranks";
  expect_recompute_is_invisible("fp32", {"parallel.dp=2", "parallel.zero=3"}, "dp2 zero3");
  expect_recompute_is_invisible("fp32", {"parallel.dp=2", "parallel.ep=2"}, "ep2");
}

// The ledger on a tensor-parallel shard (dense, one set in flight): none - selective is
// (L - 1) blocks' probabilities and none - full is (L - 1) x (none - full per block), with
// docs/model.md's per-block bytes for tp = 2, sequence-parallel or not.
TEST(recompute_parallel, tp2_activation_bytes_drop_by_the_documented_formula) {
  if (world_size() != 2) GTEST_SKIP() << "2 ranks";
  for (bool sp : {false, true}) {
    const std::vector<std::string> set{
        "parallel.tp=2", "model.moe.experts=0", "model.layers=3",
        std::string("parallel.sequence_parallel=") + (sp ? "true" : "false")};
    const auto c = deck("fp32", set, nullptr);
    const std::size_t e = 4, ea = 4, t = 2, L = 3;
    const std::size_t s = c.model.seq_len, b = c.train.micro_batch, h = c.model.hidden;
    const std::size_t a = c.model.heads, f = c.model.ffn, sb = s * b, r = sp ? sb / t : sb;
    const std::size_t probs = e * b * (a / t) * s * s;
    const std::size_t none = e * (4 * r * h + 4 * sb * h / t + 2 * sb * f / t) + probs + 4 * r * ea;
    const std::size_t full = e * r * h;
    const Mode sel{"selective", 0}, all{"full", 0};
    const auto m0 = run_parallel(c).memory.activations_peak_bytes;
    const auto ms = run_parallel(deck("fp32", set, &sel)).memory.activations_peak_bytes;
    const auto mf = run_parallel(deck("fp32", set, &all)).memory.activations_peak_bytes;
    EXPECT_EQ(m0 - ms, (L - 1) * probs) << (sp ? "sp" : "no sp");
    EXPECT_EQ(m0 - mf, (L - 1) * (none - full)) << (sp ? "sp" : "no sp");
  }
}

// ---- the full matrix (label slow): every precision x every axis and schedule.
TEST(recompute_matrix, every_precision_and_axis_on_2_ranks) {
  if (world_size() != 2) GTEST_SKIP() << "2 ranks";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"tp2", {"parallel.tp=2"}},
      {"tp2 sp", {"parallel.tp=2", "parallel.sequence_parallel=true"}},
      {"pp2 gpipe", {"parallel.pp=2", "parallel.schedule=gpipe", "model.layers=4"}},
      {"pp2 1f1b", {"parallel.pp=2", "parallel.schedule=1f1b", "model.layers=4"}},
      {"pp2 interleaved",
       {"parallel.pp=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2",
        "model.layers=4"}},
      {"dp2 zero0", {"parallel.dp=2", "parallel.zero=0"}},
      {"dp2 zero1", {"parallel.dp=2", "parallel.zero=1"}},
      {"dp2 zero2", {"parallel.dp=2", "parallel.zero=2"}},
      {"dp2 zero3", {"parallel.dp=2", "parallel.zero=3"}},
      {"dp2 zero3 overlap", {"parallel.dp=2", "parallel.zero=3", "comm.overlap=true"}},
      {"ep2", {"parallel.dp=2", "parallel.ep=2"}},
      {"ep2 capacity zero3",
       {"parallel.dp=2", "parallel.ep=2", "model.moe.capacity_factor=1.0", "parallel.zero=3"}},
      {"tp2 dense", {"parallel.tp=2", "model.moe.experts=0"}},
  };
  for (const char* precision : {"fp64", "fp32", "bf16"})
    for (const auto& [what, set] : cases) expect_recompute_is_invisible(precision, set, what);
}

TEST(recompute_matrix, every_precision_on_4_ranks) {
  if (world_size() != 4) GTEST_SKIP() << "4 ranks";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"tp2 pp2 sp 1f1b",
       {"parallel.tp=2", "parallel.pp=2", "parallel.sequence_parallel=true", "model.layers=4"}},
      {"tp2 dp2 ep2 zero3", {"parallel.tp=2", "parallel.dp=2", "parallel.ep=2", "parallel.zero=3"}},
      {"pp2 dp2 interleaved zero1",
       {"parallel.pp=2", "parallel.dp=2", "parallel.schedule=interleaved",
        "parallel.virtual_stages=2", "model.layers=4", "parallel.zero=1", "train.global_batch=16"}},
  };
  for (const char* precision : {"fp64", "fp32", "bf16"})
    for (const auto& [what, set] : cases) expect_recompute_is_invisible(precision, set, what);
}
