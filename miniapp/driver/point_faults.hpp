// The failure hooks of a point: what a rank leaves for `paraxis report` when it fails, hangs or
// dies by an injected fault (diagnosis.hpp, failure_record_json), and how it ends the job.
#pragma once

#include <string>

#include "analysis/diagnosis.hpp"
#include "driver/results.hpp"

namespace paraxis::driver {

// A message, then the whole job ends with `code` (a rank cannot tell whether the others wait
// for it in a collective). Releases the checkpoint folder locks first.
[[noreturn]] void end_job(int code);

// Writes f to `dir`'s failure file of its rank; a record that cannot be written is reported.
void write_failure_record(const std::string& dir, const diagnosis::Failure& f);

// The failure record of a rank that dies in point r (kind dead_rank): the steps it completed
// and what it was doing.
diagnosis::Failure dead_rank_record(const PointResult& r, int rank, const std::string& what);

// Before point r runs on this rank: with several ranks, a watchdog expiry leaves a failure record
// (kind hang) before it ends the job; an injected death while a checkpoint or the results are
// saved leaves a dead_rank record (last_words.hpp). r must outlive the point.
void arm_failure_hooks(const std::string& dir, const PointResult& r, int rank, int world);
// After the point (returned or thrown): the watchdog's expiry ends the job as by default again.
void disarm_hang_record();

}  // namespace paraxis::driver
