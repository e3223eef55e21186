// The process grid (process_grid.hpp): coordinates, the per-axis communicators, the host names.
#include "parallel/process_grid.hpp"

#include <cstring>
#include <stdexcept>
#include <vector>

#include "config/config_rules.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::parallel {

ProcessGrid::ProcessGrid(MPI_Comm world, const config::ParallelConfig& shape)
    : shape_(shape), world_(world) {
  MPI_Comm_rank(world, &world_rank_);
  MPI_Comm_size(world, &world_size_);
  config::require_valid(config::grid_rule_violations(shape, world_size_));
  coords_ = grid_coords_of(shape, world_rank_);
  const auto& c = coords_;
  const int s_tp = shape.tp, s_pp = shape.pp, s_ep = shape.ep;
  // color: what the group members share; key: their rank within the group.
  MPI_Comm_split(world, c.pp + s_pp * c.dp, c.tp, &tp_);
  MPI_Comm_split(world, c.tp + s_tp * c.dp, c.pp, &pp_);
  MPI_Comm_split(world, c.tp + s_tp * c.pp, c.dp, &dp_);
  MPI_Comm_split(world, (c.tp + s_tp * c.pp) * (shape.dp / s_ep) + c.edp, c.ep, &ep_);
  MPI_Comm_split(world, (c.tp + s_tp * c.pp) * s_ep + c.ep, c.edp, &edp_);
  gather_host_names();
}

void ProcessGrid::gather_host_names() {
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0'), all;
  int len = 0;
  MPI_Get_processor_name(mine.data(), &len);
  all.resize(mine.size() * static_cast<std::size_t>(world_size_));
  watchdog::all_gather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                       MPI_MAX_PROCESSOR_NAME, MPI_CHAR, world_, "process grid: host names");
  hosts_.clear();
  for (int r = 0; r < world_size_; ++r) {
    const char* name = all.data() + static_cast<std::size_t>(r) * mine.size();
    hosts_.emplace_back(name, strnlen(name, mine.size()));
  }
  int same = MPI_UNEQUAL;
  MPI_Comm_compare(world_, MPI_COMM_WORLD, &same);
  if (same == MPI_IDENT || same == MPI_CONGRUENT) record_world_host_names(hosts_);
}

NodeMap ProcessGrid::nodes(int ranks_per_node) const {
  return ranks_per_node > 0 ? emulated_nodes(world_size_, ranks_per_node)
                            : nodes_from_hosts(hosts_);
}

ProcessGrid::~ProcessGrid() {
  for (MPI_Comm* c : {&tp_, &pp_, &dp_, &ep_, &edp_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

}  // namespace paraxis::parallel
