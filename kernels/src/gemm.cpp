// Non-template parts of the GEMM interface.
#include "paraxis/kernels/gemm.hpp"

namespace paraxis::kernels {

const char* to_string(GemmVariant v) {
  switch (v) {
    case GemmVariant::automatic: return "automatic";
    case GemmVariant::portable: return "portable";
    case GemmVariant::vendor: return "vendor";
  }
  return "unknown";
}

}  // namespace paraxis::kernels
