// `paraxis plan MODEL MACHINE`: every configuration of a deck's model on a machine description
// (inputs/machines/*.yaml), those that fit in memory ranked by predicted step time
// (perfmodel/planner.hpp), each rejected one with its reason; with `--layout`, one
// configuration evaluated term by term.
//
// The layout grammar: comma-separated fields, each once: tp=N pp=N dp=N ep=N mb=N (or
// micro_batch=N) zero=0..3 schedule=NAME v=N (or virtual_stages=N) sp[=true|false] (or
// sequence_parallel) recompute=none|selective|full|full:N (N: recompute_layers). A field not
// given takes the deck's value, but dp: when omitted it is the machine's devices / (tp * pp)
// when that divides. Anything else (an unknown field, a bad value, a field twice) is an error
// naming it (exit 2). The evaluation is the planner's own (perfmodel::evaluate), so a layout's
// figures are those of its row in the ranking.
//
// Without --layout the deck's parallel section plays no part (every layout is tried), so a
// `--set parallel.*` (or of a key the search sets: train.micro_batch, train.recompute,
// train.recompute_layers) would be silently ignored: it is refused, pointing to --layout.
//
// The machine description format and its validation: machine_file.hpp. The whole plan
// (--json) is written atomically (io/checked_file.hpp): a failed write exits 4, naming the file.
// Pure (analysis/plan.hpp): rank 0 of `paraxis plan` calls it (driver/plan_command.cpp).
#include "analysis/plan.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "config/exit_codes.hpp"
#include "deck/deck.hpp"
#include "deck/machine_file.hpp"
#include "io/checked_file.hpp"
#include "model/param_layout.hpp"
#include "model/shard_layout.hpp"
#include "perfmodel/checkpoint.hpp"
#include "perfmodel/planner.hpp"
#include "perfmodel/step_traffic.hpp"

namespace paraxis::driver {

namespace pm = paraxis::perfmodel;

namespace {

// The --set keys the ranking searches over (so an override of them would change nothing).
bool searched_key(const std::string& key) {
  return key.rfind("parallel.", 0) == 0 || key == "train.micro_batch" || key == "train.recompute" ||
         key == "train.recompute_layers";
}

// The rule a rejection breaks, without its values: every number (digits, a decimal point
// between digits) becomes "#", so that rejections of one rule count together. Digits that are
// part of a name (touching a letter: zb-h1, 1f1b) stay.
std::string rule_of(const std::string& reason) {
  auto digit = [&](std::size_t i) {
    return i < reason.size() && std::isdigit(static_cast<unsigned char>(reason[i]));
  };
  auto letter = [&](std::size_t i) {
    return i < reason.size() && std::isalpha(static_cast<unsigned char>(reason[i]));
  };
  std::string rule;
  for (std::size_t i = 0; i < reason.size();) {
    if (!digit(i)) {
      rule += reason[i++];
      continue;
    }
    std::size_t j = i;
    while (digit(j) || (reason[j] == '.' && digit(j + 1) && j > i)) ++j;
    const bool name = (i > 0 && letter(i - 1)) || letter(j);
    rule += name ? reason.substr(i, j - i) : std::string("#");
    i = j;
  }
  return rule;
}

void print_ranking(const pm::Plan& plan, int top) {
  // The configuration column as wide as the longest name it shows (names grow with v, sp and
  // recompute; a fixed width let long ones push the other columns out of line).
  std::size_t width = std::string("configuration").size();
  const std::size_t shown = std::min(plan.ranked.size(), static_cast<std::size_t>(top));
  for (std::size_t i = 0; i < shown; ++i)
    width = std::max(width, pm::describe(plan.ranked[i].config).size());
  const int w = static_cast<int>(width);
  std::printf("%4s  %-*s %10s %9s %8s %9s %6s %6s  %s\n", "rank", w, "configuration", "step s",
              "bubble", "tp s", "dp s", "MFU", "HFU", "peak memory");
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& e = plan.ranked[i];
    std::printf("%4zu  %-*s %10.4g %9.3f %8.3g %9.3g %6.3f %6.3f  %s\n", i + 1, w,
                pm::describe(e.config).c_str(), e.time.step_time, e.time.bubble_fraction, e.time.tp,
                e.time.dp, e.mfu, e.hfu, pm::format_gb(e.memory.peak).c_str());
  }
  // The reasons, most common first, each whole with one example (every rejected configuration
  // and its own reason are in --json).
  std::map<std::string, std::pair<int, const pm::Rejection*>> reasons;
  for (const auto& r : plan.rejected) {
    auto& slot = reasons[rule_of(r.reason)];
    if (slot.first++ == 0) slot.second = &r;
  }
  std::vector<std::pair<std::string, std::pair<int, const pm::Rejection*>>> sorted(reasons.begin(),
                                                                                   reasons.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  if (!sorted.empty()) std::printf("\nrejected, by reason:\n");
  for (const auto& [why, seen] : sorted) {
    std::printf("  %6d  %s\n", seen.first, why.c_str());
    std::printf("          e.g. %s: %s\n", pm::describe(seen.second->config).c_str(),
                seen.second->reason.c_str());
  }
}

// --- one layout (--layout) ---

struct LayoutChoice {
  pm::Scenario config;
  std::vector<std::string> notes;  // what came from where, and what differs from the machine
};

[[noreturn]] void layout_error(const std::string& what) {
  throw std::invalid_argument(what);
}

// A whole decimal integer in [lo, hi], else an error naming the field.
int layout_int(const std::string& field, const std::string& value, int lo, int hi) {
  const bool digits =
      !value.empty() && value.size() <= 10 && std::all_of(value.begin(), value.end(), [](char ch) {
        return std::isdigit(static_cast<unsigned char>(ch));
      });
  const long long n = digits ? std::stoll(value) : -1;
  if (!digits || n < lo || n > hi)
    layout_error("'" + field + "=" + value + "': expected an integer in [" + std::to_string(lo) +
                 ", " + std::to_string(hi) + "]");
  return static_cast<int>(n);
}

// recompute=none|selective|full|full:N into c.
void set_recompute(pm::Scenario& c, const std::string& name, const std::string& value, int max) {
  const auto colon = value.find(':');
  const std::string mode = value.substr(0, colon);
  const auto& modes = model::recompute_names();
  const auto m = std::find(modes.begin(), modes.end(), mode);
  if (m == modes.end())
    layout_error("'" + name + "=" + value + "': expected none, selective, full or full:N");
  c.recompute = static_cast<model::Recompute>(m - modes.begin());
  c.recompute_layers = 0;  // full: every block of a chunk
  if (colon != std::string::npos) {
    if (c.recompute != model::Recompute::full)
      layout_error("'" + name + "=" + value + "': only full takes a layer count (full:N)");
    c.recompute_layers = layout_int(name, value.substr(colon + 1), 1, max);
  }
}

// One field of a layout (key: its canonical name, name: as spelled) into c.
void set_layout_field(pm::Scenario& c, const std::string& key, const std::string& name,
                      bool has_value, const std::string& value) {
  const int kMax = 1 << 30;
  if (key == "tp")
    c.tp = layout_int(name, value, 1, kMax);
  else if (key == "pp")
    c.pp = layout_int(name, value, 1, kMax);
  else if (key == "dp")
    c.dp = layout_int(name, value, 1, kMax);
  else if (key == "ep")
    c.ep = layout_int(name, value, 1, kMax);
  else if (key == "mb")
    c.micro_batch = layout_int(name, value, 1, kMax);
  else if (key == "zero")
    c.zero = layout_int(name, value, 0, config::kMaxZeroStage);
  else if (key == "v")
    c.virtual_stages = layout_int(name, value, 1, kMax);
  else if (key == "schedule") {
    try {
      c.schedule = schedule::parse_schedule(value);
    } catch (const std::exception& e) {
      layout_error("'" + name + "=" + value + "': " + e.what());
    }
  } else if (key == "sp") {
    if (!has_value || value == "true" || value == "1")
      c.sequence_parallel = true;
    else if (value == "false" || value == "0")
      c.sequence_parallel = false;
    else
      layout_error("'" + name + "=" + value + "': expected " + name + ", " + name + "=true or " +
                   name + "=false");
  } else if (key == "recompute") {
    set_recompute(c, name, value, kMax);
  }
}

// What the layout did not give: named as from the deck, dp from the machine's devices when
// tp * pp divides them; notes on a rank count that is not the machine's and on stage_layers
// that no longer fit.
void complete_layout(LayoutChoice& out, const std::map<std::string, std::string>& given,
                     int devices) {
  pm::Scenario& c = out.config;
  std::string from_deck;
  for (const char* k : {"tp", "pp", "ep", "mb", "zero", "schedule", "v", "sp", "recompute"})
    if (!given.count(k)) from_deck += std::string(from_deck.empty() ? "" : ", ") + k;
  if (!from_deck.empty()) out.notes.push_back("from the deck: " + from_deck);
  const long long tp_pp = static_cast<long long>(c.tp) * c.pp;
  if (!given.count("dp")) {
    if (devices % tp_pp == 0) {
      c.dp = static_cast<int>(devices / tp_pp);
      out.notes.push_back("dp = " + std::to_string(c.dp) + ": the machine's " +
                          std::to_string(devices) + " devices / (tp * pp)");
    } else {
      out.notes.push_back("dp from the deck: tp * pp = " + std::to_string(tp_pp) +
                          " does not divide the machine's " + std::to_string(devices) + " devices");
    }
  }
  // In double: three degrees up to 2^30 overflow any integer (the grid rule refuses them).
  const double ranks = static_cast<double>(tp_pp) * c.dp;
  if (ranks != devices) {
    char text[200];
    std::snprintf(text, sizeof text,
                  "tp * pp * dp = %.0f ranks, but the machine has %d devices: predicted for %.0f "
                  "ranks laid out as the machine's nodes",
                  ranks, devices, ranks);
    out.notes.push_back(text);
  }
  if (!c.stage_layers.empty() && static_cast<int>(c.stage_layers.size()) != c.chunks()) {
    out.notes.push_back("the deck's parallel.stage_layers (" +
                        std::to_string(c.stage_layers.size()) + " chunks) do not fit pp * v = " +
                        std::to_string(c.chunks()) + ": layers balanced by modelled cost");
    c.stage_layers.clear();
  }
}

LayoutChoice parse_layout(const std::string& text, const pm::Scenario& deck, int devices) {
  // Canonical field names and their aliases.
  static const std::map<std::string, std::string> names{{"tp", "tp"},
                                                        {"pp", "pp"},
                                                        {"dp", "dp"},
                                                        {"ep", "ep"},
                                                        {"mb", "mb"},
                                                        {"micro_batch", "mb"},
                                                        {"zero", "zero"},
                                                        {"schedule", "schedule"},
                                                        {"v", "v"},
                                                        {"virtual_stages", "v"},
                                                        {"sp", "sp"},
                                                        {"sequence_parallel", "sp"},
                                                        {"recompute", "recompute"}};
  LayoutChoice out;
  out.config = deck;
  std::map<std::string, std::string> given;  // canonical name -> the spelling used
  std::stringstream items(text);
  std::string item;
  int position = 0;
  if (text.empty() || text.back() == ',') layout_error("'" + text + "': an empty field");
  while (std::getline(items, item, ',')) {
    ++position;
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    const std::string value = has_value ? item.substr(eq + 1) : "";
    if (name.empty())
      layout_error("field " + std::to_string(position) + " ('" + item + "') has no name");
    const auto it = names.find(name);
    if (it == names.end())
      layout_error("'" + name +
                   "': unknown field (expected one of tp, pp, dp, ep, mb, zero, "
                   "schedule, v, sp, recompute)");
    const std::string& key = it->second;
    if (const auto seen = given.find(key); seen != given.end())
      layout_error("'" + name + "': given twice" +
                   (seen->second != name ? " (also as '" + seen->second + "')" : std::string()));
    given[key] = name;
    if (key != "sp" && (!has_value || value.empty()))
      layout_error("'" + name + "': expected " + name + "=VALUE");
    set_layout_field(out.config, key, name, has_value, value);
  }
  complete_layout(out, given, devices);
  return out;
}

std::string gb(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g GB", bytes / 1e9);
  return buf;
}

// The memory of a rank of the largest stage, by part, against the device's.
void print_memory(const pm::PlanEntry& e, const pm::Machine& mc) {
  const auto& mem = e.memory;
  std::printf("\nmemory per rank, pipeline stage %d (the largest of %d):\n", e.memory_stage,
              e.config.pp);
  std::printf("  %-22s %14s\n", "parameters", gb(mem.params).c_str());
  std::printf("  %-22s %14s\n", "gradients", gb(mem.grads).c_str());
  std::printf("  %-22s %14s\n", "optimizer state", gb(mem.optimizer).c_str());
  std::printf("  %-22s %14s\n", "ZeRO step buffers", gb(mem.step_buffers).c_str());
  std::printf("  %-22s %14s\n", "activations (peak)", gb(mem.activations).c_str());
  std::printf("  %-22s %14s   device: %s\n", "peak", gb(mem.peak).c_str(),
              gb(mc.memory_bytes).c_str());
}

// The step time by term, of the stage that finishes last. The pp term: the fill and drain's
// transfers, or, with a blocking pipeline engine, every action's waits on its own.
void print_time_terms(const pm::PlanEntry& e, const pm::Machine& mc) {
  const auto& t = e.time;
  const char* pp_label =
      mc.blocking_pipeline_transfers ? "pp (transfer waits)" : "pp (fill, drain)";
  std::printf("\ntime per step, by term (pipeline stage %d, the one that finishes last):\n",
              t.stage);
  const std::pair<const char*, double> terms[] = {{"compute", t.compute},    {"bubble", t.bubble},
                                                  {"tp (exposed)", t.tp},    {"ep (exposed)", t.ep},
                                                  {pp_label, t.pp},          {"dp (exposed)", t.dp},
                                                  {"optimizer", t.optimizer}};
  for (const auto& [name, s] : terms)
    std::printf("  %-22s %14.6g s  %5.1f %%\n", name, s,
                t.step_time > 0 ? 100 * s / t.step_time : 0.0);
  std::printf("  %-22s %14.6g s\n", "step time", t.step_time);
  std::printf("  %-22s %14.6g s   bubble fraction %.4f (mean over stages)\n", "pipeline span",
              t.pipeline_span, t.bubble_fraction);
}

// The bytes and calls a rank of that stage sends per step, per axis, and over which tier.
void print_traffic(const pm::PlanRequest& req, const pm::PlanEntry& e) {
  const pm::Scenario& c = e.config;
  const int stage = e.time.stage;
  const pm::StepTraffic traffic = pm::step_traffic(req.model, c, stage);
  const auto tiers = e.intra_node;
  std::printf("\ntraffic per step, a rank of pipeline stage %d:\n", stage);
  const struct {
    const char* axis;
    int group;
    bool intra;
    const pm::AxisTraffic& traffic;
  } axes[] = {{"tp", c.tp, tiers.tp, traffic.tp},
              {"pp", c.pp, tiers.pp, traffic.pp},
              {"dp", c.dp, tiers.dp, traffic.dp},
              {"ep", c.ep, tiers.ep, traffic.ep}};
  for (const auto& a : axes)
    std::printf("  %-3s %6d ranks  %-10s  %14s sent  %8ld calls\n", a.axis, a.group,
                a.group <= 1 ? "-"
                : a.intra    ? "intra-node"
                             : "inter-node",
                gb(a.traffic.bytes()).c_str(), a.traffic.calls());
}

// Every term of one layout's prediction. Returns exit_code::ok when it would be ranked, not_ok when
// it breaks a rule or does not fit in memory (with why).
int print_layout(const pm::PlanRequest& req, const pm::Machine& mc, const LayoutChoice& choice) {
  const pm::Evaluation ev = pm::evaluate(req, mc, choice.config);
  const pm::PlanEntry& e = ev.entry;
  const pm::Scenario& c = e.config;
  std::printf("layout: %s\n", pm::describe(c).c_str());
  for (const auto& n : choice.notes) std::printf("  %s\n", n.c_str());
  if (!ev.violations.empty()) {
    std::printf("does not fit: it breaks %zu configuration rule(s):\n", ev.violations.size());
    for (const auto& v : ev.violations) {
      std::string keys;
      for (const auto& k : v.keys) keys += (keys.empty() ? "" : ", ") + k;
      std::printf("  %s  [%s]\n", v.message.c_str(), keys.c_str());
    }
    return exit_code::not_ok;
  }
  if (ev.reason.empty())
    std::printf("fits: peak memory %s of %s (pipeline stage %d)\n",
                pm::format_gb(e.memory.peak).c_str(), pm::format_gb(mc.memory_bytes).c_str(),
                e.memory_stage);
  else
    std::printf("does not fit: %s (pipeline stage %d); the figures below are what it would take\n",
                ev.reason.c_str(), e.memory_stage);
  print_memory(e, mc);
  print_time_terms(e, mc);
  print_traffic(req, e);
  std::printf("\nthroughput: %.6g tokens/s, %.4g model TFLOP/s per device\n", e.tokens_per_s,
              e.model_flops_per_s / c.world() / 1e12);
  std::printf("MFU %.4f (model FLOPs), HFU %.4f (hardware FLOPs, recomputation included)\n", e.mfu,
              e.hfu);
  return ev.reason.empty() ? exit_code::ok : exit_code::not_ok;
}

// Progress on stderr once the search has run ~2 s: a line per ~2 s, then the total.
std::function<void(std::size_t, std::size_t)> progress_to_stderr() {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto last = start;
  bool shown = false;
  return [=](std::size_t done, std::size_t total) mutable {
    const auto now = clock::now();
    const double since_last = std::chrono::duration<double>(now - last).count();
    if (done < total && since_last < 2.0) return;
    if (done == total && !shown) return;
    last = now;
    shown = true;
    std::fprintf(stderr, "plan: %zu/%zu shapes (tp, pp, ep) searched, %.1f s\n", done, total,
                 std::chrono::duration<double>(now - start).count());
  };
}

int write_json(const pm::Plan& plan, const std::string& model_deck, const std::string& machine,
               const std::string& json_out) {
  nlohmann::json j{{"model", model_deck},
                   {"machine", machine},
                   {"ranked", nlohmann::json::array()},
                   {"rejected", nlohmann::json::array()}};
  for (const auto& e : plan.ranked)
    j["ranked"].push_back({{"configuration", pm::describe(e.config)},
                           {"step_time_s", e.time.step_time},
                           {"terms",
                            {{"compute", e.time.compute},
                             {"bubble", e.time.bubble},
                             {"tp", e.time.tp},
                             {"pp", e.time.pp},
                             {"dp", e.time.dp},
                             {"ep", e.time.ep}}},
                           {"bubble_fraction", e.time.bubble_fraction},
                           {"mfu", e.mfu},
                           {"hfu", e.hfu},
                           {"tokens_per_s", e.tokens_per_s},
                           {"peak_memory_bytes", e.memory.peak}});
  for (const auto& r : plan.rejected)
    j["rejected"].push_back({{"configuration", pm::describe(r.config)}, {"reason", r.reason}});
  try {
    io::write_file_checked(json_out,
                           j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n');
  } catch (const io::WriteError& e) {
    std::fprintf(stderr, "paraxis: error: plan: %s\n", e.what());
    return exit_code::write_failed;
  }
  std::printf("whole plan: %s\n", json_out.c_str());
  return exit_code::ok;
}

// --set of a key the ranking searches (tp, pp, ...) without --layout: an error on stderr, and true.
bool rejects_searched_override(const PlanOptions& opt) {
  if (!opt.layout.empty()) return false;
  for (const auto& o : opt.overrides) {
    const std::string key = o.substr(0, o.find('='));
    if (searched_key(key)) {
      std::fprintf(stderr,
                   "paraxis: error: plan: --set %s: the ranking tries every layout and ignores "
                   "the deck's %s; to evaluate one layout use --layout (e.g. --layout "
                   "tp=2,pp=1)\n",
                   o.c_str(), key.c_str());
      return true;
    }
  }
  return false;
}

// The machine file, or its problems on stderr (one line each) and false.
bool load_machine_or_report(const std::string& path, MachineFile& mf) {
  try {
    mf = load_machine_file(path);
  } catch (const std::exception& e) {
    // One line per problem (the file names every one).
    std::istringstream lines(e.what());
    for (std::string line; std::getline(lines, line);)
      std::fprintf(stderr, "paraxis: error: %s\n", line.c_str());
    return false;
  }
  return true;
}

pm::PlanRequest plan_request(const RunConfig& c) {
  pm::PlanRequest req;
  req.model = c.model;
  req.global_batch = c.train.global_batch;
  req.precision = c.train.precision;
  req.bucket_mb = c.comm.bucket_mb;
  req.overlap = c.comm.overlap;
  return req;
}

void print_plan_header(const PlanOptions& opt, const MachineFile& mf) {
  const auto& m = mf.machine;
  std::printf("plan: %s on %s (%d nodes x %d devices, %.4g TFLOP/s peak, %.3g GB each)\n",
              opt.model_deck.c_str(), mf.name.c_str(), m.nodes, m.devices_per_node,
              m.peak_flops / 1e12, m.memory_bytes / 1e9);
}

// --layout: the one layout's terms.
int evaluate_layout(const PlanOptions& opt, const RunConfig& c, const MachineFile& mf,
                    const pm::PlanRequest& req) {
  const auto& m = mf.machine;
  LayoutChoice choice;
  try {
    choice = parse_layout(opt.layout, pm::scenario_of(c.parallel, c.comm, c.train), m.devices());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraxis: error: plan: --layout %s\n", e.what());
    return exit_code::bad_input;
  }
  print_plan_header(opt, mf);
  try {
    return print_layout(req, m, choice);
  } catch (const std::exception& e) {
    // planner.cpp's messages carry no "plan:" of their own: one prefix, here.
    std::fprintf(stderr, "paraxis: error: plan: %s\n", e.what());
    return exit_code::bad_input;
  }
}

// The checkpoint's cost: the machine file's, or modelled as the training state (fp32 master
// weights and both AdamW moments: 12 bytes a parameter, docs/checkpoint.md) over the storage's
// bandwidth, written by every node at once; a restart reads it back as fast. {0, 0} when neither
// is known; `how` says which.
std::pair<double, double> checkpoint_and_restart_s(const MachineFile& mf,
                                                   const pm::PlanRequest& req, std::string& how) {
  double c = mf.checkpoint_s, r = 0;
  how = "given";
  if (c <= 0 && mf.storage_gbs_per_node > 0) {
    double params = 0;
    for (const auto& s : model::parameter_specs(req.model, model::ShardLayout::whole(req.model)))
      params += static_cast<double>(s.logical_size());
    const double bytes = 12 * params;
    c = r = bytes / (mf.machine.nodes * mf.storage_gbs_per_node * 1e9);
    char buf[160];
    std::snprintf(buf, sizeof buf, "modelled: %.3g GB of state at %.3g GB/s per node", bytes / 1e9,
                  mf.storage_gbs_per_node);
    how = buf;
  }
  return {c, r};
}

// Checkpointing at this scale (Young 1974, Daly 2006): the system MTBF, and the checkpoint
// cadence and its waste when the checkpoint's cost is known. Throws on a bad figure.
void print_checkpoint_cadence(const MachineFile& mf, const pm::PlanRequest& req) {
  const auto& m = mf.machine;
  const double devices = m.devices();
  const double rate = mf.mtbf_hours_per_device > 0 ? 1.0 / (mf.mtbf_hours_per_device * 3600)
                                                   : pm::llama3_failures_per_device_s();
  const double mtbf = pm::system_mtbf(rate, devices);
  std::printf("\nsystem MTBF at %d devices: %.1f h%s\n", m.devices(), mtbf / 3600,
              mf.mtbf_hours_per_device > 0 ? "" : " (Llama 3's failure rate)");
  std::string how;
  const auto [c, r] = checkpoint_and_restart_s(mf, req, how);
  if (c <= 0) return;
  const double young = pm::young_interval(c, mtbf), daly = pm::daly_interval(c, mtbf);
  pm::CadenceJob job;
  job.work_s = 1;
  job.checkpoint_s = c;
  job.restart_s = r;
  job.mtbf_s = mtbf;
  job.interval_s = daly;
  const pm::WasteEstimate w = pm::waste_estimate(job);
  std::printf(
      "checkpoint every %.0f s (Young) / %.0f s (Daly) for a %.3g s checkpoint (%s): "
      "%.2f %% of the machine's time lost to checkpoints, rework and restarts (Monte Carlo: "
      "%.2f %%, 95 %% CI [%.2f, %.2f], %d trials)\n",
      young, daly, c, how.c_str(), 100 * w.daly, 100 * w.simulated, 100 * w.ci_low, 100 * w.ci_high,
      w.trials);
}

// The ranking of every layout, the checkpoint cadence, and --json.
int rank_layouts(const PlanOptions& opt, const MachineFile& mf, const pm::PlanRequest& req) {
  const auto& m = mf.machine;
  pm::Plan plan;
  try {
    plan = pm::plan(req, m, progress_to_stderr());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraxis: error: plan: %s\n", e.what());
    return exit_code::bad_input;
  }
  print_plan_header(opt, mf);
  std::printf("%zu configurations fit, %zu rejected\n\n", plan.ranked.size(), plan.rejected.size());
  print_ranking(plan, opt.top);
  try {
    print_checkpoint_cadence(mf, req);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraxis: error: plan: %s: %s\n", opt.machine.c_str(), e.what());
    return exit_code::bad_input;
  }
  if (!opt.json_out.empty()) return write_json(plan, opt.model_deck, mf.name, opt.json_out);
  return 0;
}

}  // namespace

int evaluate_plan(const PlanOptions& opt) {
  if (rejects_searched_override(opt)) return exit_code::bad_input;
  const Deck deck = load_deck(opt.model_deck, opt.overrides, 0);
  if (!deck.errors.empty()) {
    for (const auto& e : deck.errors)
      std::fprintf(stderr, "paraxis: error: %s\n", e.to_string().c_str());
    return exit_code::bad_input;
  }
  MachineFile mf;
  if (!load_machine_or_report(opt.machine, mf)) return exit_code::bad_input;
  const RunConfig& c = deck.points.front().config;
  const pm::PlanRequest req = plan_request(c);
  if (!opt.layout.empty()) return evaluate_layout(opt, c, mf, req);
  return rank_layouts(opt, mf, req);
}

}  // namespace paraxis::driver
