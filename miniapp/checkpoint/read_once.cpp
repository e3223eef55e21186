// Reading a checkpoint once per job (read_once.hpp): who needs which saved shard (an
// allgather of shard numbers), one reader per shard, then point-to-point sends of the shards.
#include "checkpoint/read_once.hpp"

#include <algorithm>
#include <cstdint>
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

ReadOnceStats read_once(MPI_Comm comm, const Reader& reader, const std::vector<std::size_t>& needed,
                        const WaitFunction& wait) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::size_t shards = reader.shard_count();
  const auto needers = gather_needers(comm, shards, needed, wait);
  std::vector<std::size_t> sizes(shards);
  for (std::size_t s = 0; s < shards; ++s)
    sizes[s] = static_cast<std::size_t>(reader.shard(s).bytes);
  const std::vector<int> plan = read_once_plan(needers, sizes);
  ReadOnceStats stats;
  // Read (and verify) what this rank was given; one failure stops every rank before any send.
  // In file order, the kernel reading ahead of the verification (Reader::prefetch).
  std::vector<std::size_t> mine;
  for (std::size_t s = 0; s < shards; ++s)
    if (plan[s] == rank) mine.push_back(s);
  mine = reader.in_file_order(std::move(mine));
  const double t0 = MPI_Wtime();
  reader.prefetch(mine);
  std::vector<std::vector<std::byte>> data(shards);
  std::string error;
  try {
    for (const std::size_t s : mine) {
      data[s] = reader.read_shard(s);
      stats.read_bytes += data[s].size();
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  stats.read_s = MPI_Wtime() - t0;
  const int failed = first_failure(comm, !error.empty(), wait);
  if (failed >= 0)  // every rank throws the reading rank's own message (the file, the tensor)
    throw std::runtime_error(message_of(comm, failed, error, wait));
  const double t1 = MPI_Wtime();
  std::vector<MPI_Request> requests;
  for (std::size_t s = 0; s < shards; ++s) {
    const auto& who = needers[s];
    if (plan[s] < 0 || std::find(who.begin(), who.end(), rank) == who.end()) continue;
    if (plan[s] == rank) {
      for (const int peer : who)
        if (peer != rank) {
          post(requests, true, data[s].data(), data[s].size(), peer, tag_of(s), comm);
          stats.sent_bytes += data[s].size();
        }
    } else {
      data[s].resize(sizes[s]);
      post(requests, false, data[s].data(), sizes[s], plan[s], tag_of(s), comm);
      stats.received_bytes += sizes[s];
    }
  }
  if (!requests.empty())
    wait(static_cast<int>(requests.size()), requests.data(),
         "checkpoint read-once: exchanging shards", comm);
  stats.exchange_s = MPI_Wtime() - t1;
  for (std::size_t s = 0; s < shards; ++s)
    if (plan[s] >= 0 && !data[s].empty()) reader.keep(s, std::move(data[s]));
  return stats;
}

}  // namespace paraxis::checkpoint
