// The output folder of `paraxis run`: settled before the first point (the folder, the checkpoint
// roots the run claims, its provenance), and the results rewritten into it after every point.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deck/deck.hpp"
#include "driver/checkpoint_claim.hpp"
#include "driver/commands.hpp"
#include "driver/results.hpp"

namespace paraxis::driver {

// What a run settles before its first point: the output folder, the checkpoint roots it claimed
// (locks held until the run returns) and the provenance every summary records.
struct RunSetup {
  std::string dir;
  CheckpointClaim claim;
  nlohmann::json provenance;
};

// The checks before anything is written: --resume's limits, the checkpoint claim (before --force
// touches the output folder: the run's id, its lineages and the locks on the checkpoint roots it
// writes, or a refusal; checkpoint_claim.hpp), the output folder. Returns exit_code::ok or
// exit_code::bad_input, the same verdict on every rank.
int prepare_run(const Deck& deck, const RunOptions& opt, int rank, RunSetup& s);

// Rank 0 writes every result file; returns exit_code::ok or exit_code::write_failed. points.csv
// and summary.json agree whatever fails: summary.json's temporary file is written first,
// points.csv is replaced only once it is complete (and a rank dying there dies before either),
// and summary.json is renamed last, so a failed or interrupted save leaves both files as they
// were. die_during_save: fault.dead_rank at: save on rank 0.
int write_results(const std::string& dir, const Deck& deck, const nlohmann::json& provenance,
                  const std::vector<PointResult>& results, bool die_during_save);

}  // namespace paraxis::driver
