// Where a run lost its time (docs/diagnosis.md): findings, each with an address on the grid,
// from one point's per-rank, per-step measurements. Pure: the input is a summary.json point
// (its config, and its `rank_series`: every rank's per-step compute, step time and, per axis,
// collective time and wait time; optionally its `topology`), the output report.json's
// `diagnosis[]`, sorted by cost.
//
// What is found:
//   slow_rank  a rank whose compute is at least kSlowRankRatio times the median of its peers
//              (the ranks of its pipeline stage holding the same experts, which do the same
//              work) on at least kMinSteps
//              measured steps and on kPersistence of the measured steps from the first of them
//              on; its cost is the extra compute per step, which every other rank waits for.
//   slow_link  a group of an axis whose collectives take, net of waiting for late ranks, at
//              least kSlowLinkRatio times the median of the axis's other groups on
//              kPersistence of the measured steps (pipeline
//              groups: their point-to-point time, which has no arrival skew to take out); its
//              cost is the extra time per step. With nodes known, the nodes the group spans
//              are named.
//   expert_imbalance  with expert parallelism, an expert shard (the experts of one ep rank)
//              that receives at least kExpertImbalance times its share of the routed tokens;
//              cost: the time the other ep ranks wait for it in ep collectives.
//   bubble     a pipeline whose measured bubble is at least kBubbleFraction of the step;
//              its cost the bubble's time, with the micro-batch count that would bring the
//              schedule's ideal bubble under kBubbleTarget.
//   slow_axis  every group of an axis with several slower than its calibrated link (against
//              the model, diagnosis_model.hpp, like a rank or a one-group axis without peers).
//   placement  a tensor-parallel group that spans nodes (its collectives cross the slowest
//              links of the machine every layer); cost: the group's collective time.
// The thresholds are above the noise of fault-free runs on a shared machine (docs/
// diagnosis.md says how they were chosen): a clean run gives no slow_rank or slow_link. On a
// host with more ranks than cores (Host) the slow-rank threshold is multiplied by the
// oversubscription: a rank's share of a core then varies by up to that factor by itself.
// Both ratios must persist: on kPersistence of the measured steps (from the onset for ranks).
// dead_rank and hang findings come from the failure record a failing rank leaves
// (failure_finding), not from measurements.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/parallel_config.hpp"

namespace paraxis::driver::diagnosis {

constexpr double kSlowRankRatio = 1.5;
constexpr double kSlowLinkRatio = 2.0;
constexpr int kMinSteps = 2;
constexpr double kPersistence = 0.75;
constexpr double kMinCostFraction =
    0.05;  // of the step: slow_rank and slow_link below it are noise
constexpr double kBubbleFraction = 0.25;
constexpr double kBubbleTarget = 0.10;
constexpr double kExpertImbalance = 1.25;
// Against the calibrated model (diagnosis_model.hpp), both times the oversubscription: above
// the model's misses on a healthy run (compute up to some 1.2x its calibration, the data-parallel
// term up to 3.5x under ZeRO-3; docs/diagnosis.md, "Against the model").
constexpr double kModelComputeRatio = 3.0;
constexpr double kModelLinkRatio = 4.0;

// The host the point ran on (summary.json provenance): ranks per host and cores per host.
struct Host {
  int ranks_per_host = 0, cores_per_host = 0;  // 0: unknown
  // ranks / cores when above 1, else 1.
  double oversubscription() const;
};
Host host_of(const nlohmann::json& provenance);

// The findings of one point (a JSON array, most costly first). Each: {kind, axis, group
// (index of the group on its axis, -1 for none), ranks [...], from_step, cost_s, evidence
// {...figures...}, text (one sentence a user reads), advice}. Throws std::invalid_argument
// naming what is missing when the point has no rank_series.
// model: the calibrated model's seconds per step and rank ({"compute", "tp", "pp", "dp",
// "ep"}, and "compute_per_stage": one rank's compute per step on each pipeline stage; empty
// when the point was not calibrated), quoted in the evidence of slow ranks and slow links found
// by peers, and the reference where there are none (diagnosis_model.hpp). Every finding's
// evidence names its reference: "peers" or "model" (slow_rank, slow_link, slow_axis; a bubble
// "model", an expert imbalance "peers"), "topology" (placement), "failure_record".
nlohmann::json diagnose(const nlohmann::json& point, const Host& host = {},
                        const nlohmann::json& model = nlohmann::json::object());

// The failure records of one point (failure_record_json: each written by a rank that failed or
// whose watchdog expired, docs/diagnosis.md "Dead ranks and hangs") as one finding. A dead_rank
// record wins (its loss is the cause; ranks waiting for it may also have expired): kind
// dead_rank, axis "compute", group its pipeline stage, ranks [it]. Otherwise kind hang: ranks
// the members some record found silent (not answering; else those not arrived), axis and group
// those of the record that waited longest with a silent member (edp counts under dp; a wait
// outside the axes gives "compute" and the stage). cost_s is null: the job ended. Throws
// std::invalid_argument naming a missing field, an unknown kind or a rank outside the grid.
nlohmann::json failure_finding(const std::vector<nlohmann::json>& records);

// The failure record a failing rank writes: kind "dead_rank" or "hang", the world rank that
// writes it, the point (index and config), the step (-1 outside one), what happened, and for
// a hang the operation, its axis, and the world ranks that did not answer.
struct Failure {
  std::string kind;
  int rank = -1, point_index = -1, step = -1;
  nlohmann::json config;    // the point's RunConfig as summary.json writes it
  nlohmann::json settings;  // the point's swept keys and values, as in summary.json
  std::string what;
  double waited_s = 0;           // hang: how long the writer waited
  std::string op, axis;          // hang: the expired operation and its axis
  std::vector<int> silent;       // hang: world ranks that did not answer at all
  std::vector<int> not_arrived;  // hang: world ranks not in the operation (silent or elsewhere)
};
nlohmann::json failure_record_json(const Failure& f);
// The file name a rank's failure record gets in the output folder.
std::string failure_file_name(int rank);

// What the loss of world rank `rank` takes out on the grid `par` (a dead rank's diagnosis):
// its place (pipeline stage, replica, tensor-parallel rank) and every group of each axis that
// holds it, which can no longer complete a collective, e.g. "rank 5 is pipeline stage 1 of
// replica 0 (tensor-parallel rank 1): its tp group (ranks 4 5), pp group (ranks 1 5) and dp
// group (ranks 5 7) stall, and with them every rank of the step".
std::string loss_takes_out(const config::ParallelConfig& par, int rank);

// The groups of an axis ("tp", "pp", "dp", "ep") of the point's grid: world ranks per group,
// in group order (the order of the group's lowest rank).
std::vector<std::vector<int>> axis_groups(const nlohmann::json& parallel, const std::string& axis);

}  // namespace paraxis::driver::diagnosis
