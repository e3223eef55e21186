// The paraxis subcommands. Each returns the process exit code; MPI and Kokkos are already
// initialised by main.
#pragma once

#include <string>
#include <vector>

namespace paraxis::driver {

struct RunOptions {
  std::string deck;
  std::vector<std::string> overrides;
  std::string out_dir;
  bool verify = false;
  std::string command_line;  // recorded in provenance
};

int run_command(const RunOptions& opt);
// ranks: the rank count to validate the grid against (0: skip the world-size checks).
int check_command(const std::string& deck, const std::vector<std::string>& overrides, int ranks);

}  // namespace paraxis::driver
