// A slowed axis's links measured once, when its communicator is created (fault.slow_axis,
// docs/sensitivity.md): the group's first two members ping-pong a small message and 1 MiB, the
// fastest of a few rounds each, and the group agrees on the figures (all-reduce MAX), so that
// every member adds the same time to every operation and no operation's own timing feeds back
// into the delay. The figures of this process's communicators are also kept, per axis, for the
// point's summary (the report models the slowdown from them).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <map>
#include <string>

#include "parallel/link_emulation.hpp"

namespace paraxis::parallel {

// Collective over comm (size >= 2): alpha_s = the fastest half round trip of an 8-byte
// message; bytes_per_s = 1 MiB / (the fastest half round trip of 1 MiB - alpha_s).
MeasuredLink measure_group_link(MPI_Comm comm, const char* axis);

// The fastest half round trip of `bytes` between group ranks a and b over `rounds` ping-pongs
// (0 on the other members), every wait under the watchdog as `what` on `axis`: how the slow
// axis and the slow link (communicator.cpp) measure a link.
double fastest_half_round_trip(MPI_Comm comm, int me, int a, int b, std::size_t bytes, int rounds,
                               const char* axis, const char* what);

// The measured links of this process's slowed communicators, by axis name ("tp", "pp", "dp",
// "ep", "edp"); the driver clears them before a point and reads them after it.
void note_measured_link(const std::string& axis, const MeasuredLink& link);
std::map<std::string, MeasuredLink> measured_links();
void clear_measured_links();

}  // namespace paraxis::parallel
