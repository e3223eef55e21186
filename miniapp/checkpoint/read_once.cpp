// Reading a checkpoint once per job (read_once.hpp): who needs which saved shard (an
// allgather of shard numbers), one reader per shard, then the host's shared memory for the
// ranks of the reader's host and point-to-point sends for the others.
#include "checkpoint/read_once.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace paraxis::checkpoint {

namespace {

// Messages of at most 1 GiB (MPI counts are int); a larger shard travels in several.
constexpr std::size_t kMessage = std::size_t{1} << 30;
// Tags cycle below 32767, the smallest MPI_TAG_UB the standard allows; messages between two
// ranks with the same tag arrive in the order they were sent, which the receives follow.
int tag_of(std::size_t shard) {
  return static_cast<int>(shard % 32767);
}

// needers[s]: the ranks that named shard s, from every rank's list (allgathered).
std::vector<std::vector<int>> gather_needers(MPI_Comm comm, std::size_t shards,
                                             const std::vector<std::size_t>& needed,
                                             const WaitFunction& wait) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::vector<std::uint64_t> mine(needed.begin(), needed.end());
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
  MPI_Request r;
  MPI_Iallgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm, &r);
  wait(1, &r, "checkpoint read-once: gathering the counts of needed shards", comm);
  std::partial_sum(counts.begin(), counts.end() - 1, displs.begin() + 1);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(displs.back() + counts.back()));
  MPI_Iallgatherv(mine.data(), n, MPI_UINT64_T, all.data(), counts.data(), displs.data(),
                  MPI_UINT64_T, comm, &r);
  wait(1, &r, "checkpoint read-once: gathering the needed shards", comm);
  std::vector<std::vector<int>> needers(shards);
  for (int rank = 0; rank < size; ++rank)
    for (int i = 0; i < counts[static_cast<std::size_t>(rank)]; ++i) {
      const auto s = all[static_cast<std::size_t>(displs[static_cast<std::size_t>(rank)] + i)];
      if (s >= shards) throw std::logic_error("checkpoint read-once: shard number out of range");
      auto& v = needers[s];
      if (v.empty() || v.back() != rank) v.push_back(rank);
    }
  return needers;
}

// Every rank learns whether any failed; returns the lowest failing rank, or -1.
int first_failure(MPI_Comm comm, bool failed, const WaitFunction& wait) {
  int size = 1, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  int lowest = failed ? rank : size;
  MPI_Request r;
  MPI_Iallreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, comm, &r);
  wait(1, &r, "checkpoint read-once: agreeing on the reads", comm);
  return lowest == size ? -1 : lowest;
}

// `error` of rank `from`, on every rank.
std::string message_of(MPI_Comm comm, int from, std::string error, const WaitFunction& wait) {
  long long n = static_cast<long long>(error.size());
  MPI_Request r;
  MPI_Ibcast(&n, 1, MPI_LONG_LONG, from, comm, &r);
  wait(1, &r, "checkpoint read-once: the failed read's message", comm);
  error.resize(static_cast<std::size_t>(n));
  MPI_Ibcast(error.data(), static_cast<int>(n), MPI_CHAR, from, comm, &r);
  wait(1, &r, "checkpoint read-once: the failed read's message", comm);
  return error;
}

// Posts the transfers of `bytes` bytes at `data` to (send) or from (receive) `peer`.
void post(std::vector<MPI_Request>& requests, bool send, std::byte* data, std::size_t bytes,
          int peer, int tag, MPI_Comm comm) {
  for (std::size_t at = 0; at < bytes || (bytes == 0 && at == 0); at += kMessage) {
    const int count = static_cast<int>(std::min(kMessage, bytes - at));
    MPI_Request r;
    if (send)
      MPI_Isend(data + at, count, MPI_BYTE, peer, tag, comm, &r);
    else
      MPI_Irecv(data + at, count, MPI_BYTE, peer, tag, comm, &r);
    requests.push_back(r);
    if (bytes == 0) break;
  }
}

// The ranks of `comm` on this host (MPI_COMM_TYPE_SHARED): on_host[r] per rank of comm, and
// members[i] the comm rank of host rank i. Without sharing, this rank alone.
struct Host {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<char> on_host;
  std::vector<int> members;
  bool via_cache = false;  // the host's page cache, not a shared-memory window
};

Host host_of(MPI_Comm comm, const Reader& reader, HostShare share, const WaitFunction& wait) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  Host h;
  h.on_host.assign(static_cast<std::size_t>(size), 0);
  h.on_host[static_cast<std::size_t>(rank)] = 1;
  h.members = {rank};
  if (share == HostShare::none) return h;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &h.comm);
  int n = 1;
  MPI_Comm_size(h.comm, &n);
  h.members.resize(static_cast<std::size_t>(n));
  MPI_Request r;
  MPI_Iallgather(&rank, 1, MPI_INT, h.members.data(), 1, MPI_INT, h.comm, &r);
  wait(1, &r, "checkpoint read-once: the ranks of this host", h.comm);
  for (const int m : h.members) h.on_host[static_cast<std::size_t>(m)] = 1;
  int cache = 0;
  try {
    cache = share == HostShare::memory && reader.host_cache_readable() ? 1 : 0;
  } catch (const std::exception&) {  // the reads themselves say what is wrong
  }
  MPI_Iallreduce(MPI_IN_PLACE, &cache, 1, MPI_INT, MPI_MIN, h.comm, &r);
  wait(1, &r, "checkpoint read-once: how this host shares what it reads", h.comm);
  h.via_cache = cache == 1;
  return h;
}

// How each shard read on this host for another rank of it reaches them: through the host's page
// cache (`cached`: the others read the same bytes of the file again, from memory), or where it
// lies in the host's shared-memory window: the reader's host rank and the offset in its slice
// (owner -1: not in the window); `bytes` per host rank. `off_host`: a needer on another host.
// Every rank of the host computes the same from the same plan.
struct Layout {
  std::vector<int> owner;
  std::vector<std::size_t> offset, bytes;
  std::vector<char> cached, off_host;
};

Layout layout_of(const Host& h, const std::vector<std::vector<int>>& needers,
                 const std::vector<int>& plan, const std::vector<std::size_t>& sizes) {
  Layout l;
  l.owner.assign(plan.size(), -1);
  l.offset.assign(plan.size(), 0);
  l.bytes.assign(h.members.size(), 0);
  l.cached.assign(plan.size(), 0);
  l.off_host.assign(plan.size(), 0);
  for (std::size_t s = 0; s < plan.size(); ++s) {
    const int r = plan[s];
    for (const int n : needers[s]) l.off_host[s] |= !h.on_host[static_cast<std::size_t>(n)];
    if (r < 0 || !h.on_host[static_cast<std::size_t>(r)]) continue;
    const bool peer = std::any_of(needers[s].begin(), needers[s].end(), [&](int n) {
      return n != r && h.on_host[static_cast<std::size_t>(n)];
    });
    if (!peer) continue;
    if (h.via_cache) {
      l.cached[s] = 1;
      continue;
    }
    const auto i = static_cast<std::size_t>(std::find(h.members.begin(), h.members.end(), r) -
                                            h.members.begin());
    l.owner[s] = static_cast<int>(i);
    l.offset[s] = l.bytes[i];
    l.bytes[i] += (sizes[s] + 63) / 64 * 64;  // cache-line aligned
  }
  return l;
}

}  // namespace

std::string first_error(MPI_Comm comm, const std::string& error, const WaitFunction& wait) {
  const int failed = first_failure(comm, !error.empty(), wait);
  return failed < 0 ? "" : message_of(comm, failed, error, wait);
}

namespace {

std::vector<std::size_t> plan_of(const std::vector<int>& plan, int rank) {
  std::vector<std::size_t> out;
  for (std::size_t s = 0; s < plan.size(); ++s)
    if (plan[s] == rank) out.push_back(s);
  return out;
}

}  // namespace

std::vector<int> read_once_plan(const std::vector<std::vector<int>>& needers,
                                const std::vector<std::size_t>& shard_bytes) {
  std::vector<std::size_t> order(needers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return shard_bytes[a] > shard_bytes[b]; });
  std::vector<std::size_t> load;  // bytes assigned per rank
  std::vector<int> reader(needers.size(), -1);
  for (const std::size_t s : order) {
    int best = -1;
    for (const int r : needers[s]) {
      if (static_cast<std::size_t>(r) >= load.size()) load.resize(static_cast<std::size_t>(r) + 1);
      if (best < 0 || load[static_cast<std::size_t>(r)] < load[static_cast<std::size_t>(best)])
        best = r;
    }
    if (best < 0) continue;
    reader[s] = best;
    load[static_cast<std::size_t>(best)] += shard_bytes[s];
  }
  return reader;
}

namespace {

// The shards this rank reads now for others (or for itself twice), in file order, read and
// verified: into the host's shared-memory window, or into a buffer of their own (to send, or to
// keep; the ranks of its host then find them in the page cache). Returns this rank's error, ""
// for none.
std::string read_mine(const Reader& reader, const std::vector<std::size_t>& mine, const Layout& l,
                      const HostMemory* memory, std::vector<std::vector<std::byte>>& data,
                      ReadOnceStats& stats) {
  try {
    for (const std::size_t s : mine) {
      const auto bytes = static_cast<std::size_t>(reader.shard(s).bytes);
      if (l.owner[s] >= 0)
        reader.read_shard_into(s, memory->slice(l.owner[s]) + l.offset[s]);
      else
        data[s] = reader.read_shard(s);
      if (l.owner[s] >= 0 || l.cached[s]) stats.shared_bytes += bytes;
      stats.read_bytes += bytes;
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Where shard s's bytes are on this rank (shared memory or its own buffer).
std::byte* where(std::size_t s, const Layout& l, const HostMemory* memory,
                 std::vector<std::vector<std::byte>>& data) {
  return l.owner[s] >= 0 ? memory->slice(l.owner[s]) + l.offset[s] : data[s].data();
}

// The sends of what this rank read to the needers off its host, and the receives of what it
// needs from ranks off its host (or not sharing memory); the rest is in shared memory.
void exchange(MPI_Comm comm, const Host& h, const std::vector<std::vector<int>>& needers,
              const std::vector<int>& plan, const std::vector<std::size_t>& sizes, const Layout& l,
              const HostMemory* memory, std::vector<std::vector<std::byte>>& data,
              ReadOnceStats& stats, const WaitFunction& wait) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::vector<MPI_Request> requests;
  for (std::size_t s = 0; s < plan.size(); ++s) {
    const auto& who = needers[s];
    if (plan[s] < 0 || (plan[s] == rank && who.size() < 2) ||
        std::find(who.begin(), who.end(), rank) == who.end())
      continue;
    if (plan[s] == rank) {
      for (const int peer : who)
        if (peer != rank &&
            !((l.owner[s] >= 0 || l.cached[s]) && h.on_host[static_cast<std::size_t>(peer)])) {
          post(requests, true, where(s, l, memory, data), sizes[s], peer, tag_of(s), comm);
          stats.sent_bytes += sizes[s];
        }
    } else if (l.owner[s] < 0 && !l.cached[s]) {
      data[s].resize(sizes[s]);
      post(requests, false, data[s].data(), sizes[s], plan[s], tag_of(s), comm);
      stats.received_bytes += sizes[s];
    }
  }
  if (!requests.empty())
    wait(static_cast<int>(requests.size()), requests.data(),
         "checkpoint read-once: exchanging shards", comm);
}

}  // namespace

HostMemory::HostMemory(MPI_Comm host, std::size_t bytes) : host_(host) {
  void* base = nullptr;
  MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, MPI_INFO_NULL, host_, &base, &win_);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win_);
}

HostMemory::~HostMemory() {
  MPI_Win_unlock_all(win_);
  MPI_Win_free(&win_);
  MPI_Comm_free(&host_);
}

std::byte* HostMemory::slice(int host_rank) const {
  MPI_Aint size = 0;
  int unit = 1;
  void* base = nullptr;
  MPI_Win_shared_query(win_, host_rank, &size, &unit, &base);
  return static_cast<std::byte*>(base);
}

void HostMemory::sync() const {
  MPI_Win_sync(win_);
}

// A reading thread that gives no sign for this long (its storage hangs) is an error, not a hang
// (as Reader::in_host_cache's wait for another rank's).
constexpr auto kPlacedTimeout = std::chrono::seconds(600);

HostReads::HostReads(std::string folder, std::vector<std::size_t> shards, int* ready)
    : ready_(ready), shards_(std::move(shards)) {
  thread_ = std::thread([this, folder = std::move(folder)] {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return started_; });
    }
    run(folder, shards_);
  });
}

void HostReads::run(const std::string& folder, const std::vector<std::size_t>& shards) {
  std::size_t done = 0;
  try {
    own_ = std::make_unique<Reader>(folder);
    for (; done < shards.size(); ++done) {
      const std::size_t s = shards[done];
      if (std::byte* out = take_place(s)) {
        own_->read_shard_into(s, out);
        placed_bytes_ += static_cast<std::size_t>(own_->shard(s).bytes);
      } else {
        own_->read_for_host(s);
      }
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
      __atomic_store_n(ready_ + s, 1, __ATOMIC_RELEASE);
      changed_.notify_all();
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = e.what();
    busy_ = false;
    for (; done < shards.size(); ++done)  // nobody waits for them in vain
      __atomic_store_n(ready_ + shards[done], 2, __ATOMIC_RELEASE);
    changed_.notify_all();
  }
}

std::byte* HostReads::take_place(std::size_t s) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = places_.find(s);
  if (it == places_.end()) return nullptr;
  std::byte* out = it->second;
  places_.erase(it);
  busy_ = true;
  return out;
}

bool HostReads::place(std::size_t s, std::byte* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (started_ || places_.count(s) || std::find(shards_.begin(), shards_.end(), s) == shards_.end())
    return false;
  places_[s] = out;
  return true;
}

void HostReads::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  started_ = true;
  changed_.notify_all();
}

void HostReads::wait_placed(std::size_t s) const {
  std::unique_lock<std::mutex> lock(mutex_);
  const int* mark = ready_ + s;
  if (!changed_.wait_for(lock, kPlacedTimeout,
                         [&] { return __atomic_load_n(mark, __ATOMIC_ACQUIRE) != 0; }))
    throw std::runtime_error("checkpoint: shard " + std::to_string(s) +
                             ": this rank's reading thread gave no sign for 600 s");
  if (__atomic_load_n(mark, __ATOMIC_ACQUIRE) != 1) throw std::runtime_error(error_);
}

void HostReads::abandon() {
  std::unique_lock<std::mutex> lock(mutex_);
  places_.clear();
  changed_.wait(lock, [this] { return !busy_; });
}

HostReads::~HostReads() {
  abandon();
  start();
  if (thread_.joinable()) thread_.join();
}

std::string HostReads::finish(const Reader& reader) {
  abandon();
  start();
  if (thread_.joinable()) thread_.join();
  if (own_) reader.count(*own_);
  own_.reset();
  return error_;
}

namespace {

// The host's shared memory: the window's slices, or (through the page cache) one mark per shard
// on host rank 0, all 0 (not read yet) once every rank of the host is here; none without either.
std::unique_ptr<HostMemory> host_memory(Host& host, const Layout& l, int rank,
                                        const WaitFunction& wait) {
  const auto me = static_cast<std::size_t>(
      std::find(host.members.begin(), host.members.end(), rank) - host.members.begin());
  bool marks = false;
  for (std::size_t s = 0; s < l.cached.size(); ++s) marks |= l.cached[s] && !l.off_host[s];
  if (std::accumulate(l.bytes.begin(), l.bytes.end(), std::size_t{0}) > 0)
    return std::make_unique<HostMemory>(host.comm, l.bytes[me]);
  if (!marks) {
    if (host.comm != MPI_COMM_NULL) MPI_Comm_free(&host.comm);
    return nullptr;
  }
  const std::size_t bytes = me == 0 ? l.cached.size() * sizeof(int) : 0;
  auto m = std::make_unique<HostMemory>(host.comm, bytes);
  if (bytes > 0) std::memset(m->slice(0), 0, bytes);
  m->sync();
  MPI_Request r;
  MPI_Ibarrier(m->comm(), &r);
  wait(1, &r, "checkpoint read-once: the host's marks of read shards", m->comm());
  m->sync();
  return m;
}

}  // namespace

ReadOnce read_once(MPI_Comm comm, const Reader& reader, const std::vector<std::size_t>& needed,
                   const WaitFunction& wait, HostShare share) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::size_t shards = reader.shard_count();
  const auto needers = gather_needers(comm, shards, needed, wait);
  std::vector<std::size_t> sizes(shards);
  for (std::size_t s = 0; s < shards; ++s)
    sizes[s] = static_cast<std::size_t>(reader.shard(s).bytes);
  const std::vector<int> plan = read_once_plan(needers, sizes);
  Host host = host_of(comm, reader, share, wait);
  const Layout l = layout_of(host, needers, plan, sizes);
  ReadOnce out;
  out.memory = host_memory(host, l, rank, wait);
  int* ready =
      host.via_cache && out.memory ? reinterpret_cast<int*>(out.memory->slice(0)) : nullptr;
  // What this rank reads: the shards it was given that another rank needs too, or that it names
  // twice, in file order; those only the ranks of its host need, through the page cache, on a
  // thread (`later`) while the caller's second pass runs. The shards only it needs, once, are
  // left to the second pass, which reads them straight into the caller's buffers.
  std::vector<std::size_t> now, later;
  for (const std::size_t s : reader.in_file_order(plan_of(plan, rank))) {
    if (needers[s].size() < 2 && std::count(needed.begin(), needed.end(), s) < 2) continue;
    (ready && l.cached[s] && !l.off_host[s] ? later : now).push_back(s);
  }
  if (!later.empty()) out.reads = std::make_unique<HostReads>(reader.folder(), later, ready);
  ReadOnceStats& stats = out.stats;
  for (const std::size_t s : later) {
    stats.shared_bytes += sizes[s];
    stats.read_bytes += sizes[s];
  }
  std::vector<std::vector<std::byte>> data(shards);
  const double t0 = MPI_Wtime();
  const std::string error = read_mine(reader, now, l, out.memory.get(), data, stats);
  stats.read_s = MPI_Wtime() - t0;
  if (out.memory) out.memory->sync();
  const int failed = first_failure(comm, !error.empty(), wait);
  if (failed >= 0)  // every rank throws the reading rank's own message (the file, the tensor)
    throw std::runtime_error(message_of(comm, failed, error, wait));
  if (out.memory) out.memory->sync();  // the other ranks' reads visible here
  const double t1 = MPI_Wtime();
  exchange(comm, host, needers, plan, sizes, l, out.memory.get(), data, stats, wait);
  stats.exchange_s = MPI_Wtime() - t1;
  for (std::size_t s = 0; s < shards; ++s) {
    const bool need = std::binary_search(needed.begin(), needed.end(), s);
    if (l.owner[s] >= 0 && need)
      reader.keep_view(s, where(s, l, out.memory.get(), data));
    else if (!data[s].empty())
      reader.keep(s, std::move(data[s]));
    else if (l.cached[s] && need)
      reader.in_host_cache(s, ready && !l.off_host[s] ? ready + s : nullptr);
  }
  return out;
}

}  // namespace paraxis::checkpoint
