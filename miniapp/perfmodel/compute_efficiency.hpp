// Compute time that depends on the work (docs/perfmodel.md, "Compute efficiency"): each GEMM
// timed from its shape (a roofline with tile quantisation), the memory-bound passes of a
// transformer layer (LayerNorm, softmax, GeLU, bias and residual adds, the optimizer's sweep
// over its state) from memory bandwidth, and a model chunk's forward, backward and recomputed
// forward summed from them. Replaces the flat "FLOPs / (peak x achievable_fraction)" when the
// machine gives a memory bandwidth; pure functions, no Kokkos or MPI.
//
// GEMM C[m x n] = A[m x k] B[k x n], `batch` independent ones, elements of e bytes:
//   t = max( 2 batch ceil(m/Tm) Tm ceil(n/Tn) Tn k / (peak x gemm_efficiency),
//            batch (m k + k n + m n) e / (memory_bandwidth x memory_efficiency) )
// A memory-bound pass of b bytes: b / (memory_bandwidth x memory_efficiency).
#pragma once

#include "model/model_config.hpp"
#include "model/model_pieces.hpp"
#include "perfmodel/parallel_config.hpp"
#include "perfmodel/step_time.hpp"

namespace paraxis::perfmodel {

struct ComputeEfficiency {
  double peak_flops = 0;           // dense, per device, in the training precision (FLOP/s)
  double gemm_efficiency = 0.8;    // of peak, a GEMM's ceiling on whole tiles
  double memory_bytes_per_s = 0;   // device memory bandwidth (datasheet); 0: model off
  double memory_efficiency = 0.8;  // of that bandwidth, a streaming pass's share
  int tile_m = 128, tile_n = 128;  // output tile the GEMM kernels compute (rows, columns)
  // The software stack's gradient accumulation pass: bytes moved per parameter of the rank after
  // every micro-batch's backward (0: none, or fused into the weight-gradient GEMMs).
  double gradient_accumulation_bytes = 0;
  bool enabled() const { return memory_bytes_per_s > 0 && peak_flops > 0; }
};

// Throws std::invalid_argument naming the field when a value is out of range (peak and
// bandwidth > 0, efficiencies in (0, 1], tiles >= 1, gradient accumulation bytes >= 0).
void validate(const ComputeEfficiency& e);

// Seconds of `batch` GEMMs of shape (m, n, k) with `element_bytes`-byte operands.
double gemm_time(const ComputeEfficiency& e, double m, double n, double k, double element_bytes,
                 double batch = 1);
// The backward of C = A B: dA = dC B^T (m, k, n) and dB = A^T dC (k, n, m).
double gemm_backward_time(const ComputeEfficiency& e, double m, double n, double k,
                          double element_bytes, double batch = 1);
// dB = A^T dC alone (k, n, m): a linear's weight gradient when B is its weight (W of a split
// backward, docs/perfmodel.md "Zero-bubble pipeline").
double gemm_weight_gradient_time(const ComputeEfficiency& e, double m, double n, double k,
                                 double element_bytes, double batch = 1);
// Seconds of a memory-bound pass moving `bytes` (reads plus writes).
double memory_time(const ComputeEfficiency& e, double bytes);

// One transformer block on one tensor-parallel rank, for one micro-batch.
struct LayerShape {
  int tp = 1;
  bool sp = false;  // sequence parallelism: LayerNorm and residual passes on tokens / tp
  int micro_batch = 1, seq = 1, hidden = 1, ffn = 1, heads = 1;
  double element_bytes = 2;  // activations
  // model.attention fused (a FlashAttention-style kernel): the scores never reach device memory
  // (no softmax passes), the causal mask's upper triangle of score tiles is skipped (half the
  // q k^T and P v work), and the backward computes q k^T again.
  bool fused_attention = false;
  // model.attention_dropout > 0: unfused attention drops out the probabilities in a pass of its
  // own (a fused kernel does it on its tiles, no traffic).
  bool attention_dropout = false;
};

// Bytes of the block's memory-bound passes (docs/perfmodel.md lists each), N = b s tokens,
// Nl = N / tp with sp (else N), scores Sc = b (heads / tp) s^2:
//   forward  10 Nl h e + 2 Sc e + 2 N (f / tp) e
//   backward 14 Nl h e + 3 Sc e + 3 N (f / tp) e
//   softmax (selective recomputation's pass again) 2 Sc e
//   with attention dropout, (2 e + 1) Sc more in each (forward: read the probabilities, write
//   them dropped and a one-byte mask; backward: read the gradient and the mask, write)
// (fused attention: no Sc terms)
struct LayerBytes {
  double forward = 0, backward = 0, softmax = 0;
};
LayerBytes dense_layer_bytes(const LayerShape& s);

// Bytes of an MoE block's token permutation each way (Megatron-Core's all-to-all token
// dispatcher, moe_utils.py permute / unpermute / sort_chunks_by_idxs), N = b s tokens routed to
// k experts each, h wide: the dispatch gathers every token's k copies (read and write N k h e),
// the combine reads them back and sums them into N rows (N k h e + N h e); with more than one
// local expert the received rows are sorted by expert after the dispatch's all-to-all and back
// before the combine's (2 N k h e each). The backward runs the mirror passes, the same bytes.
double moe_permutation_bytes(double tokens, double hidden, int top_k, int local_experts,
                             double element_bytes);

struct LayerTimes {
  double forward = 0, backward = 0;  // a dense block's, without recomputation
  double backward_weight = 0;        // the part of backward in the linears' weight gradients
  double full_again = 0;             // full recomputation: the forward again
  double selective_again = 0;        // selective: q k^T and the softmax pass again
};
LayerTimes dense_layer_times(const ComputeEfficiency& e, const LayerShape& s);

// A model chunk on one rank of configuration c for one micro-batch: its blocks (dense or MoE,
// experts balanced over the ep ranks), the head's final LayerNorm, logits GEMM and
// cross-entropy when it has the head, and the recomputation c.recompute adds to the backward
// (model::recomputes_block decides which blocks full recomputation runs again).
// backward_weight is the part of backward a split schedule runs as W: the weight-gradient GEMM
// (A^T dC) of every linear (Q K V, output projection, MLP or router and experts, the head).
struct ChunkTimes {
  double forward = 0, backward = 0, recompute = 0;
  double backward_weight = 0;
};
ChunkTimes chunk_times(const ComputeEfficiency& e, const model::ModelConfig& m, const Scenario& c,
                       const model::ModelChunk& chunk);

// The optimizer step's sweep: `parameters` on the rank, `bytes_per_parameter` read and written
// (Adam: parameter, gradient, two moments, master copy; optimizer_bytes_per_parameter).
double optimizer_time(const ComputeEfficiency& e, double parameters, double bytes_per_parameter);
// Adam's bytes per parameter in precision p: read t + g + 2 a (+ a master), write the same
// less the gradient (docs/perfmodel.md).
double optimizer_bytes_per_parameter(model::Precision p);

// The planner's compute for configuration c on this machine: in.forward_s and in.backward_s per
// model chunk (chunk_times; the backward with its recomputation; under a schedule that splits
// the backward, B's part alone and in.backward_weight_s W's, the weight-gradient GEMMs; else
// in.backward_weight_s empty), and in.optimizer_s, the
// optimizer sweep of the stage owning the most parameters (ZeRO's shard under ZeRO >= 1).
// Uses in.chunks and in.stage_units when the caller has them. Throws std::invalid_argument
// when e is invalid (validate).
void set_compute_times(const ComputeEfficiency& e, const model::ModelConfig& m, const Scenario& c,
                       StepTimeInputs& in);

}  // namespace paraxis::perfmodel
