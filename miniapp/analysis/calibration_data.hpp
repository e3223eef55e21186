// The calibration as results record it (summary.json's `calibration`, docs/results.md): the
// fitted collectives and the compute times a point's prediction is built from, their JSON form,
// and the collectives' costs as the models take them. Plain data: the measurement itself
// (driver/calibration.hpp, the Calibrator) needs MPI and Kokkos; reading it back does not.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "perfmodel/step_time.hpp"

namespace paraxis::driver {

struct CommCalibration {
  std::string axis, op;  // "tp" | "pp" | "dp" | "ep"; perfmodel::to_string(Collective)
  int ranks = 0;
  double alpha = 0, beta = 0;        // per message, per byte on the wire (gamma folded in)
  double latency = 0, beta_eff = 0;  // the fitted line t = latency + S * beta_eff
  double rms_residual = 0;
  std::vector<std::pair<double, double>> samples;  // (S bytes, median seconds)
  // The data-parallel gradient reductions only (all-reduce, reduce-scatter; -1 elsewhere): the
  // fraction of a non-blocking call of the step's bucket size that completed while the caller
  // computed without calling MPI (comm.overlap's premise; 0 for an MPI without asynchronous
  // progress). Summaries before round 3 hold it for a 1 MiB all-reduce only.
  double async_progress = -1;
};

struct ComputeCalibration {
  // Per model chunk (pp * virtual_stages): seconds of one micro-batch's forward / backward on
  // every rank that holds it (its tensor-parallel ranks, data-parallel replicas and
  // expert-parallel ranks): the slowest of them (the step's critical path) and their mean
  // (they differ when experts are loaded unevenly, or a rank's core is busier).
  std::vector<double> forward_s, backward_s;
  std::vector<double> forward_mean_s, backward_mean_s;
  // A split backward (zero-bubble schedules): backward_s is B's and these W's, the same way;
  // all zero otherwise.
  std::vector<double> backward_weight_s, backward_weight_mean_s;
  // Pipelined points (pp > 1; empty otherwise), per model chunk: every timed action's compute
  // seconds (the micro-batches of the timed steps in order; per sample the slowest rank holding
  // the chunk), forward, backward (B) and W (a split backward's only), for the replay that holds
  // their variation (perfmodel::ActionVariation); and the engine's own seconds per action: the
  // compute-only step's pipelined span less its actions and its transfers' copies, over its
  // actions (the slowest rank's), added to each replayed action as bubble.
  std::vector<std::vector<double>> forward_samples_s, backward_samples_s, backward_weight_samples_s;
  std::vector<double> action_overhead_s;
  double optimizer_s = 0;      // gradient norm + AdamW over the owned parameters (max over ranks)
  double flops_per_s = 0;      // model FLOPs of forward + backward per rank / their time
  std::size_t peak_bytes = 0;  // the most device memory the compute calibration held
};

// The data-parallel calls timed as the step issues them (perfmodel::data_parallel_call_sequence;
// driver/calibration_comm.cpp, time_sequence_on): each repetition a barrier, then a compute
// stand-in sweeping `sweep_bytes` of memory, for `sweep_s` before a gradient reduction that
// follows compute (the first: the ranks leave it on a shared deadline; at ZeRO 2 each
// micro-batch's first, sweep_s then one micro-batch's compute) and `later_sweep_s` before an
// all-gather that follows compute (the optimizer's); at ZeRO 3 each call's compute_share of
// sweep_s (one micro-batch's compute); the calls in order on one buffer; per call the median
// over repetitions of the last-arriving rank's time. Empty calls: not measured (dp = 1, expert
// units over another group, an older summary).
struct SequenceCalibration {
  perfmodel::CallSequence calls;
  std::size_t sweep_bytes = 0;
  double sweep_s = 0, later_sweep_s = 0;
};

struct Calibration {
  std::vector<CommCalibration> comm;
  SequenceCalibration dp_sequence;
  // The tensor-parallel calls of one micro-batch of stage 0 timed the same way
  // (perfmodel::tensor_parallel_call_sequence; sweep_s one micro-batch's forward and backward of
  // the stage, of which each call takes its compute_share; the first call after all of it).
  // Empty: tp = 1, or an older summary.
  SequenceCalibration tp_sequence;
  ComputeCalibration compute;
  double seconds = 0;  // time the calibration took (0 when every part was cached)
};

nlohmann::json calibration_to_json(const Calibration& c);
Calibration calibration_from_json(const nlohmann::json& j);

// The calibrated collectives as the models take them: per axis the operation's own fit, the
// axis's link for operations not calibrated (the first fit of the axis), and the data-parallel
// all-reduce's asynchronous progress (comm.overlap's premise; 1 when not measured).
struct CommCosts {
  perfmodel::AxisLinks links;
  perfmodel::AxisOpLinks op_links;
  // Per data-parallel gradient reduction (all-reduce at ZeRO 0, reduce-scatter at 1-3): its
  // calibrated async_progress (comm.overlap's premise).
  std::map<perfmodel::Collective, double> dp_overlap_of;
  // That of `reduction`; a calibration without it (one written before the reduce-scatter's
  // was measured): the all-reduce's; none: 1.
  double dp_overlap(perfmodel::Collective reduction) const;
  // 1 when the pipeline's point-to-point transfers were calibrated (paraxis's own MPI transfers,
  // which occupy the stages that make them: StepTimeInputs::pipeline_transfer_occupancy), else 0.
  double pipeline_transfer_occupancy = 0.0;
  // The data-parallel calls timed as the step issues them (SequenceCalibration; empty: none).
  perfmodel::CallSequence dp_sequence;
  // The tensor-parallel calls of one micro-batch timed as the step issues them (Calibration::
  // tp_sequence), and the step's tensor-parallel calls of stage 0 in issue order with their
  // seconds from it (perfmodel::tensor_parallel_step_sequence; comm_costs_of_point only; empty:
  // each call its curve's).
  perfmodel::CallSequence tp_sequence, tp_step;
};
CommCosts comm_costs_of(const std::vector<CommCalibration>& fits);
// The same with the calibration's data-parallel and tensor-parallel sequences.
CommCosts comm_costs_of_calibration(const Calibration& c);
// The same with the point's step calls (tp_step) for the model `m` under `s`.
CommCosts comm_costs_of_point(const Calibration& c, const model::ModelConfig& m,
                              const perfmodel::Scenario& s);

// The member of (tp, pp, dp, ep) an axis name ("tp", "pp", "dp", "ep") selects; null for another.
template <class T>
T* axis_slot(const std::string& axis, T& tp, T& pp, T& dp, T& ep) {
  if (axis == "tp") return &tp;
  if (axis == "pp") return &pp;
  if (axis == "dp") return &dp;
  if (axis == "ep") return &ep;
  return nullptr;
}

}  // namespace paraxis::driver
