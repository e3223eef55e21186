// The model's and the run's plain configuration: enum names (precision, recomputation,
// attention), MoE capacity, which blocks are recomputed and the FLOPs recomputation adds.
#include "model_config.hpp"

#include <cmath>

#include "model_pieces.hpp"

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

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "unknown";
}

const std::vector<std::string>& recompute_names() {
  static const std::vector<std::string> n{
      to_string(Recompute::none), to_string(Recompute::selective), to_string(Recompute::full)};
  return n;
}

const char* to_string(Attention a) {
  switch (a) {
    case Attention::unfused:
      return "unfused";
    case Attention::fused:
      return "fused";
  }
  return "unknown";
}

const std::vector<std::string>& attention_names() {
  static const std::vector<std::string> n{to_string(Attention::unfused),
                                          to_string(Attention::fused)};
  return n;
}

bool recomputes_block(Recompute mode, int recompute_layers, int index) {
  return mode == Recompute::full && (recompute_layers == 0 || index < recompute_layers);
}

double recompute_forward_flops_per_token(const ModelConfig& m, const TrainConfig& t,
                                         const std::vector<ModelChunk>& chunks) {
  switch (t.recompute) {
    case Recompute::none:
      return 0;
    case Recompute::selective:
      return m.layers * 2.0 * m.seq_len * m.hidden;
    case Recompute::full: {
      const auto cost = piece_costs(m);  // [1 + l]: block l
      double f = 0;
      for (const auto& ch : chunks)
        for (int l = ch.first_layer; l < ch.end_layer; ++l)
          if (recomputes_block(t.recompute, t.recompute_layers, l - ch.first_layer))
            f += cost[static_cast<std::size_t>(l) + 1];
      return f;
    }
  }
  return 0;
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
