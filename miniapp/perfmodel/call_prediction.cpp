// One call's predicted time, the engine's operation names, the size buckets (call_prediction.hpp).
#include "perfmodel/call_prediction.hpp"

#include <algorithm>
#include <cmath>

namespace paraxis::perfmodel {

const LinkCost& link_for(Collective op, const LinkCost& link, const OpLinks* per_op) {
  if (per_op) {
    const auto it = per_op->find(op);
    if (it != per_op->end()) return it->second;
  }
  return link;
}

std::optional<double> measured_call_time(const OpCost& cost, int group, double bytes) {
  const auto& c = cost.curve;
  if (c.size() < 2 || group != cost.curve_ranks || !(bytes >= c.front().first) ||
      !(bytes <= c.back().first))
    return std::nullopt;
  const auto hi = std::lower_bound(c.begin(), c.end(), bytes,
                                   [](const auto& sample, double s) { return sample.first < s; });
  if (hi->first == bytes || hi == c.begin()) return hi->second;
  const auto lo = hi - 1;
  const double f = (bytes - lo->first) / (hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

double call_time(Collective op, int group, double bytes, const LinkCost& link,
                 const OpLinks* per_op, AllReduceAlgorithm all_reduce) {
  if (per_op) {
    const auto it = per_op->find(op);
    if (it != per_op->end()) {
      // A transfer is between two ranks whatever its communicator's size.
      const int ranks = op == Collective::point_to_point ? it->second.curve_ranks : group;
      if (const auto t = measured_call_time(it->second, ranks, bytes)) return *t;
    }
  }
  return collective_time(op, group, bytes, link_for(op, link, per_op), all_reduce);
}

bool logged_op(const std::string& name, LoggedOp* out) {
  LoggedOp o;
  if (name == "all_reduce") {
    o.op = Collective::all_reduce;
  } else if (name == "reduce_scatter") {
    o.op = Collective::reduce_scatter;
  } else if (name == "all_gather") {
    o.op = Collective::all_gather;
  } else if (name == "all_to_all_v" || name == "all_to_all") {
    o.op = Collective::all_to_all;
  } else if (name == "broadcast") {
    o.op = Collective::broadcast;
  } else if (name == "send" || name == "isend") {
    o.op = Collective::point_to_point;
  } else if (name == "recv" || name == "irecv") {
    o.op = Collective::point_to_point;
    o.receive = true;
  } else {
    return false;
  }
  if (out) *out = o;
  return true;
}

const char* call_name(const LoggedOp& o) {
  return o.receive ? "receive" : to_string(o.op);
}

std::vector<double> sequence_call_times(const CallSequence& seq, const CallSequence& calls) {
  if (seq.empty() || seq.size() != calls.size()) return {};
  std::vector<bool> used(seq.size(), false);
  std::vector<double> out;
  for (const auto& c : calls) {
    std::size_t k = 0;
    while (k < seq.size() &&
           (used[k] || seq[k].op != c.op || seq[k].bytes != c.bytes || seq[k].group != c.group))
      ++k;
    if (k == seq.size()) return {};  // not one of the sequence's calls
    used[k] = true;
    out.push_back(seq[k].seconds);
  }
  return out;
}

std::uint64_t size_bucket(double bytes) {
  if (!(bytes >= 1)) return 0;
  return std::uint64_t{1} << static_cast<int>(std::floor(std::log2(bytes)));
}

}  // namespace paraxis::perfmodel
