// Shard layouts: the whole model, the tensor-parallel split rules, expert ranges (the parameters of
// a shard: param_layout.cpp).
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

ShardRange even_shard(const std::string& what, int n, int tp, int rank) {
  if (tp < 1 || rank < 0 || rank >= tp || n < 1 || n % tp != 0) {
    std::ostringstream os;
    os << what << " = " << n << " cannot be split evenly across parallel.tp = " << tp
       << " ranks (rank " << rank << "): expected a positive multiple of " << tp;
    throw std::invalid_argument(os.str());
  }
  const int size = n / tp;
  return {rank * size, size};
}

int padded_vocab(int vocab, int tp) {
  if (vocab < 1 || tp < 1) {
    std::ostringstream os;
    os << "padded_vocab: model.vocab = " << vocab << ", parallel.tp = " << tp
       << ", expected both >= 1";
    throw std::invalid_argument(os.str());
  }
  return (vocab + tp - 1) / tp * tp;
}

ShardRange vocab_shard(int vocab, int tp, int rank) {
  return even_shard("padded model.vocab", padded_vocab(vocab, tp), tp, rank);
}

}  // namespace paraxis::model
