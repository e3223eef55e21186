// A point's status, the one type the run sets and the results record (summary.json `status`,
// points.csv `status`; docs/results.md): ok, or diverged / failed / skipped with the reason.
// The text form, "<kind>: <reason>" ("ok" alone), is written once (text) and read once
// (parse_point_status), so no code tests a status by its string prefix.
#pragma once

#include <optional>
#include <string>

namespace paraxis::driver {

struct PointStatus {
  enum class Kind { pending, ok, diverged, failed, skipped };
  Kind kind = Kind::pending;  // pending: the point has not finished (never written)
  std::string reason;         // why, for diverged, failed and skipped; empty for ok

  static PointStatus ok() { return {Kind::ok, {}}; }
  static PointStatus diverged(std::string why) { return {Kind::diverged, std::move(why)}; }
  static PointStatus failed(std::string why) { return {Kind::failed, std::move(why)}; }
  static PointStatus skipped(std::string why) { return {Kind::skipped, std::move(why)}; }

  bool is_ok() const { return kind == Kind::ok; }
  // A point the run counts against its exit status (exit 1): anything but ok and skipped (a
  // skipped point was never meant to run).
  bool counts_as_not_ok() const { return kind != Kind::ok && kind != Kind::skipped; }
  // The results' form: "ok", "diverged: <reason>", "failed: <reason>", "skipped: <reason>".
  std::string text() const;
};

// The kind's name as the text form starts ("ok", "diverged", "failed", "skipped", "pending").
const char* to_string(PointStatus::Kind kind);

// A status read back from results; nullopt for a text that is none of the forms above.
std::optional<PointStatus> parse_point_status(const std::string& text);

}  // namespace paraxis::driver
