// The link emulation's cost model (link_emulation.hpp; formulas in docs/diagnosis.md).
#include "parallel/link_emulation.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace paraxis::parallel {

namespace {
constexpr double kMicro = 1e-6;
constexpr double kGiga = 1e9;  // GB/s: 10^9 bytes per second, as the deck says
}  // namespace

bool LinkModel::crosses_nodes(int a, int b) const {
  return nodes.node_of(a) != nodes.node_of(b);
}

bool LinkModel::on_slow_link(int a, int b) const {
  const auto same_pair = [](const std::vector<int>& ends, int x, int y) {
    return (ends[0] == x && ends[1] == y) || (ends[0] == y && ends[1] == x);
  };
  if (links.slow_ranks.size() == 2) return same_pair(links.slow_ranks, a, b);
  if (links.slow_nodes.size() == 2)
    return same_pair(links.slow_nodes, nodes.node_of(a), nodes.node_of(b));
  return false;
}

LinkModel make_link_model(const config::LinkEmulation& links, NodeMap nodes) {
  const int world = static_cast<int>(nodes.node.size());
  const int n_nodes = nodes.nodes();
  const auto check = [](const std::vector<int>& ends, int limit, const char* key,
                        const char* noun) {
    if (ends.empty()) return;
    if (ends.size() != 2 || ends[0] == ends[1])
      throw std::invalid_argument(std::string(key) + " must list two different " + noun + "s");
    for (int e : ends)
      if (e < 0 || e >= limit)
        throw std::invalid_argument(std::string(key) + ": " + noun + " " + std::to_string(e) +
                                    " does not exist (this run has " + std::to_string(limit) + " " +
                                    noun + (limit == 1 ? "" : "s") + ", numbered from 0)");
  };
  check(links.slow_ranks, world, "fault.slow_link.ranks", "rank");
  check(links.slow_nodes, n_nodes, "fault.slow_link.nodes", "node");
  return LinkModel{links, std::move(nodes)};
}

double slow_axis_added(double factor, const MeasuredLink& link, double bytes, double emulated) {
  if (!(factor > 1)) return 0;
  const double wire = link.bytes_per_s > 0 ? bytes / link.bytes_per_s : 0;
  return (factor - 1) * (link.alpha_s + wire + emulated);
}

LinkDelay::LinkDelay(const LinkModel& model, std::vector<int> group, int me, double slow_link_speed,
                     const MeasuredLink* slowed_axis)
    : model_(model), group_(std::move(group)), me_(me), slow_speed_(slow_link_speed) {
  if (!model_.active() || group_.size() < 2) return;
  if (slowed_axis && model_.links.slows_an_axis()) {
    axis_slowed_ = true;
    axis_link_ = *slowed_axis;
    active_ = true;  // every edge of the group is slowed
  }
  for (std::size_t i = 0; i < group_.size() && !active_; ++i)
    for (std::size_t j = i + 1; j < group_.size() && !active_; ++j)
      active_ = (model_.links.emulates_links() && model_.crosses_nodes(group_[i], group_[j])) ||
                model_.on_slow_link(group_[i], group_[j]);
}

bool LinkDelay::slow_pair_in_group(int* a, int* b) const {
  const int n = static_cast<int>(group_.size());
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      if (model_.on_slow_link(group_[i], group_[j])) {
        if (a) *a = i;
        if (b) *b = j;
        return true;
      }
  return false;
}

double LinkDelay::slow_seconds_per_byte(bool crosses) const {
  const double f = model_.links.slow_bandwidth_factor;
  if (f >= 1) return 0;
  // The link moves at f of its own speed: the emulated bandwidth when it crosses nodes and one
  // is set, else the speed the communicator measured on it.
  const double own =
      crosses && model_.links.bandwidth_gbs > 0 ? model_.links.bandwidth_gbs * kGiga : slow_speed_;
  return own > 0 ? (1 / f - 1) / own : 0;
}

double LinkDelay::slow_axis_extra(double bytes, double emulated) const {
  return axis_slowed_ ? slow_axis_added(model_.links.slow_axis_factor, axis_link_, bytes, emulated)
                      : 0;
}

double LinkDelay::edge(int a, int b, double bytes) const {
  const int x = group_[static_cast<std::size_t>(a)], y = group_[static_cast<std::size_t>(b)];
  const auto& L = model_.links;
  double t = 0;
  const bool crosses = model_.crosses_nodes(x, y);
  if (crosses && L.emulates_links()) {
    t += L.latency_us * kMicro;
    if (L.bandwidth_gbs > 0) t += bytes / (L.bandwidth_gbs * kGiga);
  }
  t += slow_axis_extra(bytes, t);
  if (model_.on_slow_link(x, y))
    t += L.slow_latency_us * kMicro + bytes * slow_seconds_per_byte(crosses);
  return t;
}

double LinkDelay::rounds(const std::vector<std::vector<std::pair<int, int>>>& per_round,
                         double bytes) const {
  double t = 0;
  for (const auto& edges : per_round) {
    // The round's inter-node part and its slow-link part, each charged once: the edges of a
    // round run concurrently, and the slowest sets the round's end.
    double cross = 0, slow = 0;
    for (const auto& [a, b] : edges) {
      const int x = group_[static_cast<std::size_t>(a)], y = group_[static_cast<std::size_t>(b)];
      const bool crosses = model_.crosses_nodes(x, y);
      if (crosses && model_.links.emulates_links()) {
        double c = model_.links.latency_us * kMicro;
        if (model_.links.bandwidth_gbs > 0) c += bytes / (model_.links.bandwidth_gbs * kGiga);
        cross = std::max(cross, c);
      }
      if (model_.on_slow_link(x, y))
        slow = std::max(
            slow, model_.links.slow_latency_us * kMicro + bytes * slow_seconds_per_byte(crosses));
    }
    // The slow axis slows every edge of the round: its measured link and its emulated part.
    t += cross + slow + slow_axis_extra(bytes, cross);
  }
  return t;
}

double LinkDelay::ring(int steps, double bytes_per_step) const {
  const int n = static_cast<int>(group_.size());
  std::vector<std::pair<int, int>> edges;
  for (int i = 0; i < n; ++i) edges.push_back({i, (i + 1) % n});
  return rounds(
      std::vector<std::vector<std::pair<int, int>>>(static_cast<std::size_t>(steps), edges),
      bytes_per_step);
}

double LinkDelay::all_reduce(std::size_t S) const {
  if (!active_) return 0;
  const int n = static_cast<int>(group_.size());
  return ring(2 * (n - 1), static_cast<double>(S) / n);
}

double LinkDelay::reduce_scatter(std::size_t S) const {
  if (!active_) return 0;
  const int n = static_cast<int>(group_.size());
  return ring(n - 1, static_cast<double>(S) / n);
}

double LinkDelay::all_gather(std::size_t S) const {
  if (!active_) return 0;
  const int n = static_cast<int>(group_.size());
  return ring(n - 1, static_cast<double>(S) / n);
}

double LinkDelay::broadcast(std::size_t S, int root) const {
  if (!active_) return 0;
  const int n = static_cast<int>(group_.size());
  std::vector<std::vector<std::pair<int, int>>> per_round;
  // Round k: relative ranks j < 2^k send to j + 2^k (relative to the root).
  for (int span = 1; span < n; span *= 2) {
    std::vector<std::pair<int, int>> edges;
    for (int j = 0; j < span && j + span < n; ++j)
      edges.push_back({(j + root) % n, (j + span + root) % n});
    per_round.push_back(std::move(edges));
  }
  return rounds(per_round, static_cast<double>(S));
}

double LinkDelay::barrier() const {
  if (!active_) return 0;
  const int n = static_cast<int>(group_.size());
  std::vector<std::vector<std::pair<int, int>>> per_round;
  for (int span = 1; span < n; span *= 2) {
    std::vector<std::pair<int, int>> edges;
    for (int i = 0; i < n; ++i) edges.push_back({i, (i + span) % n});
    per_round.push_back(std::move(edges));
  }
  return rounds(per_round, 0.0);
}

double LinkDelay::all_to_all_v(const int* sc, const int* rc, std::size_t elem) const {
  if (!active_) return 0;
  const int n = static_cast<int>(group_.size());
  double t = 0;
  for (int k = 1; k < n; ++k) {
    const int to = (me_ + k) % n, from = (me_ - k + n) % n;
    const double out = static_cast<double>(sc[to]) * static_cast<double>(elem);
    const double in = static_cast<double>(rc[from]) * static_cast<double>(elem);
    // The step's send and receive run concurrently: the slower one sets its end.
    t += std::max(edge(me_, to, out), edge(from, me_, in));
  }
  return t;
}

double LinkDelay::receive(int from, std::size_t bytes) const {
  if (!active_ || from == me_) return 0;
  return edge(from, me_, static_cast<double>(bytes));
}

}  // namespace paraxis::parallel
