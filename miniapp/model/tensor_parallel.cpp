// Tensor-parallel split rules and the layers' argument checks (the layers are templates in the
// header).
#include "model/tensor_parallel.hpp"

namespace paraxis::model {

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

namespace detail {
void require_contiguous(const char* what, bool contiguous) {
  if (!contiguous)
    throw std::invalid_argument(std::string(what) +
                                ": the View is not contiguous; expected a contiguous buffer "
                                "(the communicator reduces span() elements from data())");
}

void require_blocks(const char* what, std::size_t block, std::size_t full, int tp) {
  if (full != block * static_cast<std::size_t>(tp)) {
    std::ostringstream os;
    os << what << ": the full View has " << full << " elements, expected parallel.tp = " << tp
       << " blocks of " << block << " (tokens divisible by tp with sequence parallelism)";
    throw std::invalid_argument(os.str());
  }
}

void require_in_place(const char* what, const void* partial, const void* out) {
  if (partial != out)
    throw std::invalid_argument(std::string(what) +
                                ": without sequence parallelism the partial sum is reduced in "
                                "place; expected partial == out (tp_partial_target)");
}
}  // namespace detail

}  // namespace paraxis::model
