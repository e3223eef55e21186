// Per-call accounting (docs/report.md, "Calls"; docs/results.md, `calls`): every communication
// call of a point's measured steps on rank 0, its predicted time beside its measured time and
// wait, summed per (axis, operation, message-size bucket).
//
// A call's prediction is perfmodel::call_time — the per-call statement whose sum over the calls
// step_traffic.hpp counts is the step model's communication (docs/perfmodel.md, "Per-call
// predictions") — with the point's calibrated fits for the call's operation, communicator size
// and bytes, all of which its event records (parallel::CommEvent). It is computed here, after
// the step, rather than by a predictor inside the communicator: parallel/ may not include
// perfmodel/ (docs/architecture.md, "Layers"), the number is the same as at issue (a pure
// function of what the event records), and nothing is added inside the timed calls.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "driver/calibration.hpp"
#include "model/trainer.hpp"
#include "perfmodel/step_time.hpp"

namespace paraxis::driver {

// CommCosts and comm_costs_of (the calibrated collectives as the models take them):
// analysis/calibration_data.hpp.

// The predicted seconds of one logged call ("tp", "pp", "dp" or "ep"; the engine's op name;
// its communicator's ranks; nccl-tests S); nullopt for an operation the model does not describe.
std::optional<double> predicted_call_s(const CommCosts& costs, const std::string& axis,
                                       const std::string& op, int ranks, double bytes);

// The predicted seconds of each of a step's calls (comm_spans, in order): predicted_call_s, but
// the step's data-parallel calls take their positions' times in the calibrated sequence
// (CommCosts::dp_sequence) when they are its calls (perfmodel::sequence_call_times), and its
// tensor-parallel calls theirs in CommCosts::tp_step (comm_costs_of_point; a position not timed,
// the once-per-step calls, its curve's).
std::vector<std::optional<double>> step_call_predictions(const model::StepResult& s,
                                                         const CommCosts& costs);

struct CallRow {
  std::string axis, op;            // op: perfmodel::call_name ("receive" for recv / irecv)
  std::uint64_t bucket_bytes = 0;  // perfmodel::size_bucket of every call's S
  long calls = 0;
  double bytes = 0;  // sum of S (a receive's: the message it received)
  double measured_s = 0, measured_median_s = 0, wait_s = 0;  // end - begin; wait per call
  std::optional<double> predicted_s;  // none without a calibration or for an unknown op
};

// Rows of the calls of `steps` numbered >= warmup, sorted by axis, op, bucket. costs: null
// when the point was not calibrated.
std::vector<CallRow> call_rows(const std::vector<model::StepResult>& steps, int warmup,
                               const CommCosts* costs);

// summary.json's `calls` of a point: {rank, steps, rows: [...]}.
nlohmann::json calls_json(const std::vector<model::StepResult>& steps, int warmup,
                          const CommCosts* costs);

}  // namespace paraxis::driver
