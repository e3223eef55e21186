// The results schema, declared once (issue 31): every field of summary.json, report.json and
// points.csv — its path, type, unit, range and one line of documentation — the way the deck's
// key table declares deck keys (deck/deck_key_table.cpp). From this declaration come:
// - the writers' schema strings and points.csv's header (driver/results.cpp, report_write.cpp);
// - the reader's type and range checks (summary_reader.cpp: check_declared), beside the rules
//   between fields it keeps (the grid against the config, the series' shapes, ...);
// - the field lists of docs/results.md (paraxis-results-schema markdown; CTest results_schema_doc
//   fails when the page differs);
// - the writer's check: CTest results_schema_run runs paraxis and checks every key it wrote is
//   declared and every field declared as always written is there (conformance, strict).
// Pure C++17 over nlohmann::json: no MPI, no Kokkos.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace paraxis::driver::results_schema {

// The schema strings the writers put in "schema" and the reader expects (docs/results.md,
// "Schema versions" lists what each version changed).
inline constexpr const char* kSummaryVersion = "paraxis.summary/2";
inline constexpr const char* kReportVersion = "paraxis.report/1";

// provenance: the provenance object alone (paraxis-bench-comm's JSON `provenance`; the kernel
// and model benchmarks' context has its process keys).
enum class File { summary, report, points_csv, provenance };

// A value's JSON type. `map`: an object whose keys are declared elsewhere (the deck's key table
// for `config`, the swept keys for `settings`), which this schema does not descend into.
enum class Kind {
  object,
  map,
  array,
  integer,
  number,
  string,
  boolean,
  integer_or_null,
  number_or_null,
  string_or_null,
  object_or_null
};

// need: the reader refuses a file without it (and the writer always writes it); always: the
// writer always writes it where its parent is (in summary.json: in a point that has steps), a
// reader tolerates its absence; when: written only in the case its documentation names.
enum class Presence { need, always, when };

// Inclusive bounds of a number or integer ((lo, hi] with lo_open); ignored for other kinds.
struct Range {
  double lo, hi;
  bool lo_open;
};

// One field. `path`: keys joined by '.', "[]" for an array's elements, and a segment in angle
// brackets for keys that vary: "<tp|pp|dp|ep>" one of those names, "<axis>" (no '|') any key,
// "<comm.*.time_s|...>" with '*' any run of characters. points.csv's fields are its columns.
struct Field {
  const char* path;
  Kind kind;
  const char* unit;  // "s", "B", "B/s", "FLOP/s", "" (none)
  Range range;
  Presence presence;
  const char* doc;
};

// Every field of `f`, parents before their children, in the order docs/results.md lists them.
const std::vector<Field>& fields(File f);

// points.csv's header line (its declared columns joined by ',', no newline).
std::string csv_header();

// "an integer >= 0", "a finite number in [0, 1]", "a finite number > 0": the reader's words.
std::string range_text(Kind kind, const Range& r);

// A value as messages show it: JSON, invalid UTF-8 replaced, shortened past 60 characters.
std::string shown(const nlohmann::json& v);

// One disagreement between a document and the declaration: the JSON path of the value
// ("points[0].time.step_median_s") and what is wrong ("missing", "not declared", "expected
// ..., got ...").
struct Violation {
  std::string path;
  std::string what;
};

// How strictly `check` reads. strict (the writer's test): every key must be declared, every
// need/always field present, every value of the declared kind and range, in every point.
// reader (`paraxis report`): undeclared keys are left alone, presence is checked for `need`
// fields only, and of points whose status is not "ok" only index, status and settings (a
// diverged point's figures may be NaN, written as null).
enum class Mode { strict, reader };

// Every violation of `doc` against the declaration of `f` (summary.json or report.json), in
// document order; `limit` stops after that many.
std::vector<Violation> check(const nlohmann::json& doc, File f, Mode mode,
                             std::size_t limit = SIZE_MAX);

// The same against a list of fields (`summary`: the list is summary.json's, whose points have
// the rules above): a test follows docs/architecture.md's worked example with it.
std::vector<Violation> check(const nlohmann::json& doc, const std::vector<Field>& declared,
                             bool summary, Mode mode, std::size_t limit = SIZE_MAX);

// points.csv's text against its declared columns: the header, then every row's cell count
// and each cell's kind and range.
std::vector<Violation> check_csv(const std::string& text);

// docs/results.md's field table of `f` (markdown; one row per declared field).
std::string markdown(File f);

}  // namespace paraxis::driver::results_schema
