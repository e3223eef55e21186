// Every communication call paraxis makes leaves an event: axis, operation, logical bytes
// (the buffer size S as nccl-tests defines it for the operation), when it started and ended,
// and how long the caller was blocked in it (exposed time), and of that how long it waited for
// the group's last rank to arrive (wait, set after the step: parallel_trainer_metrics.hpp,
// attribute_waits). Aggregated per axis for results.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace paraxis::parallel {

enum class Axis { tp, pp, dp, ep, edp, world, count };
const char* to_string(Axis a);
// The axis whose to_string is `name` ("tp", ..., "world"); throws std::invalid_argument otherwise.
Axis axis_named(const std::string& name);
// recv / irecv: the other end of a send.
bool is_receive(const char* op);

struct CommEvent {
  Axis axis;
  const char* op;     // "all_reduce", "reduce_scatter", ...
  std::size_t bytes;  // nccl-tests S
  double begin, end;  // steady clock seconds: start of the call, completion
  double exposed;     // seconds the caller spent blocked (== end - begin for blocking calls)
  // Of `exposed`, the seconds spent waiting for the last rank of the group to start the same
  // collective (point-to-point: the exposed time). 0 until attribute_waits sets it.
  double wait = 0;
  // Ranks of the communicator that made the call (a call's own group: expert units' data
  // parallelism runs over dp / ep ranks): what its predicted time (perfmodel/call_prediction)
  // depends on besides the operation and the bytes.
  int ranks = 0;
};

struct AxisTotals {
  double time_s = 0, exposed_s = 0;
  std::size_t bytes = 0;
  long calls = 0;
};

// An interval in which the caller was blocked in a communication call. A non-blocking
// request's exposed time is the sum of several (its start, each test, its wait), which may lie
// in different phases of the step: a dp all-reduce started in the backward and waited for
// after it is exposed after the backward, not in it.
struct BlockedInterval {
  double begin, end;
};

class CommLog {
 public:
  void add(const CommEvent& e) { events_.push_back(e); }
  void add_blocked(double begin, double end) {
    if (end > begin) blocked_.push_back({begin, end});
  }
  // Seconds of [begin, end) in which the caller was blocked in a call.
  double blocked_within(double begin, double end) const;
  const std::vector<CommEvent>& events() const { return events_; }
  // For attributing waits after the step (CommEvent::wait); the events themselves stay.
  std::vector<CommEvent>& events() { return events_; }
  std::vector<CommEvent> take() { return std::move(events_); }
  void clear() {
    events_.clear();
    blocked_.clear();
  }
  // Totals per axis of the recorded events (edp is reported under dp). Bytes: what this rank
  // sent; receives are recorded (their time, their size in the trace) but not added again.
  std::array<AxisTotals, static_cast<std::size_t>(Axis::count)> totals() const;

 private:
  std::vector<CommEvent> events_;
  std::vector<BlockedInterval> blocked_;
};

}  // namespace paraxis::parallel
