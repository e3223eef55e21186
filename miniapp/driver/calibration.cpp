// Calibration: the Calibrator (which communicators and shard shapes to measure, and the caches
// that make a sweep measure each once: calibration_comm.cpp, calibration_compute.cpp). The
// calibration's JSON form: analysis/calibration_data.cpp.
#include "driver/calibration.hpp"

#include <mpi.h>

#include <string>
#include <utility>

#include "driver/calibration_detail.hpp"
#include "model/trainer.hpp"
#include "parallel/process_grid.hpp"

namespace paraxis::driver {

Calibration Calibrator::calibrate(const RunConfig& cfg, const parallel::ProcessGrid* grid) {
  Calibration out;
  const double t0 = model::steady_seconds();
  bool measured = false;
  const config::ParallelConfig& shape = cfg.parallel;  // the grid's shape, when there is one
  if (grid) {
    // The emulated links are measured like real ones; the injected slow link is a fault and
    // is left out, so that the report compares the faulty run with a healthy calibration
    // (docs/diagnosis.md).
    config::LinkEmulation healthy = cfg.comm.links;
    healthy.slow_ranks.clear();
    healthy.slow_nodes.clear();
    healthy.slow_axis = config::SlowAxis::none;  // fault.slow_axis: a fault too
    const parallel::LinkModel links =
        parallel::make_link_model(healthy, grid->nodes(healthy.ranks_per_node));
    const std::pair<const char*, MPI_Comm> axes[] = {
        {"tp", grid->tp()}, {"pp", grid->pp()}, {"dp", grid->dp()}, {"ep", grid->ep()}};
    const int sizes[] = {shape.tp, shape.pp, shape.dp, shape.ep};
    for (int a = 0; a < 4; ++a) {
      if (sizes[a] < 2) continue;
      // The communicator's shape: its axis, size, the rank order and the backend.
      const std::string key =
          std::string(axes[a].first) + ' ' + std::to_string(sizes[a]) + ' ' +
          std::to_string(shape.tp) + 'x' + std::to_string(shape.pp) + 'x' +
          std::to_string(shape.dp) + 'x' + std::to_string(shape.ep) + ' ' +
          config::to_string(shape.order) + ' ' + config::to_string(cfg.comm.backend) + " nodes " +
          std::to_string(healthy.ranks_per_node) + ' ' + std::to_string(healthy.latency_us) + ' ' +
          std::to_string(healthy.bandwidth_gbs) +
          (calibration_detail::gather_in_place(axes[a].first, shape) ? " gather in place" : "") +
          " overlap " + std::to_string(calibration_detail::overlap_bytes(cfg.comm.bucket_mb));
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
  if (measured) out.seconds = model::steady_seconds() - t0;
  return out;
}

}  // namespace paraxis::driver
