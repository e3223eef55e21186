// The configuration's enums as JSON: their names, never their numbers. nlohmann::json would turn
// an enum into its integer value silently (a summary with "schedule": 1); these overloads, found
// by argument-dependent lookup wherever run_config.hpp is included, write the deck's name instead.
#pragma once

#include <nlohmann/json.hpp>

#include "config/parallel_config.hpp"
#include "model/model_config.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::model {
inline void to_json(nlohmann::json& j, Precision p) {
  j = to_string(p);
}
inline void to_json(nlohmann::json& j, Recompute r) {
  j = to_string(r);
}
}  // namespace paraxis::model

namespace paraxis::schedule {
inline void to_json(nlohmann::json& j, ScheduleKind k) {
  j = to_string(k);
}
}  // namespace paraxis::schedule

namespace paraxis::driver {
enum class GemmChoice;
enum class DeadAt;
const char* to_string(GemmChoice g);
const char* to_string(DeadAt a);
inline void to_json(nlohmann::json& j, GemmChoice g) {
  j = to_string(g);
}
inline void to_json(nlohmann::json& j, DeadAt a) {
  j = to_string(a);
}
}  // namespace paraxis::driver

namespace paraxis::config {
inline void to_json(nlohmann::json& j, RankOrder o) {
  j = to_string(o);
}
inline void to_json(nlohmann::json& j, CommBackend b) {
  j = to_string(b);
}
}  // namespace paraxis::config
