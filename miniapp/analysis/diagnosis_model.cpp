// The findings that rest on the calibrated model (diagnosis_model.hpp): each rank's compute
// against its stage's calibrated chunk times, each axis's collectives against its calibrated
// link, where no peer is there to differ from.
#include "analysis/diagnosis_model.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "analysis/diagnosis.hpp"
#include "config/grid_coords.hpp"

namespace paraxis::driver::diagnosis::detail {

using nlohmann::json;

namespace {

// One series (a rank's compute, a group's wire time) against its calibrated figure, per
// measured step: the persistent onset, the median ratio and the median excess over the slowed
// steps. slowed is empty when the series is not persistently above threshold x model.
struct AgainstModel {
  int from_step = -1;
  std::vector<int> slowed;  // measured-step indices
  double ratio = 0, extra_s = 0, measured_s = 0;
};

// from_start: persistent over every measured step (a link, as the peers judge links: the
// emulated and injected links are slow from the first step) rather than from an onset (a rank).
AgainstModel against_model(const Point& pt, const std::vector<double>& measured, double model_s,
                           double threshold, bool from_start) {
  AgainstModel a;
  if (model_s <= 0 || measured.empty()) return a;
  std::vector<double> ratios;
  for (double x : measured) ratios.push_back(x / model_s);
  Onset o;
  if (!from_start) {
    o = persistent_onset(ratios, threshold);
  } else {
    for (int j = 0; j < static_cast<int>(ratios.size()); ++j)
      if (ratios[j] >= threshold) o.slowed.push_back(j);
    const double n = static_cast<double>(ratios.size());
    if (static_cast<int>(o.slowed.size()) >= kMinSteps &&
        static_cast<double>(o.slowed.size()) >= kPersistence * n)
      o.first = 0;
  }
  if (o.first < 0) return a;
  a.from_step = pt.steps[pt.measured[o.first]];
  a.slowed = o.slowed;
  std::vector<double> r, e, m;
  for (int j : o.slowed) {
    r.push_back(ratios[j]);
    e.push_back(measured[j] - model_s);
    m.push_back(measured[j]);
  }
  a.ratio = median_of(r);
  a.extra_s = median_of(e);
  a.measured_s = median_of(m);
  return a;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? " " : "") << ranks[i];
  return os.str();
}

json finding(const char* kind, const std::string& axis, int group, const std::vector<int>& ranks,
             int from_step, double cost_s) {
  return {{"kind", kind},
          {"axis", axis},
          {"group", group},
          {"ranks", ranks},
          {"from_step", from_step},
          {"cost_s", cost_s},
          {"evidence", {{"reference", "model"}}}};
}

// One slow_rank finding against the model for ranks (one, or every rank of the point).
json rank_finding(const Point& pt, const std::map<int, AgainstModel>& slow,
                  const std::vector<double>& per_stage, const std::vector<int>& ranks, int group,
                  const std::string& who, double threshold) {
  std::vector<double> ratio, extra, own, cal;
  int from = pt.steps.back();
  for (int r : ranks) {
    const AgainstModel& a = slow.at(r);
    ratio.push_back(a.ratio);
    extra.push_back(a.extra_s);
    own.push_back(a.measured_s);
    cal.push_back(per_stage.at(config::grid_coords_of(pt.par, r).pp));
    from = std::min(from, a.from_step);
  }
  json f = finding("slow_rank", "compute", group, ranks, from, median_of(extra));
  f["evidence"].update({{"compute_ratio_to_model", median_of(ratio)},
                        {"compute_s", median_of(own)},
                        {"model_compute_s", median_of(cal)},
                        {"slowed_steps", slow.at(ranks.front()).slowed.size()},
                        {"measured_steps", pt.measured.size()},
                        {"threshold", threshold}});
  std::ostringstream t;
  t << who << " computes " << fixed(median_of(ratio), 1) << "x its calibrated time from step "
    << from << " (" << fixed(median_of(own), 4) << " s per step against "
    << fixed(median_of(cal), 4) << " s); it adds " << fixed(median_of(extra), 3)
    << " s of compute per step";
  f["text"] = t.str();
  return f;
}

// Whether rank r stands out from the other ranks once each is measured against its own stage's
// calibration: r's compute over its calibrated compute, divided by the median of the others',
// at least threshold persistently (the onset rule). On a loaded machine descheduling stretches
// every rank's steps at random, far beyond the calibration; a slowed rank is slower than the
// others step after step.
bool stands_out(const Point& pt, const Series& compute, const std::vector<double>& per_stage, int r,
                double threshold) {
  if (pt.world < 2) return true;
  const auto normalised = [&](int q, int k) {
    return compute[q][k] / per_stage.at(config::grid_coords_of(pt.par, q).pp);
  };
  std::vector<double> rel;
  for (int k : pt.measured) {
    std::vector<double> others;
    for (int q = 0; q < pt.world; ++q)
      if (q != r) others.push_back(normalised(q, k));
    const double ref = median_of(others);
    rel.push_back(ref > 0 ? normalised(r, k) / ref : 0.0);
  }
  return persistent_onset(rel, threshold).first >= 0;
}

}  // namespace

void model_slow_ranks(const Point& pt, const json& model, double oversubscription,
                      const std::vector<int>& found_by_peers, json& out) {
  if (!model.is_object() || !model.contains("compute_per_stage")) return;
  const auto per_stage = model.at("compute_per_stage").get<std::vector<double>>();
  const Series compute = series(pt.rs, "compute_s");
  if (compute.empty() || static_cast<int>(per_stage.size()) != pt.par.pp ||
      *std::min_element(per_stage.begin(), per_stage.end()) <= 0)
    return;
  const double threshold = kModelComputeRatio * oversubscription;
  std::map<int, AgainstModel> slow;  // by rank
  for (int r = 0; r < pt.world; ++r) {
    if (std::count(found_by_peers.begin(), found_by_peers.end(), r)) continue;
    std::vector<double> own;
    for (int k : pt.measured) own.push_back(compute[r][k]);
    const int stage = config::grid_coords_of(pt.par, r).pp;
    const AgainstModel a = against_model(pt, own, per_stage.at(stage), threshold, false);
    if (!a.slowed.empty()) slow[r] = a;
  }
  // Where peers exist they decide about one rank; the model speaks for a rank without peers,
  // and for a whole peer set slower than calibrated (which its peers cannot see), when it also
  // stands out from the other ranks.
  std::vector<int> ranks;
  for (const auto& [key, set] : peer_sets(pt)) {
    const bool all = std::all_of(set.begin(), set.end(), [&](int r) { return slow.count(r); });
    for (int r : set)
      if (slow.count(r) && (set.size() == 1 || all) &&
          stands_out(pt, compute, per_stage, r, kSlowRankRatio * oversubscription))
        ranks.push_back(r);
  }
  if (ranks.empty() && static_cast<int>(slow.size()) == pt.world && pt.world > 1) {
    for (const auto& [r, a] : slow) ranks.push_back(r);
    out.push_back(rank_finding(pt, slow, per_stage, ranks, pt.par.pp == 1 ? 0 : -1,
                               "every rank (" + rank_list(ranks) + ")", threshold));
    out.back()["advice"] =
        "the whole job computes slower than when it calibrated: check the nodes' clocks, "
        "thermals and power caps, and other jobs on their cores";
    return;
  }
  for (int r : ranks) {
    const int stage = config::grid_coords_of(pt.par, r).pp;
    out.push_back(rank_finding(pt, slow, per_stage, {r}, stage,
                               "rank " + std::to_string(r) + " (" + where(pt.par, r) + ")",
                               threshold));
    out.back()["advice"] =
        "check that device (clocks, thermals, errors, other jobs) or take its node out";
  }
}

namespace {

// What a group's calls cost the step, per rank and step, as the model's term for the axis counts
// it: the calls' time, or with comm.overlap on dp their exposed time (a call that progresses
// behind the backward spans the compute it overlaps, which the model's term leaves out).
const char* model_compared_series(const Point& pt, const std::string& axis) {
  return axis == "dp" && pt.dp_overlap ? "exposed_s" : "time_s";
}

// Every group of the axis against the model; empty unless all are slow and none holds a slow
// rank (the rank explains its groups' time).
std::vector<AgainstModel> every_group_slow(const Point& pt, const std::string& axis,
                                           const std::vector<std::vector<int>>& groups,
                                           double model_s, double threshold,
                                           const std::vector<int>& slow_ranks) {
  const Series time = series(pt.rs, "comm." + axis + "." + model_compared_series(pt, axis));
  const Series wait = series(pt.rs, "comm." + axis + ".wait_s");
  std::vector<AgainstModel> slow;
  if (model_s <= 0 || time.empty() || groups.front().size() < 2) return slow;
  for (const auto& g : groups) {
    const bool holds_slow_rank = std::any_of(g.begin(), g.end(), [&](int r) {
      return std::count(slow_ranks.begin(), slow_ranks.end(), r) > 0;
    });
    const AgainstModel a = holds_slow_rank ? AgainstModel()
                                           : against_model(pt, group_wire(pt, time, wait, g),
                                                           model_s, threshold, true);
    if (a.slowed.empty()) return {};
    slow.push_back(a);
  }
  return slow;
}

json axis_finding(const Point& pt, const std::string& axis,
                  const std::vector<std::vector<int>>& groups,
                  const std::vector<AgainstModel>& slow, double model_s, double threshold) {
  std::vector<double> ratio, extra, measured;
  std::vector<int> ranks;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    ratio.push_back(slow[g].ratio);
    extra.push_back(slow[g].extra_s);
    measured.push_back(slow[g].measured_s);
    ranks.insert(ranks.end(), groups[g].begin(), groups[g].end());
  }
  std::sort(ranks.begin(), ranks.end());
  const bool one = groups.size() == 1;
  const int from = slow.front().from_step;
  json f =
      finding(one ? "slow_link" : "slow_axis", axis, one ? 0 : -1, ranks, from, median_of(extra));
  f["evidence"].update(
      {{"wire_ratio_to_model", median_of(ratio)},
       {"least_group_ratio_to_model", *std::min_element(ratio.begin(), ratio.end())},
       {"group_time_s", median_of(measured)},
       {"model_s", model_s},
       {"series", std::string("comm.") + axis + "." + model_compared_series(pt, axis)},
       {"groups", groups.size()},
       {"threshold", threshold}});
  std::ostringstream t;
  t << (one ? axis + " group 0, the axis's only group" : "every " + axis + " group") << " (ranks "
    << rank_list(ranks) << ") spends " << fixed(median_of(ratio), 1) << "x its calibrated "
    << (model_compared_series(pt, axis) == std::string("exposed_s")
            ? "exposed collective time (comm.overlap: what the backward did not hide)"
            : "collective time")
    << ", net of waiting for late ranks, from step " << from << ": " << fixed(median_of(extra), 3)
    << " s per step";
  f["text"] = t.str();
  f["advice"] = one ? "test the links between these ranks (a collective benchmark on the group) "
                      "against the calibration: a slow or degraded link"
                    : "the whole axis is slower than when it calibrated: its network (contention "
                      "from other jobs, a degraded fabric, another transport or algorithm), or "
                      "recalibrate if the machine changed";
  return f;
}

}  // namespace

void model_slow_links(const Point& pt, const json& model, double oversubscription,
                      const std::vector<int>& slow_ranks, json& faults) {
  if (!model.is_object()) return;
  const double threshold = kModelLinkRatio * oversubscription;
  // Not the pipeline: a stage's transfer time holds its wait for the neighbour's compute
  // (docs/diagnosis.md, "Against the model"), which the model's transfer term does not.
  for (const std::string axis : {"tp", "dp", "ep"}) {
    const auto groups = groups_of(pt.par, axis);
    const double model_s = model.value(axis, 0.0);
    const auto slow = every_group_slow(pt, axis, groups, model_s, threshold, slow_ranks);
    if (slow.empty()) continue;  // with several groups only a whole axis is news to peers
    json f = axis_finding(pt, axis, groups, slow, model_s, threshold);
    // The axis's own slowdown is its least slowed group's; a group the peers found slow by less
    // than that differs within it (a disturbance of the whole axis lands unevenly), so the
    // whole axis is the finding and the group's is dropped.
    const double axis_ratio = f.at("evidence").at("least_group_ratio_to_model");
    json kept = json::array();
    for (const auto& g : faults)
      if (g.at("kind") != "slow_link" || g.at("axis") != axis ||
          g.at("evidence").value("wire_ratio_to_other_groups", 0.0) >= axis_ratio)
        kept.push_back(g);
    faults = kept;
    faults.push_back(f);
  }
}

}  // namespace paraxis::driver::diagnosis::detail
