// Node maps and the per-axis topology summary (topology.hpp).
#include "parallel/topology.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "parallel/process_grid.hpp"

namespace paraxis::parallel {

int NodeMap::nodes() const {
  return node.empty() ? 0 : *std::max_element(node.begin(), node.end()) + 1;
}

int NodeMap::node_of(int r) const {
  if (r < 0 || r >= static_cast<int>(node.size()))
    throw std::out_of_range("node_of: world rank " + std::to_string(r) + " is not in a run of " +
                            std::to_string(node.size()) + " ranks");
  return node[static_cast<std::size_t>(r)];
}

NodeMap emulated_nodes(int world_size, int ranks_per_node) {
  if (world_size <= 0 || ranks_per_node <= 0)
    throw std::invalid_argument("emulated_nodes: world size " + std::to_string(world_size) +
                                " and hardware.ranks_per_node " + std::to_string(ranks_per_node) +
                                " must both be > 0");
  NodeMap m;
  m.ranks_per_node = ranks_per_node;
  for (int r = 0; r < world_size; ++r) m.node.push_back(r / ranks_per_node);
  return m;
}

NodeMap nodes_from_hosts(const std::vector<std::string>& hosts) {
  NodeMap m;
  std::map<std::string, int> index;
  for (const auto& h : hosts) {
    auto it = index.emplace(h, static_cast<int>(index.size())).first;
    m.node.push_back(it->second);
  }
  return m;
}

std::vector<std::vector<int>> axis_groups(const config::ParallelConfig& s, const char* axis) {
  const std::string a = axis;
  if (a != "tp" && a != "pp" && a != "dp" && a != "ep")
    throw std::invalid_argument("axis_groups: axis '" + a + "' is not one of tp, pp, dp, ep");
  // A group: the ranks that share every coordinate but the axis' own, ordered by that one.
  std::map<std::tuple<int, int, int>, std::vector<std::pair<int, int>>> by_key;
  for (int r = 0; r < s.world(); ++r) {
    const GridCoords c = grid_coords_of(s, r);
    std::tuple<int, int, int> key;
    int index = 0;
    if (a == "tp") key = {c.pp, c.dp, 0}, index = c.tp;
    if (a == "pp") key = {c.tp, c.dp, 0}, index = c.pp;
    if (a == "dp") key = {c.tp, c.pp, 0}, index = c.dp;
    if (a == "ep") key = {c.tp, c.pp, c.edp}, index = c.ep;
    by_key[key].push_back({index, r});
  }
  std::vector<std::vector<int>> groups;
  for (auto& [key, members] : by_key) {
    std::sort(members.begin(), members.end());
    std::vector<int> g;
    for (const auto& m : members) g.push_back(m.second);
    groups.push_back(std::move(g));
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

const std::array<const char*, 4>& topology_axis_names() {
  static const std::array<const char*, 4> names{"tp", "pp", "dp", "ep"};
  return names;
}

TopologySummary summarize_topology(const config::ParallelConfig& shape, const NodeMap& nodes) {
  if (static_cast<int>(nodes.node.size()) != shape.world())
    throw std::invalid_argument("summarize_topology: the node map has " +
                                std::to_string(nodes.node.size()) + " ranks, the grid " +
                                std::to_string(shape.world()));
  TopologySummary t;
  t.nodes = nodes.nodes();
  t.ranks_per_node = nodes.ranks_per_node;
  t.emulated = nodes.emulated();
  for (std::size_t a = 0; a < 4; ++a) {
    for (const auto& g : axis_groups(shape, topology_axis_names()[a])) {
      t.axes[a].groups += 1;
      for (int r : g)
        if (nodes.node_of(r) != nodes.node_of(g.front())) {
          t.axes[a].groups_spanning_nodes += 1;
          break;
        }
    }
  }
  return t;
}

namespace {
std::vector<std::string>& host_cache() {
  static std::vector<std::string> hosts;
  return hosts;
}
}  // namespace

const std::vector<std::string>* world_host_names() {
  return host_cache().empty() ? nullptr : &host_cache();
}

void record_world_host_names(std::vector<std::string> hosts) {
  host_cache() = std::move(hosts);
}

std::optional<NodeMap> run_nodes(int world_size, int ranks_per_node) {
  if (ranks_per_node > 0) return emulated_nodes(world_size, ranks_per_node);
  if (world_size == 1) return nodes_from_hosts({"this host"});
  const auto* hosts = world_host_names();
  if (!hosts || static_cast<int>(hosts->size()) != world_size) return std::nullopt;
  return nodes_from_hosts(*hosts);
}

}  // namespace paraxis::parallel
