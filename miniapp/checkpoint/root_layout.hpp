// The checkpoint root folder (docs/checkpoint.md, "Format"): complete checkpoints `step-<N>`
// (their index.json exists: it is written last), folders being written `step-<N>.tmp-<id>`,
// and the `latest` pointer. Publishing a written folder, finding the newest complete one and
// pruning old ones live here, so that the writer and the reader agree on what "complete" and
// "latest" mean.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace paraxis::checkpoint {

inline constexpr const char* kIndexFile = "index.json";
inline constexpr const char* kLatestFile = "latest";

std::string step_folder_name(long step);  // "step-<N>"
// "step-<N>" or "step-<N>-<tag>" (a lineage saved beside another's step-<N>: publish) -> N,
// else none.
std::optional<long> step_of_folder_name(const std::string&);
std::string data_file_name(int rank);  // "rank-<R>.bin"

// Complete checkpoints under root (step folders holding index.json), by increasing step.
struct StepFolder {
  long step = 0;
  std::string path;
};
std::vector<StepFolder> complete_checkpoints(const std::string& root);

// Which checkpoints a commit may prune (lineage.hpp, retention_victims).
struct Retention {
  int keep = 2;            // checkpoints of the lineage kept (>= 1)
  std::string lineage_id;  // "": a writer that tracks no runs
  std::string protect;     // the name of the folder the run resumed from, kept until a newer one
};

// Moves the written folder `tmp` (its files and index.json synced) to `<root>/step-<step>`, or to
// `<root>/step-<step>-<tag>` when `step-<step>` is another lineage's (lineage_tag): a checkpoint
// of the same lineage and name is renamed aside first and removed after. Syncs the root, points
// `latest` at it (io::write_file_checked) and then removes leftover `step-*.tmp-*` folders and
// the retention's victims (lineage.hpp). Throws std::runtime_error naming the path; before
// `latest` is written the previous checkpoint and `latest` are intact. Returns the published
// folder; failures of the clean-up after `latest` is written do not undo the commit: they are
// appended to `warnings`.
std::string publish(const std::string& root, const std::string& tmp, long step,
                    const Retention& retention, std::vector<std::string>& warnings);

// A name for the folder a save writes into: "step-<N>.tmp-<pid>-<counter>-<clock>".
std::string temporary_folder_name(long step);

// The folder a resume reads (Reader::resolve, reader.hpp).
std::string resolve_checkpoint(const std::string& root_or_folder_or_latest);

}  // namespace paraxis::checkpoint
