// The zero-bubble schedule ZB-H1 under every axis it combines with (docs/parallel.md,
// "Zero-bubble pipeline"): pp 2 and 4 (dense and MoE), pp 2 x tp 2 (with and without sequence
// parallelism), pp 2 x dp 2 (ZeRO 1 and 3), pp 2 x ep 2, and with selective recomputation. Each
// run reproduces the single-rank run as --verify judges it, and its losses and parameters are
// bitwise those of 1F1B on the same grid (W runs each chunk's weight gradients in 1F1B's
// micro-batch order). Its pipeline and expert traffic is 1F1B's, call for call; with sequence
// parallelism W all-gathers again per micro-batch the output gradient of every block's attention
// projection and of every dense block's second MLP linear; with ZeRO-3
// the embedding's backward gather is gone (neither B nor W reads its parameters); its peak live
// activation sets are at most p on every stage (1F1B's peak), with p reached on stage 0.
//
// The world size picks the cases: 2 ranks, pp 2; 4 ranks, the rest. zero_bubble.* is the CI
// subset (fp64, recompute none, one case selective); zero_bubble_matrix.* runs every case in
// fp64, fp32 and bf16, with recompute none and selective, and ZeRO 2 besides (CTest label slow).
#include <string>
#include <vector>

#include "parallel/process_grid.hpp"
#include "training_run.hpp"

using namespace ptest;

namespace {

// inputs/tiny.yaml (two blocks, the second MoE), 2 steps of 8 micro-batches of one sequence.
std::vector<std::string> base(int layers, const std::string& precision = "fp64") {
  return {"train.steps=2", "train.precision=" + precision, "train.global_batch=8",
          "train.micro_batch=1", "model.layers=" + std::to_string(layers)};
}

struct Case {
  std::string name;
  std::vector<std::string> set;  // with base(); parallel.schedule is added
};

std::vector<Case> cases_for(int world) {
  std::vector<Case> c;
  auto with = [](std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  if (world == 2) {
    c.push_back({"pp2 moe", with(base(2), {"parallel.pp=2"})});
    c.push_back({"pp2 dense", with(base(2), {"parallel.pp=2", "model.moe.experts=0"})});
    c.push_back({"pp2 fp32 4 layers", with(base(4, "fp32"), {"parallel.pp=2"})});
    c.push_back({"pp2 selective", with(base(2), {"parallel.pp=2", "train.recompute=selective"})});
  }
  if (world == 4) {
    c.push_back({"pp4 moe", with(base(4), {"parallel.pp=4"})});
    c.push_back({"pp4 dense", with(base(4), {"parallel.pp=4", "model.moe.experts=0"})});
    c.push_back({"pp2 x tp2", with(base(2), {"parallel.pp=2", "parallel.tp=2"})});
    c.push_back({"pp2 x tp2 sp", with(base(2), {"parallel.pp=2", "parallel.tp=2",
                                                "parallel.sequence_parallel=true"})});
    c.push_back(
        {"pp2 x dp2 zero1", with(base(2), {"parallel.pp=2", "parallel.dp=2", "parallel.zero=1"})});
    c.push_back(
        {"pp2 x dp2 zero3", with(base(2), {"parallel.pp=2", "parallel.dp=2", "parallel.zero=3"})});
    c.push_back({"pp2 x ep2", with(base(2), {"parallel.pp=2", "parallel.dp=2", "parallel.ep=2"})});
  }
  return c;
}

driver::RunConfig deck_for(const Case& k, const std::string& schedule) {
  auto o = k.set;
  o.push_back("parallel.schedule=" + schedule);
  return tiny(o);
}

// The all-gathers W adds per micro-batch under sequence parallelism on this rank's stage: the
// output gradients of wo (every block) and of the MLP's second linear (dense blocks).
int extra_gathers(const driver::RunConfig& c) {
  parallel::ProcessGrid grid(MPI_COMM_WORLD, c.parallel);
  const auto chunks = model::split_layers(c.model, c.parallel.pp, c.parallel.stage_layers);
  const auto& ch = chunks.at(grid.coords().pp);
  int n = 0;
  for (int l = ch.first_layer; l < ch.end_layer; ++l) n += c.model.is_moe_layer(l) ? 1 : 2;
  return n;
}

}  // namespace

TEST(zero_bubble, matches_single_rank_and_is_bitwise_1f1b) {
  const auto cases = cases_for(world_size());
  if (cases.empty()) GTEST_SKIP() << "cases for 2 and 4 ranks";
  for (const Case& k : cases) {
    const auto zb = deck_for(k, "zb-h1"), ob = deck_for(k, "1f1b");
    const TrainedRun z = run_parallel(zb), o = run_parallel(ob);
    expect_matches(z, run_reference(zb), k.name + " zb-h1");
    EXPECT_EQ(z.loss, o.loss) << k.name;      // bitwise
    EXPECT_EQ(z.params, o.params) << k.name;  // bitwise
    // Communication: 1F1B's, plus W's all-gathers under sequence parallelism (of
    // [micro_batch * seq_len, hidden] elements: the gathered size).
    const bool sp = zb.parallel.sequence_parallel && zb.parallel.tp > 1;
    const long micro = zb.train.global_batch / (zb.parallel.dp * zb.train.micro_batch);
    const long extra = sp ? static_cast<long>(extra_gathers(zb)) * micro : 0;
    const long gathered =
        static_cast<long>(zb.train.micro_batch) * zb.model.seq_len * zb.model.hidden * 8 /* fp64 */;
    // ZeRO-3 gathers a unit's parameters for B only (W reads none), and B of the embedding reads
    // none either: its backward gather, one per micro-batch on stage 0, is gone.
    parallel::ProcessGrid grid(MPI_COMM_WORLD, zb.parallel);
    const bool emb_gather = zb.parallel.effective_zero() == 3 && grid.coords().pp == 0;
    const long emb_bytes =
        static_cast<long>(zb.model.vocab + zb.model.seq_len) * zb.model.hidden * 8 /* fp64 */;
    for (std::size_t s = 0; s < z.comm.size(); ++s) {
      EXPECT_EQ(o.comm[s].at("dp").calls - z.comm[s].at("dp").calls, emb_gather ? micro : 0)
          << k.name;
      EXPECT_EQ(o.comm[s].at("dp").bytes - z.comm[s].at("dp").bytes,
                emb_gather ? micro * emb_bytes : 0)
          << k.name;
      for (const char* axis : {"pp", "ep"}) {
        EXPECT_EQ(z.comm[s].at(axis).calls, o.comm[s].at(axis).calls) << k.name << " " << axis;
        EXPECT_EQ(z.comm[s].at(axis).bytes, o.comm[s].at(axis).bytes) << k.name << " " << axis;
      }
      EXPECT_EQ(z.comm[s].at("tp").calls - o.comm[s].at("tp").calls, extra) << k.name;
      EXPECT_EQ(z.comm[s].at("tp").bytes - o.comm[s].at("tp").bytes, extra * gathered) << k.name;
    }
    // Memory: at most p sets in flight on any stage; p on stage 0 (m >= p here), as 1F1B's
    // stage 0.
    const int p = zb.parallel.pp, stage = grid.coords().pp;
    for (const auto& st : z.steps) {
      EXPECT_LE(st.peak_live_activations, p) << k.name;
      if (stage == 0) {
        EXPECT_EQ(st.peak_live_activations, p) << k.name;
      }
      EXPECT_EQ(st.backward_weight_actions, st.backward_actions) << k.name;  // one W per B
      EXPECT_EQ(st.backward_actions, micro) << k.name;
    }
    for (const auto& st : o.steps) EXPECT_EQ(st.backward_weight_actions, 0) << k.name;
  }
}

// Every case in every precision, recompute none and selective, and ZeRO 2: zb-h1 bitwise 1F1B
// (losses and parameters), and --verify's criterion in fp64 and fp32 (bf16: its loss
// tolerance only, as --verify applies it).
TEST(zero_bubble_matrix, every_precision_and_recompute_mode_is_bitwise_1f1b) {
  auto cases = cases_for(world_size());
  if (cases.empty()) GTEST_SKIP() << "cases for 2 and 4 ranks";
  if (world_size() == 4) {
    auto set = base(2);
    set.insert(set.end(), {"parallel.pp=2", "parallel.dp=2", "parallel.zero=2"});
    cases.push_back({"pp2 x dp2 zero2", set});
  }
  for (const char* precision : {"fp64", "fp32", "bf16"})
    for (const char* recompute : {"none", "selective"})
      for (Case k : cases) {
        for (auto& o : k.set)
          if (o.rfind("train.precision=", 0) == 0) o = std::string("train.precision=") + precision;
        k.set.push_back(std::string("train.recompute=") + recompute);
        k.name += std::string(" ") + precision + " " + recompute;
        const auto zb = deck_for(k, "zb-h1");
        const TrainedRun z = run_parallel(zb), o = run_parallel(deck_for(k, "1f1b"));
        EXPECT_EQ(z.loss, o.loss) << k.name;
        EXPECT_EQ(z.params, o.params) << k.name;
        if (std::string(precision) != "bf16") expect_matches(z, run_reference(zb), k.name);
      }
}

TEST(zero_bubble, reruns_are_bitwise_identical) {
  const auto cases = cases_for(world_size());
  if (cases.empty()) GTEST_SKIP() << "cases for 2 and 4 ranks";
  expect_bitwise_rerun(deck_for(cases.front(), "zb-h1"), cases.front().name);
}
