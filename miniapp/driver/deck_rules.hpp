// The rules a configuration must satisfy between its keys (divisibility, grid, schedule,
// index ranges): stated once, here, and used by the deck loader (errors at each key's
// file:line) and by the summary reader (errors at each key's JSON path), so a results file is
// held to exactly the rules that let its points run. No YAML, no JSON, no Kokkos, no MPI.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "driver/run_config.hpp"

namespace paraxis::driver {

struct RuleViolation {
  std::vector<std::string> keys;  // the key the message names first, then the others it reads
  std::string message;
};

// Every rule `c` breaks; world = 0 skips the check against the run's rank count.
std::vector<RuleViolation> config_rule_violations(const RunConfig& c, int world);

// tp * pp * dp when it is a possible world size (fits an int), else nullopt.
std::optional<long long> grid_world(const ParallelConfig& p);

}  // namespace paraxis::driver
