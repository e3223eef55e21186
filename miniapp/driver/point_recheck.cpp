// The recheck of a point's calibration right after its steps (point_recheck.hpp).
#include "driver/point_recheck.hpp"

#include <mpi.h>

#include <algorithm>
#include <string>
#include <utility>

#include "analysis/prediction.hpp"
#include "analysis/summary_reader.hpp"
#include "driver/calibration_detail.hpp"
#include "parallel/watchdog.hpp"
#include "perfmodel/call_prediction.hpp"

namespace paraxis::driver {

namespace {

namespace pm = paraxis::perfmodel;
namespace detail = calibration_detail;
using nlohmann::json;

// Repetitions of the data-parallel sequence after its warm-up, and compute steps timed after the
// warm-up step: fewer than the calibration's 15 and 5, so that the recheck stays a small part of
// the run (docs/perf-log/2026-12-05-recheck-round6.md).
constexpr int kSequenceReps = 3;
constexpr int kComputeSteps = 1;

// Marks in `flags` the positions of `samples` (a curve sorted by bytes) that the curve's time of
// a call of S = `bytes` is read from (perfmodel::measured_call_time: the sizes around it); none
// outside the curve, where the fit predicts.
void mark_around(const std::vector<std::pair<double, double>>& samples, double bytes,
                 std::vector<int>& flags) {
  if (samples.size() < 2 || !(bytes >= samples.front().first) || !(bytes <= samples.back().first))
    return;
  std::size_t hi = 0;
  while (samples[hi].first < bytes) ++hi;
  flags[hi] = 1;
  if (hi > 0 && samples[hi].first != bytes) flags[hi - 1] = 1;
}

// Per fit of `cal.comm`, per sample, whether some rank's calls were predicted from it: each rank
// marks its own calls' (a fit's axis and operation, its communicator size; a transfer between
// two ranks whatever the group), then the world agrees on the union.
std::vector<std::vector<int>> wanted_samples(const Calibration& cal,
                                             const std::vector<model::StepResult>& steps) {
  std::vector<std::vector<int>> flags;
  for (const auto& f : cal.comm) flags.emplace_back(f.samples.size(), 0);
  for (const auto& s : steps)
    for (const auto& c : s.comm_spans) {
      pm::LoggedOp o;
      if (!pm::logged_op(c.op, &o)) continue;
      for (std::size_t f = 0; f < cal.comm.size(); ++f) {
        const CommCalibration& fit = cal.comm[f];
        const bool same_group = o.op == pm::Collective::point_to_point || c.ranks == fit.ranks;
        if (fit.axis == c.axis && collective_named(fit.op) == o.op && same_group)
          mark_around(fit.samples, static_cast<double>(c.bytes), flags[f]);
      }
    }
  std::vector<int> all;
  for (const auto& v : flags) all.insert(all.end(), v.begin(), v.end());
  if (!all.empty())
    parallel::watchdog::all_reduce(MPI_IN_PLACE, all.data(), static_cast<int>(all.size()), MPI_INT,
                                   MPI_MAX, MPI_COMM_WORLD, "recheck: the samples to time again");
  std::size_t k = 0;
  for (auto& v : flags)
    for (int& x : v) x = all[k++];
  return flags;
}

// The axes in the calibration's order, with their communicators and degrees.
struct Axis {
  const char* name;
  MPI_Comm comm;
  int size;
};
std::vector<Axis> axes_of(const RunConfig& cfg, const parallel::ProcessGrid& grid) {
  const auto& p = cfg.parallel;
  return {{"tp", grid.tp(), p.tp},
          {"pp", grid.pp(), p.pp},
          {"dp", grid.dp(), p.dp},
          {"ep", grid.ep(), p.ep}};
}

// The curve samples the point's calls were predicted from, timed again axis by axis.
void recheck_samples(const RunConfig& cfg, const parallel::ProcessGrid& grid,
                     const std::vector<model::StepResult>& steps, Recheck& out) {
  const Calibration& cal = out.calibration;
  const auto flags = wanted_samples(cal, steps);
  const parallel::LinkModel links = detail::healthy_link_model(cfg, grid);
  json samples = json::array();
  for (const Axis& a : axes_of(cfg, grid)) {
    std::vector<detail::RetimedOp> wanted;
    std::vector<std::size_t> fit_of;  // the fit each wanted entry re-times
    for (std::size_t f = 0; f < cal.comm.size(); ++f) {
      if (cal.comm[f].axis != a.name || a.size < 2) continue;
      detail::RetimedOp w{collective_named(cal.comm[f].op), {}};
      for (std::size_t i = 0; i < flags[f].size(); ++i)
        if (flags[f][i]) w.positions.push_back(i);
      if (w.positions.empty()) continue;
      wanted.push_back(std::move(w));
      fit_of.push_back(f);
    }
    if (wanted.empty()) continue;  // the same on every rank: the flags were agreed
    // The pipeline's transfers always use MPI (parallel_trainer.cpp), as in the calibration.
    const config::CommBackend backend =
        std::string(a.name) == "pp" ? config::CommBackend::mpi : cfg.comm.backend;
    const auto t = detail::retime_axis(a.name, a.comm, backend, links,
                                       detail::gather_in_place(a.name, cfg.parallel), wanted);
    for (std::size_t w = 0; w < wanted.size(); ++w) {
      CommCalibration& fit = out.calibration.comm[fit_of[w]];
      for (std::size_t i = 0; i < wanted[w].positions.size(); ++i) {
        auto& sample = fit.samples[wanted[w].positions[i]];
        samples.push_back({{"axis", fit.axis},
                           {"op", fit.op},
                           {"bytes", sample.first},
                           {"calibration_s", sample.second},
                           {"recheck_s", t[w][i]}});
        sample.second = t[w][i];
      }
    }
  }
  out.retimed["samples"] = samples;
}

// A sequence the calibration timed (`name`: "dp_sequence" | "tp_sequence"), its calls and
// stand-in timed again by `time` (calibration_detail::time_dp_sequence / time_tp_sequence).
template <class Time>
void recheck_sequence(const char* name, SequenceCalibration& q, Time time, Recheck& out) {
  if (q.calls.empty()) return;
  const SequenceCalibration before = q;
  time(q);
  json calls = json::array();
  for (std::size_t k = 0; k < q.calls.size(); ++k)
    calls.push_back({{"op", pm::to_string(q.calls[k].op)},
                     {"bytes", q.calls[k].bytes},
                     {"calibration_s", before.calls[k].seconds},
                     {"recheck_s", q.calls[k].seconds}});
  out.retimed[name] = calls;
}

// Both sequences, where the calibration timed them.
void recheck_sequences(const RunConfig& cfg, const parallel::ProcessGrid& grid, Recheck& out) {
  if (cfg.parallel.dp >= 2)
    recheck_sequence(
        "dp_sequence", out.calibration.dp_sequence,
        [&](SequenceCalibration& q) { detail::time_dp_sequence(cfg, grid, q, kSequenceReps); },
        out);
  if (cfg.parallel.tp >= 2)
    recheck_sequence(
        "tp_sequence", out.calibration.tp_sequence,
        [&](SequenceCalibration& q) { detail::time_tp_sequence(cfg, grid, q, kSequenceReps); },
        out);
}

// With comm.overlap, its premise (each data-parallel reduction's async_progress: the share of a
// non-blocking call that progresses behind compute) timed again: the overlapped dp term's hidden
// part rests on it.
void recheck_overlap(const RunConfig& cfg, const parallel::ProcessGrid& grid, Recheck& out) {
  if (!cfg.comm.overlap || cfg.parallel.dp < 2) return;
  const parallel::LinkModel links = detail::healthy_link_model(cfg, grid);
  json retimed = json::array();
  for (CommCalibration& fit : out.calibration.comm) {
    const pm::Collective op = collective_named(fit.op);
    if (fit.axis != "dp" ||
        (op != pm::Collective::all_reduce && op != pm::Collective::reduce_scatter))
      continue;
    const double before = fit.async_progress;
    fit.async_progress = detail::retime_async_progress(grid.dp(), cfg.comm.backend, links, op,
                                                       detail::overlap_bytes(cfg.comm.bucket_mb));
    retimed.push_back({{"op", fit.op}, {"calibration", before}, {"recheck", fit.async_progress}});
  }
  out.retimed["async_progress"] = retimed;
}

// One micro-batch of every chunk, forward, backward and W (the slowest holder's).
double chunks_s(const ComputeCalibration& k) {
  double s = 0;
  for (std::size_t c = 0; c < k.forward_s.size(); ++c)
    s += k.forward_s[c] + k.backward_s.at(c) +
         (c < k.backward_weight_s.size() ? k.backward_weight_s[c] : 0.0);
  return s;
}

}  // namespace

Recheck recheck_point(const RunConfig& cfg, const parallel::ProcessGrid* grid,
                      const Calibration& cal, const std::vector<model::StepResult>& steps) {
  const double t0 = model::steady_seconds();
  Recheck out;
  out.calibration = cal;
  out.retimed["samples"] = json::array();  // none without a grid or calls
  if (grid) {
    recheck_samples(cfg, *grid, steps, out);
    recheck_sequences(cfg, *grid, out);
    recheck_overlap(cfg, *grid, out);
  }
  ComputeCalibration k = detail::calibrate_compute(cfg, grid, kComputeSteps);
  out.retimed["compute"] = {{"calibration_s", chunks_s(cal.compute)},
                            {"recheck_s", chunks_s(k)},
                            {"optimizer_calibration_s", cal.compute.optimizer_s},
                            {"optimizer_recheck_s", k.optimizer_s}};
  out.calibration.compute = std::move(k);
  out.seconds = model::steady_seconds() - t0;
  return out;
}

json recheck_json(const Recheck& r, const RunConfig& cfg) {
  return {{"seconds", r.seconds},
          {"retimed", r.retimed},
          {"predicted", report::predicted_time_terms(r.calibration, cfg)}};
}

}  // namespace paraxis::driver
