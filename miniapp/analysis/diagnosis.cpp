// The findings of a point (diagnosis.hpp): peers against peers, step by step, on the grid the
// point ran; against the calibrated model where there are no peers (diagnosis_model.cpp).
#include "analysis/diagnosis.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

#include "analysis/diagnosis_model.hpp"
#include "analysis/diagnosis_series.hpp"
#include "analysis/statistics.hpp"
#include "config/grid_coords.hpp"
#include "config/parallel_config.hpp"
#include "deck/deck.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver::diagnosis {

using nlohmann::json;
using namespace detail;

namespace {

// Rank r's compute against the median of its peers' (the other ranks of `ranks`), per measured
// step where that median is positive: the columns, the ratios and the differences.
struct PeerComparison {
  std::vector<int> cols;
  std::vector<double> ratio, extra;
};

PeerComparison compute_against_peers(const Point& pt, const Series& compute,
                                     const std::vector<int>& ranks, int r) {
  PeerComparison c;
  for (int k : pt.measured) {
    std::vector<double> peers;
    for (int q : ranks)
      if (q != r) peers.push_back(compute[q][k]);
    const double ref = median_of(peers);
    if (ref <= 0) continue;
    c.cols.push_back(k);
    c.ratio.push_back(compute[r][k] / ref);
    c.extra.push_back(compute[r][k] - ref);
  }
  return c;
}

// Who waits for rank r: the other ranks' mean wait in each axis's collectives, the median over
// the slowed columns, per axis; `wait_text` names the axes where it exceeds a tenth of `cost`.
json waits_for_rank(const Point& pt, int r, const std::vector<int>& slowed, double cost,
                    std::string& wait_text) {
  json waits = json::object();
  for (const char* axis : {"tp", "pp", "dp", "ep"}) {
    const Series w = series(pt.rs, std::string("comm.") + axis + ".wait_s");
    if (w.empty()) continue;
    std::vector<double> per_step;
    for (int k : slowed) {
      double sum = 0;
      for (int q = 0; q < pt.world; ++q)
        if (q != r) sum += w[q][k];
      per_step.push_back(sum / std::max(1, pt.world - 1));
    }
    const double m = median_of(per_step);
    waits[axis] = m;
    if (m > 0.1 * cost) wait_text += std::string(wait_text.empty() ? "" : " and ") + axis;
  }
  return waits;
}

// Slow ranks: compute against the median of the ranks of the same pipeline stage.
void slow_ranks(const Point& pt, double oversubscription, json& out) {
  const double threshold = kSlowRankRatio * oversubscription;
  const Series compute = series(pt.rs, "compute_s");
  if (compute.empty()) return;
  for (const auto& [key, ranks] : peer_sets(pt)) {
    const int st = key.first;
    if (ranks.size() < 2) continue;  // no peer doing the same work
    for (int r : ranks) {
      const PeerComparison c = compute_against_peers(pt, compute, ranks, r);
      const Onset o = persistent_onset(c.ratio, threshold);
      if (o.first < 0) continue;
      std::vector<int> slowed;  // columns from the onset on that cross the threshold
      std::vector<double> ratios, extra, own;
      for (int j : o.slowed) {
        slowed.push_back(c.cols[j]);
        ratios.push_back(c.ratio[j]);
        extra.push_back(c.extra[j]);
        own.push_back(compute[r][c.cols[j]]);
      }
      const int from = pt.steps[c.cols[o.first]];
      const double ratio = median_of(ratios), cost = median_of(extra);
      std::string wait_text;
      const json waits = waits_for_rank(pt, r, slowed, cost, wait_text);
      json f;
      f["kind"] = "slow_rank";
      f["axis"] = "compute";
      f["group"] = st;
      f["ranks"] = json::array({r});
      f["from_step"] = from;
      f["cost_s"] = cost;
      f["evidence"] = {{"reference", "peers"},
                       {"compute_ratio_to_peers", ratio},
                       {"compute_s", median_of(own)},
                       {"slowed_steps", static_cast<int>(slowed.size())},
                       {"measured_steps", static_cast<int>(pt.measured.size())},
                       {"peers", ranks.size() - 1},
                       {"peer_wait_s_per_axis", waits},
                       {"threshold", threshold}};
      std::ostringstream t;
      t << "rank " << r << " computes " << fixed(ratio, 1) << "x slower than its "
        << ranks.size() - 1 << " peer(s) from step " << from << ": it is " << where(pt.par, r)
        << "; it adds " << fixed(cost, 3) << " s of compute per step";
      if (!wait_text.empty()) t << ", which the other ranks wait for in " << wait_text;
      f["text"] = t.str();
      f["advice"] = "check that device (clocks, thermals, errors, other jobs) or take its node out";
      out.push_back(f);
    }
  }
}

// Each group's wire time against the median of the axis's other groups, per measured step: the
// median ratio and difference, and whether the ratio persists at or above `threshold`.
struct GroupComparison {
  std::vector<bool> slow;
  std::vector<double> ratio, extra;
};

GroupComparison compare_groups(const Point& pt, const std::vector<std::vector<double>>& wire,
                               double threshold) {
  const std::size_t n = wire.size();
  GroupComparison c{std::vector<bool>(n, false), std::vector<double>(n, 0),
                    std::vector<double>(n, 0)};
  for (std::size_t g = 0; g < n; ++g) {
    std::vector<double> ratios, extras;
    for (std::size_t i = 0; i < pt.measured.size(); ++i) {
      std::vector<double> others;
      for (std::size_t h = 0; h < n; ++h)
        if (h != g) others.push_back(wire[h][i]);
      const double ref = median_of(others);
      if (ref <= 0) continue;
      ratios.push_back(wire[g][i] / ref);
      extras.push_back(wire[g][i] - ref);
    }
    c.ratio[g] = median_of(ratios);
    c.extra[g] = median_of(extras);
    // Persistent: at or above the threshold on kPersistence of the measured steps.
    const auto above = std::count_if(ratios.begin(), ratios.end(),
                                     [threshold](double x) { return x >= threshold; });
    c.slow[g] = static_cast<int>(ratios.size()) >= kMinSteps &&
                static_cast<double>(above) >= kPersistence * static_cast<double>(ratios.size());
  }
  return c;
}

// The nodes slow group g spans (node_of: each rank's node), into the finding's evidence and text.
void slow_group_nodes(const std::vector<std::vector<int>>& groups, std::size_t g,
                      const std::vector<bool>& slow, const std::vector<int>& node_of, json& f,
                      std::ostringstream& t) {
  std::vector<int> mine, normal;
  for (int r : groups[g]) mine.push_back(node_of.at(r));
  for (std::size_t h = 0; h < groups.size(); ++h)
    if (!slow[h])
      for (int r : groups[h]) normal.push_back(node_of.at(r));
  std::sort(mine.begin(), mine.end());
  mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  f["evidence"]["nodes"] = mine;
  if (mine.size() > 1) {
    t << "; it spans nodes";
    for (int n : mine) t << ' ' << n;
  }
}

// The finding of slow group g of `axis`.
json slow_link_finding(const Point& pt, const char* axis, const Series& time,
                       const std::vector<std::vector<int>>& groups, std::size_t g,
                       const GroupComparison& c, const std::vector<int>& node_of) {
  const bool p2p = std::string(axis) == "pp";
  json f;
  f["kind"] = "slow_link";
  f["axis"] = axis;
  f["group"] = static_cast<int>(g);
  f["ranks"] = groups[g];
  f["from_step"] = pt.steps[pt.measured.front()];
  f["cost_s"] = c.extra[g];
  std::vector<double> group_time;
  for (int k : pt.measured) {
    double sum = 0;
    for (int r : groups[g]) sum += time[r][k];
    group_time.push_back(sum / static_cast<double>(groups[g].size()));
  }
  f["evidence"] = {{"reference", "peers"},
                   {"wire_ratio_to_other_groups", c.ratio[g]},
                   {"group_time_s", median_of(group_time)},
                   {"groups", groups.size()},
                   {"threshold", kSlowLinkRatio}};
  std::ostringstream t;
  t << axis << " group " << g << " (ranks";
  for (int r : groups[g]) t << ' ' << r;
  t << ") spends " << fixed(c.ratio[g], 1) << "x the "
    << (p2p ? "transfer time of the other pipelines"
            : "collective time of the other " + std::string(axis) +
                  " groups, net of waiting for late ranks")
    << ": " << fixed(c.extra[g], 3) << " s per step";
  // The nodes only this group spans.
  if (!node_of.empty()) slow_group_nodes(groups, g, c.slow, node_of, f, t);
  f["text"] = t.str();
  f["advice"] =
      "test the links between these ranks' nodes (a collective benchmark on the group); "
      "a slow or degraded link, or a group placed across a slower boundary";
  return f;
}

// Slow links: a group's collective time net of waiting against the axis's other groups.
// Groups holding a slow rank are left out: the rank explains their time (it makes its peers
// wait, and a time-shared rank's own collectives stretch too).
void slow_links(const Point& pt, const json& topology, const std::vector<int>& slow_ranks,
                double oversubscription, json& out) {
  // Not scaled by the oversubscription: time-sharing stretches a collective by descheduling
  // slices (milliseconds, additive), which the persistence rule and the cost floor take out,
  // while a degraded link multiplies it (docs/diagnosis.md, "How the thresholds were chosen").
  (void)oversubscription;
  std::vector<int> node_of;
  if (topology.is_object() && topology.contains("node_of"))
    node_of = topology.at("node_of").get<std::vector<int>>();
  for (const char* axis : {"tp", "pp", "dp", "ep"}) {
    const bool p2p = std::string(axis) == "pp";
    const Series time = series(pt.rs, std::string("comm.") + axis + ".time_s");
    // A pipeline's transfers have no arrival skew to take out (their wait is their exposed
    // time, docs/diagnosis.md "Wait time"): its groups are compared on their transfer time.
    const Series wait = p2p ? Series() : series(pt.rs, std::string("comm.") + axis + ".wait_s");
    if (time.empty()) continue;
    const auto groups = groups_of(pt.par, axis);
    if (groups.size() < 2 || groups.front().size() < 2) continue;
    // wire[g][column]: mean over the group's ranks of time - wait.
    std::vector<std::vector<double>> wire(groups.size());
    for (std::size_t g = 0; g < groups.size(); ++g) wire[g] = group_wire(pt, time, wait, groups[g]);
    const GroupComparison c = compare_groups(pt, wire, kSlowLinkRatio);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (!c.slow[g]) continue;
      bool explained = false;
      for (int r : groups[g])
        explained =
            explained || std::find(slow_ranks.begin(), slow_ranks.end(), r) != slow_ranks.end();
      if (!explained) out.push_back(slow_link_finding(pt, axis, time, groups, g, c, node_of));
    }
  }
}

void bubble(const json& p, const Point& pt, json& out) {
  if (pt.par.pp < 2 || !p.contains("pipeline")) return;
  const double b = p.at("time").value("bubble_fraction", 0.0);
  if (b < kBubbleFraction) return;
  const int m = p.at("pipeline").at("micro_batches");
  schedule::PipelineShape shape{pt.par.pp, m, pt.par.virtual_stages};
  const double own = schedule::ideal_bubble_fraction(pt.par.schedule, shape);
  int better = m;
  double ideal = own;
  while (ideal > kBubbleTarget && better < (1 << 20)) {
    better *= 2;
    shape.micro_batches = better;
    ideal = schedule::ideal_bubble_fraction(pt.par.schedule, shape);
  }
  const double step = p.at("time").value("step_median_s", 0.0);
  json f;
  f["kind"] = "bubble";
  f["axis"] = "pp";
  f["group"] = -1;
  f["ranks"] = json::array();
  f["from_step"] = pt.steps.empty() ? 0 : pt.steps[pt.measured.empty() ? 0 : pt.measured.front()];
  f["cost_s"] = b * step;
  f["evidence"] = {{"reference", "model"},  // the schedule's own bubble
                   {"bubble_fraction", b}, {"schedule_bubble_fraction", own}, {"micro_batches", m},
                   {"stages", pt.par.pp},  {"threshold", kBubbleFraction}};
  std::ostringstream t;
  t << "m = " << m << " micro-batches on p = " << pt.par.pp << " stages ("
    << schedule::to_string(pt.par.schedule) << "): the bubble is " << fixed(100 * b, 0)
    << " % of the pipelined step";
  // The schedule explains a bubble up to its ideal fraction; far beyond it the stages wait
  // for each other's transfers or unequal work, which more micro-batches do not cure.
  if (own >= kBubbleFraction || b < 2 * own) {
    t << "; m = " << better << " would cut the schedule's to " << fixed(100 * ideal, 0) << " %";
    f["advice"] =
        "more micro-batches per step (a smaller train.micro_batch or a larger "
        "train.global_batch), or the interleaved or zb-h1 schedule";
  } else {
    t << ", against the schedule's " << fixed(100 * own, 0)
      << " %: the stages wait for transfers or for each other beyond what the schedule implies";
    f["advice"] =
        "look at the pipeline's transfers (a slow pp link, the pp findings) and at the stages' "
        "compute (parallel.stage_layers balances them)";
  }
  f["text"] = t.str();
  out.push_back(f);
}

void placement(const json& p, json& out) {
  if (!p.contains("topology")) return;
  const json& axes = p.at("topology").value("axes", json::object());
  if (!axes.contains("tp")) return;
  const int spanning = axes.at("tp").value("groups_spanning_nodes", 0);
  if (spanning == 0) return;
  double cost = 0;
  if (p.at("time").contains("comm")) cost = p.at("time").at("comm").at("tp").value("time_s", 0.0);
  json f;
  f["kind"] = "placement";
  f["axis"] = "tp";
  f["group"] = -1;
  f["ranks"] = json::array();
  f["from_step"] = 0;
  f["cost_s"] = cost;
  f["evidence"] = {{"reference", "topology"},
                   {"tp_groups_spanning_nodes", spanning},
                   {"tp_groups", axes.at("tp").value("groups", 0)}};
  f["text"] = std::to_string(spanning) +
              " tensor-parallel group(s) span nodes: their collectives, two per block and "
              "micro-batch each way, cross the inter-node links (" +
              fixed(cost, 3) + " s of tp communication per step)";
  f["advice"] =
      "keep tensor parallelism inside a node: parallel.tp <= ranks per node, and "
      "parallel.order tp-pp-dp or tp-dp-pp (tp varies fastest)";
  out.push_back(f);
}

// The share of the routed tokens each of the ep shards' experts receive (E / ep experts each),
// per measured step that recorded them: [shard][step].
std::vector<std::vector<double>> token_shares(const json& steps, int E, int ep) {
  const int per = E / ep;
  std::vector<std::vector<double>> share(ep);
  for (const auto& st : steps) {
    if (!st.value("measured", true) || !st.contains("moe")) continue;
    const auto tokens = st.at("moe").at("tokens_per_expert").get<std::vector<double>>();
    if (static_cast<int>(tokens.size()) != E) continue;
    double total = 0;
    for (double t : tokens) total += t;
    if (total <= 0) continue;
    for (int j = 0; j < ep; ++j) {
      double mine = 0;
      for (int e = j * per; e < (j + 1) * per; ++e) mine += tokens[e];
      share[j].push_back(mine / total);
    }
  }
  return share;
}

// The ranks' mean wait in ep collectives, the median over the measured steps (0: none recorded).
double median_ep_wait(const Point& pt, const std::vector<int>& ranks) {
  const Series wait = series(pt.rs, "comm.ep.wait_s");
  std::vector<double> per_step;
  if (!wait.empty() && !ranks.empty())
    for (int k : pt.measured) {
      double sum = 0;
      for (int r : ranks) sum += wait[r][k];
      per_step.push_back(sum / static_cast<double>(ranks.size()));
    }
  return median_of(per_step);
}

// Expert imbalance: the share of the routed tokens each ep rank's experts receive, step by
// step (summary.json steps[].moe.tokens_per_expert, over every replica), against 1/ep.
void expert_imbalance(const json& p, const Point& pt, json& out) {
  const int ep = pt.par.ep;
  const int E = p.at("config").at("model").at("moe").value("experts", 0);
  if (ep < 2 || E < ep || E % ep != 0 || !p.contains("steps")) return;
  const int per = E / ep;
  const std::vector<std::vector<double>> share = token_shares(p.at("steps"), E, ep);
  if (share[0].empty()) return;
  int heavy = 0;
  std::vector<double> ratio(ep);
  for (int j = 0; j < ep; ++j) {
    ratio[j] = median_of(share[j]) * ep;
    if (ratio[j] > ratio[heavy]) heavy = j;
  }
  if (ratio[heavy] < kExpertImbalance) return;
  std::vector<int> ranks, others;
  for (int r = 0; r < pt.world; ++r)
    (config::grid_coords_of(pt.par, r).ep == heavy ? ranks : others).push_back(r);
  // What the others lose: their wait for the heavy shard's ranks in ep collectives.
  const double cost = median_ep_wait(pt, others);
  json f;
  f["kind"] = "expert_imbalance";
  f["axis"] = "ep";
  f["group"] = heavy;
  f["ranks"] = ranks;
  f["from_step"] = pt.steps[pt.measured.front()];
  f["cost_s"] = cost;
  f["evidence"] = {{"reference", "peers"},  // the other ep ranks' shares
                   {"token_share_to_fair_share", ratio},
                   {"experts_per_ep_rank", per},
                   {"other_ranks_ep_wait_s", cost},
                   {"threshold", kExpertImbalance}};
  std::ostringstream t;
  t << "experts " << heavy * per << "-" << (heavy + 1) * per - 1 << " (ep rank " << heavy
    << ": ranks";
  for (int r : ranks) t << ' ' << r;
  t << ") receive " << fixed(ratio[heavy], 2) << "x their share of the routed tokens ("
    << fixed(100 * ratio[heavy] / ep, 0) << " % on 1 of " << ep
    << " ep ranks); the other ranks wait " << fixed(cost, 3) << " s per step for them in ep";
  f["text"] = t.str();
  f["advice"] =
      "balance the routing: a larger model.moe.aux_loss_coef, a capacity_factor that caps each "
      "expert, or more experts per ep rank";
  out.push_back(f);
}

}  // namespace

std::vector<std::vector<int>> axis_groups(const json& parallel, const std::string& axis) {
  config::ParallelConfig p;
  p.tp = parallel.at("tp");
  p.pp = parallel.at("pp");
  p.dp = parallel.at("dp");
  p.ep = parallel.value("ep", 1);
  p.order = config::parse_rank_order(parallel.value("order", std::string("tp-pp-dp")));
  const int world = p.tp * p.pp * p.dp;
  std::map<std::vector<int>, std::vector<int>> by_key;
  for (int r = 0; r < world; ++r) {
    const auto c = config::grid_coords_of(p, r);
    std::vector<int> key;
    if (axis == "tp")
      key = {c.pp, c.dp};
    else if (axis == "pp")
      key = {c.tp, c.dp};
    else if (axis == "dp")
      key = {c.tp, c.pp};
    else if (axis == "ep")
      key = {c.tp, c.pp, c.edp};
    else
      throw std::invalid_argument("diagnosis: unknown axis \"" + axis + "\"");
    by_key[key].push_back(r);
  }
  std::vector<std::vector<int>> groups;
  for (auto& [key, ranks] : by_key) groups.push_back(ranks);
  std::sort(groups.begin(), groups.end(), [](const std::vector<int>& a, const std::vector<int>& b) {
    return a.front() < b.front();
  });
  return groups;
}

std::string loss_takes_out(const config::ParallelConfig& par, int rank) {
  const json p = {{"tp", par.tp},
                  {"pp", par.pp},
                  {"dp", par.dp},
                  {"ep", par.ep},
                  {"order", config::to_string(par.order)}};
  std::ostringstream os;
  os << "rank " << rank << " is " << where(par, rank);
  std::vector<std::string> parts;
  for (const char* axis : {"tp", "pp", "dp", "ep"}) {
    if (p.at(axis).get<int>() < 2) continue;
    for (const auto& g : axis_groups(p, axis))
      if (std::find(g.begin(), g.end(), rank) != g.end()) {
        std::ostringstream q;
        q << axis << " group (ranks";
        for (int r : g) q << ' ' << r;
        q << ')';
        parts.push_back(q.str());
      }
  }
  if (parts.empty()) return os.str() + ", the only rank of the run";
  os << ": its ";
  for (std::size_t i = 0; i < parts.size(); ++i)
    os << (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") << parts[i];
  os << " stall, and with them every rank of the step";
  return os.str();
}

double Host::oversubscription() const {
  if (ranks_per_host <= 0 || cores_per_host <= 0 || ranks_per_host <= cores_per_host) return 1.0;
  return static_cast<double>(ranks_per_host) / cores_per_host;
}

Host host_of(const json& provenance) {
  Host h;
  if (!provenance.is_object()) return h;
  h.ranks_per_host = provenance.value("max_ranks_per_host", 0);
  h.cores_per_host = provenance.value("cores_per_host", 0);
  return h;
}

// The calibrated model's figure beside a finding's measured one (evidence and text).
static void quote_model(json& f, const json& model, const char* term, double measured_s,
                        const char* what) {
  if (!model.is_object() || !model.contains(term)) return;
  const double m = model.at(term).get<double>();
  if (m <= 0) return;
  f["evidence"]["measured_s"] = measured_s;
  f["evidence"]["model_s"] = m;
  f["evidence"]["ratio_to_model"] = measured_s / m;
  f["text"] = f["text"].get<std::string>() + "; " + what + " " + fixed(measured_s, 3) +
              " s per step against the calibrated model's " + fixed(m, 3) + " s (" +
              fixed(measured_s / m, 1) + "x)";
}

json diagnose(const json& p, const Host& host, const json& model) {
  const Point pt = read_point(p);
  json out = json::array();
  if (pt.measured.empty()) return out;
  const double o = host.oversubscription();
  // Peers first; the calibrated model where no peer differs (diagnosis_model.hpp). A rank the
  // model finds explains its groups' time only when it costs enough to be a finding.
  const double step = p.at("time").value("step_median_s", 0.0);
  json faults = json::array();
  slow_ranks(pt, o, faults);
  std::vector<int> slowed;
  for (const auto& f : faults) slowed.push_back(f.at("ranks").at(0));
  json by_model = json::array();
  model_slow_ranks(pt, model, o, slowed, by_model);
  for (const auto& f : by_model)
    if (f.at("cost_s").get<double>() >= kMinCostFraction * step) {
      for (const auto& r : f.at("ranks")) slowed.push_back(r.get<int>());
      faults.push_back(f);
    }
  slow_links(pt, p.value("topology", json::object()), slowed, o, faults);
  model_slow_links(pt, model, o, slowed, faults);
  // A fault that costs less than kMinCostFraction of the step is within the machine's noise.
  for (auto& f : faults)
    if (f.at("cost_s").get<double>() >= kMinCostFraction * step) {
      const auto& e = f.at("evidence");
      if (e.at("reference") == "peers") {
        if (f.at("kind") == "slow_rank")
          quote_model(f, model, "compute", e.at("compute_s").get<double>(), "it computes");
        else
          quote_model(f, model, f.at("axis").get<std::string>().c_str(),
                      e.at("group_time_s").get<double>(), "the group spends");
      }
      out.push_back(f);
    }
  // A bubble well beyond the schedule's own is waiting; with a fault found, the fault is what
  // the stages wait for, and the bubble is not a finding of its own.
  json bubbles = json::array();
  bubble(p, pt, bubbles);
  for (const auto& b : bubbles)
    if (out.empty() || b.at("evidence").at("bubble_fraction").get<double>() <
                           2 * b.at("evidence").at("schedule_bubble_fraction").get<double>())
      out.push_back(b);
  placement(p, out);
  expert_imbalance(p, pt, out);
  std::stable_sort(out.begin(), out.end(), [](const json& a, const json& b) {
    return a.at("cost_s").get<double>() > b.at("cost_s").get<double>();
  });
  return out;
}

}  // namespace paraxis::driver::diagnosis
