// Runs and lineages of checkpoints (docs/checkpoint.md, "Runs, lineages and the lock"). Every run
// has an id; a lineage is the linear history of checkpoints that one run starts and its resumed
// runs continue (a run that resumes records its parent: the run and step it continued from). A
// checkpoint root may hold several lineages (a run started beside another with --new-lineage),
// but a run only ever prunes, or falls back to, its own lineage's checkpoints. The rules here
// are pure functions over what a root holds, so they are tested without MPI or a file system.
#pragma once

#include <string>
#include <vector>

namespace paraxis::checkpoint {

// What index.json records of the run that wrote a checkpoint (index.hpp declares the keys).
struct Lineage {
  std::string id;          // the lineage: the id of the run that started it
  std::string run;         // the run that wrote the checkpoint
  std::string parent_run;  // the run it resumed from ("": it started the lineage from scratch,
                           // or resumed a checkpoint written before lineages were recorded)
  long parent_step = -1;   // the step it resumed from (-1: not resumed)
};

// A new run id: the UTC time and 32 random bits, "20261205T001512Z-3fa9c2d1" (unique across
// hosts without coordination; sortable by start time).
std::string new_run_id();

// The short form of a lineage id that tells its checkpoint folders apart from another lineage's
// of the same step (its last 8 characters): "step-6-3fa9c2d1".
std::string lineage_tag(const std::string& lineage_id);

// A complete checkpoint under a root, with its lineage (an empty id: none recorded, as in
// index.json format version 1, or by a writer that tracks no runs).
struct CheckpointRecord {
  long step = 0;
  std::string path;
  Lineage lineage;
  std::string problem;  // its index.json could not be read (the reason): never pruned
};

// The complete checkpoints under `root` (root_layout.hpp, complete_checkpoints) with the lineage
// their index.json records, by increasing step. Throws std::runtime_error naming an index that
// cannot be read.
std::vector<CheckpointRecord> lineage_records(const std::string& root);

// The history a run continues: its lineage, and the step it resumed from (-1: none).
struct RunHistory {
  std::string lineage_id;
  long resumed_step = -1;
};

// The checkpoints under a root that a run may not write beside: its own lineage's after the step
// it resumes from (a branch it would otherwise write over), and, unless its lineage already has
// checkpoints in the root (it was started there, beside them, with --new-lineage), every other
// lineage's, one without a lineage, or one whose index cannot be read. Empty: the run may use
// the root.
std::vector<CheckpointRecord> foreign_checkpoints(const std::vector<CheckpointRecord>& all,
                                                  const RunHistory& run);

// Retention after a commit: the folders to remove so that `keep` checkpoints of `lineage_id`
// remain, the newest by step (`published`, a path, always among them). Only that lineage's
// checkpoints are counted or removed, never another's, one without a lineage (unless
// lineage_id is empty: a writer that tracks no runs) or one whose index cannot be read;
// `protect` (the name of the folder the run resumed from, "" for none) is kept until a newer
// checkpoint of the lineage than it is committed.
std::vector<std::string> retention_victims(const std::vector<CheckpointRecord>& all,
                                           const std::string& lineage_id,
                                           const std::string& published, int keep,
                                           const std::string& protect);

// One line about a checkpoint for a message: "step-6 (run 2026...-3fa9c2d1, lineage ...)".
std::string describe(const CheckpointRecord& r);

}  // namespace paraxis::checkpoint
