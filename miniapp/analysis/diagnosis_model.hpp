// Internal to the diagnosis (diagnosis*.cpp): the findings that rest on the calibrated model
// rather than on peers (docs/diagnosis.md, "Against the model"). Peers decide where they exist;
// the model finds what has no peer to differ from:
//   - a rank without peers (the only rank of its pipeline stage and experts: a pure pipeline)
//     whose compute is persistently kModelComputeRatio x o its stage's calibrated compute, or a
//     whole peer set that is, each when it also stands out from the other ranks measured
//     against their own calibrations (kSlowRankRatio x o); else every rank, when all are slower
//     than calibrated (one finding naming them all): kind slow_rank;
//   - the only group of an axis whose collective time net of waiting is persistently
//     kModelLinkRatio x o the calibrated model's: slow_link; every group of an axis with several:
//     slow_axis (group -1, ranks every rank of the axis).
// Every finding's evidence has reference "model". o: the host's oversubscription.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "analysis/diagnosis_series.hpp"

namespace paraxis::driver::diagnosis::detail {

// model: {"compute_per_stage": [seconds per step of one rank of each stage], ...}; nothing is
// found without it. found_by_peers: ranks the peers already found slow (left to them).
void model_slow_ranks(const Point& pt, const nlohmann::json& model, double oversubscription,
                      const std::vector<int>& found_by_peers, nlohmann::json& out);

// model: {"tp", "dp", "ep": the calibrated seconds per step and rank of the axis's collectives}.
// Against the model a group must be slow on kPersistence of every measured step (as the peers
// judge links). slow_ranks: ranks found slow (a group holding one is explained by it). faults:
// the findings so far, the peers' slow links among them; the model's are added, and a peer
// slow_link on an axis found slow as a whole by less than the axis's least slowed group is
// dropped (it differs within the axis's own slowdown).
void model_slow_links(const Point& pt, const nlohmann::json& model, double oversubscription,
                      const std::vector<int>& slow_ranks, nlohmann::json& faults);

}  // namespace paraxis::driver::diagnosis::detail
