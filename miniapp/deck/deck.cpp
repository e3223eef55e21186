// Deck parsing: a table of every key (type, range, where it lands in RunConfig), a walk of
// the YAML tree that reports unknown, duplicate and ill-typed keys with file:line, and the
// cross-key constraints, judged over every key that parsed so that `check` lists key errors and
// constraint errors in one pass. The sweep is sized before it is expanded (a few YAML anchors can
// ask for 10^10 points), then expanded so that each point is checked.
#include "deck/deck.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "config/checked_product.hpp"
#include "config/config_rules.hpp"
#include "config/divisors.hpp"
#include "deck/deck_checkpoint.hpp"
#include "deck/deck_key_types.hpp"
#include "deck/deck_slow_axis.hpp"
#include "deck/sweep_combinations.hpp"
#include "deck/yaml_document.hpp"
#include "io/input_file.hpp"

namespace paraxis::driver {

std::string DeckError::to_string() const {
  std::string s = where.empty() ? std::string() : where + ": ";
  if (!key.empty()) s += "'" + key + "': ";
  return s + message;
}

namespace {

using namespace deck_keys;

constexpr long long kDefaultMaxPoints = 4096;
// Each point holds a resolved configuration (a few kB): a larger sweep could never train, and
// listing it alone costs seconds and a gigabyte on every rank (the fuzzer's 983,040-point deck).
constexpr long long kMaxMaxPoints = 100000;

// A JSON value as the YAML node a deck would hold (numbers keep every bit: %.17g).
YAML::Node yaml_of(const nlohmann::json& v) {
  if (v.is_array()) {
    YAML::Node seq(YAML::NodeType::Sequence);
    for (const auto& e : v) seq.push_back(yaml_of(e));
    return seq;
  }
  if (v.is_object()) return YAML::Node(YAML::NodeType::Map);  // no key takes a map: an error
  if (v.is_string()) return YAML::Node(v.get<std::string>());
  if (v.is_boolean()) return YAML::Node(v.get<bool>() ? "true" : "false");
  if (v.is_number_float()) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v.get<double>());
    return YAML::Node(std::string(buf));
  }
  if (v.is_number()) return YAML::Node(v.dump());
  return YAML::Node(YAML::NodeType::Null);
}

// The dotted key's place in nested JSON objects: nullptr when a level is absent.
const nlohmann::json* json_at(const nlohmann::json& j, const std::string& key) {
  const nlohmann::json* at = &j;
  std::size_t begin = 0;
  while (true) {
    const std::size_t dot = key.find('.', begin);
    const std::string part = key.substr(begin, dot == std::string::npos ? dot : dot - begin);
    if (!at->is_object()) return nullptr;
    const auto it = at->find(part);
    if (it == at->end()) return nullptr;
    at = &*it;
    if (dot == std::string::npos) return at;
    begin = dot + 1;
  }
}

const KeySpec* find_key(const std::string& key) {
  for (const auto& k : key_table())
    if (k.key == key) return &k;
  return nullptr;
}

bool is_section_prefix(const std::string& prefix) {
  for (const auto& k : key_table())
    if (k.key.compare(0, prefix.size() + 1, prefix + ".") == 0) return true;
  return false;
}

// An unknown key, or one that moved: a deck written for an older paraxis learns where it went.
std::string unknown_key_message(const std::string& key) {
  static const std::map<std::string, std::string> moved = {
      {"train.fault_step", "fault.dead_rank.step"}, {"train.fault_rank", "fault.dead_rank.rank"}};
  const auto it = moved.find(key);
  if (it == moved.end()) return "unknown key";
  return "unknown key: fault injection moved to the fault section, use " + it->second +
         " (fault.dead_rank: {rank, step, at}; rank -1 = off; see docs/deck.md)";
}

struct Source {
  std::string path;
  std::set<std::string> overridden;              // keys whose value came from --set
  std::map<std::string, std::string> generated;  // swept keys whose values auto made: its place
  std::string where(const std::string& key, const YAML::Node& n) const {
    if (overridden.count(key)) return "--set";
    const auto m = n.Mark();
    if (m.line >= 0) return path + ":" + std::to_string(m.line + 1);
    if (auto it = generated.find(key); it != generated.end()) return it->second;
    return path;
  }
};

// Where each key (or section) got its value, and which keys are in error: a constraint is
// judged unless a key it needs is itself in error, and names the place of its key.
struct Located {
  std::string path;
  std::map<std::string, std::string> origin;
  std::set<std::string> bad;
  void mark_bad(const std::string& key) {
    bad.insert(key.rfind("sweep.", 0) == 0 ? key.substr(6) : key);
  }
  bool is_bad(const std::string& key) const {
    for (const auto& b : bad)
      if (b.empty() || key == b || key.compare(0, b.size() + 1, b + ".") == 0) return true;
    return false;
  }
  // The place of the first of `keys` that was given a value (a key before a section: its line
  // is the more precise); the deck when all are defaults.
  std::string where(const std::vector<std::string>& keys) const;
};

std::string Located::where(const std::vector<std::string>& keys) const {
  for (const bool sections : {false, true})
    for (const auto& k : keys)
      if (auto it = origin.find(k); it != origin.end() && (sections || find_key(k)))
        return it->second;
  return path;
}

void walk(const YAML::Node& node, const std::string& prefix, RunConfig& cfg, const Source& src,
          std::vector<DeckError>& errors, Located& loc) {
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    if (!seen.insert(name).second) {
      errors.push_back({key, src.where(key, kv.first), "duplicate key"});
      continue;
    }
    if (prefix.empty() && name == "sweep") continue;
    // The key's own line: a value may be an alias, whose mark is its anchor's line.
    const std::string where = src.where(key, kv.first);
    if (const KeySpec* spec = find_key(key)) {
      loc.origin[key] = where;
      if (auto err = spec->apply(cfg, kv.second)) errors.push_back({key, where, *err});
    } else if (is_section_prefix(key)) {
      loc.origin[key] = where;
      if (kv.second.IsMap()) {
        walk(kv.second, key, cfg, src, errors, loc);
      } else if (!kv.second.IsNull()) {
        errors.push_back({key, where, "expected a map of keys"});
      }
    } else {
      errors.push_back({key, src.where(key, kv.first), unknown_key_message(key)});
    }
  }
}

// Sets root[a][b][c] = value for key "a.b.c", creating maps on the way.
void set_path(YAML::Node root, const std::string& key, const YAML::Node& value) {
  if (key.rfind("sweep.", 0) == 0) {  // sweep entries are dotted keys themselves
    if (!root["sweep"] || !root["sweep"].IsMap()) root["sweep"] = YAML::Node(YAML::NodeType::Map);
    root["sweep"][key.substr(6)] = value;
    return;
  }
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  std::vector<YAML::Node> chain{root};
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsMap()) next = YAML::Node(YAML::NodeType::Map);
    chain.back()[parts[i]] = next;
    chain.push_back(chain.back()[parts[i]]);
  }
  chain.back()[parts.back()] = value;
}

std::string num(long long v) {
  return std::to_string(v);
}

// Constraints between keys for one point (config/config_rules.hpp); world = 0 skips the world-size
// checks. A rule is judged when every key it reads parsed (the others keep their defaults,
// which would mislead).
std::vector<DeckError> check_constraints(const RunConfig& c, int world, const Located& loc) {
  std::vector<DeckError> e;
  for (const auto& v : config::rule_violations(c.model, c.train, c.parallel, world)) {
    bool judged = true;
    for (const auto& k : v.keys) judged = judged && !loc.is_bad(k);
    if (judged) e.push_back({v.keys.front(), loc.where(v.keys), v.message});
  }
  return e;
}

// The slow rank (fault.slow_rank): in the run, its steps in order and in the run, an effect.
void slow_rank_errors(const RunConfig& c, std::optional<long long> w, const Located& loc,
                      std::vector<DeckError>& e) {
  const auto& sr = c.fault.slow_rank;
  if (sr.rank >= 0 && !loc.is_bad("fault.slow_rank.rank")) {
    if (w && sr.rank >= *w)
      e.push_back({"fault.slow_rank.rank", loc.where({"fault.slow_rank.rank"}),
                   "rank " + num(sr.rank) + " is not in the run (" + num(*w) + " ranks: 0.." +
                       num(*w - 1) + ")"});
    if (sr.from_step >= c.train.steps && !loc.is_bad("train.steps"))
      e.push_back(
          {"fault.slow_rank.from_step", loc.where({"fault.slow_rank.from_step", "train.steps"}),
           "step " + num(sr.from_step) + " never comes: train.steps = " + num(c.train.steps) +
               " (steps are 0-based)"});
    if (sr.to_step >= 0 && sr.to_step < sr.from_step)
      e.push_back({"fault.slow_rank.to_step",
                   loc.where({"fault.slow_rank.to_step", "fault.slow_rank.from_step"}),
                   "to_step " + num(sr.to_step) + " is before from_step " + num(sr.from_step) +
                       " (-1: to the last step)"});
    if (sr.factor == 1 && !loc.is_bad("fault.slow_rank.factor"))  // not a value refused above
      e.push_back({"fault.slow_rank.factor", loc.where({"fault.slow_rank.factor"}),
                   "factor 1 slows nothing (expected > 1, e.g. 2 for twice as slow)"});
    if (w && *w < 2)
      e.push_back({"fault.slow_rank.rank", loc.where({"fault.slow_rank.rank"}),
                   "a slow rank needs peers to be slow against: the run has 1 rank"});
  }
}

// The slow link (fault.slow_link): two distinct ranks of the run, or two distinct nodes, and an
// effect.
void slow_link_errors(const RunConfig& c, std::optional<long long> w, const Located& loc,
                      std::vector<DeckError>& e) {
  const auto& L = c.comm.links;
  if (L.slows_a_link()) {
    const bool both = !L.slow_ranks.empty() && !L.slow_nodes.empty();
    const char* key = L.slow_ranks.empty() ? "fault.slow_link.nodes" : "fault.slow_link.ranks";
    const auto& ends = L.slow_ranks.empty() ? L.slow_nodes : L.slow_ranks;
    if (both)
      e.push_back({"fault.slow_link.ranks",
                   loc.where({"fault.slow_link.ranks", "fault.slow_link.nodes"}),
                   "give the link's two ranks or its two nodes, not both"});
    else if (ends.size() != 2 || ends[0] == ends[1])
      e.push_back({key, loc.where({key}),
                   "expected the link's two ends, two different numbers, e.g. [0, 1]"});
    else if (!L.slow_ranks.empty() && w && std::max(ends[0], ends[1]) >= *w)
      e.push_back({key, loc.where({key}),
                   "rank " + num(std::max(ends[0], ends[1])) + " is not in the run (" + num(*w) +
                       " ranks)"});
    else if (!L.slow_nodes.empty() && L.ranks_per_node > 0 && w &&
             std::max(ends[0], ends[1]) >= (*w + L.ranks_per_node - 1) / L.ranks_per_node)
      e.push_back({key, loc.where({key, "hardware.ranks_per_node"}),
                   "node " + num(std::max(ends[0], ends[1])) + " is not in the run (" +
                       num((*w + L.ranks_per_node - 1) / L.ranks_per_node) + " nodes of " +
                       num(L.ranks_per_node) + " ranks)"});
    if (L.slow_latency_us == 0 && L.slow_bandwidth_factor == 1 &&
        !loc.is_bad("fault.slow_link.latency_us") &&
        !loc.is_bad("fault.slow_link.bandwidth_factor"))
      e.push_back({"fault.slow_link.latency_us",
                   loc.where({"fault.slow_link.latency_us", "fault.slow_link.bandwidth_factor"}),
                   "the slow link slows nothing: give latency_us > 0 or bandwidth_factor < 1"});
  }
}

// Fault injections outside the run are errors even in a sweep: a point that cannot inject its
// fault would pass a fault test without testing anything.
std::vector<DeckError> check_faults(const RunConfig& c, int world, const Located& loc) {
  std::vector<DeckError> e;
  const bool grid_ok =
      !loc.is_bad("parallel.tp") && !loc.is_bad("parallel.pp") && !loc.is_bad("parallel.dp");
  const auto w = world > 0 ? std::optional<long long>(world)
                 : grid_ok ? config::grid_world(c.parallel)
                           : std::nullopt;
  auto check = [&](const std::string& kind, int rank, int step) {
    const std::string rk = "fault." + kind + ".rank", sk = "fault." + kind + ".step";
    if (rank < 0 || loc.is_bad(rk)) return;
    if (w && rank >= *w)
      e.push_back({rk, loc.where({rk.c_str()}),
                   "rank " + num(rank) + " is not in the run (" + num(*w) + " ranks: 0.." +
                       num(*w - 1) + ")"});
    if (step >= c.train.steps && !loc.is_bad(sk) && !loc.is_bad("train.steps"))
      e.push_back({sk, loc.where({sk.c_str(), "train.steps"}),
                   "step " + num(step) + " never comes: train.steps = " + num(c.train.steps) +
                       " (steps are 0-based: 0.." + num(c.train.steps - 1) + ")"});
  };
  check("dead_rank", c.fault.dead_rank.rank, c.fault.dead_rank.step);
  check("hang", c.fault.hang.rank, c.fault.hang.step);
  slow_rank_errors(c, w, loc, e);
  slow_link_errors(c, w, loc, e);
  for (const auto& [key, message] : slow_axis_errors(c))  // deck_slow_axis.hpp
    if (!loc.is_bad(key)) e.push_back({key, loc.where({key}), message});
  // A hang is found by the other ranks' watchdog: a lone rank would wait for ever.
  if (c.fault.hang.rank >= 0 && w && *w < 2 && !loc.is_bad("fault.hang.rank"))
    e.push_back({"fault.hang.rank", loc.where({"fault.hang.rank"}),
                 "a hang needs at least 2 ranks (the others' watchdog ends the job); the run "
                 "has 1"});
  return e;
}

bool is_grid_key(const std::string& key) {
  return key == "parallel.tp" || key == "parallel.pp" || key == "parallel.dp" ||
         key == "parallel.ep";
}

bool is_auto(const YAML::Node& n) {
  return n.IsScalar() && n.Scalar() == "auto";
}

// `parallel.X: auto` in the parallel section means the same as in the sweep: move it there.
void move_auto_degrees_to_sweep(YAML::Node root) {
  YAML::Node par = root["parallel"];
  if (!par || !par.IsMap()) return;
  for (const char* k : {"tp", "pp", "dp", "ep"}) {
    if (!par[k] || !is_auto(par[k])) continue;
    const std::string key = std::string("parallel.") + k;
    YAML::Node sw = root["sweep"];
    if (!sw || sw.IsNull()) root["sweep"] = YAML::Node(YAML::NodeType::Map);
    if (root["sweep"].IsMap()) root["sweep"][key] = par[k];
    par.remove(k);
  }
}

// sweep.max_points: the one sweep entry that is a setting of the sweep itself, not a swept key.
long long read_max_points(const YAML::Node& root, const Source& src,
                          std::vector<DeckError>& errors) {
  const YAML::Node sw = root["sweep"];
  if (!sw || !sw.IsMap() || !sw["max_points"]) return kDefaultMaxPoints;
  long long v = kDefaultMaxPoints;
  if (auto err = read_int(sw["max_points"], 1, kMaxMaxPoints, v)) {
    errors.push_back({"sweep.max_points", src.where("sweep.max_points", sw["max_points"]), *err});
    return kDefaultMaxPoints;
  }
  return v;
}

using Sweep = std::vector<std::pair<std::string, std::vector<YAML::Node>>>;

Sweep read_sweep(const YAML::Node& root, Source& src, int world, std::set<std::string>& auto_keys,
                 std::vector<DeckError>& errors) {
  Sweep out;
  const YAML::Node sw = root["sweep"];
  if (!sw || sw.IsNull()) return out;
  if (!sw.IsMap()) {
    errors.push_back({"sweep", src.where("sweep", sw), "expected a map of dotted keys to lists"});
    return out;
  }
  std::set<std::string> seen;
  for (const auto& kv : sw) {
    const std::string key = kv.first.Scalar();
    const std::string full = "sweep." + key;
    if (key == "max_points") continue;  // read_max_points
    if (!seen.insert(key).second) {
      errors.push_back({full, src.where(full, kv.first), "duplicate key"});
      continue;
    }
    if (!find_key(key)) {
      const std::string why =
          key == "sweep.max_points" ? "sweep.max_points cannot be swept" : unknown_key_message(key);
      errors.push_back({full, src.where(full, kv.first), why + " ('" + key + "')"});
      continue;
    }
    std::vector<YAML::Node> values;
    if (kv.second.IsSequence()) {
      for (const auto& v : kv.second) values.push_back(v);
    } else {
      values.push_back(kv.second);
    }
    if (values.size() == 1 && is_auto(values[0])) {
      // auto: every degree that divides the rank count; the product loop keeps the valid
      // factorisations of the world size only.
      if (!is_grid_key(key)) {
        errors.push_back(
            {full, src.where(full, kv.second), "auto applies to parallel.tp, pp, dp and ep only"});
        continue;
      }
      if (world <= 0) {
        errors.push_back(
            {full, src.where(full, kv.second),
             "auto needs the rank count: run under mpiexec, or `paraxis check --ranks N`"});
        continue;
      }
      src.generated[full] = src.where(full, kv.second);
      values.clear();
      for (int d : config::divisors(world)) values.push_back(YAML::Node(d));
      auto_keys.insert(key);
    }
    if (values.empty()) {
      errors.push_back({full, src.where(full, kv.second), "empty list"});
      continue;
    }
    out.emplace_back(key, values);
  }
  return out;
}

// The sweep's lists as SweepCombinations sees them: their lengths and, with `auto`, each grid
// degree's value at every position of its list (one value when not swept; a value that does not
// parse counts as the deck's own, as the expansion leaves it).
SweepCombinations combinations_of(const Sweep& sweep, const RunConfig& base, int world,
                                  const std::set<std::string>& autos) {
  SweepCombinations sc;
  sc.world = world;
  sc.auto_grid =
      autos.count("parallel.tp") || autos.count("parallel.pp") || autos.count("parallel.dp");
  sc.auto_ep = autos.count("parallel.ep") > 0;
  for (const auto& e : sweep) sc.lengths.push_back(e.second.size());
  const char* names[4] = {"parallel.tp", "parallel.pp", "parallel.dp", "parallel.ep"};
  auto degree = [](const ParallelConfig& p, int a) {
    return a == 0 ? p.tp : a == 1 ? p.pp : a == 2 ? p.dp : p.ep;
  };
  for (int a = 0; a < 4; ++a) {
    sc.grid_values[a] = {degree(base.parallel, a)};
    for (std::size_t i = 0; i < sweep.size() && sc.filtered(); ++i) {
      if (sweep[i].first != names[a]) continue;
      sc.grid_entry[a] = static_cast<int>(i);
      sc.grid_values[a].clear();
      for (const auto& v : sweep[i].second) {
        RunConfig c = base;
        find_key(names[a])->apply(c, v);
        sc.grid_values[a].push_back(degree(c.parallel, a));
      }
    }
  }
  return sc;
}

// Builds and checks each point. In a sweep a point whose constraints fail is skipped, not fatal.
void expand(const Sweep& sweep, const std::vector<std::vector<std::size_t>>& combinations,
            const RunConfig& base, const Located& base_loc, const Source& src, int world,
            Deck& deck) {
  const bool swept = !sweep.empty();
  for (const auto& idx : combinations) {
    SweepPoint pt;
    pt.config = base;
    Located loc = base_loc;
    for (std::size_t i = 0; i < sweep.size(); ++i) {
      const auto& [key, values] = sweep[i];
      const YAML::Node& v = values[idx[i]];
      pt.settings.emplace_back(key, scalar_text(v));
      loc.origin[key] = src.where("sweep." + key, v);
      if (auto err = find_key(key)->apply(pt.config, v)) {
        deck.errors.push_back({"sweep." + key, src.where("sweep." + key, v), *err});
        loc.mark_bad(key);
      }
    }
    const auto faults = check_faults(pt.config, world, loc);
    deck.errors.insert(deck.errors.end(), faults.begin(), faults.end());
    // A published run's dropout is a cost `paraxis plan` models; paraxis's model has none.
    if (world > 0 && pt.config.model.attention_dropout > 0 &&
        !loc.is_bad("model.attention_dropout"))
      deck.errors.push_back({"model.attention_dropout", loc.where({"model.attention_dropout"}),
                             "paraxis's model has no dropout: the key describes a published run "
                             "for `paraxis plan` (set 0, or leave it out, to run)"});
    for (const auto& [key, message] : checkpoint_errors(pt.config))  // deck_checkpoint.hpp
      if (!loc.is_bad(key)) deck.errors.push_back({key, loc.where({key}), message});
    for (const auto& c : check_constraints(pt.config, world, loc)) {
      if (!swept)
        deck.errors.push_back(c);
      else
        pt.skip_reason += (pt.skip_reason.empty() ? "" : "; ") + c.to_string();
    }
    deck.points.push_back(std::move(pt));
  }
}

// --set key=value, each into the deck's tree (a value parsed as YAML); a malformed one, a value
// that does not parse or an unknown key is an error naming it, and the rest still apply.
void apply_overrides(const std::vector<std::string>& overrides, YAML::Node& root, Source& src,
                     std::vector<DeckError>& errors) {
  for (const auto& ov : overrides) {
    const auto eq = ov.find('=');
    if (eq == std::string::npos || eq == 0) {
      errors.push_back({ov, "--set", "expected key=value"});
      continue;
    }
    const std::string key = ov.substr(0, eq);
    YAML::Node value;
    try {
      value = YAML::Load(ov.substr(eq + 1));
    } catch (const YAML::Exception& ex) {
      errors.push_back({key, "--set", "cannot parse value: " + yaml_error_text(ex)});
      continue;
    }
    if (!find_key(key) && key.rfind("sweep.", 0) != 0) {
      errors.push_back({key, "--set", unknown_key_message(key)});
      continue;
    }
    set_path(root, key, value);
    src.overridden.insert(key);
  }
}

// Where the sweep is: the line of `sweep:`, or of its first entry (auto, --set); else the deck.
std::string sweep_location(const YAML::Node& root, const Source& src, const std::string& name) {
  std::string sweep_where = name;
  for (const auto& kv : root)
    if (kv.first.Scalar() == "sweep") {
      sweep_where = src.where("sweep", kv.first);
      if (kv.second.IsMap())
        for (const auto& e : kv.second)
          if (sweep_where == name && e.first.Scalar() != "max_points")
            sweep_where = src.where("sweep." + e.first.Scalar(), e.second);
    }
  return sweep_where;
}

// The errors, each message once, in their first order.
std::vector<DeckError> unique_errors(const std::vector<DeckError>& errors) {
  std::vector<DeckError> unique;
  std::set<std::string> seen;
  for (const auto& e : errors)
    if (seen.insert(e.to_string()).second) unique.push_back(e);
  return unique;
}

}  // namespace

Deck load_deck_text(const std::string& text, const std::string& name,
                    const std::vector<std::string>& overrides, int world) {
  Deck deck;
  deck.path = name;
  if (world < 0) {
    deck.errors.push_back({"", name, "rank count " + num(world) + ": expected >= 1 (0: unknown)"});
    return deck;
  }
  Source src{name, {}, {}};
  YAML::Node root;
  try {
    root = single_yaml_document(text, name, "deck");
  } catch (const YamlDocumentError& ex) {
    deck.errors.push_back({"", ex.where, ex.what()});
    return deck;
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    deck.errors.push_back({"", name, "a deck is a map of sections (model, train, ...)"});
    return deck;
  }
  apply_overrides(overrides, root, src, deck.errors);
  move_auto_degrees_to_sweep(root);
  const long long max_points = read_max_points(root, src, deck.errors);
  std::set<std::string> auto_keys;
  const Sweep sweep = read_sweep(root, src, world, auto_keys, deck.errors);

  RunConfig base;
  Located loc{name, {}, {}};
  walk(root, "", base, src, deck.errors, loc);
  // Keep going after key errors so that one `check` lists every problem; the constraints skip
  // only the rules that read a key in error.
  for (const auto& e : deck.errors) loc.mark_bad(e.key);

  const std::string sweep_where = sweep_location(root, src, name);
  const SweepCombinations combinations = combinations_of(sweep, base, world, auto_keys);
  if (const long long n = combinations.count(); n > max_points) {
    std::string lists;
    for (const auto& e : sweep) lists += (lists.empty() ? "" : " x ") + num(e.second.size());
    if (combinations.filtered())
      lists = "lists of " + lists + ", auto keeping the factorisations of the rank count";
    deck.errors.push_back(
        {"sweep", sweep_where,
         "the sweep asks for " + (n == LLONG_MAX ? "more than " + num(n) : num(n)) + " points (" +
             lists + "), more than sweep.max_points = " + num(max_points) +
             ": shorten its lists, or raise sweep.max_points (--set sweep.max_points=N, at most " +
             num(kMaxMaxPoints) + ")"});
  } else {
    expand(sweep, combinations.list(), base, loc, src, world, deck);
  }
  // Duplicate messages (the same bad swept value in several points) are reported once.
  deck.errors = unique_errors(deck.errors);
  return deck;
}

Deck load_deck(const std::string& path, const std::vector<std::string>& overrides, int world) {
  std::string text;
  try {
    text = io::read_regular_file(path, "deck", kMaxDeckBytes);
  } catch (const io::ReadError& e) {
    Deck deck;
    deck.path = path;
    deck.errors.push_back({"", path, "cannot read the deck: " + e.reason});
    return deck;
  }
  return load_deck_text(text, path, overrides, world);
}

std::vector<std::string> deck_key_reference() {
  std::vector<std::string> out;
  for (const auto& k : key_table()) out.push_back(k.key + ": " + k.type);
  out.push_back("sweep.max_points: " + int_type(1, kMaxMaxPoints) + " (default " +
                num(kDefaultMaxPoints) + ")");
  return out;
}

nlohmann::json config_to_json(const RunConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& k : key_table()) {
    std::string pointer = "/" + k.key;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    j[nlohmann::json::json_pointer(pointer)] = k.get(c);
  }
  return j;
}

RunConfig config_from_json(const nlohmann::json& j) {
  RunConfig c;
  for (const auto& k : key_table()) {
    const nlohmann::json* v = json_at(j, k.key);
    if (!v) continue;
    if (auto err = k.apply(c, yaml_of(*v)))
      throw std::invalid_argument("config." + k.key + ": " + *err);
  }
  return c;
}

}  // namespace paraxis::driver
