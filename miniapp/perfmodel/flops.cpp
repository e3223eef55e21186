// Model FLOPs per token and per step, the Narayanan et al. reference counts, and MFU.
#include "perfmodel/flops.hpp"

#include <stdexcept>
#include <string>

namespace paraxis::perfmodel {

double step_flops(const model::ModelConfig& m, double sequences) {
  return 3.0 * forward_flops_per_token(m) * sequences * m.seq_len;
}

double hardware_step_flops(const model::ModelConfig& m, const Scenario& c) {
  const double recompute = model::recompute_forward_flops_per_token(
      m, c.train(), split_layers(m, c.chunks(), c.stage_layers));
  return step_flops(m, c.global_batch) +
         recompute * static_cast<double>(c.global_batch) * m.seq_len;
}

double narayanan_step_flops(double B, double s, double l, double h, double V) {
  return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

double narayanan_step_flops_recompute(double B, double s, double l, double h, double V) {
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double mfu(double model_flops_per_s, double peak_flops_per_device, int devices) {
  if (!(peak_flops_per_device > 0) || devices < 1)
    throw std::invalid_argument("mfu: peak_flops = " + std::to_string(peak_flops_per_device) +
                                " per device on " + std::to_string(devices) +
                                " devices; expected a positive peak and at least one device");
  return model_flops_per_s / (peak_flops_per_device * devices);
}

}  // namespace paraxis::perfmodel
