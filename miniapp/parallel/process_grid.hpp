// The process grid: world = tp * pp * dp, expert-parallel groups (ep | dp) carved from the
// data-parallel group. Coordinates of this rank and one MPI communicator per axis, built once
// per configuration. Rank order: `tp-pp-dp` (default: tensor-parallel ranks adjacent, a chain
// of pipeline stages forms a replica, replicas outermost) or `tp-dp-pp` (Megatron-LM's).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "config/grid_coords.hpp"
#include "config/parallel_config.hpp"
#include "parallel/topology.hpp"

namespace paraxis::parallel {

// A rank's coordinates and its world rank: config/grid_coords.hpp (MPI-free, shared with the
// analysis).
using config::grid_coords_of;
using config::grid_rank_of;
using config::GridCoords;

class ProcessGrid {
 public:
  // Collective over `world`. Throws std::invalid_argument (same message on every rank) when
  // the shape breaks a grid rule (config::grid_rule_violations).
  ProcessGrid(MPI_Comm world, const config::ParallelConfig& shape);
  ~ProcessGrid();
  ProcessGrid(const ProcessGrid&) = delete;
  ProcessGrid& operator=(const ProcessGrid&) = delete;

  const config::ParallelConfig& shape() const { return shape_; }
  const GridCoords& coords() const { return coords_; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  MPI_Comm world() const { return world_; }
  MPI_Comm tp() const { return tp_; }
  MPI_Comm pp() const { return pp_; }
  MPI_Comm dp() const { return dp_; }
  MPI_Comm ep() const { return ep_; }
  MPI_Comm edp() const { return edp_; }
  // Host name of each rank of world (MPI_Get_processor_name, gathered when the grid is built;
  // over MPI_COMM_WORLD they are also recorded for world_host_names()).
  const std::vector<std::string>& host_names() const { return hosts_; }
  // The nodes of the run: emulated with ranks_per_node > 0 (hardware.ranks_per_node), else
  // from the host names.
  NodeMap nodes(int ranks_per_node) const;

 private:
  void gather_host_names();
  config::ParallelConfig shape_;  // the grid reads tp, pp, dp, ep and order
  GridCoords coords_;
  std::vector<std::string> hosts_;
  int world_rank_ = 0, world_size_ = 1;
  MPI_Comm world_, tp_ = MPI_COMM_NULL, pp_ = MPI_COMM_NULL, dp_ = MPI_COMM_NULL,
                   ep_ = MPI_COMM_NULL, edp_ = MPI_COMM_NULL;
};

}  // namespace paraxis::parallel
