#include "model_config.hpp"

#include <cmath>

namespace paraxis::model {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp64:
      return "fp64";
    case Precision::fp32:
      return "fp32";
    case Precision::bf16:
      return "bf16";
  }
  return "unknown";
}

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> n{to_string(Precision::fp64), to_string(Precision::fp32),
                                          to_string(Precision::bf16)};
  return n;
}

int ModelConfig::moe_layer_count() const {
  int n = 0;
  for (int l = 0; l < layers; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}

int expert_capacity(const ModelConfig& m, int tokens) {
  if (m.moe.capacity_factor <= 0 || m.moe.experts == 0) return 0;
  const double c = m.moe.capacity_factor * tokens * m.moe.top_k / m.moe.experts;
  return static_cast<int>(std::ceil(c));
}

}  // namespace paraxis::model
