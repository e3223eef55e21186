// --verify of one sweep point (point_stages.hpp): rank 0 compares with the single-rank reference
// (verify.hpp), every rank learns the verdict.
#include <mpi.h>

#include "driver/point_stages.hpp"
#include "driver/verify.hpp"

namespace paraxis::driver {

void verify_point(const RunConfig& cfg, int rank, const std::vector<double>& params,
                  double replica_divergence, PointResult& r) {
  VerifyResult v;
  int verdict = 0;
  if (rank == 0) {
    v = verify_against_reference(cfg, r.steps, params, replica_divergence);
    verdict = v.passed ? 1 : 0;
  }
  // Not under the watchdog's deadline: rank 0 trains the whole model alone meanwhile, which
  // takes longer than any step; it does no communication that could hang.
  MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
  v.passed = verdict == 1;
  r.verify = v;
  // Only rank 0 knows the reason; only rank 0 writes the results.
  if (!v.passed)
    r.status = PointStatus::failed(
        "--verify: " + (v.reason.empty() ? std::string("deviations beyond tolerance") : v.reason));
}

}  // namespace paraxis::driver
