// A rank's Chrome trace events of one point (one process per rank; thread 0 compute, one slice
// per action, thread 1 communication), as write_trace writes them into trace-<point>.json.
#include <cctype>

#include "driver/results.hpp"

namespace paraxis::driver {

using nlohmann::json;

json trace_events_json(const std::vector<model::StepResult>& steps, int rank, double t0) {
  json events = json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"args", {{"name", "rank " + std::to_string(rank)}}}});
  events.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"tid", 0},
                    {"args", {{"name", "compute"}}}});
  events.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"tid", 1},
                    {"args", {{"name", "communication"}}}});
  for (const auto& s : steps) {
    for (const auto& sp : s.spans) {
      // One slice per action: "F3" / "B3" (micro-batch 3), ".c1" for this rank's chunk 1.
      std::string name = sp.name;
      json args{{"step", s.step}};
      if (sp.micro_batch >= 0) {
        name = std::string(1, static_cast<char>(std::toupper(sp.name[0]))) +
               std::to_string(sp.micro_batch) +
               (sp.chunk > 0 ? ".c" + std::to_string(sp.chunk) : "");
        args["micro_batch"] = sp.micro_batch;
        args["chunk"] = sp.chunk;
      }
      events.push_back({{"name", name},
                        {"cat", "compute"},
                        {"ph", "X"},
                        {"pid", rank},
                        {"tid", 0},
                        {"ts", (sp.begin - t0) * 1e6},
                        {"dur", (sp.end - sp.begin) * 1e6},
                        {"args", args}});
    }
    for (const auto& c : s.comm_spans)
      events.push_back(
          {{"name", std::string(c.axis) + ":" + c.op},
           {"cat", "comm"},
           {"ph", "X"},
           {"pid", rank},
           {"tid", 1},
           {"ts", (c.begin - t0) * 1e6},
           {"dur", (c.end - c.begin) * 1e6},
           {"args", {{"step", s.step}, {"bytes", c.bytes}, {"exposed_us", c.exposed * 1e6}}}});
  }
  return events;
}

}  // namespace paraxis::driver
