// A run's claim on its checkpoint roots (docs/checkpoint.md, "Runs, lineages and the lock"),
// made before any point trains and before --force touches the output folder: the run's id, each
// point's lineage (a new one, or the resumed checkpoint's continued), the lock on every root the
// run will write (held until the run ends), and the refusal of a root that holds another
// lineage's checkpoints (unless --new-lineage) or that another live run holds.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/folder_lock.hpp"
#include "checkpoint/lineage.hpp"
#include "deck/deck.hpp"
#include "driver/commands.hpp"

namespace paraxis::driver {

// What a point's checkpoints record and may prune.
struct PointLineage {
  checkpoint::Lineage lineage;  // empty id: the point neither saves nor resumes
  std::string protect;          // the name of the folder resumed from, when under the root
  std::string resume;           // the resolved checkpoint folder to resume from ("": none)
};

// summary.json's point `lineage`: {id, run, parent: {run, step} | null} (null: none).
nlohmann::json lineage_json(const PointLineage& p);

struct CheckpointClaim {
  std::string run_id;
  std::vector<PointLineage> points;                            // one per deck point
  std::vector<std::unique_ptr<checkpoint::FolderLock>> locks;  // rank 0's, held to the run's end
  std::vector<std::string> notes;  // rank 0: said once (a stale lock taken over)
};

// Collective over MPI_COMM_WORLD. Rank 0 makes the claim and broadcasts it; returns "" or the
// refusal (every rank gets the same; rank 0 prints it; the run exits 2). `out_dir` is the run's
// output folder (the default checkpoint root is under it).
std::string claim_checkpoints(const Deck& deck, const std::string& out_dir, const RunOptions& opt,
                              CheckpointClaim& claim);

}  // namespace paraxis::driver
