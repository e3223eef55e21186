// Dead ranks and hangs as findings (diagnosis.hpp; docs/diagnosis.md "Dead ranks and hangs"):
// the job ends at once, so nothing is measured; the rank that failed (an exception) or whose
// wait expired (the watchdog) leaves a failure record in the output folder before it ends the
// job, and `paraxis report` turns the record into a finding with its address on the grid.
#include <algorithm>
#include <climits>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "deck/deck.hpp"
#include "analysis/diagnosis.hpp"
#include "config/grid_coords.hpp"

namespace paraxis::driver::diagnosis {

using nlohmann::json;

namespace {

const json& field(const json& record, const char* name) {
  if (!record.is_object() || !record.contains(name))
    throw std::invalid_argument(std::string("failure record: no \"") + name + "\"");
  return record.at(name);
}

// An integer field of a record (a rank, a step, a point index): a number that is not an integer
// in [lo, INT_MAX] (1e300, 2.5, -7) is refused naming the field, never converted (a double
// beyond int's range would read as rank -2147483648).
int integer_in(const json& v, const std::string& name, int lo) {
  const bool ok =
      v.is_number_integer() &&
      (v.is_number_unsigned() ? v.get<unsigned long long>() <= INT_MAX
                              : v.get<long long>() >= lo && v.get<long long>() <= INT_MAX);
  if (!ok)
    throw std::invalid_argument("failure record: " + name + " = " + v.dump() +
                                " is not an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(INT_MAX) + "]");
  return v.get<int>();
}

std::vector<int> rank_list(const json& record, const char* name) {
  const json& a = field(record, name);
  if (!a.is_array())
    throw std::invalid_argument(std::string("failure record: \"") + name +
                                "\" is not a list of ranks: " + a.dump());
  std::vector<int> out;
  for (std::size_t i = 0; i < a.size(); ++i)
    out.push_back(integer_in(a[i], std::string(name) + "[" + std::to_string(i) + "]", 0));
  return out;
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

// The longest wait of a hang, as its records give it.
struct HangWait {
  int writer, step, index;
  double waited_s, timeout_s;
  std::string where;  // "<axis> <operation>"
};

// A hang finding's text and advice. When no member of the group was silent or missing (every
// one answered, arrived), no rank stopped responding: the collective itself took longer than
// the deadline, and it is said so.
void word_hang(json& f, const std::vector<int>& stalled, const HangWait& w,
               const std::string& takes_out) {
  std::ostringstream t;
  const std::string at = w.step >= 0 ? " at step " + std::to_string(w.step) : std::string();
  const std::string waited = "rank " + std::to_string(w.writer) + " waited " +
                             seconds_text(w.waited_s) + " s in " + w.where;
  if (stalled.empty()) {
    t << "a collective slower than the deadline" << at << " of point " << w.index + 1 << ": "
      << waited << ", longer than comm.timeout_s = " << w.timeout_s
      << " s, while every member of its group answered (no rank was silent); the watchdog ended "
         "the job";
    f["text"] = t.str();
    f["advice"] =
        "raise comm.timeout_s above the operation's time if it is meant to take this long "
        "(a large buffer, a slow or oversubscribed link); otherwise find why the operation is "
        "slow (the step's trace, the calibration's link figures)";
    return;
  }
  t << (stalled.size() == 1 ? "rank " : "ranks ") << ranks_text(stalled) << " stopped responding"
    << at << " of point " << w.index + 1 << ": " << waited << " until the watchdog ended the job; "
    << takes_out;
  f["text"] = t.str();
  f["advice"] =
      "find what the stalled rank was doing (a stack dump of its process, gdb -p, on its "
      "node; its device's state); comm.timeout_s sets how long the others wait";
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

namespace {

void check_rank(int r, int world, const char* what) {
  if (r < 0 || r >= world)
    throw std::invalid_argument(std::string("failure record: ") + what + " " + std::to_string(r) +
                                " is outside the point's " + std::to_string(world) + " ranks");
}

// The finding of a rank that died (its own record).
json dead_rank_finding(const json& dead, const config::ParallelConfig& par, int index) {
  const int rank = integer_in(field(dead, "rank"), "rank", 0);
  const int step = integer_in(field(dead, "step"), "step", -1);
  check_rank(rank, par.tp * par.pp * par.dp, "rank");
  json f;
  f["cost_s"] = nullptr;  // the job ended: every later step is lost
  f["point_index"] = index;
  f["kind"] = "dead_rank";
  f["axis"] = "compute";
  f["group"] = config::grid_coords_of(par, rank).pp;
  f["ranks"] = json::array({rank});
  f["from_step"] = step;
  std::ostringstream t;
  t << "rank " << rank << " failed"
    << (step >= 0 ? " at step " + std::to_string(step) : std::string()) << " of point " << index + 1
    << " (" << field(dead, "what").get<std::string>() << "); " << loss_takes_out(par, rank);
  f["advice"] = "take the rank's node out (check its device and memory errors) and rerun the point";
  f["evidence"] = {
      {"reference", "failure_record"}, {"record_of_rank", rank}, {"what", dead.value("what", "")}};
  f["text"] = t.str();
  return f;
}

// The record a hang is addressed from: one that names a silent member from a wait on an axis
// (rather than in the driver's world-wide calls), the longest such wait (it expired first).
const json& hang_address(const std::vector<json>& records) {
  const auto rank_of_record = [](const json& r) {
    const std::string a = field(r, "axis");
    const bool on_axis = a == "tp" || a == "pp" || a == "dp" || a == "ep" || a == "edp";
    return std::make_tuple(!field(r, "silent").empty(), on_axis,
                           field(r, "waited_s").get<double>());
  };
  const json* chosen = &records.front();
  for (const auto& r : records)
    if (rank_of_record(r) > rank_of_record(*chosen)) chosen = &r;
  return *chosen;
}

// The stalled ranks of a hang: the silent ranks of every record (else those not arrived),
// sorted, once each.
std::vector<int> stalled_ranks(const std::vector<json>& records, int world) {
  std::vector<int> silent, not_arrived;
  for (const auto& r : records) {
    const auto s = rank_list(r, "silent");
    const auto n = rank_list(r, "not_arrived");
    silent.insert(silent.end(), s.begin(), s.end());
    not_arrived.insert(not_arrived.end(), n.begin(), n.end());
  }
  std::vector<int> stalled = silent.empty() ? not_arrived : silent;
  std::sort(stalled.begin(), stalled.end());
  stalled.erase(std::unique(stalled.begin(), stalled.end()), stalled.end());
  for (int r : stalled) check_rank(r, world, "stalled rank");
  return stalled;
}

json hang_finding(const std::vector<json>& records, const json& first,
                  const config::ParallelConfig& par, int index) {
  const std::vector<int> stalled = stalled_ranks(records, par.tp * par.pp * par.dp);
  const json& longest = hang_address(records);
  const int writer = integer_in(field(longest, "rank"), "rank", 0);
  const int step = integer_in(field(longest, "step"), "step", -1);
  std::string axis = field(longest, "axis");
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
    group = config::grid_coords_of(par, culprit).pp;
  }
  json f;
  f["cost_s"] = nullptr;  // the job ended: every later step is lost
  f["point_index"] = index;
  f["kind"] = "hang";
  f["axis"] = axis;
  f["group"] = group;
  f["ranks"] = stalled;
  f["from_step"] = step;
  const double timeout_s = field(first, "config").at("comm").value("timeout_s", 0.0);
  const HangWait wait{writer,    step,
                      index,     field(longest, "waited_s").get<double>(),
                      timeout_s, op_axis + " " + field(longest, "op").get<std::string>()};
  word_hang(f, stalled, wait, loss_takes_out(par, culprit));
  f["evidence"] = {{"reference", "failure_record"},
                   {"record_of_rank", writer},
                   {"records", records.size()},
                   {"waited_s", field(longest, "waited_s")},
                   {"timeout_s", timeout_s}};
  return f;
}

}  // namespace

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
  const int index = integer_in(field(first, "point_index"), "point_index", 0);
  const config::ParallelConfig par = config_from_json(field(first, "config")).parallel;
  return dead ? dead_rank_finding(*dead, par, index) : hang_finding(records, first, par, index);
}

}  // namespace paraxis::driver::diagnosis
