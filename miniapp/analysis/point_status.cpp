// A point's status and its text form (point_status.hpp).
#include "analysis/point_status.hpp"

namespace paraxis::driver {

const char* to_string(PointStatus::Kind kind) {
  switch (kind) {
    case PointStatus::Kind::ok:
      return "ok";
    case PointStatus::Kind::diverged:
      return "diverged";
    case PointStatus::Kind::failed:
      return "failed";
    case PointStatus::Kind::skipped:
      return "skipped";
    case PointStatus::Kind::pending:
      break;
  }
  return "pending";
}

std::string PointStatus::text() const {
  if (kind == Kind::ok || kind == Kind::pending) return to_string(kind);
  return std::string(to_string(kind)) + ": " + reason;
}

std::optional<PointStatus> parse_point_status(const std::string& text) {
  if (text == "ok") return PointStatus::ok();
  for (const auto kind :
       {PointStatus::Kind::diverged, PointStatus::Kind::failed, PointStatus::Kind::skipped}) {
    const std::string head = std::string(to_string(kind)) + ": ";
    if (text.compare(0, head.size(), head) == 0) return PointStatus{kind, text.substr(head.size())};
  }
  return std::nullopt;
}

}  // namespace paraxis::driver
