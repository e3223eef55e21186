// `paraxis plan MODEL MACHINE`: rank 0 evaluates the plan (analysis/plan.hpp, evaluate_plan);
// the other ranks of an mpiexec have nothing to do.
#include <mpi.h>

#include "config/exit_codes.hpp"
#include "driver/commands.hpp"

namespace paraxis::driver {

int plan_command(const PlanOptions& opt) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank == 0 ? evaluate_plan(opt) : exit_code::ok;
}

}  // namespace paraxis::driver
