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
};

int run_command(const RunOptions& opt);
int check_command(const std::string& deck, const std::vector<std::string>& overrides);

}  // namespace paraxis::driver
