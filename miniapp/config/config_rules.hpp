// The rules a configuration must satisfy between its keys (divisibility, grid, schedule, index
// ranges): stated once, here, and used by every caller: the deck loader (errors at each key's
// file:line), the summary reader (errors at each key's JSON path, so a results file is held to
// exactly the rules that let its points run), the process grid, the parallel trainer and the
// planner. No YAML, no JSON, no Kokkos, no MPI.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/parallel_config.hpp"
#include "model/model_config.hpp"

namespace paraxis::config {

struct RuleViolation {
  std::vector<std::string> keys;  // the key the message names first, then the others it reads
  std::string message;
};

// The grid's own rules: degrees >= 1, tp * pp * dp a possible world size and equal to `world`
// (world = 0 skips that check), ep dividing dp. What the process grid needs.
std::vector<RuleViolation> grid_rule_violations(const ParallelConfig& p, int world);

// Every rule the configuration breaks: the grid's, and what each axis, the schedule and the
// batch need of the model (checked even for axes of degree 1 where they cannot fail, so that a
// deck learns everything that is wrong with it at once).
std::vector<RuleViolation> rule_violations(const model::ModelConfig& m, const model::TrainConfig& t,
                                           const ParallelConfig& p, int world);

// Throws std::invalid_argument with every violation's first key and message, one per line;
// returns when there is none. For callers below the deck (the grid, the trainer), which see
// configurations the deck has already checked unless they are called directly.
void require_valid(const std::vector<RuleViolation>& violations);

// tp * pp * dp when it is a possible world size (fits an int), else nullopt.
std::optional<long long> grid_world(const ParallelConfig& p);

}  // namespace paraxis::config
