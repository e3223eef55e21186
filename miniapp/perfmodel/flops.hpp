// Model FLOPs: what paraxis's matmuls cost per token (2 FLOPs per multiply-add, full S x S
// attention products as computed), per training step (3x the forward: the backward computes
// the input and the weight gradients, each as costly as the forward), and model FLOPs
// utilisation against a given dense peak.

#pragma once

#include <vector>

#include "model/model_config.hpp"
#include "model/model_pieces.hpp"
#include "perfmodel/parallel_config.hpp"

namespace paraxis::perfmodel {

// Forward FLOPs per token of each piece and of the whole model: model::piece_costs and
// model::forward_flops_per_token (model/model_pieces.hpp), the one definition paraxis uses.
//   block:  2*4*H^2 (Q, K, V, output projection) + 2*2*S*H (QK^T and PV)
//           + 2*2*H*F (dense MLP)  |  2*H*E (router) + K*2*2*H*F (top-k experts)
//   head:   2*H*V
using model::forward_flops_per_token;

// FLOPs of one training step of `sequences` sequences (every replica together):
// 3 * forward per token * sequences * seq_len.
double step_flops(const model::ModelConfig& m, double sequences);

// Hardware FLOPs of one training step of configuration c (c.global_batch sequences): the
// model FLOPs plus the forward FLOPs recomputation runs again,
// (3 * forward + model::recompute_forward_flops_per_token) per token; for HFU.
double hardware_step_flops(const model::ModelConfig& m, const Scenario& c);

// Narayanan et al. 2021 (arXiv 2104.04473), section 5.1, for a dense GPT with F = 4H:
// with full activation recomputation 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) (hardware FLOPs
// with train.recompute full over every block); without, the same derivation gives
// 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) (model FLOPs).
double narayanan_step_flops(double batch, double seq_len, double layers, double hidden,
                            double vocab);
double narayanan_step_flops_recompute(double batch, double seq_len, double layers, double hidden,
                                      double vocab);

// Model FLOPs utilisation: achieved model FLOP/s over the dense peak of all devices.
// Throws std::invalid_argument when peak or devices is not positive.
double mfu(double model_flops_per_s, double peak_flops_per_device, int devices);

}  // namespace paraxis::perfmodel
