// Per-call accounting: predictions from the calibration and rows per (axis, op, size bucket)
// (call_accounting.hpp).
#include "driver/call_accounting.hpp"

#include <map>
#include <tuple>

#include "analysis/statistics.hpp"
#include "analysis/summary_reader.hpp"
#include "perfmodel/call_prediction.hpp"

namespace paraxis::driver {

namespace pm = paraxis::perfmodel;
using nlohmann::json;

std::optional<double> predicted_call_s(const CommCosts& costs, const std::string& axis,
                                       const std::string& op, int ranks, double bytes) {
  pm::LoggedOp o;
  if (!pm::logged_op(op, &o) || ranks < 1) return std::nullopt;
  const auto& l = costs.links;
  const auto& ops = costs.op_links;
  const pm::LinkCost* link = axis_slot(axis, l.tp, l.pp, l.dp, l.ep);
  const pm::OpLinks* per_op = axis_slot(axis, ops.tp, ops.pp, ops.dp, ops.ep);
  if (!link) return std::nullopt;
  return pm::call_time(o.op, ranks, bytes, *link, per_op);
}

namespace {

// A call of `axis` the model sequences (not a receive).
bool sequenced_call(const model::StepResult::CommSpan& c, const char* axis, pm::LoggedOp* o) {
  return std::string(c.axis) == axis && pm::logged_op(c.op, o) && !o->receive;
}

// The step's calls on `axis` with their times by position in `seq` (the calibrated sequence:
// perfmodel::sequence_call_times), or empty when they are not its calls.
std::vector<double> as_issued_times(const model::StepResult& s, const char* axis,
                                    const pm::CallSequence& seq) {
  if (seq.empty()) return {};
  pm::CallSequence calls;
  for (const auto& c : s.comm_spans) {
    pm::LoggedOp o;
    if (sequenced_call(c, axis, &o))
      calls.push_back({o.op, static_cast<double>(c.bytes), c.ranks, false, 0});
  }
  return pm::sequence_call_times(seq, calls);
}

}  // namespace

std::vector<std::optional<double>> step_call_predictions(const model::StepResult& s,
                                                         const CommCosts& costs) {
  // The step's data-parallel and tensor-parallel calls in issue order: the calibrated sequence's,
  // position by position, when they are its calls; a tensor-parallel position the calibration
  // did not time (seconds < 0: the step's once-per-step calls) and every other call: its curve's.
  const char* axes[] = {"dp", "tp"};
  const std::vector<double> times[] = {as_issued_times(s, "dp", costs.dp_sequence),
                                       as_issued_times(s, "tp", costs.tp_step)};
  std::size_t next[] = {0, 0};
  std::vector<std::optional<double>> out;
  for (const auto& c : s.comm_spans) {
    std::optional<double> t;
    for (int a = 0; a < 2; ++a) {
      pm::LoggedOp o;
      if (times[a].empty() || !sequenced_call(c, axes[a], &o)) continue;
      const double v = times[a][next[a]++];
      if (v >= 0) t = v;
    }
    out.push_back(t ? t
                    : predicted_call_s(costs, c.axis, c.op, c.ranks, static_cast<double>(c.bytes)));
  }
  return out;
}

std::vector<CallRow> call_rows(const std::vector<model::StepResult>& steps, int warmup,
                               const CommCosts* costs) {
  using Key = std::tuple<std::string, std::string, std::uint64_t>;
  std::map<Key, CallRow> rows;
  std::map<Key, std::vector<double>> times;
  for (const auto& s : steps) {
    if (!is_measured_step(s.step, warmup)) continue;
    const auto predicted =
        costs ? step_call_predictions(s, *costs) : std::vector<std::optional<double>>{};
    for (std::size_t i = 0; i < s.comm_spans.size(); ++i) {
      const auto& c = s.comm_spans[i];
      pm::LoggedOp o;
      const bool known = pm::logged_op(c.op, &o);
      const std::string op = known ? pm::call_name(o) : c.op;
      const Key k{c.axis, op, pm::size_bucket(static_cast<double>(c.bytes))};
      CallRow& r = rows[k];
      if (r.calls == 0) {
        r.axis = c.axis;
        r.op = op;
        r.bucket_bytes = std::get<2>(k);
        if (costs && known) r.predicted_s = 0.0;
      }
      ++r.calls;
      r.bytes += static_cast<double>(c.bytes);
      r.measured_s += c.end - c.begin;
      r.wait_s += c.wait;
      times[k].push_back(c.end - c.begin);
      if (r.predicted_s) *r.predicted_s += predicted[i].value_or(0.0);
    }
  }
  std::vector<CallRow> out;
  for (auto& [k, r] : rows) {
    r.measured_median_s = median(std::move(times[k]));
    out.push_back(std::move(r));
  }
  return out;
}

json calls_json(const std::vector<model::StepResult>& steps, int warmup, const CommCosts* costs) {
  int measured = 0;
  for (const auto& s : steps) measured += is_measured_step(s.step, warmup) ? 1 : 0;
  json rows = json::array();
  for (const auto& r : call_rows(steps, warmup, costs))
    rows.push_back({{"axis", r.axis},
                    {"op", r.op},
                    {"bucket_bytes", r.bucket_bytes},
                    {"calls", r.calls},
                    {"bytes", r.bytes},
                    {"measured_s", r.measured_s},
                    {"measured_median_s", r.measured_median_s},
                    {"predicted_s", r.predicted_s ? json(*r.predicted_s) : json()},
                    {"wait_s", r.wait_s}});
  return {{"rank", 0}, {"steps", measured}, {"rows", rows}};
}

}  // namespace paraxis::driver
