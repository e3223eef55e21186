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
//              least kSlowLinkRatio times the median of the axis's other groups; its cost is
//              the extra time per step. With nodes known, the nodes the group spans that no
//              normal group does are named.
//   bubble     a pipeline whose measured bubble is at least kBubbleFraction of the step;
//              its cost the bubble's time, with the micro-batch count that would bring the
//              schedule's ideal bubble under kBubbleTarget.
//   placement  a tensor-parallel group that spans nodes (its collectives cross the slowest
//              links of the machine every layer); cost: the group's collective time.
// The thresholds are above the noise of fault-free runs on a shared machine (docs/
// diagnosis.md says how they were chosen): a clean run gives no slow_rank or slow_link.
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

// The findings of one point (a JSON array, most costly first). Each: {kind, axis, group
// (index of the group on its axis, -1 for none), ranks [...], from_step, cost_s, evidence
// {...figures...}, text (one sentence a user reads), advice}. Throws std::invalid_argument
// naming what is missing when the point has no rank_series.
nlohmann::json diagnose(const nlohmann::json& point);

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
