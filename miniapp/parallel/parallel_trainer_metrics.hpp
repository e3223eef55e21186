// The metrics of one step of the parallel trainer (parallel_trainer.cpp): what this rank's
// micro-batches add up to (StepTally), and the step's loss, MoE statistics and routing record
// reduced over the grid so every rank holds the single-rank run's figures (finish_step_metrics);
// the wait time of every collective of the step (attribute_waits, with the clock offsets of
// estimate_clock_offset; docs/diagnosis.md, "Wait time").
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "model/gpt_model.hpp"
#include "model/trainer.hpp"
#include "parallel/communicator.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::parallel {

// Sums over this rank's micro-batches of one step.
struct StepTally {
  explicit StepTally(int experts = 0)
      : expert_tokens(static_cast<std::size_t>(experts), 0),
        expert_dropped(static_cast<std::size_t>(experts), 0) {}
  // head: this rank holds the last model chunk (the loss).
  void add(const model::MicroBatchResult& mr, int global_mb, bool head);
  double ce_sum = 0, aux_sum = 0;
  std::vector<long long> expert_tokens, expert_dropped;
  std::vector<int> routing;  // records: global micro-batch, layer, n, n choices
};

// Every rank's `mine` over `world`, concatenated in rank order (lengths may differ), through
// the watchdog.
template <class V>
std::vector<V> all_gather_v(const std::vector<V>& mine, MPI_Datatype type, MPI_Comm world_comm) {
  int world = 1;
  MPI_Comm_size(world_comm, &world);
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(world), displs(world, 0);
  watchdog::all_gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, world_comm,
                       "all_gather (counts)");
  for (int k = 1; k < world; ++k) displs[k] = displs[k - 1] + counts[k - 1];
  std::vector<V> all(static_cast<std::size_t>(displs[world - 1] + counts[world - 1]));
  watchdog::all_gather_v(mine.data(), n, type, all.data(), counts.data(), displs.data(), type,
                         world_comm, "all_gather_v (parameters / routing)");
  return all;
}

// The loss of the whole global batch and the MoE statistics, the same on every rank: each
// quantity summed over the ranks that own it once (`counts`: this rank is tensor-parallel rank 0;
// the loss from the last pipeline stage), through `metrics` (a communicator over `world`). With
// record_routing (MoE), r.routing: every rank's routing in single-rank order (micro-batch, then
// layer). Collective over `world`.
void finish_step_metrics(const StepTally& tally, bool counts, const model::ModelConfig& mcfg,
                         const model::TrainConfig& tcfg, bool record_routing, Communicator& metrics,
                         MPI_Comm world, model::StepResult& r);

// This rank's clock against world rank 0's: rank 0's steady clock reads local + offset_s.
struct ClockOffset {
  double offset_s = 0;
  double accuracy_s = 0;  // |error| <= accuracy_s: half the best round trip (0: not measured)
  bool measured = false;  // false: on rank 0's host, whose steady clock every rank there shares
};

// Collective over `world`. Ranks on world rank 0's host (MPI_Get_processor_name) share its steady
// clock: offset 0, nothing measured. Every other rank (every rank but 0 with always_measure)
// runs `rounds` ping-pongs with rank 0 (Cristian's method): it sends at t0, rank 0 answers with
// its clock T, the answer arrives at t1; the round with the shortest t1 - t0 gives offset
// T - (t0 + t1) / 2, exact within (t1 - t0) / 2 because T was read between t0 and t1. Through
// the watchdog; throws std::invalid_argument for rounds < 1. `clock` is the clock each rank
// reads (steady_now; a test gives a rank a skewed one to check the estimate's sign).
using Clock = double (*)();
ClockOffset estimate_clock_offset(MPI_Comm world, bool always_measure = false, int rounds = 8,
                                  Clock clock = steady_now);

// Sets CommEvent::wait of this step's events of `c` in `log` (the events of c's axis):
// point-to-point transfers are charged their exposed time; collectives their arrival wait
// (collective_wait.hpp: every rank's start times, gathered over c's group in start order and
// moved to rank 0's clock by `offset_s`, this rank's ClockOffset), at most their exposed time.
// Collective over c's group (size 1: nothing, no call). Returns "" or, when the group's ranks
// recorded different numbers of collectives (the i-th would not be the same operation
// everywhere), a note naming the axis and the counts; their waits then stay 0.
std::string attribute_waits(CommLog& log, Communicator& c, double offset_s);

}  // namespace paraxis::parallel
