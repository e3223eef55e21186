// Link emulation (docs/diagnosis.md, "Nodes and emulated links" and "Slow links"): the time an
// operation of a communicator costs on top of what the host measures, because its data
// crosses emulated nodes (hardware.emulate.*), an injected slow link (fault.slow_link.*) or an
// injected slow axis (fault.slow_axis.*, docs/sensitivity.md).
// The figures come from the group's node map and the operation's algorithm (ring, binomial
// tree, dissemination, pairwise exchange), never from timing, so every member of a collective
// adds the same time and the group stays in step. Plain C++: the Communicator applies it.
#pragma once

#include <cstddef>
#include <vector>

#include "config/parallel_config.hpp"
#include "parallel/topology.hpp"

namespace paraxis::parallel {

// The run's nodes and links, as every communicator of the run applies them.
struct LinkModel {
  config::LinkEmulation links;
  NodeMap nodes;
  // Whether anything is added at all (emulated inter-node links, a slow link or a slow axis).
  bool active() const {
    return links.emulates_links() || links.slows_a_link() || links.slows_an_axis();
  }
  bool crosses_nodes(int world_a, int world_b) const;
  bool on_slow_link(int world_a, int world_b) const;
};

// Checks the slow link against the nodes (every rank has the same map, so every rank throws
// the same std::invalid_argument): fault.slow_link.nodes must name nodes that exist,
// fault.slow_link.ranks ranks of the run. nodes must cover the run.
LinkModel make_link_model(const config::LinkEmulation& links, NodeMap nodes);

// A group's links as measured when its communicator was created (fault.slow_axis): the
// per-message latency and the speed of a ping-pong between two members (link_measure.hpp).
struct MeasuredLink {
  double alpha_s = 0;      // seconds per message
  double bytes_per_s = 0;  // 0: unknown (no bandwidth term)
};

// The added time of each operation for one member of a group.
class LinkDelay {
 public:
  // group: world ranks of the members in group-rank order; me: this member's group rank.
  // slow_link_speed: the slow link's own speed in bytes/s, used for bandwidth_factor when no
  // emulated bandwidth is set (0: the factor adds nothing; Communicator measures it).
  // slowed_axis: non-null when this group's axis is fault.slow_axis.axis (with a factor > 1):
  // its measured links; every round or message of the group then costs (factor - 1) times
  // (alpha_s + bytes / bytes_per_s + the emulated inter-node cost of that round) more.
  LinkDelay(const LinkModel& model, std::vector<int> group, int me, double slow_link_speed = 0,
            const MeasuredLink* slowed_axis = nullptr);
  // Whether any operation of this group can cost anything (off: the communicator skips it).
  bool active() const { return active_; }
  // Whether two members (group ranks) are the two ends of the slow link.
  bool slow_pair_in_group(int* a = nullptr, int* b = nullptr) const;

  // Ring algorithms over the group order: all-reduce 2(n-1) steps of S/n bytes,
  // reduce-scatter and all-gather n-1 steps of S/n (S: nccl-tests bytes, as CommLog records).
  double all_reduce(std::size_t S) const;
  double reduce_scatter(std::size_t S) const;
  double all_gather(std::size_t S) const;
  // Binomial tree from root (group rank): ceil(log2 n) rounds of S bytes.
  double broadcast(std::size_t S, int root) const;
  // Dissemination: ceil(log2 n) rounds, latency only.
  double barrier() const;
  // Pairwise exchange, n-1 steps; step k sends to me+k and receives from me-k (mod n). Counts
  // in elements of elem bytes. Per member: it depends on this member's own traffic.
  double all_to_all_v(const int* send_counts, const int* recv_counts, std::size_t elem) const;
  // A message of `bytes` from group rank `from` to this member (charged on the receiver only).
  double receive(int from, std::size_t bytes) const;

  // One edge's cost for `bytes`: latency and bandwidth of the emulated inter-node link when it
  // crosses nodes, plus the slow link's when it is the slow link, plus the slow axis's.
  double edge(int group_a, int group_b, double bytes) const;
  // The slow axis's added time for one round or message of `bytes` whose emulated inter-node
  // cost is `emulated` (0: not slowed): (factor - 1) (alpha_m + bytes / v_m + emulated).
  double slow_axis_extra(double bytes, double emulated) const;

 private:
  // `steps` rounds that each move `bytes` over the edges (a, b) listed: a round is as slow as
  // its slowest kind of edge, so crossing and slow edges are charged once per round.
  double rounds(const std::vector<std::vector<std::pair<int, int>>>& per_round, double bytes) const;
  double ring(int steps, double bytes_per_step) const;
  double slow_seconds_per_byte(bool crosses) const;

  LinkModel model_;
  std::vector<int> group_;
  int me_ = 0;
  double slow_speed_ = 0;
  bool axis_slowed_ = false;
  MeasuredLink axis_link_;
  bool active_ = false;
};

// The slow axis's added time per round or message (LinkDelay::slow_axis_extra's formula):
// (factor - 1) (alpha_s + bytes / bytes_per_s + emulated); 0 for factor <= 1.
double slow_axis_added(double factor, const MeasuredLink& link, double bytes, double emulated);

}  // namespace paraxis::parallel
