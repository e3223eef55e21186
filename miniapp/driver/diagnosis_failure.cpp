// Dead ranks and hangs as findings (diagnosis.hpp; docs/diagnosis.md "Dead ranks and hangs"):
// the job ends at once, so nothing is measured; the rank that failed (an exception) or whose
// wait expired (the watchdog) leaves a failure record in the output folder before it ends the
// job, and `paraxis report` turns the record into a finding with its address on the grid.
#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "driver/deck.hpp"
#include "driver/diagnosis.hpp"
#include "parallel/process_grid.hpp"

namespace paraxis::driver::diagnosis {

using nlohmann::json;

namespace {

const json& field(const json& record, const char* name) {
  if (!record.is_object() || !record.contains(name))
    throw std::invalid_argument(std::string("failure record: no \"") + name + "\"");
  return record.at(name);
}

json parallel_json(const config::ParallelConfig& p) {
  return {{"tp", p.tp},
          {"pp", p.pp},
          {"dp", p.dp},
          {"ep", p.ep},
          {"order", config::to_string(p.order)}};
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? " " : "") << ranks[i];
  return os.str();
}

std::string seconds_text(double s) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << s;
  return os.str();
}

}  // namespace

std::string failure_file_name(int rank) {
  return "failure-rank" + std::to_string(rank) + ".json";
}

json failure_record_json(const Failure& f) {
  json j = {{"kind", f.kind},
            {"rank", f.rank},
            {"point_index", f.point_index},
            {"step", f.step},
            {"what", f.what},
            {"config", f.config},
            {"settings", f.settings.is_null() ? json::object() : f.settings}};
  if (f.kind == "hang") {
    j["waited_s"] = f.waited_s;
    j["op"] = f.op;
    j["axis"] = f.axis;
    j["silent"] = f.silent;
    j["not_arrived"] = f.not_arrived;
  }
  return j;
}

json failure_finding(const std::vector<json>& records) {
  if (records.empty()) throw std::invalid_argument("failure records: none");
  const json* dead = nullptr;
  for (const auto& r : records) {
    const std::string kind = field(r, "kind");
    if (kind != "dead_rank" && kind != "hang")
      throw std::invalid_argument("failure record: kind \"" + kind +
                                  "\" is neither dead_rank nor hang");
    if (kind == "dead_rank" && !dead) dead = &r;
  }
  const json& first = dead ? *dead : records.front();
  const int index = field(first, "point_index");
  const config::ParallelConfig par = config_from_json(field(first, "config")).parallel;
  const int world = par.tp * par.pp * par.dp;
  const auto check_rank = [world](int r, const char* what) {
    if (r < 0 || r >= world)
      throw std::invalid_argument(std::string("failure record: ") + what + " " + std::to_string(r) +
                                  " is outside the point's " + std::to_string(world) + " ranks");
  };
  json f;
  f["cost_s"] = nullptr;  // the job ended: every later step is lost
  f["point_index"] = index;
  std::ostringstream t;
  if (dead) {
    const int rank = field(*dead, "rank");
    const int step = field(*dead, "step");
    check_rank(rank, "rank");
    f["kind"] = "dead_rank";
    f["axis"] = "compute";
    f["group"] = parallel::grid_coords_of(par, rank).pp;
    f["ranks"] = json::array({rank});
    f["from_step"] = step;
    t << "rank " << rank << " failed"
      << (step >= 0 ? " at step " + std::to_string(step) : std::string()) << " of point "
      << index + 1 << " (" << field(*dead, "what").get<std::string>() << "); "
      << loss_takes_out(par, rank);
    f["advice"] =
        "take the rank's node out (check its device and memory errors) and rerun the point";
    f["evidence"] = {{"reference", "failure_record"},
                     {"record_of_rank", rank},
                     {"what", dead->value("what", "")}};
    f["text"] = t.str();
    return f;
  }
  // A hang: the silent ranks of every record. The address: the record that names a silent
  // member from a wait on an axis (rather than in the driver's world-wide calls), the longest
  // such wait (it expired first).
  std::vector<int> silent, not_arrived;
  const json* chosen = nullptr;
  const auto rank_of_record = [](const json& r) {
    const std::string a = field(r, "axis");
    const bool on_axis = a == "tp" || a == "pp" || a == "dp" || a == "ep" || a == "edp";
    return std::make_tuple(!field(r, "silent").empty(), on_axis,
                           field(r, "waited_s").get<double>());
  };
  for (const auto& r : records) {
    const auto s = field(r, "silent").get<std::vector<int>>();
    const auto n = field(r, "not_arrived").get<std::vector<int>>();
    silent.insert(silent.end(), s.begin(), s.end());
    not_arrived.insert(not_arrived.end(), n.begin(), n.end());
    if (!chosen || rank_of_record(r) > rank_of_record(*chosen)) chosen = &r;
  }
  const json* longest = chosen;
  std::vector<int> stalled = silent.empty() ? not_arrived : silent;
  std::sort(stalled.begin(), stalled.end());
  stalled.erase(std::unique(stalled.begin(), stalled.end()), stalled.end());
  for (int r : stalled) check_rank(r, "stalled rank");
  const int writer = field(*longest, "rank");
  const int step = field(*longest, "step");
  std::string axis = field(*longest, "axis");
  const std::string op_axis = axis;
  if (axis == "edp") axis = "dp";  // the experts' data parallelism, counted under dp
  const int culprit = stalled.empty() ? writer : stalled.front();
  int group = -1;
  if (axis == "tp" || axis == "pp" || axis == "dp" || axis == "ep") {
    const auto groups = axis_groups(parallel_json(par), axis);
    for (std::size_t g = 0; g < groups.size(); ++g)
      if (std::find(groups[g].begin(), groups[g].end(), culprit) != groups[g].end())
        group = static_cast<int>(g);
  } else {
    axis = "compute";  // a wait outside the axes (the driver's own gathers)
    group = parallel::grid_coords_of(par, culprit).pp;
  }
  f["kind"] = "hang";
  f["axis"] = axis;
  f["group"] = group;
  f["ranks"] = stalled;
  f["from_step"] = step;
  t << (stalled.size() == 1 ? "rank " : "ranks ") << ranks_text(stalled) << " stopped responding"
    << (step >= 0 ? " at step " + std::to_string(step) : std::string()) << " of point " << index + 1
    << ": rank " << writer << " waited " << seconds_text(field(*longest, "waited_s").get<double>())
    << " s in " << op_axis << " " << field(*longest, "op").get<std::string>()
    << " until the watchdog ended the job; " << loss_takes_out(par, culprit);
  f["advice"] =
      "find what the stalled rank was doing (a stack dump of its process, gdb -p, on its "
      "node; its device's state); comm.timeout_s sets how long the others wait";
  f["evidence"] = {{"reference", "failure_record"},
                   {"record_of_rank", writer},
                   {"records", records.size()},
                   {"waited_s", field(*longest, "waited_s")},
                   {"timeout_s", field(first, "config").at("comm").value("timeout_s", 0.0)}};
  f["text"] = t.str();
  return f;
}

}  // namespace paraxis::driver::diagnosis
