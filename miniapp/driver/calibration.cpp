// Calibration: the Calibrator (which communicators and shard shapes to measure, and the caches
// that make a sweep measure each once: calibration_comm.cpp, calibration_compute.cpp) and the
// calibration's JSON form.
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
          std::to_string(healthy.bandwidth_gbs);
      auto it = comm_cache_.find(key);
      if (it == comm_cache_.end()) {
        // Rank 0's group speaks for the axis (every group of an axis runs at once, as in
        // training); its fit is broadcast so every rank stores the same.
        // The pipeline's transfers always use MPI (parallel_trainer.cpp).
        const config::CommBackend backend = a == 1 ? config::CommBackend::mpi : cfg.comm.backend;
        auto fits =
            calibration_detail::calibrate_axis(axes[a].first, axes[a].second, backend, links);
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

nlohmann::json calibration_to_json(const Calibration& c) {
  nlohmann::json comm = nlohmann::json::object();
  for (const auto& f : c.comm) {
    nlohmann::json s = nlohmann::json::array();
    for (const auto& [S, t] : f.samples) s.push_back({S, t});
    comm[f.axis][f.op] = {{"ranks", f.ranks},
                          {"alpha_s", f.alpha},
                          {"beta_s_per_byte", f.beta},
                          {"latency_s", f.latency},
                          {"beta_eff_s_per_byte", f.beta_eff},
                          {"rms_residual_s", f.rms_residual},
                          {"samples", s}};
    if (f.async_progress >= 0) comm[f.axis][f.op]["async_progress"] = f.async_progress;
  }
  return {{"seconds", c.seconds},
          {"comm", comm},
          {"compute",
           {{"forward_s_per_chunk", c.compute.forward_s},
            {"backward_s_per_chunk", c.compute.backward_s},
            {"forward_mean_s_per_chunk", c.compute.forward_mean_s},
            {"backward_mean_s_per_chunk", c.compute.backward_mean_s},
            {"backward_weight_s_per_chunk", c.compute.backward_weight_s},
            {"backward_weight_mean_s_per_chunk", c.compute.backward_weight_mean_s},
            {"optimizer_s", c.compute.optimizer_s},
            {"flops_per_s", c.compute.flops_per_s},
            {"peak_bytes", c.compute.peak_bytes}}}};
}

Calibration calibration_from_json(const nlohmann::json& j) {
  Calibration c;
  c.seconds = j.value("seconds", 0.0);
  for (const auto& [axis, ops] : j.at("comm").items())
    for (const auto& [op, f] : ops.items()) {
      CommCalibration cc;
      cc.axis = axis;
      cc.op = op;
      cc.ranks = f.at("ranks");
      cc.alpha = f.at("alpha_s");
      cc.beta = f.at("beta_s_per_byte");
      cc.latency = f.value("latency_s", 0.0);
      cc.beta_eff = f.value("beta_eff_s_per_byte", 0.0);
      cc.rms_residual = f.value("rms_residual_s", 0.0);
      cc.async_progress = f.value("async_progress", -1.0);
      for (const auto& s : f.at("samples")) cc.samples.push_back({s.at(0), s.at(1)});
      c.comm.push_back(std::move(cc));
    }
  const auto& k = j.at("compute");
  c.compute.forward_s = k.at("forward_s_per_chunk").get<std::vector<double>>();
  c.compute.backward_s = k.at("backward_s_per_chunk").get<std::vector<double>>();
  c.compute.forward_mean_s = k.value("forward_mean_s_per_chunk", c.compute.forward_s);
  c.compute.backward_mean_s = k.value("backward_mean_s_per_chunk", c.compute.backward_s);
  c.compute.backward_weight_s =
      k.value("backward_weight_s_per_chunk", std::vector<double>(c.compute.backward_s.size(), 0.0));
  c.compute.backward_weight_mean_s =
      k.value("backward_weight_mean_s_per_chunk", c.compute.backward_weight_s);
  c.compute.optimizer_s = k.at("optimizer_s");
  c.compute.flops_per_s = k.at("flops_per_s");
  c.compute.peak_bytes = k.value("peak_bytes", std::size_t{0});
  return c;
}

}  // namespace paraxis::driver
