// Checkpoints of a point's training state (docs/checkpoint.md): where they go, writing one
// after a step (every rank its own pieces, checkpoint::Writer), and resuming from one
// (checkpoint::Reader, any layout), with the figures summary.json records.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "checkpoint/read_once.hpp"
#include "checkpoint/reader.hpp"
#include "deck/run_config.hpp"
#include "driver/checkpoint_claim.hpp"
#include "model/trainer.hpp"

namespace paraxis::driver {

// A checkpoint that cannot be written or resumed from, agreed on every rank (so the job need not
// be aborted): the message names the file, tensor or key; exit_code is what `paraxis run` exits
// with (2: a resume refused, 4: a save that failed; docs/results.md).
struct CheckpointError : std::runtime_error {
  CheckpointError(const std::string& what, int code, bool report)
      : std::runtime_error(what), exit_code(code), report(report) {}
  int exit_code;
  bool report;  // this rank prints the message (one rank does)
};

// The checkpoint root of point `index` of `total`: checkpoint.dir, else <out>/checkpoints; a
// sweep gets one root per point (<root>/point-<index>).
std::string checkpoint_root(const RunConfig& cfg, const std::string& out_dir, std::size_t index,
                            std::size_t total);

// One checkpoint, <root>/step-<steps> (checkpoint.keep kept), being written (collective over
// MPI_COMM_WORLD: construction and finish()). The constructor opens it and writes this rank's
// pieces (synchronous), or copies them into host memory and starts a thread that writes them
// and fsyncs the file while training goes on (async: checkpoint.async). poll(), at every step's
// end, never waits and makes no collective call on MPI_COMM_WORLD: once the thread is done it
// begins the commit (checkpoint::Writer::begin_commit: its own communicator; rank 0 publishes on
// a thread) and advances it. finish(), collective, at the same point on every rank (the next
// save, the point's end), waits for what is left and returns the save's figures: {step, folder,
// async, bytes, write_s and exposed_s (what training stalled for: a synchronous save's whole
// time; an asynchronous one's staging, polls and the wait in finish) {min, mean, max} per rank,
// total_bytes, aggregate_bytes_per_s, total_s}, for an asynchronous save also staged_bytes (the
// extra host memory), staging_s, poll_s, join_wait_s, commit_wait_s, async_can_hide and
// commit_off_training_thread (every rank's fsync and rank 0's publication ran off the thread
// that trains).
class CheckpointSave {
 public:
  CheckpointSave(const RunConfig& cfg, const model::Trainer& trainer, const std::string& root,
                 const PointLineage& lineage, int steps, bool async);
  ~CheckpointSave();
  CheckpointSave(const CheckpointSave&) = delete;
  CheckpointSave& operator=(const CheckpointSave&) = delete;
  void poll();
  // Collective over MPI_COMM_WORLD (one small all-reduce): whether every rank's commit is done,
  // so that finish() would not wait. A synchronous save: true.
  bool committed_everywhere() const;
  nlohmann::json finish();
  struct Impl;  // point_checkpoint.cpp

 private:
  std::unique_ptr<Impl> impl_;
};

// Collective: the plain-I/O baseline of a save (docs/checkpoint.md, "Cost"), taken away from
// the save (at the end of the point): `trials` times, every rank writes the save's largest
// per-rank byte count to a fresh file in `root` (8 MiB writes, fsync), drops its pages, reads it
// back and removes it. The median trial's {write_s, read_s {min, mean, max}}, trials,
// write_s_trials (each trial's slowest write), write_bytes_per_s and
// checkpoint_to_baseline_write (the baseline's slowest write over the save's).
nlohmann::json io_baseline(const std::string& root, const nlohmann::json& save, int trials);

// checkpoint.every: auto, collective: from a save's figures (its stalled time, the cost C), this
// rank's step time (the slowest rank's is used) and the failure rate (checkpoint.device_mtbf_h,
// else Llama 3's) for `world` ranks: {checkpoint_s, step_s, system_mtbf_s, daly_interval_s,
// every}, every = Daly's interval in steps, rounded, at least 1.
nlohmann::json auto_cadence(const RunConfig& cfg, const nlohmann::json& save, double step_s,
                            int world);
// Rank 0 prints the cadence auto_cadence chose (one line).
void say_auto_cadence(const nlohmann::json& cadence, int rank);

// Collective over MPI_COMM_WORLD: loads this rank's pieces of an open checkpoint into the
// trainer (its step count set to the checkpoint's) under the read-once rule (docs/checkpoint.md):
// on several ranks each saved shard is read from storage by one rank that needs it and given to
// the others (`share`: through the host's memory, else messages, read_once.hpp). Returns
// {received_bytes, sent_bytes, shared_bytes, needs_s, read_s, exchange_s, assemble_s} per rank
// {min, mean, max} (null on one rank). Throws CheckpointError (exit code 2) on every rank.
nlohmann::json load_pieces(const checkpoint::Reader& reader, model::Trainer& trainer,
                           checkpoint::HostShare share = checkpoint::HostShare::memory);

// Collective over MPI_COMM_WORLD: resolves `where` (a step folder, a root, or "latest": the
// newest complete checkpoint under this point's root), refuses a checkpoint whose configuration
// this run may not continue (resume_keys.hpp: naming the key and both values; rank 0 warns of
// the changes it may), and loads this rank's pieces into the trainer. Returns {folder, step,
// read_s {min, mean, max}, bytes {min, mean, max}, saved_grid, changed {key: {checkpoint, now,
// change}}}. Throws CheckpointError (exit code 2, on every rank) naming the file, tensor or key.
nlohmann::json load_checkpoint(const RunConfig& cfg, model::Trainer& trainer,
                               const std::string& where, const std::string& root);

}  // namespace paraxis::driver
