// Which keys a resume may change (driver/resume_keys.hpp, docs/checkpoint.md "What a resume may
// change"): every train key of the configuration has a rule, and the rules the issue asks for
// (issue 29): lr warned, micro_batch refused for a MoE model and warned for a dense one, the
// model refused, steps allowed, the layout not compared.
#include <gtest/gtest.h>

#include "deck/deck.hpp"
#include "driver/resume_keys.hpp"

using namespace paraxis::driver;
using nlohmann::json;

namespace {

json moe_config() {
  RunConfig c;
  c.model.moe.experts = 4;
  return config_to_json(c);
}

const ResumeDifference* find(const std::vector<ResumeDifference>& d, const std::string& key) {
  for (const auto& x : d)
    if (x.key == key) return &x;
  return nullptr;
}

}  // namespace

// A train key added without a rule would be compared by nobody: each must be classified.
TEST(resume_keys, every_train_key_has_a_rule) {
  const json train = config_to_json(RunConfig{}).at("train");
  ASSERT_GT(train.size(), 10u);
  for (const auto& [k, v] : train.items())
    EXPECT_NO_THROW(resume_rule("train." + k, false)) << "train." << k;
  EXPECT_THROW(resume_rule("train.no_such_key", false), std::logic_error);
}

TEST(resume_keys, rules_of_the_issue) {
  json saved = moe_config();
  json now = saved;
  now["train"]["lr"] = 1e-4;
  now["train"]["micro_batch"] = 2;
  now["train"]["steps"] = 99;
  now["parallel"]["tp"] = 2;
  const auto d = resume_differences(saved, now);
  ASSERT_EQ(d.size(), 3u);  // parallel.* is not compared
  ASSERT_TRUE(find(d, "train.lr"));
  EXPECT_EQ(find(d, "train.lr")->change, ResumeChange::warned);
  EXPECT_EQ(find(d, "train.lr")->checkpoint, saved["train"]["lr"]);
  EXPECT_EQ(find(d, "train.lr")->now, 1e-4);
  ASSERT_TRUE(find(d, "train.micro_batch"));
  EXPECT_EQ(find(d, "train.micro_batch")->change, ResumeChange::refused);
  EXPECT_NE(find(d, "train.micro_batch")->why.find("auxiliary loss"), std::string::npos);
  EXPECT_EQ(find(d, "train.steps")->change, ResumeChange::allowed);
  // A dense model: micro_batch only regroups the gradient sums.
  json dense = config_to_json(RunConfig{}), dense_now = dense;
  dense_now["train"]["micro_batch"] = 2;
  EXPECT_EQ(resume_differences(dense, dense_now).at(0).change, ResumeChange::warned);
  now = saved;
  now["model"]["hidden"] = 32;
  now["train"]["seed"] = 7;
  for (const auto& x : resume_differences(saved, now))
    EXPECT_EQ(x.change, ResumeChange::refused) << x.key;
  EXPECT_THROW(resume_differences(json::object(), now), std::runtime_error);
}
