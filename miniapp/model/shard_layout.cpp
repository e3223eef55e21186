// Shard layouts: the whole model, expert ranges (the parameters of a shard: param_layout.cpp).
#include "model/shard_layout.hpp"

#include <sstream>
#include <stdexcept>

namespace paraxis::model {

ShardLayout ShardLayout::whole(const ModelConfig& c) {
  ShardLayout s;
  s.chunks.push_back({0, c.layers, true, true});
  return s;
}

ExpertRange expert_range(const ModelConfig& c, int ep, int ep_rank) {
  const int E = c.moe.experts;
  if (ep < 1 || ep_rank < 0 || ep_rank >= ep || E % ep != 0) {
    std::ostringstream os;
    os << "parallel.ep = " << ep << " does not divide model.moe.experts = " << E << " (rank "
       << ep_rank << ")";
    throw std::invalid_argument(os.str());
  }
  return {ep_rank * (E / ep), E / ep};
}

}  // namespace paraxis::model
