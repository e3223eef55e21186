// `paraxis report DIR [DIR ...]`: every measured point next to the performance models'
// prediction, term by term. Predictions use only what the run calibrated before the point
// (summary.json `calibration`: fitted collectives, the shard's compute per chunk, the
// optimizer) and the analytic models (perfmodel/), never the point's own measured steps.
// Several result folders (a job array, two machines) are merged: machines side by side, weak
// and strong scaling, like with like only (the same model). Every summary.json is validated
// first (summary_reader.hpp); points that are not "ok" are listed, never analysed. Writes
// report.json and report.md atomically (io/checked_file.hpp) and plots/ (report_plots.hpp)
// into the first DIR; a failed write exits 4 naming the file, the previous file left in place.
#include <mpi.h>

#include "analysis/report_parts.hpp"
#include "config/exit_codes.hpp"
#include "driver/commands.hpp"
#include "driver/provenance.hpp"

namespace paraxis::driver {

int report_command(const std::vector<std::string>& dirs) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return exit_code::ok;
  report::Loaded in;
  if (const int rc = report::load_folders(dirs, in, blas_warning_of); rc != exit_code::ok)
    return rc;
  const report::Comparison cmp = report::compare_points(in.all);
  return report::write_report(dirs, in, cmp);
}

}  // namespace paraxis::driver
