// Nodes of a run and where each parallel axis lies on them (docs/diagnosis.md, "Nodes and
// emulated links"). A node map gives the node of every world rank: emulated (ranks_per_node
// consecutive world ranks per node, hardware.ranks_per_node > 0) or from the host names
// (numbered by first appearance in rank order). The topology summary counts, per axis, the
// groups whose members sit on more than one node (summary.json `topology`). Plain C++: the
// host names are gathered by the caller (ProcessGrid).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "config/parallel_config.hpp"

namespace paraxis::parallel {

struct NodeMap {
  std::vector<int> node;   // node[r]: node of world rank r, 0-based
  int ranks_per_node = 0;  // > 0: emulated nodes; 0: nodes from the host names
  int nodes() const;       // how many distinct nodes
  // Throws std::out_of_range naming the rank and the world size.
  int node_of(int world_rank) const;
  bool emulated() const { return ranks_per_node > 0; }
};

// Emulated nodes: rank / ranks_per_node (the last node may hold fewer ranks). Throws
// std::invalid_argument unless world_size > 0 and ranks_per_node > 0.
NodeMap emulated_nodes(int world_size, int ranks_per_node);
// Nodes from the host name of each world rank, numbered by first appearance in rank order.
NodeMap nodes_from_hosts(const std::vector<std::string>& hosts);

// World ranks of every group of an axis (tp, pp, dp or ep; edp and world are refused with
// std::invalid_argument), each group in group-rank order, groups in order of their first rank.
std::vector<std::vector<int>> axis_groups(const config::ParallelConfig& shape, const char* axis);

struct AxisTopology {
  int groups = 0, groups_spanning_nodes = 0;
};
struct TopologySummary {
  int nodes = 1;
  int ranks_per_node = 0;  // 0: from the host names
  bool emulated = false;
  std::array<AxisTopology, 4> axes{};  // tp, pp, dp, ep (topology_axis_names())
};
const std::array<const char*, 4>& topology_axis_names();
// Throws std::invalid_argument when the map does not cover shape.world() ranks.
TopologySummary summarize_topology(const config::ParallelConfig& shape, const NodeMap& nodes);

// The process-wide host names of MPI_COMM_WORLD's ranks, recorded by the first ProcessGrid over
// it (host names do not change during a run): the driver's results read them without
// communicating. nullptr before any grid was built.
const std::vector<std::string>* world_host_names();
void record_world_host_names(std::vector<std::string> hosts);
// The node map of a run of world_size ranks as results report it: emulated with
// ranks_per_node > 0, else from world_host_names() (one rank: one node); nullopt when the host
// names are needed and unknown (no grid over MPI_COMM_WORLD was built, or of another size).
std::optional<NodeMap> run_nodes(int world_size, int ranks_per_node);

}  // namespace paraxis::parallel
