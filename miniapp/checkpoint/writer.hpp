// Saving a checkpoint (docs/checkpoint.md): collective over a communicator. Every rank
// constructs a Writer, adds the shards it owns (written at once to its own data file in a
// temporary folder) and calls commit(): the files are fsync'ed, the shard records gathered to
// rank 0, which checks that every tensor is covered exactly once, writes index.json last,
// renames the folder to `step-<N>`, points `latest` at it and prunes old checkpoints. Every
// rank learns the outcome: any failure on any rank makes every rank's commit throw the same
// std::runtime_error (naming the file, or the tensor whose coverage is wrong) and leaves the
// previous checkpoint and `latest` as they were. A state that is not finite is not published
// (WriterOptions::refuse_non_finite), agreed the same way. No gather of tensor data to rank 0.
#pragma once

#include <mpi.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/format.hpp"
#include "checkpoint/index.hpp"

namespace paraxis::checkpoint {

// Completes `n` requests of a collective the writer just started on `comm` (`what` names it).
// The default polls with a deadline of WriterOptions::timeout_s and, at expiry, prints which
// rank waited for what and ends the job with MPI_Abort (exit code 5, the watchdog's): a save
// never hangs. The driver passes the watchdog's wait_all to get its diagnosis instead.
using WaitFunction =
    std::function<void(int n, MPI_Request* requests, const char* what, MPI_Comm comm)>;

// The default wait: polls the requests, and once `timeout_s` has passed prints which rank waited
// for what and ends the job (MPI_Abort, exit code 5).
void default_wait(int n, MPI_Request* requests, const char* what, MPI_Comm comm, double timeout_s);

struct WriterOptions {
  int keep = 2;            // complete checkpoints of the lineage kept after a commit (>= 1)
  double timeout_s = 600;  // the default wait's deadline (> 0)
  WaitFunction wait;       // empty: the default
  Lineage lineage;         // recorded in index.json; its id decides what retention may prune
  std::string protect;     // the name of the folder the run resumed from (root_layout.hpp)
  // A state with a non-finite element (f64, f32, bf16: NaN or infinity) on any rank is not
  // published: commit() returns with `published` false, and `latest` stays as it was.
  bool refuse_non_finite = true;
};

struct Spread {
  double min = 0, mean = 0, max = 0;
};

struct SaveStats {
  std::string folder;      // the published step-<N> folder
  double write_s = 0;      // this rank: writing its data file (add) and its fsync (commit)
  double bytes = 0;        // this rank's data bytes
  Spread write_s_ranks;    // over ranks
  Spread bytes_ranks;      // over ranks
  double total_bytes = 0;  // every rank's data bytes
  double aggregate_bytes_per_s = 0;   // total_bytes / write_s_ranks.max
  double commit_s = 0;                // rank 0: gather, index, rename, latest, prune
  double total_s = 0;                 // rank 0: the Writer's construction to the end of commit
  std::vector<std::string> warnings;  // clean-up after the commit that failed (rank 0)
  bool published = true;              // false: a non-finite state, nothing published
  std::string not_published;          // why (the ranks, the tensors and the counts)
};

class Writer {
 public:
  // Collective over `comm`: rank 0 creates `<root>/step-<step>.tmp-<id>/` (and root) and every
  // rank creates its data file in it. Throws std::invalid_argument on every rank for a bad
  // step (< 0), keep (< 1), timeout or a meta that is not a JSON object, and
  // std::runtime_error on every rank when the folder cannot be created.
  Writer(MPI_Comm comm, std::string root, long step, nlohmann::json meta,
         WriterOptions options = {});
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Adds a shard this rank owns: `bytes` bytes at `data`, the shard's elements in its flat
  // order. Throws std::invalid_argument (this rank only: a caller's bug) naming the tensor when
  // the shard is invalid (format.hpp, normalized), `bytes` is not its elements times the
  // dtype's size, or this rank already added the tensor with another shape or dtype. A failed
  // write is not thrown here but by commit(), on every rank.
  // add() makes no MPI call: it may run on a thread of its own while the owner's thread goes on
  // (an asynchronous save), as long as one thread at a time adds; the constructor and commit()
  // are collective and stay on the owner's thread.
  void add(const Shard& shard, const void* data, std::size_t bytes);

  // Fsyncs and closes this rank's data file (what commit() would do first). No MPI call: an
  // asynchronous save calls it on its writing thread, so that the training thread's commit is
  // only the agreement. A failure is reported by commit(), on every rank. Optional; once.
  void sync();

  // Collective: see the top of this file. Call once.
  SaveStats commit();

  // The same commit in steps that never wait, for an asynchronous save (docs/checkpoint.md):
  // begin_commit() (after sync(), on the owner's thread) posts the gather of the shard records;
  // each poll() tests what is posted and posts the next step (the outcome's broadcast), while
  // rank 0 checks the records, writes index.json, renames the folder and points `latest` on a
  // thread of its own (no MPI call). poll() returns true once the outcome is here; commit() then
  // returns it at once (it waits only for what is left). Every rank polls in its own time: the
  // commit has a communicator of its own, so other collectives in between do not matter.
  void begin_commit();
  bool poll();
  // A Writer alone on its communicator (one rank) needs no agreement: its whole commit (the
  // record check, index.json, the rename, `latest`, the pruning) runs here without any MPI call,
  // so on any thread, e.g. an asynchronous save's writing thread right after sync(), leaving
  // nothing for the training thread; commit() then returns the outcome at once. False (nothing
  // done) with more than one rank or once a commit began.
  bool commit_alone();
  // Whether this rank's fsync and rank 0's publication ran on a thread other than the one that
  // constructed the Writer (true for an asynchronous save; known after commit()).
  bool synced_off_owner() const { return synced_off_owner_; }
  bool published_off_owner() const { return published_off_owner_; }

 private:
  enum class Phase { none, sizes, records, publishing, outcome_size, outcome, done };
  void wait(int n, MPI_Request* requests, const char* what);
  bool advance(bool block);
  bool next_request(bool block, const char* what);
  void begin(bool publish_on_thread);
  void make_piece(bool publish_on_thread);
  void start_publishing();
  std::string broadcast_string(std::string s, const char* what);
  std::string rank0_publish(const std::vector<std::string>& pieces);
  SaveStats stats_from_outcome() const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::string root_, tmp_;
  long step_ = 0;
  nlohmann::json meta_;
  WriterOptions options_;
  struct File;
  std::unique_ptr<File> file_;
  std::vector<ShardRecord> records_;
  std::string error_;              // the first write error of this rank
  std::int64_t non_finite_ = 0;    // non-finite elements this rank added
  std::string non_finite_tensor_;  // the first tensor that had one
  double write_s_ = 0, start_s_ = 0;
  bool committed_ = false;
  bool synced_ = false;
  // The commit's steps (begin_commit, poll, commit).
  Phase phase_ = Phase::none;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::string piece_, all_, outcome_;
  int piece_len_ = 0;
  long long outcome_len_ = 0;
  std::vector<int> lens_, displs_;
  std::int64_t my_bytes_ = 0;
  double commit_start_ = 0;
  std::thread publisher_;  // rank 0, an asynchronous commit: index.json, rename, latest
  std::atomic<bool> publisher_done_{false};
  bool publish_on_thread_ = false;
  std::thread::id owner_;
  bool synced_off_owner_ = false, published_off_owner_ = false;
};

}  // namespace paraxis::checkpoint
