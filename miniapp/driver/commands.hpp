// The paraxis subcommands. Each returns the process exit code; MPI and Kokkos are already
// initialised by main.
#pragma once

#include <string>
#include <vector>

#include "analysis/plan.hpp"  // PlanOptions

namespace paraxis::driver {

struct RunOptions {
  std::string deck;
  std::vector<std::string> overrides;
  std::string out_dir;
  bool verify = false;
  bool force = false;        // replace earlier results in out_dir (removed first, never mixed)
  std::string resume;        // --resume: a checkpoint folder, a root or "latest" ("": none)
  bool new_lineage = false;  // --new-lineage: a new lineage beside others in checkpoint.dir
  std::string command_line;  // recorded in provenance
};

int run_command(const RunOptions& opt);
// ranks: the rank count to validate the grid against (0: skip the world-size checks).
int check_command(const std::string& deck, const std::vector<std::string>& overrides, int ranks);
// Measured against predicted for the points of one or more result folders (rank 0 writes
// report.md, report.json and plots/ into the first).
int report_command(const std::vector<std::string>& dirs);
// PlanOptions: analysis/plan.hpp.
// Every configuration of a model on a machine description, ranked by predicted step time; or,
// with a layout, that one configuration term by term.
int plan_command(const PlanOptions& opt);

}  // namespace paraxis::driver
