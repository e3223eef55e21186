// A rank that is about to die leaves its failure record first, whatever it was doing (issue 29):
// the driver registers, for the point that runs, how this rank's record is written
// (diagnosis::Failure, kind dead_rank); an injected death (fault.dead_rank while the results or a
// checkpoint are saved) calls die_leaving_record, which writes it and kills the process, so that
// `paraxis report` can say what happened even when the job ends before any summary.json.
#pragma once

#include <functional>
#include <string>

namespace paraxis::driver {

// writer(what, step): writes this rank's record of dying at `step` (completed steps) for `what`.
// An empty function: no record (outside a point, or a run of one rank that records its points).
void set_last_words(std::function<void(const std::string& what, int step)> writer);

// Prints "paraxis: rank R dies while <doing> (fault.dead_rank)", leaves the record (if a writer
// is set), then raises SIGKILL: the rank dies as a killed process would.
[[noreturn]] void die_leaving_record(int rank, const std::string& doing, int step);

}  // namespace paraxis::driver
