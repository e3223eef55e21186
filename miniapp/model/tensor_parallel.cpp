// The tensor-parallel layers' argument checks (the layers are templates in the
// header).
#include "model/tensor_parallel.hpp"

namespace paraxis::model {

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
