// What a run leaves behind (--out DIR): summary.json (schema analysis/results_schema.hpp's
// kSummaryVersion), points.csv and one Chrome trace per point. Written by rank 0 after every point,
// so an interrupted sweep keeps the points it finished. Defined in results.cpp (the writers),
// point_json.cpp (a point's JSON), point_metrics.cpp (per-rank metrics, pipeline figures),
// trace_events.cpp and provenance.cpp.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/point_status.hpp"
#include "deck/deck.hpp"
#include "driver/calibration.hpp"
#include "driver/verify.hpp"
#include "model/trainer.hpp"

namespace paraxis::driver {

struct PointResult {
  int index = 0;
  SweepPoint point;
  PointStatus status;  // analysis/point_status.hpp
  std::vector<model::StepResult> steps;
  model::MemoryReport memory;
  std::vector<model::MemoryReport> memory_per_rank;
  double entropy_floor = 0;
  std::size_t parameters = 0;
  double flops_per_token = 0;  // forward
  // Forward FLOPs per token that train.recompute runs again in the backward (0 without it):
  // hardware FLOPs = 3 * flops_per_token + this (model FLOPs leave it out).
  double recompute_flops_per_token = 0;
  int world = 1;
  std::optional<VerifyResult> verify;
  std::optional<Calibration> calibration;  // with hardware.calibrate
  // summary.json's `recheck` (point_recheck.hpp): the calibration timed again right after the
  // steps and the prediction rebuilt from it; null without a calibration.
  nlohmann::json recheck;
  // summary.json's `rerun` (point_stages.hpp, rerun_if_missed): the point's steps run again after
  // a term missed with nothing in the point showing it the machine's; null when not run again.
  nlohmann::json rerun;
  // fault.slow_axis: the links this rank's slowed communicators measured, by axis name
  // ({"dp": {"alpha_s", "bytes_per_s"}}; parallel/link_measure.hpp); empty when none was.
  nlohmann::json slow_axis_links = nlohmann::json::object();
  // Per-step metrics of every rank ([rank][step][metric], metrics in rank_metric_names()),
  // and every rank's trace events (Chrome trace JSON objects, pid = rank).
  std::vector<std::vector<std::vector<double>>> rank_steps;
  nlohmann::json trace_events = nlohmann::json::array();
  // Checkpoints written (one entry per save) and the one resumed from (null: none); figures
  // over ranks (point_checkpoint.hpp, docs/checkpoint.md).
  nlohmann::json checkpoints = nlohmann::json::array();
  nlohmann::json resumed;
  nlohmann::json checkpoint_auto;  // checkpoint.every: auto: the cadence chosen (auto_cadence)
  // Saves not committed because the state was not finite: [{step, refused}].
  nlohmann::json checkpoints_refused = nlohmann::json::array();
  nlohmann::json lineage;  // the lineage its checkpoints record (checkpoint_claim.hpp; null: none)
};

// Pipeline parallelism of a point (pp > 1): the bubble measured on each rank (median over
// measured steps) and its mean, the schedule replayed with the measured forward, backward (B of
// a split backward) and W action times of each stage (model: schedule::replay_with_stage_times;
// per stage and mean), the schedule's closed form with the stages' mean times (formula:
// schedule::bubble_fraction_formula), the textbook formula (ideal: equal times).
struct PipelineFigures {
  int micro_batches = 0;
  double measured_mean = 0, model = 0, formula = 0, ideal = 0;
  std::vector<double> measured_per_rank, forward_s, backward_s, backward_weight_s;
  std::vector<double> model_per_stage;
  std::vector<int> peak_live;
};
PipelineFigures pipeline_figures(const PointResult& r);

// Names of the per-step metrics gathered from every rank.
const std::vector<std::string>& rank_metric_names();
std::vector<double> rank_metrics(const model::StepResult& s);
// This rank's trace events for a point, times relative to t0 (a moment all ranks share).
nlohmann::json trace_events_json(const std::vector<model::StepResult>& steps, int rank, double t0);

nlohmann::json point_to_json(const PointResult& r);
nlohmann::json provenance_json(int world, const std::string& command_line);

// Median over the measured (post-warm-up) steps of a per-step quantity.
double measured_median(const PointResult& r, double (*get)(const model::StepResult&));

// Each written atomically through io::write_file_checked (a failure throws io::WriteError and
// leaves the previous file in place); before_rename: see write_file_checked.
void write_summary(const std::string& dir, const std::string& deck_path,
                   const nlohmann::json& provenance, const std::vector<PointResult>& points,
                   const std::function<void()>& before_rename = nullptr);
void write_points_csv(const std::string& dir, const std::vector<PointResult>& points);
void write_trace(const std::string& dir, const PointResult& r);

}  // namespace paraxis::driver
