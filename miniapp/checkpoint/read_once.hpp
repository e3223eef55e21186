// Reading a checkpoint once per job (docs/checkpoint.md, "Read once"): collective over a
// communicator. Every rank names the saved shards it will read (Reader::shards_of for each of
// its regions); a shard that several ranks need (ZeRO-0 replicas, tensors replicated over tensor
// parallelism, the whole master copies a ZeRO 1-2 rank loads) is read from storage and verified
// by one of them and given to the others: through memory the ranks of a host share to those on
// its host (the page cache: it reads the shard on a thread, HostReads, and they read the same
// bytes from the cache; else an MPI shared-memory window), over the communicator to the others.
// Afterwards each rank's Reader holds every such shard it named, or knows it is in the page cache
// (Reader::keep, keep_view, in_host_cache), so its reads make no further storage access; a shard
// only one rank needs, once, is left to that rank's own read (straight into its buffer:
// Reader::read_into).
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "checkpoint/reader.hpp"
#include "checkpoint/writer.hpp"  // WaitFunction

namespace paraxis::checkpoint {

struct ReadOnceStats {
  std::size_t read_bytes = 0;      // this rank: read from storage (and verified) for others too
  std::size_t shared_bytes = 0;    // this rank: of those, read for its host (page cache, window)
  std::size_t received_bytes = 0;  // this rank: received from the rank that read them
  std::size_t sent_bytes = 0;      // this rank: sent to ranks that need what it read
  double read_s = 0;               // this rank: reading and verifying its shards before the
                                   // second pass (its HostReads thread's run during it)
  double exchange_s = 0;           // this rank: the sends and receives
};

// Memory shared by the ranks of one host (an MPI shared-memory window) holding the shards they
// read for each other; Reader::keep_view points into it. Its end is collective over the host
// (MPI_Win_free): every rank ends its own at the same point, after Reader::forget_kept().
class HostMemory {
 public:
  HostMemory(MPI_Comm host, std::size_t bytes);  // collective over `host`, which it takes over
  ~HostMemory();
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  std::byte* slice(int host_rank) const;  // that rank's part
  void sync() const;                      // MPI_Win_sync: this rank's writes visible
  MPI_Comm comm() const { return host_; }

 private:
  MPI_Comm host_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
};

// How the ranks of a host share what one of them read: `memory`: through the host's page cache
// (the others read the same file bytes again, from memory only: preadv2 RWF_NOWAIT) where the
// file system allows it, else through a shared-memory window; `window`: always the window;
// `none`: messages only, as between hosts.
enum class HostShare { memory, window, none };

// The shards this rank reads for the ranks of its host through the page cache, read and verified
// on a thread of its own (no MPI call) while the caller's second pass runs: each shard is marked
// ready (1) or failed (2) in memory the host's ranks share, which their Readers wait for before
// taking its bytes from the page cache (Reader::in_host_cache). A shard this rank needs whole,
// once, the thread reads straight into its place in the trainer's buffer (place()), so that this
// rank neither copies nor verifies it twice; the others through a buffer of its own.
// The thread begins at start() (or finish()), after the second pass named the places.
class HostReads {
 public:
  HostReads(std::string folder, std::vector<std::size_t> shards, int* ready);
  ~HostReads();
  HostReads(const HostReads&) = delete;
  HostReads& operator=(const HostReads&) = delete;
  // Before start(): shard s, one of the thread's, goes straight into `out` (shard(s).bytes,
  // valid until wait_placed(s) or abandon() returns). False when it cannot (not the thread's,
  // placed already, or the thread began): read it as any other shard.
  bool place(std::size_t s, std::byte* out);
  void start();  // the thread begins (again: nothing)
  // Waits until placed shard s is in place, read and verified (throws the thread's message,
  // naming the file and the tensor, when it could not; or when it gives no sign for 600 s).
  void wait_placed(std::size_t s) const;
  // Forgets the places not begun (the thread reads those through its buffer) and waits for the
  // one being read into: the places may end after it returns (a load that failed).
  void abandon();
  std::size_t placed_bytes() const { return placed_bytes_; }  // read straight into place
  // Waits for the thread (begun if it was not, without places); adds its reads to `reader`'s
  // figures (Reader::count) and returns its error (the file and the tensor), "" for none.
  std::string finish(const Reader& reader);

 private:
  void run(const std::string& folder, const std::vector<std::size_t>& shards);
  std::byte* take_place(std::size_t s);  // the thread: s's place (null: none), now being read

  int* ready_;
  std::vector<std::size_t> shards_;
  std::unique_ptr<Reader> own_;  // the thread's, of the same folder
  std::string error_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::unordered_map<std::size_t, std::byte*> places_;
  bool started_ = false, busy_ = false;  // busy_: reading into a place
  std::size_t placed_bytes_ = 0;
  std::thread thread_;
};

struct ReadOnce {
  ReadOnceStats stats;
  std::unique_ptr<HostMemory> memory;  // the window, or the ready marks; null when none
  std::unique_ptr<HostReads> reads;    // null when this rank reads nothing for its host's cache
};

// Which rank reads saved shard s: needers[s] is the sorted list of ranks that need it (empty:
// nobody). Each shard goes to one of its needers, the largest shards first, each to the needer
// with the fewest bytes assigned so far (the lowest rank on a tie): every rank computes the same
// plan from the same lists. Returns the reader per shard (-1: nobody needs it).
std::vector<int> read_once_plan(const std::vector<std::vector<int>>& needers,
                                const std::vector<std::size_t>& shard_bytes);

// Collective over `comm`: the `error` of its lowest rank with one, on every rank ("" when none):
// the reading rank's own message (the file, the tensor) where others only waited for it.
std::string first_error(MPI_Comm comm, const std::string& error, const WaitFunction& wait);

// Collective over `comm` (every rank of it calls, with the same checkpoint folder open): see the
// top of this file. `needed` are this rank's shard numbers (Reader::shards_of), sorted, a shard
// it will read twice named twice (then it is read here and kept). `share`: how the ranks of a
// host (MPI_COMM_TYPE_SHARED) share what they read (HostShare). A shard
// that cannot be read or fails its checksum makes every rank throw the same std::runtime_error:
// the Reader's message on the (lowest) failing rank, naming the file and the tensor.
// `wait` completes the requests it starts (the driver's watchdog; writer.hpp). Keep the returned
// memory until the last read of the kept shards, then Reader::forget_kept(), finish the reads and
// end the memory.
ReadOnce read_once(MPI_Comm comm, const Reader& reader, const std::vector<std::size_t>& needed,
                   const WaitFunction& wait, HostShare share = HostShare::memory);

}  // namespace paraxis::checkpoint
