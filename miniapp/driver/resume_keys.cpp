// The resume rules of every model and train key (resume_keys.hpp).
#include "driver/resume_keys.hpp"

#include <map>
#include <stdexcept>

namespace paraxis::driver {

using nlohmann::json;

namespace {

struct Rule {
  ResumeChange dense, moe;
  const char* why;
};

constexpr const char* kOptimizer =
    "the optimizer goes on with the new value: the steps after the resume are neither the "
    "checkpoint's run's nor this deck's from step 0";

// Every train key (config_to_json's `train`); model.* keys are all refused (the tensors' shapes
// and the function they compute).
const std::map<std::string, Rule>& train_rules() {
  using C = ResumeChange;
  static const std::map<std::string, Rule> rules = {
      {"precision", {C::refused, C::refused, "the master copies' type and the arithmetic"}},
      {"seed", {C::refused, C::refused, "the data of every step"}},
      {"global_batch", {C::refused, C::refused, "the data of every step"}},
      {"corpus_branching", {C::refused, C::refused, "the corpus"}},
      {"micro_batch",
       {C::warned, C::refused,
        "a MoE model's auxiliary loss (and expert capacity) is computed per micro-batch, so "
        "another micro_batch trains another function; a dense model only sums its gradients in "
        "other groups (rounding-level differences)"}},
      {"lr", {C::warned, C::warned, kOptimizer}},
      {"beta1", {C::warned, C::warned, kOptimizer}},
      {"beta2", {C::warned, C::warned, kOptimizer}},
      {"adam_eps", {C::warned, C::warned, kOptimizer}},
      {"weight_decay", {C::warned, C::warned, kOptimizer}},
      {"grad_clip", {C::warned, C::warned, kOptimizer}},
      {"steps", {C::allowed, C::allowed, ""}},
      {"warmup_steps", {C::allowed, C::allowed, ""}},
      {"recompute", {C::allowed, C::allowed, ""}},
      {"recompute_layers", {C::allowed, C::allowed, ""}},
  };
  return rules;
}

}  // namespace

const char* to_string(ResumeChange c) {
  switch (c) {
    case ResumeChange::allowed:
      return "allowed";
    case ResumeChange::warned:
      return "warned";
    case ResumeChange::refused:
      return "refused";
  }
  return "?";
}

ResumeDifference resume_rule(const std::string& key, bool moe) {
  ResumeDifference d;
  d.key = key;
  if (key.rfind("model.", 0) == 0) {
    d.change = ResumeChange::refused;
    d.why = "the model's tensors and the function they compute";
    return d;
  }
  const auto it =
      key.rfind("train.", 0) == 0 ? train_rules().find(key.substr(6)) : train_rules().end();
  if (it == train_rules().end())
    throw std::logic_error("resume_rule: '" + key + "' has no rule (resume_keys.cpp)");
  d.change = moe ? it->second.moe : it->second.dense;
  d.why = it->second.why;
  return d;
}

std::vector<ResumeDifference> resume_differences(const json& saved, const json& now) {
  if (!saved.is_object() || !saved.contains("model") || !saved.contains("train"))
    throw std::runtime_error("its index holds no configuration (model and train)");
  const bool moe = now.at("model").at("moe").value("experts", 0) > 0 ||
                   saved.at("model").at("moe").value("experts", 0) > 0;
  std::vector<ResumeDifference> out;
  for (const char* section : {"model", "train"})
    for (const auto& [k, v] : now.at(section).items()) {
      const json old = saved.at(section).value(k, json());
      if (old == v) continue;
      ResumeDifference d = resume_rule(std::string(section) + "." + k, moe);
      d.checkpoint = old;
      d.now = v;
      out.push_back(std::move(d));
    }
  return out;
}

}  // namespace paraxis::driver
