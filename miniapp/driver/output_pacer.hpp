// Rank 0's progress output, kept out of the timed steps (docs/performance.md, "Output inside
// the timed steps").
//
// A write to the launcher's pipe (mpiexec's and srun's forwarding of stdout) wakes the
// processes that forward it. Where the ranks occupy every core those take their time from a rank
// inside the next step, which then reaches that step's first collective late while the other
// ranks wait for it. MPICH's MPI_Init leaves stdout unbuffered, so each printf was one such write:
// four a step. So stdout is fully buffered when it is not a terminal, and the step loop flushes
// it at most once per interval: nothing is dropped, other output keeps its order, and a step
// longer than the interval is written as soon as it ends.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <utility>

namespace paraxis::driver {

// `out` fully buffered (in `buffer`) unless it is a terminal, where a person reads it line by
// line. After MPI_Init, which may have set it otherwise, and before anything is written to it.
inline void buffer_fully_unless_terminal(std::FILE* out, char* buffer, std::size_t size) {
  if (!isatty(fileno(out))) std::setvbuf(out, buffer, _IOFBF, size);
}

// Flushes `out` when a step ends and at least `interval_s` has passed since the last flush (or
// since construction), and when it goes out of scope (also by an exception).
class OutputPacer {
 public:
  using Clock = std::function<double()>;

  OutputPacer(std::FILE* out, double interval_s, Clock clock = steady)
      : out_(out), interval_s_(interval_s), clock_(std::move(clock)), last_(clock_()) {}
  OutputPacer(const OutputPacer&) = delete;
  OutputPacer& operator=(const OutputPacer&) = delete;
  ~OutputPacer() { std::fflush(out_); }

  // After each step: whether it flushed.
  bool step_done() {
    const double t = clock_();
    if (t - last_ < interval_s_) return false;
    std::fflush(out_);
    last_ = t;
    return true;
  }

  static double steady() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  std::FILE* out_;
  double interval_s_;
  Clock clock_;
  double last_;
};

}  // namespace paraxis::driver
