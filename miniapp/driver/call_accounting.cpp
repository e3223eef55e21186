// Per-call accounting: predictions from the calibration and rows per (axis, op, size bucket)
// (call_accounting.hpp).
#include "driver/call_accounting.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "driver/statistics.hpp"
#include "driver/summary_reader.hpp"
#include "perfmodel/call_prediction.hpp"

namespace paraxis::driver {

namespace pm = paraxis::perfmodel;
using nlohmann::json;

namespace {

template <class T>
T* of_axis(const std::string& axis, T& tp, T& pp, T& dp, T& ep) {
  if (axis == "tp") return &tp;
  if (axis == "pp") return &pp;
  if (axis == "dp") return &dp;
  if (axis == "ep") return &ep;
  return nullptr;
}

}  // namespace

CommCosts comm_costs_of(const std::vector<CommCalibration>& fits) {
  CommCosts c;
  for (const auto& f : fits) {
    auto& o = c.op_links;
    auto& l = c.links;
    pm::OpLinks* ops = of_axis(f.axis, o.tp, o.pp, o.dp, o.ep);
    pm::LinkCost* axis = of_axis(f.axis, l.tp, l.pp, l.dp, l.ep);
    if (!ops || !axis) continue;
    const pm::LinkCost link{f.alpha, f.beta, 0.0};
    pm::OpCost measured = link;  // the operation's own: its fit and its measured curve
    measured.curve = f.samples;
    std::sort(measured.curve.begin(), measured.curve.end());
    measured.curve_ranks = f.ranks;
    (*ops)[collective_named(f.op)] = measured;
    if (f.axis == "dp" && f.async_progress >= 0) c.dp_overlap = f.async_progress;
    // Operations not calibrated: the axis's first fit, never another operation's curve.
    if (axis->alpha == 0 && axis->beta == 0) *axis = link;
  }
  return c;
}

std::optional<double> predicted_call_s(const CommCosts& costs, const std::string& axis,
                                       const std::string& op, int ranks, double bytes) {
  pm::LoggedOp o;
  if (!pm::logged_op(op, &o) || ranks < 1) return std::nullopt;
  const auto& l = costs.links;
  const auto& ops = costs.op_links;
  const pm::LinkCost* link = of_axis(axis, l.tp, l.pp, l.dp, l.ep);
  const pm::OpLinks* per_op = of_axis(axis, ops.tp, ops.pp, ops.dp, ops.ep);
  if (!link) return std::nullopt;
  return pm::call_time(o.op, ranks, bytes, *link, per_op);
}

std::vector<CallRow> call_rows(const std::vector<model::StepResult>& steps, int warmup,
                               const CommCosts* costs) {
  using Key = std::tuple<std::string, std::string, std::uint64_t>;
  std::map<Key, CallRow> rows;
  std::map<Key, std::vector<double>> times;
  for (const auto& s : steps) {
    if (s.step < warmup) continue;
    for (const auto& c : s.comm_spans) {
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
      if (r.predicted_s)
        *r.predicted_s +=
            predicted_call_s(*costs, c.axis, c.op, c.ranks, static_cast<double>(c.bytes))
                .value_or(0.0);
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
  for (const auto& s : steps) measured += s.step >= warmup ? 1 : 0;
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
