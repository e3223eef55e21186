// The step metrics of the parallel trainer (parallel_trainer_metrics.hpp).
#include "parallel/parallel_trainer_metrics.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <stdexcept>

#include "parallel/collective_wait.hpp"

namespace paraxis::parallel {

void StepTally::add(const model::MicroBatchResult& mr, int global_mb, bool head) {
  if (head) ce_sum += mr.ce_sum;
  aux_sum += mr.aux_sum;
  for (const auto& st : mr.moe) {
    for (std::size_t e = 0; e < expert_tokens.size(); ++e) {
      expert_tokens[e] += st.tokens_per_expert[e];
      expert_dropped[e] += st.dropped_per_expert[e];
    }
    if (!st.routing.empty()) {
      routing.push_back(global_mb);
      routing.push_back(st.layer);
      routing.push_back(static_cast<int>(st.routing.size()));
      routing.insert(routing.end(), st.routing.begin(), st.routing.end());
    }
  }
}

void finish_step_metrics(const StepTally& tally, bool counts, const model::ModelConfig& mcfg,
                         const model::TrainConfig& tcfg, bool record_routing, Communicator& metrics,
                         MPI_Comm world, model::StepResult& r) {
  double sums[2] = {counts ? tally.ce_sum : 0.0, counts ? tally.aux_sum : 0.0};
  std::vector<long long> moe = tally.expert_tokens;  // then the dropped, per expert
  moe.insert(moe.end(), tally.expert_dropped.begin(), tally.expert_dropped.end());
  if (!counts) std::fill(moe.begin(), moe.end(), 0);
  metrics.all_reduce(sums, sums, 2, DType::f64);
  metrics.all_reduce(moe.data(), moe.data(), moe.size(), DType::i64);
  if (record_routing && mcfg.moe.experts > 0) {
    // Records of every rank, in single-rank order: micro-batch, then layer.
    const auto all = all_gather_v(counts ? tally.routing : std::vector<int>{}, MPI_INT, world);
    std::map<std::pair<int, int>, std::pair<std::size_t, int>> order;
    for (std::size_t k = 0; k < all.size(); k += 3 + static_cast<std::size_t>(all[k + 2]))
      order[{all[k], all[k + 1]}] = {k + 3, all[k + 2]};
    for (const auto& [key, where] : order)
      r.routing.insert(r.routing.end(), all.begin() + static_cast<std::ptrdiff_t>(where.first),
                       all.begin() + static_cast<std::ptrdiff_t>(where.first + where.second));
  }
  model::set_losses(mcfg, tcfg, sums[0], sums[1], r);
  const int E = mcfg.moe.experts;
  if (E > 0) {
    r.moe = model::moe_step_stats(std::vector<long long>(moe.begin(), moe.begin() + E),
                                  std::vector<long long>(moe.begin() + E, moe.end()));
  }
}

namespace {
bool point_to_point(const char* op) {
  return is_receive(op) || std::strcmp(op, "send") == 0 || std::strcmp(op, "isend") == 0;
}
// Who measures, one flag per rank: the ranks that are not on rank 0's host (with always_measure:
// all but 0). Collective over world.
std::vector<int> clock_measuring_ranks(MPI_Comm world, int rank, int size, bool always_measure) {
  char host[MPI_MAX_PROCESSOR_NAME + 1] = {}, host0[MPI_MAX_PROCESSOR_NAME + 1] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  std::memcpy(host0, host, sizeof host);
  watchdog::broadcast(host0, MPI_MAX_PROCESSOR_NAME + 1, MPI_CHAR, 0, world,
                      "broadcast (clock offset: rank 0's host)");
  int mine = rank != 0 && (always_measure || std::strcmp(host, host0) != 0) ? 1 : 0;
  std::vector<int> measures(static_cast<std::size_t>(size), 0);
  watchdog::all_gather(&mine, 1, MPI_INT, measures.data(), 1, MPI_INT, world,
                       "all_gather (clock offset: who measures)");
  return measures;
}

constexpr int clock_ping_tag = 17;

// Rank 0: serve the measuring ranks one after the other: each round, a ping, then rank 0's clock.
void serve_clock_pings(MPI_Comm pc, const std::vector<int>& measures, int rounds, Clock clock) {
  const int size = static_cast<int>(measures.size());
  for (int k = 1; k < size; ++k) {
    if (!measures[static_cast<std::size_t>(k)]) continue;
    for (int i = 0; i < rounds; ++i) {
      char ping = 0;
      MPI_Request rq;
      MPI_Irecv(&ping, 1, MPI_CHAR, k, clock_ping_tag, pc, &rq);
      watchdog::Wait w;
      w.op = "recv (clock offset ping)";
      w.axis = "world";
      w.comm = pc;
      w.peer = k;
      watchdog::wait_all(1, &rq, w);
      double t = clock();
      MPI_Isend(&t, 1, MPI_DOUBLE, k, clock_ping_tag, pc, &rq);
      w.op = "send (clock offset answer)";
      watchdog::wait_all(1, &rq, w);
    }
  }
}

// A measuring rank: rounds ping-pongs with rank 0; the offset from the one with the shortest
// round trip.
ClockOffset ping_clock_root(MPI_Comm pc, int rounds, Clock clock) {
  ClockOffset out;
  double best_rtt = -1;
  for (int i = 0; i < rounds; ++i) {
    char ping = 1;
    double t_root = 0;
    MPI_Request rq[2];
    MPI_Irecv(&t_root, 1, MPI_DOUBLE, 0, clock_ping_tag, pc, &rq[1]);
    const double t0 = clock();
    MPI_Isend(&ping, 1, MPI_CHAR, 0, clock_ping_tag, pc, &rq[0]);
    watchdog::Wait w;
    w.op = "recv (clock offset answer)";
    w.axis = "world";
    w.comm = pc;
    w.peer = 0;
    watchdog::wait_all(2, rq, w);
    const double t1 = clock();
    if (best_rtt < 0 || t1 - t0 < best_rtt) {
      best_rtt = t1 - t0;
      out.offset_s = t_root - 0.5 * (t0 + t1);
      out.accuracy_s = 0.5 * best_rtt;
    }
  }
  out.measured = true;
  return out;
}
}  // namespace

ClockOffset estimate_clock_offset(MPI_Comm world, bool always_measure, int rounds, Clock clock) {
  if (rounds < 1)
    throw std::invalid_argument("estimate_clock_offset: rounds " + std::to_string(rounds) +
                                " (expected >= 1)");
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  const std::vector<int> measures = clock_measuring_ranks(world, rank, size, always_measure);
  ClockOffset out;
  if (std::accumulate(measures.begin(), measures.end(), 0) == 0) return out;
  // A communicator of its own: the ping-pongs' tags cannot meet any other message.
  MPI_Comm pc = MPI_COMM_NULL;
  MPI_Comm_dup(world, &pc);
  if (rank == 0)
    serve_clock_pings(pc, measures, rounds, clock);
  else if (measures[static_cast<std::size_t>(rank)])
    out = ping_clock_root(pc, rounds, clock);
  MPI_Comm_free(&pc);
  return out;
}

std::string attribute_waits(CommLog& log, Communicator& c, double offset_s) {
  if (c.size() <= 1) return "";
  auto& ev = log.events();
  // This communicator's collectives in start order: every member starts them in the same order
  // (MPI's rule), even when non-blocking ones complete, and are recorded, in another.
  std::vector<std::size_t> mine;
  for (std::size_t k = 0; k < ev.size(); ++k) {
    if (ev[k].axis != c.axis()) continue;
    if (point_to_point(ev[k].op))
      ev[k].wait = ev[k].exposed;
    else
      mine.push_back(k);
  }
  std::stable_sort(mine.begin(), mine.end(),
                   [&](std::size_t a, std::size_t b) { return ev[a].begin < ev[b].begin; });
  const MPI_Comm comm = c.mpi_comm();
  const char* axis = to_string(c.axis());
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(c.size()), 0);
  watchdog::all_gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm,
                       "all_gather (wait time: collectives per rank)", axis);
  if (std::any_of(counts.begin(), counts.end(), [&](int x) { return x != n; })) {
    std::string note = std::string("comm.") + axis +
                       ": the group's ranks recorded different numbers of collectives this step (";
    for (std::size_t r = 0; r < counts.size(); ++r)
      note += (r ? ", " : "") + std::to_string(counts[r]);
    return note + " by group rank); their wait time is not attributed";
  }
  if (n == 0) return "";
  std::vector<double> begins(mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) begins[i] = ev[mine[i]].begin + offset_s;
  std::vector<double> all(begins.size() * counts.size());
  watchdog::all_gather(begins.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, comm,
                       "all_gather (wait time: start times)", axis);
  std::vector<std::vector<double>> per_rank(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r)
    per_rank[r].assign(all.begin() + static_cast<std::ptrdiff_t>(r * mine.size()),
                       all.begin() + static_cast<std::ptrdiff_t>((r + 1) * mine.size()));
  // Already on rank 0's clock: no further offsets.
  const auto waits = arrival_waits(per_rank, std::vector<double>(counts.size(), 0.0));
  const auto& row = waits[static_cast<std::size_t>(c.rank())];
  for (std::size_t i = 0; i < mine.size(); ++i)
    ev[mine[i]].wait = charged_wait(row[i], ev[mine[i]].exposed);
  return "";
}

}  // namespace paraxis::parallel
