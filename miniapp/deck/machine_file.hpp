// Machine descriptions for `paraxis plan` (inputs/machines/*.yaml), validated as decks are:
// every problem is reported at once, each naming the key and file:line; values must be finite
// and positive, integers where integers are meant, unknown keys are errors.
//
// Format (every key required unless a default is given):
//   name: dgx-h100                 # optional (default: the file name)
//   devices_per_node: 8            # integer >= 1
//   nodes: 128                     # integer >= 1; nodes * devices_per_node must fit an int
//   peak_flops: 989.0e12           # > 0: dense, per device, in the training precision
//   memory_gb: 80                  # > 0: per device
//   achievable_fraction: 0.5       # in (0, 1]: of peak the kernels reach (default 0.5)
//   intra_node: {latency_us: 3, bandwidth_gbs: 450}    # > 0 each: per rank, one direction
//   inter_node: {latency_us: 6, bandwidth_gbs: 50}
//   mtbf_hours_per_device: 0       # >= 0, optional: failures for the checkpoint interval
//                                  #   (0: Llama 3's failure rate)
//   checkpoint_s: 0                # >= 0, optional: the time to write a checkpoint (0: not shown)
//   storage_gbs_per_node: 0        # >= 0, optional: write bandwidth to the checkpoint storage
//                                  #   per node, GB/s (without checkpoint_s: the checkpoint
//                                  #   modelled as its bytes over nodes x this)
//   pipeline_transfers: overlapped # optional: overlapped (default: the pipeline engine overlaps
//                                  #   its point-to-point transfers with compute, Megatron-LM's
//                                  #   and paraxis's) or blocking (each forward and backward
//                                  #   waits on its own, DeepSpeed's; perfmodel/step_time.hpp)
// The work-dependent compute model (perfmodel/compute_efficiency.hpp, docs/perfmodel.md,
// "Compute efficiency"), all optional; without memory_bandwidth_gbs the planner times compute
// as FLOPs / (peak_flops x achievable_fraction), and the others are refused:
//   memory_bandwidth_gbs: 2039     # > 0: device memory bandwidth (datasheet), GB/s
//   memory_efficiency: 0.8         # in (0, 1]: of it, a streaming pass's share (default 0.8)
//   gemm_efficiency: 0.8           # in (0, 1]: of peak, a GEMM's ceiling (default 0.8)
//   gemm_tile: [128, 128]          # integers >= 1: output tile rows, columns (default 128 x 128)
//   gradient_accumulation_bytes: 0 # in [0, 1000]: bytes per parameter the software stack moves
//                                  #   after each micro-batch's backward to accumulate gradients
//                                  #   (default 0: none, or inside the weight-gradient GEMM)
#pragma once

#include <string>

#include "perfmodel/planner.hpp"

namespace paraxis::driver {

struct MachineFile {
  std::string name;
  perfmodel::Machine machine;
  double mtbf_hours_per_device = 0, checkpoint_s = 0, storage_gbs_per_node = 0;
};

// Reads and validates `path`. Throws std::invalid_argument whose message lists every problem,
// one per line, each "<path>:<line>: '<key>': <what>".
MachineFile load_machine_file(const std::string& path);

// The same for YAML text already in memory; `name` stands for the file in messages (the fuzz
// target's entry: any bytes give a MachineFile or a std::exception, never a crash).
MachineFile load_machine_text(const std::string& text, const std::string& name);

}  // namespace paraxis::driver
