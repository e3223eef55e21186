// Which keys of a deck a resume may change against the checkpoint's own configuration
// (docs/checkpoint.md, "What a resume may change"), declared once in a table: refused (the
// checkpoint's state cannot continue under it, or would continue another function), warned (the
// run goes on, but its steps after the resume are neither run's), or allowed (steps, measurement,
// recomputation, and every section but `model` and `train`: layout, communication, output).
// Pure JSON in and out (config_to_json's form), so it is tested without MPI.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace paraxis::driver {

enum class ResumeChange { allowed, warned, refused };
const char* to_string(ResumeChange c);

struct ResumeDifference {
  std::string key;  // "train.lr"
  nlohmann::json checkpoint, now;
  ResumeChange change = ResumeChange::allowed;
  std::string why;  // for warned and refused: what the change does
};

// The rule of a `model.*` or `train.*` key ("train.micro_batch" depends on whether the model has
// experts); throws std::logic_error for a train key the table does not list (a new key must be
// classified).
ResumeDifference resume_rule(const std::string& key, bool moe);

// Every model.* and train.* key whose value differs between the checkpoint's configuration and
// this run's, with its rule; `saved` must hold `model` and `train` (else std::runtime_error).
std::vector<ResumeDifference> resume_differences(const nlohmann::json& saved,
                                                 const nlohmann::json& now);

}  // namespace paraxis::driver
