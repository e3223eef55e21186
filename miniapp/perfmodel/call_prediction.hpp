// One communication call's predicted time: the one statement that both the step model
// (step_time.hpp, traffic_time: the sum over the calls step_traffic.hpp counts) and the
// per-call accounting of a run (summary.json `calls`: every call the engine recorded, predicted
// from the point's calibration) use, so that the model's communication terms are the sums of
// the same per-call predictions the run's calls get (docs/perfmodel.md, "Per-call predictions").
//
// A call is (operation, group size, nccl-tests S); its time is collective_time with the
// operation's own alpha-beta fit when the calibration has one, else its axis's link. The
// engine's operation names (parallel/comm_log.hpp) map onto the model's collectives here:
// all_to_all_v is the all-to-all; send, isend, recv and irecv are point-to-point (a receive is
// predicted the same transfer time as its send; its bytes are the sender's, counted once).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "perfmodel/collectives.hpp"

namespace paraxis::perfmodel {

// Costs fitted per operation (in-run calibration): an operation listed here uses its own fit
// instead of its axis's link (MPI implements each collective its own way, so one alpha-beta
// pair per axis is a coarser model).
using OpLinks = std::map<Collective, LinkCost>;
// The cost `op` uses: its own fit when `per_op` has one, else `link`.
const LinkCost& link_for(Collective op, const LinkCost& link, const OpLinks* per_op);

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

// The message-size bucket of S bytes: the largest power of two <= S (0 for S < 1).
std::uint64_t size_bucket(double bytes);

}  // namespace paraxis::perfmodel
