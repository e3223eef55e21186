// Deck parsing: every error names its key and file:line; valid decks resolve fully; sweeps
// expand to the cartesian product; constraints make a sweep point skipped, not fatal.
#include <gtest/gtest.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "deck/deck.hpp"
#include "driver/results.hpp"

using namespace paraxis::driver;

namespace {
std::string decks(const char* f) {
  return std::string(PARAXIS_DECKS_DIR) + "/" + f;
}

std::string all_errors(const Deck& d) {
  std::string s;
  for (const auto& e : d.errors) s += e.to_string() + "\n";
  return s;
}

bool has_error(const Deck& d, const std::string& key, const std::string& where_part,
               const std::string& msg_part) {
  for (const auto& e : d.errors)
    if (e.key == key && e.where.find(where_part) != std::string::npos &&
        e.message.find(msg_part) != std::string::npos)
      return true;
  return false;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST(deck, tiny_deck_is_valid_and_resolved) {
  const Deck d = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {}, 1);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 1u);
  const auto& c = d.points[0].config;
  EXPECT_EQ(c.model.vocab, 128);
  EXPECT_EQ(c.model.moe.experts, 4);
  EXPECT_EQ(c.model.moe.top_k, 2);
  EXPECT_EQ(c.train.steps, 50);
  EXPECT_EQ(c.train.precision, paraxis::model::Precision::fp32);
}

TEST(deck, small_deck_is_valid) {
  const Deck d = load_deck(PARAXIS_INPUTS_DIR "/small.yaml", {}, 1);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  EXPECT_GE(d.points[0].config.model.hidden, 512);
}

TEST(deck, unknown_key_is_named_with_line) {
  const Deck d = load_deck(decks("unknown_key.yaml"), {}, 1);
  EXPECT_TRUE(has_error(d, "model.hiden", "unknown_key.yaml:3", "unknown key")) << all_errors(d);
}

TEST(deck, negative_layers_is_out_of_range) {
  const Deck d = load_deck(decks("negative_layers.yaml"), {}, 1);
  EXPECT_TRUE(has_error(d, "model.layers", "negative_layers.yaml:3", "out of range"))
      << all_errors(d);
}

TEST(deck, heads_must_divide_hidden) {
  const Deck d = load_deck(decks("heads_not_dividing.yaml"), {}, 1);
  EXPECT_TRUE(
      has_error(d, "model.heads", "heads_not_dividing.yaml", "does not divide model.hidden = 30"))
      << all_errors(d);
}

TEST(deck, every_error_is_reported_at_once) {
  const Deck d = load_deck(decks("many_errors.yaml"), {}, 1);
  EXPECT_TRUE(has_error(d, "model.vocab", "many_errors.yaml:3", "duplicate key")) << all_errors(d);
  EXPECT_TRUE(has_error(d, "model.seq_len", "many_errors.yaml:4", "64 bits")) << all_errors(d);
  EXPECT_TRUE(has_error(d, "model.heads", "many_errors.yaml:5", "expected integer"))
      << all_errors(d);
  EXPECT_TRUE(has_error(d, "train.precision", "many_errors.yaml:7", "fp16")) << all_errors(d);
  EXPECT_TRUE(has_error(d, "colour", "many_errors.yaml:10", "unknown key")) << all_errors(d);
  EXPECT_GE(d.errors.size(), 5u);
}

TEST(deck, set_overrides_and_names_its_origin) {
  Deck d = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {"model.layers=3", "train.lr=0.5"}, 1);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  EXPECT_EQ(d.points[0].config.model.layers, 3);
  EXPECT_DOUBLE_EQ(d.points[0].config.train.lr, 0.5);
  d = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {"model.layers=0"}, 1);
  EXPECT_TRUE(has_error(d, "model.layers", "--set", "out of range")) << all_errors(d);
  d = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {"model.nope=1"}, 1);
  EXPECT_TRUE(has_error(d, "model.nope", "--set", "unknown key")) << all_errors(d);
  d = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {"train.steps"}, 1);
  EXPECT_FALSE(d.errors.empty());
}

TEST(deck, micro_batch_must_divide_global_batch) {
  const Deck d = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {"train.micro_batch=3"}, 1);
  EXPECT_TRUE(has_error(d, "train.micro_batch", "--set", "does not divide train.global_batch = 8"))
      << all_errors(d);
}

TEST(deck, attention_dropout_is_for_the_planner_and_a_run_refuses_it) {
  // A published run's dropout (docs/deck.md): validated alone (world 0, as `paraxis plan` loads
  // a deck) it is accepted; for a run on ranks it is refused, naming the key.
  const Deck plan = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {"model.attention_dropout=0.1"}, 0);
  EXPECT_TRUE(plan.errors.empty()) << all_errors(plan);
  EXPECT_DOUBLE_EQ(plan.points.front().config.model.attention_dropout, 0.1);
  const Deck run = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {"model.attention_dropout=0.1"}, 1);
  EXPECT_TRUE(has_error(run, "model.attention_dropout", "--set", "paraxis's model has no dropout"))
      << all_errors(run);
  const Deck bad = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {"model.attention_dropout=1"}, 0);
  EXPECT_TRUE(has_error(bad, "model.attention_dropout", "--set", "")) << all_errors(bad);
}

TEST(deck, world_size_must_match_the_grid) {
  const Deck d = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {}, 2);
  EXPECT_TRUE(has_error(d, "parallel", "tiny.yaml:20", "but the run has 2 ranks")) << all_errors(d);
}

TEST(deck, sweep_is_a_cartesian_product_with_skipped_points) {
  const std::string path = write_temp("sweep.yaml",
                                      "model: {hidden: 64, heads: 4}\n"
                                      "train: {global_batch: 8, steps: 2}\n"
                                      "sweep:\n"
                                      "  train.micro_batch: [1, 3, 4]\n"
                                      "  train.precision: [fp32, bf16]\n");
  const Deck d = load_deck(path, {}, 1);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 6u);
  EXPECT_EQ(d.points[0].settings[0].second, "1");
  EXPECT_EQ(d.points[1].settings[1].second, "bf16");
  EXPECT_EQ(d.points[2].config.train.micro_batch, 3);
  int skipped = 0;
  for (const auto& p : d.points) skipped += !p.skip_reason.empty();
  EXPECT_EQ(skipped, 2);  // micro_batch 3 does not divide 8
  EXPECT_NE(d.points[2].skip_reason.find("train.micro_batch"), std::string::npos);
}

TEST(deck, sweep_of_unknown_key_or_bad_value_is_an_error) {
  const std::string path = write_temp("bad_sweep.yaml",
                                      "sweep:\n"
                                      "  model.colour: [1, 2]\n"
                                      "  model.layers: [2, -1]\n");
  const Deck d = load_deck(path, {}, 1);
  EXPECT_TRUE(has_error(d, "sweep.model.colour", "bad_sweep.yaml:2", "unknown key"))
      << all_errors(d);
  EXPECT_TRUE(has_error(d, "sweep.model.layers", "bad_sweep.yaml:3", "out of range"))
      << all_errors(d);
}

TEST(deck, missing_file_and_broken_yaml) {
  Deck d = load_deck(decks("does_not_exist.yaml"), {}, 1);
  ASSERT_EQ(d.errors.size(), 1u);
  EXPECT_NE(d.errors[0].message.find("cannot read the deck: No such file or directory"),
            std::string::npos);
  d = load_deck(write_temp("broken.yaml", "model: {vocab: [1, 2\n"), {}, 1);
  ASSERT_EQ(d.errors.size(), 1u);
  EXPECT_NE(d.errors[0].where.find("broken.yaml:"), std::string::npos);
}

TEST(deck, auto_degrees_enumerate_the_factorisations_of_the_rank_count) {
  const std::string path = write_temp("auto.yaml",
                                      "model: {hidden: 64, heads: 4}\n"
                                      "train: {global_batch: 8, steps: 2}\n"
                                      "parallel: {tp: auto, dp: auto}\n");
  // 12 = tp * dp with pp = 1: (1,12) (2,6) (3,4) (4,3) (6,2) (12,1).
  Deck d = load_deck(path, {}, 12);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 6u);
  for (const auto& p : d.points) EXPECT_EQ(p.config.parallel.tp * p.config.parallel.dp, 12);
  // ep: auto keeps the degrees dividing dp.
  d = load_deck(path, {"sweep.parallel.ep=auto", "parallel.tp=1", "parallel.dp=4"}, 4);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  EXPECT_EQ(d.points.size(), 3u);  // ep = 1, 2, 4
  // Without a rank count (check without --ranks) auto cannot be expanded: one clear error.
  d = load_deck(path, {}, 0);
  EXPECT_TRUE(has_error(d, "sweep.parallel.tp", "auto.yaml:3", "auto needs the rank count"))
      << all_errors(d);
  d = load_deck(path, {"sweep.train.steps=auto"}, 4);
  EXPECT_TRUE(has_error(d, "sweep.train.steps", "--set", "auto applies to parallel"))
      << all_errors(d);
}

TEST(deck, degrees_the_model_cannot_take_are_named) {
  const std::string deck = PARAXIS_INPUTS_DIR "/tiny.yaml";  // heads 4, ffn 128, layers 2
  Deck d = load_deck(deck, {"parallel.tp=3", "parallel.dp=1"}, 3);
  EXPECT_TRUE(has_error(d, "parallel.tp", "--set", "tp = 3 does not divide model.heads = 4"))
      << all_errors(d);
  EXPECT_TRUE(has_error(d, "parallel.tp", "--set", "does not divide model.ffn = 128"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.tp=2", "parallel.sequence_parallel=true", "model.seq_len=33"}, 2);
  EXPECT_TRUE(
      has_error(d, "parallel.sequence_parallel", "--set", "does not divide model.seq_len = 33"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.pp=4"}, 4);
  EXPECT_TRUE(has_error(d, "parallel.pp", "--set", "exceeds model.layers = 2")) << all_errors(d);
  d = load_deck(deck,
                {"parallel.pp=2", "parallel.schedule=interleaved", "model.layers=4",
                 "train.global_batch=6", "train.micro_batch=2"},
                2);
  EXPECT_TRUE(has_error(d, "train.micro_batch", "--set", "divisible by parallel.pp = 2"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.virtual_stages=2"}, 1);
  EXPECT_TRUE(
      has_error(d, "parallel.virtual_stages", "--set", "needs parallel.schedule: interleaved"))
      << all_errors(d);
  // Slow ranks and slow links (docs/diagnosis.md): in the run, with an effect, ends distinct.
  d = load_deck(deck, {"fault.slow_rank.rank=4", "fault.slow_rank.factor=2"}, 2);
  EXPECT_TRUE(has_error(d, "fault.slow_rank.rank", "--set", "rank 4 is not in the run"))
      << all_errors(d);
  d = load_deck(deck, {"fault.slow_rank.rank=0", "fault.slow_rank.factor=2"}, 1);
  EXPECT_TRUE(has_error(d, "fault.slow_rank.rank", "--set", "needs peers")) << all_errors(d);
  d = load_deck(deck, {"fault.slow_rank.rank=1"}, 2);
  EXPECT_TRUE(has_error(d, "fault.slow_rank.factor", "", "factor 1 slows nothing"))
      << all_errors(d);
  d = load_deck(deck,
                {"fault.slow_rank.rank=1", "fault.slow_rank.factor=2",
                 "fault.slow_rank.from_step=2", "fault.slow_rank.to_step=1"},
                2);
  EXPECT_TRUE(has_error(d, "fault.slow_rank.to_step", "--set", "before from_step 2"))
      << all_errors(d);
  d = load_deck(deck, {"fault.slow_link.ranks=[1,1]", "fault.slow_link.latency_us=10"}, 2);
  EXPECT_TRUE(has_error(d, "fault.slow_link.ranks", "--set", "two different numbers"))
      << all_errors(d);
  d = load_deck(deck,
                {"fault.slow_link.nodes=[0,3]", "hardware.ranks_per_node=2",
                 "fault.slow_link.bandwidth_factor=0.25"},
                4);
  EXPECT_TRUE(has_error(d, "fault.slow_link.nodes", "--set", "node 3 is not in the run (2 nodes"))
      << all_errors(d);
  d = load_deck(deck, {"fault.slow_link.ranks=[0,1]"}, 2);
  EXPECT_TRUE(has_error(d, "fault.slow_link.latency_us", "", "slows nothing")) << all_errors(d);
  d = load_deck(deck,
                {"parallel.dp=2", "train.global_batch=8", "train.micro_batch=2",
                 "fault.slow_link.ranks=[0,1]", "fault.slow_link.bandwidth_factor=0.25",
                 "fault.slow_rank.rank=1", "fault.slow_rank.factor=2", "hardware.ranks_per_node=1",
                 "hardware.emulate.latency_us=20", "hardware.emulate.bandwidth_gbs=1.5"},
                2);
  EXPECT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 1u);
  EXPECT_EQ(d.points[0].config.comm.links.slow_ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(d.points[0].config.comm.links.bandwidth_gbs, 1.5);
  EXPECT_EQ(d.points[0].config.fault.slow_rank.factor, 2.0);
  d = load_deck(deck, {"parallel.schedule=zb-h1", "train.recompute=full"}, 1);
  EXPECT_TRUE(has_error(d, "parallel.schedule", "--set", "does not run with train.recompute: full"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.schedule=zb-h1", "train.recompute=selective"}, 1);
  EXPECT_TRUE(d.errors.empty()) << all_errors(d);
  d = load_deck(deck, {"parallel.dp=3", "parallel.ep=3", "train.global_batch=12"}, 3);
  EXPECT_TRUE(has_error(d, "parallel.ep", "--set", "does not divide model.moe.experts = 4"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.pp=2", "parallel.stage_layers=[1,2]"}, 2);
  EXPECT_TRUE(has_error(d, "parallel.stage_layers", "--set", "summing to model.layers = 2"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.pp=2", "parallel.stage_layers=[0,2]"}, 2);
  EXPECT_TRUE(has_error(d, "parallel.stage_layers", "--set", "entries >= 1")) << all_errors(d);
}

TEST(deck, every_key_is_documented_in_the_deck_reference) {
  std::ifstream in(PARAXIS_DOCS_DIR "/deck.md");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const auto keys = deck_key_reference();
  EXPECT_GT(keys.size(), 30u);
  for (const auto& entry : keys) {
    const std::string key = entry.substr(0, entry.find(':'));
    EXPECT_NE(doc.find(key), std::string::npos) << "docs/deck.md does not document " << key;
  }
}

// ---- Hostile decks (ctest reliability_hostile_decks runs these) ----

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool every_error_names_key_and_line(const Deck& d, const std::string& file) {
  for (const auto& e : d.errors)
    if (e.key.empty() || (e.where != "--set" && e.where.find(file + ":") == std::string::npos))
      return false;
  return true;
}

// 27 points: three keys of three values.
const char* kSweep27 =
    "model: {hidden: 64, heads: 4}\n"
    "train: {global_batch: 8, steps: 4}\n"
    "sweep:\n"
    "  train.seed: [1, 2, 3]\n"
    "  train.lr: [0.1, 0.2, 0.3]\n"
    "  parallel.zero: [0, 1, 2]\n";
}  // namespace

TEST(DeckHostile, AnchorBombSweepIsRefusedWithCount) {
  // 13 lines, 10 keys sharing one anchored list of 10 values: 10^10 points. Before the sweep was
  // sized first, expanding it ended in std::bad_alloc.
  const Deck d = load_deck(decks("anchor_bomb.yaml"), {}, 1);
  EXPECT_TRUE(has_error(d, "sweep", "anchor_bomb.yaml:3", "asks for 10000000000 points"))
      << all_errors(d);
  EXPECT_TRUE(has_error(d, "sweep", "anchor_bomb.yaml:3", "more than sweep.max_points = 4096"))
      << all_errors(d);
  EXPECT_TRUE(has_error(d, "sweep", "anchor_bomb.yaml:3", "--set sweep.max_points=N"))
      << all_errors(d);
  EXPECT_EQ(d.errors.size(), 1u) << all_errors(d);
  EXPECT_TRUE(d.points.empty());
}

TEST(DeckHostile, MaxPointsIsSetBySetAndIsNotSwept) {
  const std::string path = write_temp("sweep27.yaml", kSweep27);
  Deck d = load_deck(path, {"sweep.max_points=26"}, 1);
  EXPECT_TRUE(has_error(d, "sweep", "sweep27.yaml:3", "27 points (3 x 3 x 3)")) << all_errors(d);
  EXPECT_TRUE(has_error(d, "sweep", "sweep27.yaml:3", "sweep.max_points = 26")) << all_errors(d);
  EXPECT_TRUE(d.points.empty());
  d = load_deck(path, {"sweep.max_points=27"}, 1);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 27u);
  for (const auto& p : d.points) {
    ASSERT_EQ(p.settings.size(), 3u);  // max_points is a setting of the sweep, not a swept key
    for (const auto& kv : p.settings) EXPECT_NE(kv.first, "max_points");
  }
  EXPECT_TRUE(has_error(load_deck(path, {"sweep.max_points=0"}, 1), "sweep.max_points", "--set",
                        "out of range"));
  EXPECT_TRUE(has_error(load_deck(path, {"sweep.max_points=lots"}, 1), "sweep.max_points", "--set",
                        "expected integer"));
  // In the deck itself, and the default 4096: 4097 = 17 x 241 points is one too many.
  d = load_deck(write_temp("max8.yaml", std::string(kSweep27) + "  max_points: 8\n"), {}, 1);
  EXPECT_TRUE(has_error(d, "sweep", "max8.yaml:3", "sweep.max_points = 8")) << all_errors(d);
  std::string seeds = "[", lrs = "[";
  for (int i = 1; i <= 17; ++i) seeds += (i > 1 ? "," : "") + std::to_string(i);
  for (int i = 1; i <= 241; ++i) lrs += (i > 1 ? ",0." : "0.") + std::to_string(i);
  d = load_deck(
      path,
      {"sweep.train.seed=" + seeds + "]", "sweep.train.lr=" + lrs + "]", "sweep.parallel.zero=[0]"},
      1);
  EXPECT_TRUE(has_error(d, "sweep", "sweep27.yaml:3", "4097 points (17 x 241 x 1)"))
      << all_errors(d);
  // Swept itself it is refused by name.
  d = load_deck(path, {"sweep.sweep.max_points=[1,2]"}, 1);
  EXPECT_TRUE(has_error(d, "sweep.sweep.max_points", "--set", "cannot be swept")) << all_errors(d);
}

TEST(DeckHostile, AutoSweepIsSizedByItsFactorisations) {
  // tp, pp, dp auto on 2^20 ranks: 21^3 = 9261 combinations of the lists, of which the
  // C(22, 2) = 231 factorisations 2^a x 2^b x 2^c (a + b + c = 20) are the points.
  const std::string path = write_temp("auto3.yaml",
                                      "model: {hidden: 64, heads: 4}\n"
                                      "train: {global_batch: 8, steps: 2}\n"
                                      "parallel: {tp: auto, pp: auto, dp: auto}\n");
  Deck d = load_deck(path, {}, 1 << 20);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 231u);
  for (const auto& p : d.points)
    EXPECT_EQ(
        static_cast<long long>(p.config.parallel.tp) * p.config.parallel.pp * p.config.parallel.dp,
        1LL << 20);
  EXPECT_EQ(d.points.front().config.parallel.dp, 1 << 20);  // the sweep's order: dp fastest
  EXPECT_EQ(d.points.back().config.parallel.tp, 1 << 20);
  d = load_deck(path, {"sweep.max_points=230"}, 1 << 20);
  EXPECT_TRUE(has_error(d, "sweep", "auto3.yaml:3", "asks for 231 points")) << all_errors(d);
  // ep auto keeps the ep dividing dp: tp = 2 on 8 ranks leaves pp x dp = 1 x 4 (ep 1, 2, 4),
  // 2 x 2 (ep 1, 2) and 4 x 1 (ep 1).
  d = load_deck(path, {"parallel.tp=2", "parallel.ep=auto"}, 8);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 6u);
  for (const auto& p : d.points) EXPECT_EQ(p.config.parallel.dp % p.config.parallel.ep, 0);
}

TEST(DeckHostile, GridProductOverflowIsADeckError) {
  const std::string tiny = PARAXIS_INPUTS_DIR "/tiny.yaml";
  // 65536^2 = 2^32 ranks: fits a long long, not the int every world size is.
  Deck d = load_deck(tiny, {"parallel.tp=65536", "parallel.pp=65536"}, 0);
  EXPECT_TRUE(has_error(d, "parallel", "--set", "65536 * 65536 * 1 exceeds the largest world size"))
      << all_errors(d);
  // (2^31 - 1)^3 overflows even a long long: a clear error, never a wrapped rank count.
  const std::string big = std::to_string(INT_MAX);
  d = load_deck(tiny, {"parallel.tp=" + big, "parallel.pp=" + big, "parallel.dp=" + big}, 8);
  EXPECT_TRUE(has_error(d, "parallel", "--set", "exceeds the largest world size")) << all_errors(d);
  for (const auto& e : d.errors) EXPECT_EQ(e.message.find("but the run has"), std::string::npos);
  // The largest grid that fits is accepted as a grid (other constraints aside).
  d = load_deck(tiny, {"parallel.dp=" + big}, 0);
  for (const auto& e : d.errors) EXPECT_NE(e.key, "parallel") << all_errors(d);
}

TEST(DeckHostile, HugeRankCountIsExpandedWithoutOverflow) {
  const std::string path = write_temp("auto_tp.yaml",
                                      "model: {hidden: 64, heads: 4}\n"
                                      "train: {global_batch: 8, steps: 2}\n"
                                      "parallel: {tp: auto}\n");
  // 2^31 - 1 is prime: tp = 2^31 - 1 is its only factorisation with pp = dp = 1. Enumerating
  // divisors up to the rank count overflowed the loop counter at INT_MAX.
  Deck d = load_deck(path, {}, INT_MAX);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 1u);
  EXPECT_EQ(d.points[0].config.parallel.tp, INT_MAX);
  EXPECT_NE(d.points[0].skip_reason.find("does not divide model.heads = 4"), std::string::npos);
  // A value auto made is named at the line of its `auto`.
  EXPECT_NE(d.points[0].skip_reason.find("auto_tp.yaml:3: 'parallel.tp'"), std::string::npos)
      << d.points[0].skip_reason;
  // 2^30 ranks, tp and dp auto: the 31 factorisations 2^i x 2^(30-i).
  d = load_deck(path, {"parallel.dp=auto"}, 1 << 30);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 31u);
  for (const auto& p : d.points)
    EXPECT_EQ(static_cast<long long>(p.config.parallel.tp) * p.config.parallel.dp, 1LL << 30);
  d = load_deck(path, {}, -4);
  ASSERT_EQ(d.errors.size(), 1u);
  EXPECT_NE(d.errors[0].message.find("rank count -4"), std::string::npos) << all_errors(d);
}

TEST(DeckHostile, FaultSectionSetsEveryFieldAndSweeps) {
  const std::string tiny = PARAXIS_INPUTS_DIR "/tiny.yaml";
  Deck d = load_deck(tiny, {}, 1);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  const auto& off = d.points[0].config.fault;
  EXPECT_EQ(off.dead_rank.rank, -1);
  EXPECT_EQ(off.dead_rank.at, DeadAt::step);
  EXPECT_EQ(off.hang.rank, -1);
  d = load_deck(tiny,
                {"parallel.dp=2", "fault.dead_rank.rank=1", "fault.dead_rank.step=3",
                 "fault.dead_rank.at=save", "fault.hang.rank=0", "fault.hang.step=2"},
                2);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  const auto& f = d.points[0].config.fault;
  EXPECT_EQ(f.dead_rank.rank, 1);
  EXPECT_EQ(f.dead_rank.step, 3);
  EXPECT_EQ(f.dead_rank.at, DeadAt::save);
  EXPECT_EQ(f.hang.rank, 0);
  EXPECT_EQ(f.hang.step, 2);
  d = load_deck(write_temp("fault.yaml", read_text(tiny) + "fault:\n  hang: {rank: 1, step: 1}\n"),
                {"parallel.dp=2", "sweep.fault.dead_rank.step=[0, 2]", "fault.dead_rank.rank=0"},
                2);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 2u);
  EXPECT_EQ(d.points[1].config.fault.dead_rank.step, 2);
  EXPECT_EQ(d.points[1].config.fault.hang.step, 1);
}

TEST(DeckHostile, FaultInjectionsOutsideTheRunAreErrors) {
  const std::string tiny = PARAXIS_INPUTS_DIR "/tiny.yaml";  // 50 steps
  Deck d = load_deck(tiny, {"parallel.dp=2", "fault.dead_rank.rank=2"}, 2);
  EXPECT_TRUE(has_error(d, "fault.dead_rank.rank", "--set", "not in the run (2 ranks: 0..1)"))
      << all_errors(d);
  d = load_deck(tiny, {"fault.hang.rank=0", "fault.hang.step=50"}, 1);
  EXPECT_TRUE(has_error(d, "fault.hang.step", "--set", "train.steps = 50")) << all_errors(d);
  d = load_deck(tiny, {"fault.dead_rank.rank=0", "fault.dead_rank.at=sometimes"}, 1);
  EXPECT_TRUE(has_error(d, "fault.dead_rank.at", "--set", "one of step save")) << all_errors(d);
  d = load_deck(tiny, {"fault.hang.rank=-2"}, 1);
  EXPECT_TRUE(has_error(d, "fault.hang.rank", "--set", "out of range")) << all_errors(d);
  // Without a rank count (check), the grid is the run: dp = 2 has ranks 0..1.
  d = load_deck(tiny, {"parallel.dp=2", "fault.hang.rank=3"}, 0);
  EXPECT_TRUE(has_error(d, "fault.hang.rank", "--set", "2 ranks")) << all_errors(d);
  // In a sweep too: an injection that cannot happen is an error, not a skipped point.
  d = load_deck(
      tiny, {"sweep.train.steps=[2, 10]", "fault.dead_rank.rank=0", "fault.dead_rank.step=5"}, 1);
  EXPECT_TRUE(has_error(d, "fault.dead_rank.step", "--set", "train.steps = 2")) << all_errors(d);
  // A hang on a lone rank: nobody would notice it.
  d = load_deck(tiny, {"fault.hang.rank=0"}, 1);
  EXPECT_TRUE(has_error(d, "fault.hang.rank", "--set", "needs at least 2 ranks")) << all_errors(d);
  // Off (rank -1): the step is not judged.
  d = load_deck(tiny, {"fault.dead_rank.step=99"}, 1);
  EXPECT_TRUE(d.errors.empty()) << all_errors(d);
}

TEST(DeckHostile, OldFaultKeysPointToTheFaultSection) {
  const std::string path = write_temp("old_fault.yaml",
                                      "model: {hidden: 64, heads: 4}\n"
                                      "train:\n"
                                      "  steps: 4\n"
                                      "  fault_step: 2\n");
  Deck d = load_deck(path, {}, 1);
  EXPECT_TRUE(has_error(d, "train.fault_step", "old_fault.yaml:4", "use fault.dead_rank.step"))
      << all_errors(d);
  d = load_deck(path, {"train.fault_rank=1"}, 1);
  EXPECT_TRUE(has_error(d, "train.fault_rank", "--set", "use fault.dead_rank.rank"))
      << all_errors(d);
  d = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {"sweep.train.fault_step=[-1,1]"}, 1);
  EXPECT_TRUE(has_error(d, "sweep.train.fault_step", "--set", "fault.dead_rank.step"))
      << all_errors(d);
}

// Issue 29: a deadline of 1e-300 s passed check and ended the run at its first wait; the lower
// bound is config::kMinTimeoutS (0.1 s).
TEST(DeckHostile, CommTimeoutHasASaneRange) {
  const std::string tiny = PARAXIS_INPUTS_DIR "/tiny.yaml";
  Deck d = load_deck(tiny, {}, 1);
  EXPECT_DOUBLE_EQ(d.points[0].config.comm.timeout_s, 600);  // PyTorch's NCCL watchdog default
  d = load_deck(tiny, {"comm.timeout_s=0.5"}, 1);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  EXPECT_DOUBLE_EQ(d.points[0].config.comm.timeout_s, 0.5);
  d = load_deck(tiny, {"comm.timeout_s=0.1"}, 1);
  EXPECT_TRUE(d.errors.empty()) << all_errors(d);
  for (const char* bad : {"0", "-1", "1e-300", "0.099", "1e7", "nan", "inf", "soon"})
    EXPECT_TRUE(has_error(load_deck(tiny, {std::string("comm.timeout_s=") + bad}, 1),
                          "comm.timeout_s", "--set", "number in [0.1, 1e+06]"))
        << bad;
}

TEST(DeckHostile, KeyAndConstraintErrorsAreReportedInOnePass) {
  const Deck d = load_deck(decks("key_and_constraint_errors.yaml"), {}, 0);
  const std::string f = "key_and_constraint_errors.yaml";
  // Key errors...
  EXPECT_TRUE(has_error(d, "model.layers", f + ":5", "expected integer")) << all_errors(d);
  EXPECT_TRUE(has_error(d, "model.colour", f + ":6", "unknown key")) << all_errors(d);
  EXPECT_TRUE(has_error(d, "train.precision", f + ":10", "fp16")) << all_errors(d);
  // ...and, in the same pass, the constraints between the keys that parsed, at their lines.
  EXPECT_TRUE(has_error(d, "model.heads", f + ":4", "does not divide model.hidden = 30"))
      << all_errors(d);
  EXPECT_TRUE(has_error(d, "train.micro_batch", f + ":9", "does not divide train.global_batch"))
      << all_errors(d);
  EXPECT_TRUE(has_error(d, "train.warmup_steps", f + ":12", "leaves no measured step"))
      << all_errors(d);
  EXPECT_TRUE(has_error(d, "parallel.tp", f + ":14", "tp = 3 does not divide model.heads = 4"))
      << all_errors(d);
  // A rule that reads a key in error is not judged (layers did not parse: pp vs layers unknown).
  for (const auto& e : d.errors) EXPECT_NE(e.key, "parallel.pp") << e.to_string();
  EXPECT_TRUE(every_error_names_key_and_line(d, f)) << all_errors(d);
}

TEST(DeckHostile, TextLoaderEqualsFileLoaderOnEveryInputDeck) {
  int decks_seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(PARAXIS_INPUTS_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string path = entry.path().string();
    ++decks_seen;
    for (int world : {0, 1, 4, 8}) {
      const Deck a = load_deck(path, {"train.steps=7"}, world);
      const Deck b = load_deck_text(read_text(path), path, {"train.steps=7"}, world);
      EXPECT_EQ(all_errors(a), all_errors(b)) << path << " world " << world;
      ASSERT_EQ(a.points.size(), b.points.size()) << path << " world " << world;
      for (std::size_t i = 0; i < a.points.size(); ++i) {
        EXPECT_EQ(a.points[i].settings, b.points[i].settings) << path;
        EXPECT_EQ(a.points[i].skip_reason, b.points[i].skip_reason) << path;
        EXPECT_EQ(config_to_json(a.points[i].config), config_to_json(b.points[i].config)) << path;
        EXPECT_EQ(b.points[i].config.train.steps, 7);
      }
    }
  }
  EXPECT_GE(decks_seen, 8);
}

TEST(DeckHostile, MissingDeckFileNamesPathAndReason) {
  const std::string missing = decks("no_such_deck.yaml");
  Deck d = load_deck(missing, {}, 1);
  ASSERT_EQ(d.errors.size(), 1u);
  EXPECT_EQ(d.errors[0].where, missing);
  EXPECT_NE(d.errors[0].message.find("No such file or directory"), std::string::npos)
      << all_errors(d);
  d = load_deck(PARAXIS_DECKS_DIR, {}, 1);  // a folder, not a file
  ASSERT_EQ(d.errors.size(), 1u);
  EXPECT_NE(d.errors[0].message.find("is a directory"), std::string::npos) << all_errors(d);
}

TEST(DeckHostile, AliasedValueIsNamedAtItsKeyLineInShortText) {
  // Each value aliases a list of 10^10 scalars, anchored lines away: the error names the line of
  // the key that uses it (an alias's own mark is its anchor's line) and describes it briefly.
  const Deck d = load_deck(decks("alias_bomb_value.yaml"), {}, 1);
  EXPECT_TRUE(has_error(d, "train.precision", "alias_bomb_value.yaml:13", "expected one of"))
      << all_errors(d);
  EXPECT_TRUE(has_error(d, "parallel.stage_layers", "alias_bomb_value.yaml:15", "element"))
      << all_errors(d);
  for (const auto& e : d.errors) EXPECT_LT(e.message.size(), 400u) << e.message;
}

// The configuration's JSON form (summary.json's `config`) is generated from the key table and
// read back through it: every key is written, and a configuration with every key away from its
// default survives the round trip. A key that config_from_json dropped would come back as its
// default and differ.
TEST(config_json, every_key_round_trips) {
  const std::string deck =
      R"(model: {vocab: 300, seq_len: 24, hidden: 48, heads: 6, layers: 6, ffn: 96,
        moe: {experts: 6, top_k: 3, every: 2, capacity_factor: 1.25, aux_loss_coef: 0.03,
              router_skew: 0.7}, attention: fused}
train: {global_batch: 12, micro_batch: 2, steps: 9, warmup_steps: 2, lr: 0.0003, beta1: 0.8,
        beta2: 0.97, adam_eps: 1.0e-7, weight_decay: 0.1, grad_clip: 0.5, seed: 98765,
        precision: bf16, corpus_branching: 5, recompute: full, recompute_layers: 1}
parallel: {tp: 2, pp: 3, dp: 2, ep: 2, zero: 2, schedule: interleaved, virtual_stages: 2,
           stage_layers: [1, 1, 1, 1, 1, 1], sequence_parallel: true, order: tp-dp-pp}
comm: {backend: nccl, bucket_mb: 3.5, overlap: true, timeout_s: 42.5, mpi_gpu_aware: no}
hardware: {peak_flops: 1.5e14, gemm: portable, calibrate: false, calibration_reuse: true,
           rerun_misses: false, ranks_per_node: 4,
           emulate: {latency_us: 5, bandwidth_gbs: 12.5}}
output: {dir: somewhere, trace: false}
checkpoint: {every: 3, dir: ckpts, keep: 4, async: true, device_mtbf_h: 5000}
fault: {dead_rank: {rank: 3, step: 4, at: save}, hang: {rank: 5, step: 6},
        slow_rank: {rank: 7, factor: 2.5, from_step: 1, to_step: 3},
        slow_link: {ranks: [2, 9], latency_us: 15, bandwidth_factor: 0.5},
        slow_axis: {axis: dp, factor: 3}}
)";
  // A slow link names its ranks or its nodes, not both: the nodes form round-trips below.
  const std::string exclusive = "fault.slow_link.nodes";
  // A run refuses a published run's dropout (plan only): its round trip is checked at world 0.
  const std::string plan_only = "model.attention_dropout";
  const Deck d = load_deck_text(deck, "all_keys.yaml", {}, 12);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  const RunConfig& c = d.points.at(0).config;
  const RunConfig defaults;
  const nlohmann::json j = config_to_json(c), jd = config_to_json(defaults);
  // Every key of the table, nested by its dotted name, and none at its default above.
  for (const std::string& line : deck_key_reference()) {
    const std::string key = line.substr(0, line.find(':'));
    if (key.rfind("sweep.", 0) == 0) continue;  // how the deck expands, not a point's setting
    if (key == exclusive || key == plan_only) continue;
    std::string pointer = "/" + key;
    for (auto& ch : pointer)
      if (ch == '.') ch = '/';
    ASSERT_TRUE(j.contains(nlohmann::json::json_pointer(pointer))) << key;
    EXPECT_NE(j.at(nlohmann::json::json_pointer(pointer)),
              jd.at(nlohmann::json::json_pointer(pointer)))
        << key << " is at its default: the round trip would not notice it dropped";
  }
  // Names, not enum values.
  EXPECT_EQ(j["parallel"]["schedule"], "interleaved");
  EXPECT_EQ(j["parallel"]["order"], "tp-dp-pp");
  EXPECT_EQ(j["comm"]["backend"], "nccl");
  EXPECT_EQ(j["train"]["precision"], "bf16");
  EXPECT_EQ(j["train"]["recompute"], "full");
  const RunConfig back = config_from_json(j);
  EXPECT_EQ(config_to_json(back), j);
  const Deck dp = load_deck_text(deck, "all_keys.yaml", {plan_only + "=0.25"}, 0);
  ASSERT_TRUE(dp.errors.empty()) << all_errors(dp);
  const nlohmann::json jp = config_to_json(dp.points.at(0).config);
  EXPECT_EQ(jp["model"]["attention_dropout"], 0.25);
  EXPECT_EQ(config_to_json(config_from_json(jp)), jp);
  const Deck dn = load_deck_text(deck, "all_keys.yaml",
                                 {"fault.slow_link.ranks=[]", "fault.slow_link.nodes=[0,2]"}, 12);
  ASSERT_TRUE(dn.errors.empty()) << all_errors(dn);
  const nlohmann::json jn = config_to_json(dn.points.at(0).config);
  EXPECT_EQ(jn["fault"]["slow_link"]["nodes"], nlohmann::json::array({0, 2}));
  EXPECT_EQ(config_to_json(config_from_json(jn)), jn);
  EXPECT_EQ(back.parallel.schedule, paraxis::schedule::ScheduleKind::interleaved);
  EXPECT_EQ(back.train.lr, 0.0003);  // bit for bit
  EXPECT_EQ(back.model.moe.capacity_factor, 1.25);
  // A key absent keeps its default, as in a deck.
  EXPECT_EQ(config_to_json(config_from_json(nlohmann::json::object())), jd);
}

// config_from_json holds a value to its key's type and range, naming the key.
TEST(config_json, a_bad_value_names_its_key) {
  auto message = [](const nlohmann::json& j) -> std::string {
    try {
      config_from_json(j);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message({{"parallel", {{"tp", "two"}}}}),
            "config.parallel.tp: expected integer in [1, 2147483647], got 'two'");
  EXPECT_EQ(message({{"parallel", {{"schedule", "zigzag"}}}}),
            "config.parallel.schedule: expected one of gpipe 1f1b interleaved zb-h1, got 'zigzag'");
  EXPECT_EQ(message({{"train", {{"lr", -1.0}}}}),
            "config.train.lr: value -1 out of range (expected number in [0, 1000])");
}
