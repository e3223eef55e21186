// Which part of the model one rank holds: its tensor-parallel slice (heads, ffn columns,
// vocabulary rows), its experts, and its model chunks (contiguous runs of blocks, the
// embedding on the first chunk, the final LayerNorm + head + loss on the last). The model
// builds exactly these parameters (param_layout.hpp); the single-rank model is the layout
// `whole`. Chunks come from split_layers (model_pieces.hpp). Plain C++: paraxis_model_core.
#pragma once

#include <string>
#include <vector>

#include "model/model_config.hpp"
#include "model/model_pieces.hpp"
#include "model/param_layout.hpp"

namespace paraxis::model {

struct ShardLayout {
  int tp = 1, tp_rank = 0;
  bool sequence_parallel = false;  // takes effect only with tp > 1
  int ep = 1, ep_rank = 0;
  std::vector<ModelChunk> chunks;  // this rank's chunks, in model order

  // One chunk with everything, on one rank.
  static ShardLayout whole(const ModelConfig& c);
  bool sp() const { return sequence_parallel && tp > 1; }
};

// Expert range [first, first + count) held by expert-parallel rank ep_rank of ep.
// This rank's block [offset, offset + size) of an extent cut across a tensor-parallel group.
struct ShardRange {
  int offset = 0, size = 0;
};

// Megatron's even split of n over tp ranks (paraxis splits heads and ffn evenly too). Throws
// std::invalid_argument naming `what` (the deck key, e.g. "model.heads"), n and tp when tp does
// not divide n. The parameter layout and the tensor-parallel layers' activations both use it.
ShardRange even_shard(const std::string& what, int n, int tp, int rank);
// The vocabulary rounded up to a multiple of tp, and this rank's rows of it (the last shard
// may hold padding, excluded from the loss and zero in the parameters; with a tiny vocabulary
// on many ranks, nothing but padding).
int padded_vocab(int vocab, int tp);
ShardRange vocab_shard(int vocab, int tp, int rank);

struct ExpertRange {
  int first = 0, count = 0;
};
ExpertRange expert_range(const ModelConfig& c, int ep, int ep_rank);

}  // namespace paraxis::model
