// The results declaration (analysis/results_schema.hpp): its checker finds what it should (an
// undeclared key, a missing field, a wrong kind or range, in strict and reader mode), the reader
// refuses a summary of another schema version naming both, points.csv's header is the declared
// columns, and docs/architecture.md's worked example "Adding a result field" holds (its
// declaration line is below, verbatim: ctest/tools/test_results_doc.py checks that).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "analysis/results_schema.hpp"
#include "analysis/summary_reader.hpp"

namespace {

namespace rs = paraxis::driver::results_schema;
using nlohmann::json;

// The table's own shorthands (results_schema_table.cpp), so the example line reads the same.
constexpr rs::Kind num = rs::Kind::number, integer = rs::Kind::integer, obj = rs::Kind::object,
                   arr = rs::Kind::array;
constexpr rs::Presence need = rs::Presence::need, always = rs::Presence::always,
                       when = rs::Presence::when;
constexpr rs::Range kNonNeg{0, HUGE_VAL, false};
constexpr rs::Range kNone{0, 0, false};

std::string joined(const std::vector<rs::Violation>& v) {
  std::string s;
  for (const auto& x : v) s += x.path + ": " + x.what + "\n";
  return s;
}

// A small declaration exercising every rule of the walker.
const std::vector<rs::Field> kSmall = {
    {"schema", rs::Kind::string, "", kNone, need, "version"},
    {"points", arr, "", kNone, need, "points"},
    {"points[]", obj, "", kNone, need, "a point"},
    {"points[].status", rs::Kind::string, "", kNone, need, "status"},
    {"points[].steps", arr, "", kNone, always, "steps"},
    {"points[].steps[]", num, "s", kNonNeg, always, "a step's time"},
    {"points[].comm", obj, "", kNone, always, "per axis"},
    {"points[].comm.<tp|dp>", integer, "", {1, 10, false}, need, "a degree"},
    {"points[].links", obj, "", kNone, when, "any names"},
    {"points[].links.<axis>", num, "", kNonNeg, always, "a link"},
};

json small_point() {
  return json{{"status", "ok"}, {"steps", {0.5, 1.0}}, {"comm", {{"tp", 2}, {"dp", 1}}}};
}

TEST(results_schema, small_declaration_conforms) {
  const json doc{{"schema", "s"}, {"points", {small_point()}}};
  EXPECT_EQ(joined(rs::check(doc, kSmall, true, rs::Mode::strict)), "");
}

TEST(results_schema, strict_names_undeclared_missing_and_out_of_range) {
  json p = small_point();
  p["extra"] = 1;                // not declared
  p["comm"].erase("dp");         // an alternative of a need pattern: missing
  p["steps"][1] = -1.0;          // out of range
  p["links"] = {{"x", "fast"}};  // a free pattern's value of the wrong kind
  const json doc{{"schema", "s"}, {"points", {p}}};
  EXPECT_EQ(joined(rs::check(doc, kSmall, true, rs::Mode::strict)),
            "points[0].comm.dp: missing\n"
            "points[0].extra: not declared in the results schema\n"
            "points[0].links.x: expected a finite number >= 0, got \"fast\"\n"
            "points[0].steps[1]: expected a finite number >= 0, got -1.0\n");
  // The reader leaves undeclared keys alone; the rest it refuses the same way.
  EXPECT_EQ(joined(rs::check(doc, kSmall, true, rs::Mode::reader)),
            "points[0].comm.dp: missing\n"
            "points[0].links.x: expected a finite number >= 0, got \"fast\"\n"
            "points[0].steps[1]: expected a finite number >= 0, got -1.0\n");
}

TEST(results_schema, points_that_are_not_ok) {
  // The reader reads only index, status and settings of a point that is not ok; strict mode
  // still refuses an undeclared key, but not its values (NaN is written as null).
  json p{{"status", "diverged: loss is nan at step 1"},
         {"steps", {nullptr}},
         {"comm", {{"tp", nullptr}, {"dp", 1}}},
         {"bogus", 1}};
  const json doc{{"schema", "s"}, {"points", {p}}};
  EXPECT_EQ(joined(rs::check(doc, kSmall, true, rs::Mode::reader)), "");
  EXPECT_EQ(joined(rs::check(doc, kSmall, true, rs::Mode::strict)),
            "points[0].bogus: not declared in the results schema\n");
  // Its head is read: a point without a status is refused, whatever else it holds.
  p.erase("status");
  EXPECT_EQ(
      joined(rs::check(json{{"schema", "s"}, {"points", {p}}}, kSmall, true, rs::Mode::reader)),
      "points[0].status: missing\n");
}

TEST(results_schema, reader_refuses_another_version_naming_both) {
  const json old{{"schema", "paraxis.summary/1"}, {"points", json::array()}};
  try {
    paraxis::driver::validate_summary(old, "old/summary.json");
    FAIL() << "a /1 summary was accepted";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("old/summary.json: schema: "), std::string::npos) << m;
    EXPECT_NE(m.find("\"paraxis.summary/1\""), std::string::npos) << m;
    EXPECT_NE(m.find(std::string("\"") + rs::kSummaryVersion + "\""), std::string::npos) << m;
  }
  const json now{{"schema", rs::kSummaryVersion}, {"points", json::array()}};
  EXPECT_NO_THROW(paraxis::driver::validate_summary(now, "new/summary.json"));
}

TEST(results_schema, csv_header_and_cells) {
  EXPECT_EQ(rs::csv_header().rfind("index,status,world,tp,pp,dp,ep,zero,", 0), 0u);
  const std::string row = "0,\"ok\",1,1,1,1,1,0,1f1b,fp32,4,2,0.1,10,20,4.5,100,0,0,0,0,-1,0";
  EXPECT_EQ(joined(rs::check_csv(rs::csv_header() + "\n" + row + "\n")), "");
  const std::string bad = "0,\"ok\",0,1,1,1,1,0,1f1b,fp32,4,2,x,10,20,4.5,100,0,0,0,0,-1,0";
  EXPECT_EQ(joined(rs::check_csv(rs::csv_header() + "\n" + bad + "\n")),
            "points.csv:2: world: expected an integer >= 1, got 0\n"
            "points.csv:2: step_median_s: expected a finite number >= 0, got 'x'\n");
  EXPECT_EQ(rs::check_csv("index,status\n").size(), 1u);  // another header
}

// docs/architecture.md, "Adding a result field": one declaration line and its computation in
// the writer; the schema check then refuses the output until both are there.
TEST(results_schema, worked_example_adding_a_result_field) {
  // clang-format off
  const std::vector<rs::Field> example = {
    {"points[].throughput.tokens_per_s_per_rank", num, "1/s", kNonNeg, always, "tokens per second per rank"},
  };
  // clang-format on
  std::vector<rs::Field> declared = rs::fields(rs::File::summary);
  auto about = [](const std::vector<rs::Violation>& v) {
    std::string s;
    for (const auto& x : v)
      if (x.path.find("tokens_per_s_per_rank") != std::string::npos) s += x.path + ": " + x.what;
    return s;
  };
  json point{{"index", 0},
             {"status", "ok"},
             {"steps", json::array()},
             {"throughput", {{"tokens_per_s", 8.0}, {"tokens_per_s_per_rank", 4.0}}}};
  const json doc{{"schema", rs::kSummaryVersion}, {"points", {point}}};
  // Written, not declared: the writer's check fails.
  EXPECT_EQ(about(rs::check(doc, declared, true, rs::Mode::strict)),
            "points[0].throughput.tokens_per_s_per_rank: not declared in the results schema");
  declared.push_back(example.front());
  EXPECT_EQ(about(rs::check(doc, declared, true, rs::Mode::strict)), "");
  // Declared (always written), not written: the writer's check fails.
  json without = doc;
  without["points"][0]["throughput"].erase("tokens_per_s_per_rank");
  EXPECT_EQ(about(rs::check(without, declared, true, rs::Mode::strict)),
            "points[0].throughput.tokens_per_s_per_rank: missing");
  // Out of its range: the reader refuses it, naming the path.
  json negative = doc;
  negative["points"][0]["throughput"]["tokens_per_s_per_rank"] = -4.0;
  EXPECT_EQ(about(rs::check(negative, declared, true, rs::Mode::reader)),
            "points[0].throughput.tokens_per_s_per_rank: expected a finite number >= 0, got -4.0");
}

}  // namespace
