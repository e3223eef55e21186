// fault.slow_axis in the deck (docs/deck.md, docs/sensitivity.md): its keys parse, are
// `--set`-able and sweepable; a factor without an axis, or an axis of one rank in the point,
// is an error naming the key, while a factor-1 point (a sweep's baseline) is valid for any
// axis; out-of-range and unknown values are refused by the key table.
#include <gtest/gtest.h>

#include <string>

#include "deck/deck.hpp"

using namespace paraxis::driver;
using paraxis::config::SlowAxis;

namespace {

const char* kDeck = R"(model: {vocab: 64, seq_len: 8, hidden: 16, heads: 2, layers: 2, ffn: 32}
train: {global_batch: 4, micro_batch: 2, steps: 3}
parallel: {tp: 1, pp: 1, dp: 2}
)";

std::string all_errors(const Deck& d) {
  std::string s;
  for (const auto& e : d.errors) s += e.to_string() + "\n";
  return s;
}

bool has_error(const Deck& d, const std::string& key, const std::string& msg_part) {
  for (const auto& e : d.errors)
    if (e.key == key && e.message.find(msg_part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(deck_slow_axis, parses_and_defaults_to_off) {
  Deck d = load_deck_text(kDeck, "d.yaml", {}, 2);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  EXPECT_EQ(d.points.at(0).config.comm.links.slow_axis, SlowAxis::none);
  EXPECT_EQ(d.points.at(0).config.comm.links.slow_axis_factor, 1);
  d = load_deck_text(kDeck, "d.yaml", {"fault.slow_axis.axis=dp", "fault.slow_axis.factor=4"}, 2);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  EXPECT_EQ(d.points.at(0).config.comm.links.slow_axis, SlowAxis::dp);
  EXPECT_EQ(d.points.at(0).config.comm.links.slow_axis_factor, 4);
  EXPECT_TRUE(d.points.at(0).config.comm.links.slows_an_axis());
}

TEST(deck_slow_axis, factor_needs_an_axis) {
  const Deck d = load_deck_text(kDeck, "d.yaml", {"fault.slow_axis.factor=2"}, 2);
  EXPECT_TRUE(has_error(d, "fault.slow_axis.factor", "slows no axis")) << all_errors(d);
}

TEST(deck_slow_axis, axis_must_have_ranks) {
  // tp = 1 in this point: nothing to slow.
  const Deck d =
      load_deck_text(kDeck, "d.yaml", {"fault.slow_axis.axis=tp", "fault.slow_axis.factor=2"}, 2);
  EXPECT_TRUE(has_error(d, "fault.slow_axis.axis", "axis tp has one rank")) << all_errors(d);
  // The baseline (factor 1) is valid for any axis.
  const Deck base =
      load_deck_text(kDeck, "d.yaml", {"fault.slow_axis.axis=tp", "fault.slow_axis.factor=1"}, 2);
  EXPECT_TRUE(base.errors.empty()) << all_errors(base);
}

TEST(deck_slow_axis, values_out_of_range_or_unknown) {
  Deck d =
      load_deck_text(kDeck, "d.yaml", {"fault.slow_axis.axis=dp", "fault.slow_axis.factor=0.5"}, 2);
  EXPECT_TRUE(has_error(d, "fault.slow_axis.factor", "")) << all_errors(d);
  d = load_deck_text(kDeck, "d.yaml", {"fault.slow_axis.axis=dp", "fault.slow_axis.factor=2e6"}, 2);
  EXPECT_TRUE(has_error(d, "fault.slow_axis.factor", "")) << all_errors(d);
  d = load_deck_text(kDeck, "d.yaml", {"fault.slow_axis.axis=sp"}, 2);
  EXPECT_TRUE(has_error(d, "fault.slow_axis.axis", "")) << all_errors(d);
}

TEST(deck_slow_axis, sweeps_over_axis_and_factor) {
  // factor [1, 4] x axis [dp, pp] on a pp 1 grid: (pp, 4) has no pipeline to slow (an error
  // naming the swept key), (pp, 1) is a valid baseline.
  Deck d =
      load_deck_text(kDeck, "d.yaml",
                     {"sweep.fault.slow_axis.factor=[1,4]", "sweep.fault.slow_axis.axis=[dp]"}, 2);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  ASSERT_EQ(d.points.size(), 2u);
  EXPECT_EQ(d.points[0].config.comm.links.slow_axis_factor, 1);
  EXPECT_EQ(d.points[1].config.comm.links.slow_axis_factor, 4);
  EXPECT_EQ(d.points[1].config.comm.links.slow_axis, SlowAxis::dp);
  d = load_deck_text(kDeck, "d.yaml",
                     {"sweep.fault.slow_axis.factor=[1,4]", "sweep.fault.slow_axis.axis=[dp,pp]"},
                     2);
  EXPECT_TRUE(has_error(d, "fault.slow_axis.axis", "axis pp has one rank")) << all_errors(d);
  EXPECT_EQ(d.errors.size(), 1u) << all_errors(d);
  // The recorded configuration names the axis and reads back.
  d = load_deck_text(kDeck, "d.yaml", {"fault.slow_axis.axis=dp", "fault.slow_axis.factor=8"}, 2);
  ASSERT_TRUE(d.errors.empty()) << all_errors(d);
  const nlohmann::json j = config_to_json(d.points.at(0).config);
  EXPECT_EQ(j["fault"]["slow_axis"]["axis"], "dp");
  EXPECT_EQ(j["fault"]["slow_axis"]["factor"], 8.0);
  EXPECT_EQ(config_from_json(j).comm.links.slow_axis, SlowAxis::dp);
}
