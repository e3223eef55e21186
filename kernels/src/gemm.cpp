// Non-template parts of the GEMM interface.
#include "paraxis/kernels/gemm.hpp"

#include <atomic>

namespace paraxis::kernels {

namespace {
std::atomic<GemmVariant> g_automatic{GemmVariant::automatic};
}

void set_automatic_gemm(GemmVariant v) {
  if (v == GemmVariant::vendor)
    throw std::invalid_argument(
        "set_automatic_gemm: automatic may resolve to portable or stay "
        "automatic, not force vendor (it does not apply to every type)");
  g_automatic.store(v);
}

GemmVariant automatic_gemm() {
  return g_automatic.load();
}

const char* to_string(GemmVariant v) {
  switch (v) {
    case GemmVariant::automatic:
      return "automatic";
    case GemmVariant::portable:
      return "portable";
    case GemmVariant::vendor:
      return "vendor";
  }
  return "unknown";
}

}  // namespace paraxis::kernels
