// Reading a results folder's summary.json for `paraxis report`: the schema version
// (results_schema::kSummaryVersion only), every declared field's type and range (the results
// declaration, analysis/results_schema.hpp), then the rules between fields (array lengths, the
// grid against the config, the shape rules the performance models divide by) before anything
// reads it, so a hostile or damaged file gives one error naming the file and the JSON path of
// the field, never a crash or a silent default. Points whose status is not "ok" are checked only
// for index, status and settings: the report lists them and analyses nothing else of theirs (a
// diverged point's steps may hold NaN).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "perfmodel/collectives.hpp"

namespace paraxis::driver {

// The most (pipeline stages x virtual stages x micro-batches) a point may ask the report to
// replay: the schedule is built action by action, so a file must not be able to ask for 10^10.
constexpr long long kMaxReportScheduleChunks = 1LL << 22;

// Parses `path` and validates it (validate_summary). Throws std::runtime_error
// "<path>: <json path>: <what was expected, what was found>".
nlohmann::json read_summary(const std::string& path);

// Validates a parsed summary; `name` is the file named in the messages. Throws
// std::runtime_error (only): safe on any JSON value.
void validate_summary(const nlohmann::json& j, const std::string& name);

// The collective a calibration entry names (perfmodel::to_string spelling); throws
// std::invalid_argument for any other name.
perfmodel::Collective collective_named(const std::string& op);

}  // namespace paraxis::driver
