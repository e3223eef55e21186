// One communication call's predicted time: the one statement that both the step model
// (step_time.hpp, traffic_time: the sum over the calls step_traffic.hpp counts) and the
// per-call accounting of a run (summary.json `calls`: every call the engine recorded, predicted
// from the point's calibration) use, so that the model's communication terms are the sums of
// the same per-call predictions the run's calls get (docs/perfmodel.md, "Per-call predictions").
//
// A call is (operation, group size, nccl-tests S). Its time is the calibration's measured curve
// of that operation where the curve covers it (the same group size, S between the smallest and
// the largest size measured: linear between the two measured sizes around S), else
// collective_time with the operation's own alpha-beta fit when the calibration has one, else its
// axis's link. A single alpha-beta line through 8 B - 4 MiB misses the mid sizes a step's calls
// have by 25-50 % where MPI switches protocol or algorithm (docs/perf-log/2026-12-05-dp-bubble.md).
// The engine's operation names (parallel/comm_log.hpp) map onto the model's collectives here:
// all_to_all_v is the all-to-all; send, isend, recv and irecv are point-to-point (a receive is
// predicted the same transfer time as its send; its bytes are the sender's, counted once).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perfmodel/collectives.hpp"
#include "perfmodel/step_traffic.hpp"

namespace paraxis::perfmodel {

// One operation's calibrated cost: its alpha-beta fit and the measured curve the fit was made
// from, (S, seconds) on `curve_ranks` ranks sorted by S (empty: a fit alone).
struct OpCost : LinkCost {
  std::vector<std::pair<double, double>> curve;
  int curve_ranks = 0;
  OpCost() = default;
  OpCost(const LinkCost& fit) : LinkCost(fit) {}  // NOLINT: a fit without a curve
  OpCost(double alpha, double beta, double gamma) : LinkCost{alpha, beta, gamma} {}
};
// Costs calibrated per operation (in-run calibration): an operation listed here uses its own
// cost instead of its axis's link (MPI implements each collective its own way, so one
// alpha-beta pair per axis is a coarser model).
using OpLinks = std::map<Collective, OpCost>;
// The cost `op` uses: its own fit when `per_op` has one, else `link`.
const LinkCost& link_for(Collective op, const LinkCost& link, const OpLinks* per_op);

// The curve's time for S = `bytes` on `group` ranks (linear between the measured sizes around
// it), or nullopt when `cost` has no curve for that group size or S lies outside it.
std::optional<double> measured_call_time(const OpCost& cost, int group, double bytes);

// Seconds of one call of `op` on `group` ranks, S = `bytes`.
double call_time(Collective op, int group, double bytes, const LinkCost& link,
                 const OpLinks* per_op = nullptr,
                 AllReduceAlgorithm all_reduce = AllReduceAlgorithm::ring);

// An operation as the engine logs it, in the model's terms.
struct LoggedOp {
  Collective op = Collective::all_reduce;
  bool receive = false;  // recv / irecv: a call, its bytes the sender's
};
// False for a name the model does not describe (barrier: the engine's synchronisation, which
// a training step's traffic does not include).
bool logged_op(const std::string& name, LoggedOp* out);
// The name the accounting gives it: the collective's (to_string), or "receive".
const char* call_name(const LoggedOp& o);

// A call's time by its position in a calibrated sequence (step_traffic.hpp,
// data_parallel_call_sequence): when `calls` (every call of one step on the axis, in the order
// the log holds them; op, bytes and group compared) are the sequence's calls, the k-th of them
// takes the time of the first position not yet taken with its op, bytes and group — position k
// when the step issued the sequence in order, as it does at ZeRO 0-3 without comm.overlap (with
// it, requests may complete, and be logged, out of order: a swapped pair of calls takes each its
// own size's position). Otherwise empty: each call then takes its curve's time (call_time).
std::vector<double> sequence_call_times(const CallSequence& seq, const CallSequence& calls);

// The message-size bucket of S bytes: the largest power of two <= S (0 for S < 1).
std::uint64_t size_bucket(double bytes);

}  // namespace paraxis::perfmodel
