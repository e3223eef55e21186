// Deck parsing: every error names its key and file:line; valid decks resolve fully; sweeps
// expand to the cartesian product; constraints make a sweep point skipped, not fatal.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "driver/deck.hpp"

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
  EXPECT_TRUE(
      has_error(d, "train.micro_batch", "tiny.yaml", "does not divide train.global_batch = 8"))
      << all_errors(d);
}

TEST(deck, world_size_must_match_the_grid) {
  const Deck d = load_deck(PARAXIS_INPUTS_DIR "/tiny.yaml", {}, 2);
  EXPECT_TRUE(has_error(d, "parallel", "tiny.yaml", "but the run has 2 ranks")) << all_errors(d);
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
  EXPECT_NE(d.errors[0].message.find("cannot open"), std::string::npos);
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
  EXPECT_TRUE(has_error(d, "parallel.tp", "tiny.yaml", "tp = 3 does not divide model.heads = 4"))
      << all_errors(d);
  EXPECT_TRUE(has_error(d, "parallel.tp", "tiny.yaml", "does not divide model.ffn = 128"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.tp=2", "parallel.sequence_parallel=true", "model.seq_len=33"}, 2);
  EXPECT_TRUE(
      has_error(d, "parallel.sequence_parallel", "tiny.yaml", "does not divide model.seq_len = 33"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.pp=4"}, 4);
  EXPECT_TRUE(has_error(d, "parallel.pp", "tiny.yaml", "exceeds model.layers = 2"))
      << all_errors(d);
  d = load_deck(deck,
                {"parallel.pp=2", "parallel.schedule=interleaved", "model.layers=4",
                 "train.global_batch=6", "train.micro_batch=2"},
                2);
  EXPECT_TRUE(has_error(d, "train.micro_batch", "tiny.yaml", "divisible by parallel.pp = 2"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.virtual_stages=2"}, 1);
  EXPECT_TRUE(
      has_error(d, "parallel.virtual_stages", "tiny.yaml", "needs parallel.schedule: interleaved"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.dp=3", "parallel.ep=3", "train.global_batch=12"}, 3);
  EXPECT_TRUE(has_error(d, "parallel.ep", "tiny.yaml", "does not divide model.moe.experts = 4"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.pp=2", "parallel.stage_layers=[1,2]"}, 2);
  EXPECT_TRUE(has_error(d, "parallel.stage_layers", "tiny.yaml", "summing to model.layers = 2"))
      << all_errors(d);
  d = load_deck(deck, {"parallel.pp=2", "parallel.stage_layers=[0,2]"}, 2);
  EXPECT_TRUE(has_error(d, "parallel.stage_layers", "tiny.yaml", "entries >= 1")) << all_errors(d);
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
