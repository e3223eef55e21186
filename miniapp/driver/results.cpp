// Result writers: summary.json, points.csv and a point's Chrome trace, each written atomically
// (io/checked_file.hpp). What goes into them: point_json.cpp (a point), provenance.cpp,
// trace_events.cpp, point_metrics.cpp (per-rank metrics, pipeline figures). Every field is
// declared once in analysis/results_schema_table.cpp: docs/results.md's tables come from it, and
// CTest results_schema_run checks this writer's output against it.
#include "driver/results.hpp"

#include <algorithm>
#include <sstream>

#include "analysis/results_schema.hpp"
#include "io/checked_file.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver {

using nlohmann::json;

void write_summary(const std::string& dir, const std::string& deck_path, const json& provenance,
                   const std::vector<PointResult>& points,
                   const std::function<void()>& before_rename) {
  json j{
      {"schema", results_schema::kSummaryVersion}, {"deck", deck_path}, {"provenance", provenance}};
  j["points"] = json::array();
  for (const auto& p : points) j["points"].push_back(point_to_json(p));
  io::write_file_checked(dir + "/summary.json", j.dump(2) + '\n', before_rename);
}

void write_points_csv(const std::string& dir, const std::vector<PointResult>& points) {
  std::ostringstream out;
  out << results_schema::csv_header() << '\n';  // the columns below, in declaration order
  for (const auto& r : points) {
    const auto& c = r.point.config;
    std::string status = r.status.text();
    std::replace(status.begin(), status.end(), ',', ';');
    std::replace(status.begin(), status.end(), '"', '\'');
    const double step_s = measured_median(r, [](const model::StepResult& s) { return s.time_s; });
    const double tokens = static_cast<double>(c.train.global_batch) * c.model.seq_len;
    const double tps = step_s > 0 ? tokens / step_s : 0;
    out << r.index << ",\"" << status << "\"," << r.world << ',' << c.parallel.tp << ','
        << c.parallel.pp << ',' << c.parallel.dp << ',' << c.parallel.ep << ',' << c.parallel.zero
        << ',' << schedule::to_string(c.parallel.schedule) << ','
        << model::to_string(c.train.precision) << ',' << c.train.global_batch << ','
        << c.train.micro_batch << ',' << step_s << ',' << tps << ','
        << 3.0 * r.flops_per_token * tps << ',' << (r.steps.empty() ? 0.0 : r.steps.back().loss)
        << ',' << r.memory.peak_bytes;
    // Checkpoints: the last save's figures (0 without), the step resumed from (-1: none).
    const nlohmann::json none = nlohmann::json::object();
    const nlohmann::json& last = r.checkpoints.empty() ? none : r.checkpoints.back();
    auto max_of = [&](const char* k) {
      return last.contains(k) ? last.at(k).value("max", 0.0) : 0.0;
    };
    out << ',' << r.checkpoints.size() << ',' << max_of("bytes") << ',' << max_of("write_s") << ','
        << max_of("exposed_s") << ',' << (r.resumed.is_null() ? -1 : r.resumed.value("step", -1))
        << ',' << (r.resumed.is_null() ? 0.0 : r.resumed.value("restart_to_first_step_s", 0.0))
        << '\n';
  }
  io::write_file_checked(dir + "/points.csv", out.str());
}

void write_trace(const std::string& dir, const PointResult& r) {
  if (r.trace_events.empty()) return;
  io::write_file_checked(
      dir + "/trace-" + std::to_string(r.index) + ".json",
      json{{"traceEvents", r.trace_events}, {"displayTimeUnit", "ms"}}.dump() + '\n');
}

}  // namespace paraxis::driver
