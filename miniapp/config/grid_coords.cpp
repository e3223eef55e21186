// A rank's coordinates in the process grid (grid_coords.hpp).
#include "config/grid_coords.hpp"

namespace paraxis::config {

int grid_rank_of(const ParallelConfig& s, int tp, int pp, int dp) {
  if (s.order == RankOrder::tp_dp_pp) return tp + s.tp * (dp + s.dp * pp);
  return tp + s.tp * (pp + s.pp * dp);  // tp-pp-dp
}

GridCoords grid_coords_of(const ParallelConfig& s, int r) {
  GridCoords c;
  c.tp = r % s.tp;
  const int rest = r / s.tp;
  if (s.order == RankOrder::tp_dp_pp) {
    c.dp = rest % s.dp;
    c.pp = rest / s.dp;
  } else {
    c.pp = rest % s.pp;
    c.dp = rest / s.pp;
  }
  // Expert-parallel groups: ep consecutive data-parallel ranks share one copy of the experts
  // split ep ways; edp indexes the copies.
  c.ep = c.dp % s.ep;
  c.edp = c.dp / s.ep;
  return c;
}

}  // namespace paraxis::config
