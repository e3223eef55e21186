// A point's steps run again where a term missed its target unexplained (point_stages.hpp,
// rerun_if_missed; docs/report.md, "Rerun").
#include <mpi.h>

#include <cstdio>
#include <string>

#include "analysis/prediction.hpp"
#include "driver/point_stages.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::driver {

namespace wd = parallel::watchdog;

void rerun_if_missed(const RunConfig& cfg, int world, int rank,
                     const std::function<std::unique_ptr<model::Trainer>()>& make, PointResult& r) {
  if (!cfg.hardware.rerun_misses || !r.calibration) return;
  nlohmann::json terms = nlohmann::json::array();
  if (rank == 0)
    for (const std::string& t : report::unexplained_misses(point_to_json(r))) terms.push_back(t);
  int again = terms.empty() ? 0 : 1;
  wd::broadcast(&again, 1, MPI_INT, 0, MPI_COMM_WORLD, "rerun: whether the point runs again");
  if (!again) return;
  if (rank == 0) {
    std::printf(
        "  rerun: %s missed its prediction, neither its steps' range nor the recheck "
        "shows it the machine's: the steps run again\n",
        terms.dump().c_str());
    std::fflush(stdout);
  }
  const double t0 = model::steady_seconds();
  PointResult rr;
  rr.point = r.point;
  rr.world = r.world;
  {
    const std::unique_ptr<model::Trainer> trainer = make();
    train_steps(cfg, rank, *trainer, rr.steps, {}, false);
  }
  RunConfig untraced = cfg;
  untraced.output.trace = false;
  gather_steps_and_trace(untraced, world, rank, t0, rr);
  if (rank != 0) return;
  const nlohmann::json measured = point_to_json(rr);
  if (!measured.contains("time")) return;  // no measured step: nothing to compare
  r.rerun = {{"seconds", model::steady_seconds() - t0},
             {"terms", terms},
             {"measured", report::measured_time_terms(measured)}};
}

}  // namespace paraxis::driver
