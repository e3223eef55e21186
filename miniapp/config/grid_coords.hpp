// A rank's coordinates in the process grid, a pure function of the parallel configuration and
// the rank: world = tp * pp * dp, expert-parallel groups (ep | dp) carved from the data-parallel
// group. The process grid (parallel/process_grid.hpp) builds its communicators from them; the
// analysis (the diagnosis, the report's stages) reads results with them, without MPI.
// Rank order: `tp-pp-dp` (tensor-parallel ranks adjacent, a chain of pipeline stages forms a
// replica, replicas outermost) or `tp-dp-pp` (Megatron-LM's).
#pragma once

#include "config/parallel_config.hpp"

namespace paraxis::config {

struct GridCoords {
  int tp = 0, pp = 0, dp = 0, ep = 0, edp = 0;  // edp: index among ranks holding the same experts
};

// World rank of the rank at these coordinates (ep/edp are derived from dp).
int grid_rank_of(const ParallelConfig& s, int tp, int pp, int dp);
GridCoords grid_coords_of(const ParallelConfig& s, int world_rank);

}  // namespace paraxis::config
