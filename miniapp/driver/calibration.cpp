// Calibration: the Calibrator (which communicators and shard shapes to measure, and the caches
// that make a sweep measure each once: calibration_comm.cpp, calibration_compute.cpp). The
// calibration's JSON form: analysis/calibration_data.cpp.
#include "driver/calibration.hpp"

#include <mpi.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <utility>

#include "driver/calibration_detail.hpp"
#include "model/trainer.hpp"
#include "parallel/process_grid.hpp"
#include "parallel/watchdog.hpp"
#include "perfmodel/parallel_config.hpp"
#include "perfmodel/shard_params.hpp"

namespace paraxis::driver {

namespace {

// The communicator's shape: its axis, size, the rank order, the backend and the links; on dp
// also the all-gathers' arrangement and the bucket size the overlap test uses.
std::string comm_key(const RunConfig& cfg, const char* axis, int size,
                     const config::LinkEmulation& healthy) {
  const config::ParallelConfig& shape = cfg.parallel;
  return std::string(axis) + ' ' + std::to_string(size) + ' ' + std::to_string(shape.tp) + 'x' +
         std::to_string(shape.pp) + 'x' + std::to_string(shape.dp) + 'x' +
         std::to_string(shape.ep) + ' ' + config::to_string(shape.order) + ' ' +
         config::to_string(cfg.comm.backend) + " nodes " + std::to_string(healthy.ranks_per_node) +
         ' ' + std::to_string(healthy.latency_us) + ' ' + std::to_string(healthy.bandwidth_gbs) +
         (calibration_detail::gather_in_place(axis, shape) ? " gather in place" : "") +
         " overlap " + std::to_string(calibration_detail::overlap_bytes(cfg.comm.bucket_mb));
}

// The compute stand-in of the data-parallel sequence (SequenceCalibration): the memory the
// compute calibration held (at least the sequence's own buffer twice over; at ZeRO 3 the one
// workspace), capped at 64 MiB
// (past any last-level cache); before a gradient reduction after compute the compute the step
// runs before it (the forward and backward of the `micro_batches` micro-batches that come
// before it: the chunks' sum over pp; at ZeRO 2-3, which reduce after each micro-batch, one),
// before an all-gather after compute the optimizer's; each within 0.2-20 ms.
SequenceCalibration stand_in_of(const ComputeCalibration& k, perfmodel::CallSequence recorded,
                                int pp, int micro_batches, bool one_workspace, bool phases) {
  // The sequence's buffer (time_sequence_on): with `phases` (the data-parallel flat buffer) the
  // largest phase's calls (a phase: from a call after compute on), else every call's, or (ZeRO
  // 3) the largest call.
  double bytes = 0, phase = 0;
  for (const auto& q : recorded) {
    if (q.after_compute && phases) phase = 0;
    phase = one_workspace ? q.bytes : phase + q.bytes;
    bytes = std::max(bytes, phase);
  }
  SequenceCalibration out;
  out.sweep_bytes = std::min<std::size_t>(
      std::max<std::size_t>(k.peak_bytes, static_cast<std::size_t>(2 * bytes)),
      std::size_t{64} << 20);
  double step = 0;
  for (std::size_t c = 0; c < k.backward_s.size(); ++c)
    step += k.forward_s[c] + k.backward_s[c] +
            (c < k.backward_weight_s.size() ? k.backward_weight_s[c] : 0.0);
  out.sweep_s = std::clamp(step * micro_batches / std::max(pp, 1), 0.2e-3, 20e-3);
  out.later_sweep_s = std::clamp(k.optimizer_s, 0.2e-3, 20e-3);
  out.calls = std::move(recorded);
  return out;
}

}  // namespace

namespace calibration_detail {

// The emulated links are measured like real ones; the injected slow link is a fault and is left
// out, so that the report compares the faulty run with a healthy calibration (docs/diagnosis.md).
config::LinkEmulation healthy_links(const RunConfig& cfg) {
  config::LinkEmulation healthy = cfg.comm.links;
  healthy.slow_ranks.clear();
  healthy.slow_nodes.clear();
  healthy.slow_axis = config::SlowAxis::none;  // fault.slow_axis: a fault too
  return healthy;
}

parallel::LinkModel healthy_link_model(const RunConfig& cfg, const parallel::ProcessGrid& grid) {
  const config::LinkEmulation healthy = healthy_links(cfg);
  return parallel::make_link_model(healthy, grid.nodes(healthy.ranks_per_node));
}

namespace {

// The sequence `q` on this rank's group of `axis` with `mine` (this rank's stage's calls), rank
// 0's times broadcast over the world so that every rank stores the same.
void time_sequence_of(const RunConfig& cfg, const parallel::ProcessGrid& grid, const char* axis,
                      const perfmodel::CallSequence& mine, bool one_workspace,
                      SequenceCalibration& q, int reps) {
  const parallel::LinkModel links = healthy_link_model(cfg, grid);
  const MPI_Comm comm = std::string(axis) == "tp" ? grid.tp() : grid.dp();
  std::vector<double> t =
      time_sequence(axis, comm, cfg.comm.backend, links, mine, q, one_workspace, reps);
  t.resize(q.calls.size());  // rank 0's stage's, broadcast so that every rank stores the same
  parallel::watchdog::broadcast(t.data(), static_cast<int>(t.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD,
                                "calibration: broadcast a sequence");
  for (std::size_t k = 0; k < t.size(); ++k) q.calls[k].seconds = t[k];
}

}  // namespace

void time_dp_sequence(const RunConfig& cfg, const parallel::ProcessGrid& grid,
                      SequenceCalibration& q, int reps) {
  const perfmodel::Scenario sc = perfmodel::scenario_of(cfg.parallel, cfg.comm, cfg.train);
  // This rank's stage's calls are the ones its group times; rank 0's (stage 0's) are recorded.
  const auto mine = perfmodel::data_parallel_call_sequence(cfg.model, sc, grid.coords().pp);
  time_sequence_of(cfg, grid, "dp", mine, sc.effective_zero() == 3, q, reps);
}

void time_tp_sequence(const RunConfig& cfg, const parallel::ProcessGrid& grid,
                      SequenceCalibration& q, int reps) {
  const perfmodel::Scenario sc = perfmodel::scenario_of(cfg.parallel, cfg.comm, cfg.train);
  const auto mine = perfmodel::tensor_parallel_call_sequence(cfg.model, sc, grid.coords().pp);
  time_sequence_of(cfg, grid, "tp", mine, false, q, reps);
}

std::string sequence_key(const std::string& dp_key, const SequenceCalibration& q) {
  std::ostringstream os;
  os << dp_key << " sequence";
  for (const auto& c : q.calls) {
    os << ' ' << perfmodel::to_string(c.op) << ':' << static_cast<long long>(c.bytes) << ':'
       << c.group << (c.after_compute ? "c" : "");
    if (c.compute_share > 0) os << static_cast<long>(c.compute_share * 1e4);  // to 1e-4
  }
  // The stand-in's durations to 10 us.
  os << " sweep " << q.sweep_bytes << ' ' << static_cast<long>(q.sweep_s * 1e5) << ' '
     << static_cast<long>(q.later_sweep_s * 1e5);
  return os.str();
}

}  // namespace calibration_detail

Calibration Calibrator::calibrate(const RunConfig& cfg, const parallel::ProcessGrid* grid) {
  Calibration out;
  // Without hardware.calibration_reuse every point is calibrated right before it runs: a machine
  // that drifts over a sweep leaves no stale calibration (docs/report.md, "Calibration").
  if (!cfg.hardware.calibration_reuse) {
    comm_cache_.clear();
    sequence_cache_.clear();
    compute_cache_.clear();
  }
  const double t0 = model::steady_seconds();
  bool measured = false;
  const config::ParallelConfig& shape = cfg.parallel;  // the grid's shape, when there is one
  if (grid) {
    const config::LinkEmulation healthy = calibration_detail::healthy_links(cfg);
    const parallel::LinkModel links =
        parallel::make_link_model(healthy, grid->nodes(healthy.ranks_per_node));
    const std::pair<const char*, MPI_Comm> axes[] = {
        {"tp", grid->tp()}, {"pp", grid->pp()}, {"dp", grid->dp()}, {"ep", grid->ep()}};
    const int sizes[] = {shape.tp, shape.pp, shape.dp, shape.ep};
    for (int a = 0; a < 4; ++a) {
      if (sizes[a] < 2) continue;
      const std::string key = comm_key(cfg, axes[a].first, sizes[a], healthy);
      auto it = comm_cache_.find(key);
      if (it == comm_cache_.end()) {
        // Rank 0's group speaks for the axis (every group of an axis runs at once, as in
        // training); its fit is broadcast so every rank stores the same.
        // The pipeline's transfers always use MPI (parallel_trainer.cpp).
        const config::CommBackend backend = a == 1 ? config::CommBackend::mpi : cfg.comm.backend;
        auto fits = calibration_detail::calibrate_axis(
            axes[a].first, axes[a].second, backend, links,
            calibration_detail::gather_in_place(axes[a].first, shape),
            calibration_detail::overlap_bytes(cfg.comm.bucket_mb));
        it = comm_cache_.emplace(key, std::move(fits)).first;
        measured = true;
      }
      out.comm.insert(out.comm.end(), it->second.begin(), it->second.end());
    }
  }
  const std::string ckey = calibration_detail::compute_key(cfg);
  auto it = compute_cache_.find(ckey);
  if (it == compute_cache_.end()) {
    ComputeCalibration c = calibration_detail::calibrate_compute(cfg, grid);
    it = compute_cache_.emplace(ckey, std::move(c)).first;
    measured = true;
  }
  out.compute = it->second;
  if (grid && shape.dp > 1) measured = calibrate_sequence(cfg, *grid, out) || measured;
  if (grid && shape.tp > 1) measured = calibrate_tp_sequence(cfg, *grid, out) || measured;
  if (measured) out.seconds = model::steady_seconds() - t0;
  return out;
}

bool Calibrator::calibrate_sequence(const RunConfig& cfg, const parallel::ProcessGrid& grid,
                                    Calibration& out) {
  const perfmodel::Scenario sc = perfmodel::scenario_of(cfg.parallel, cfg.comm, cfg.train);
  // Rank 0's (stage 0's) calls are recorded; each group times its own stage's.
  auto recorded = perfmodel::data_parallel_call_sequence(cfg.model, sc, 0);
  // Timed on the dp communicator: a sequence with calls over another group (expert units over
  // their dp / ep ranks) keeps the curves.
  const bool on_dp = std::all_of(recorded.begin(), recorded.end(),
                                 [&](const auto& q) { return q.group == cfg.parallel.dp; });
  if (recorded.empty() || !on_dp) return false;
  // ZeRO 2-3: sweep_s is one micro-batch's compute (ZeRO 3's calls take their shares of it).
  const bool zero3 = sc.effective_zero() == 3;
  SequenceCalibration q =
      stand_in_of(out.compute, std::move(recorded), cfg.parallel.pp,
                  sc.effective_zero() >= 2 ? 1 : sc.micro_batches(), zero3, true);
  return cached_sequence(cfg, "dp", std::move(q), out.dp_sequence, [&](SequenceCalibration& s) {
    calibration_detail::time_dp_sequence(cfg, grid, s);
  });
}

bool Calibrator::cached_sequence(const RunConfig& cfg, const char* axis, SequenceCalibration q,
                                 SequenceCalibration& out,
                                 const std::function<void(SequenceCalibration&)>& time) {
  const config::LinkEmulation healthy = calibration_detail::healthy_links(cfg);
  const int size = std::string(axis) == "tp" ? cfg.parallel.tp : cfg.parallel.dp;
  const std::string key = calibration_detail::sequence_key(comm_key(cfg, axis, size, healthy), q);
  auto it = sequence_cache_.find(key);
  const bool fresh = it == sequence_cache_.end();
  if (fresh) {
    time(q);
    it = sequence_cache_.emplace(key, std::move(q)).first;
  }
  out = it->second;
  return fresh;
}

bool Calibrator::calibrate_tp_sequence(const RunConfig& cfg, const parallel::ProcessGrid& grid,
                                       Calibration& out) {
  const perfmodel::Scenario sc = perfmodel::scenario_of(cfg.parallel, cfg.comm, cfg.train);
  // Rank 0's (stage 0's) calls are recorded; each group times its own stage's. sweep_s: one
  // micro-batch's forward and backward of the stage, of which each call takes its share.
  auto recorded = perfmodel::tensor_parallel_call_sequence(cfg.model, sc, 0);
  if (recorded.empty()) return false;
  SequenceCalibration q =
      stand_in_of(out.compute, std::move(recorded), cfg.parallel.pp, 1, false, false);
  return cached_sequence(cfg, "tp", std::move(q), out.tp_sequence, [&](SequenceCalibration& s) {
    calibration_detail::time_tp_sequence(cfg, grid, s);
  });
}

}  // namespace paraxis::driver
