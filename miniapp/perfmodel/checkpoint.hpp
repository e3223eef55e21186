// How often to checkpoint a long run: the interval that minimises the expected time lost to
// writing checkpoints plus the work redone after a failure, from the checkpoint's cost C and
// the system's mean time between failures M (seconds, both).
//   Young 1974 (CACM 17(9)), first order:   tau = sqrt(2 C M)
//   Daly 2006 (FGCS 22(3), doi:10.1016/j.future.2004.11.016), higher order:
//       tau = sqrt(2 C M) [1 + (1/3) sqrt(C / (2M)) + (1/9) (C / (2M))] - C   for C < 2M
//       tau = M                                                               for C >= 2M
// Both assume exponentially distributed failures (a constant rate); Daly's also counts the
// restart, which Young's first-order expansion drops.
#pragma once

namespace paraxis::perfmodel {

// Throw std::invalid_argument unless C >= 0 and M > 0.
double young_interval(double checkpoint_s, double mtbf_s);
double daly_interval(double checkpoint_s, double mtbf_s);

// Mean time between failures of a system of `devices` devices failing independently at
// `failures_per_device_s` each: 1 / (rate * devices).
double system_mtbf(double failures_per_device_s, double devices);

// Llama 3 (arXiv 2407.21783): 419 unexpected interruptions in 54 days of
// training on 16,384 H100 GPUs — about one every 3 hours for the job, or
// 419 / (54 * 86400 s * 16384) per GPU-second: the planner's default failure rate.
inline constexpr double kLlama3Interruptions = 419;
inline constexpr double kLlama3Days = 54;
inline constexpr double kLlama3Gpus = 16384;
double llama3_failures_per_device_s();

}  // namespace paraxis::perfmodel
