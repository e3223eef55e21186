// Deck parsing: a table of every key (type, range, where it lands in RunConfig), a walk of
// the YAML tree that reports unknown, duplicate and ill-typed keys with file:line, and the
// cross-key constraints. The sweep is expanded before validation so each point is checked.
#include "driver/deck.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace paraxis::driver {

std::string DeckError::to_string() const {
  std::string s = where.empty() ? std::string() : where + ": ";
  if (!key.empty()) s += "'" + key + "': ";
  return s + message;
}

namespace {

using Apply = std::function<std::optional<std::string>(RunConfig&, const YAML::Node&)>;

struct KeySpec {
  std::string key;
  std::string type;
  Apply apply;
};

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  std::ostringstream os;
  os << YAML::Dump(n);
  return os.str();
}

std::optional<long long> parse_int(const std::string& s) {
  long long v = 0;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (b != e && *b == '+') ++b;
  auto [ptr, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || ptr != e) return std::nullopt;
  return v;
}

std::optional<double> parse_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

template <class Ref>
KeySpec int_key(std::string key, long long lo, long long hi, Ref ref) {
  std::ostringstream t;
  t << "integer in [" << lo << ", " << hi << "]";
  std::string type = t.str();
  return {key, type, [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (!n.IsScalar())
              return "expected " + type + ", got a " + (n.IsSequence() ? "list" : "map");
            const std::string s = n.Scalar();
            auto v = parse_int(s);
            if (!v) {
              if (parse_double(s) || s.find_first_not_of("+-0123456789") == std::string::npos)
                return "'" + s + "' is not an integer that fits 64 bits (expected " + type + ")";
              return "expected " + type + ", got '" + s + "'";
            }
            if (*v < lo || *v > hi) return "value " + s + " out of range (expected " + type + ")";
            using Field = std::remove_reference_t<decltype(ref(c))>;
            ref(c) = static_cast<Field>(*v);
            return std::nullopt;
          }};
}

template <class Ref>
KeySpec real_key(std::string key, double lo, double hi, Ref ref) {
  std::ostringstream t;
  t << "number in [" << lo << ", " << hi << "]";
  std::string type = t.str();
  return {key, type, [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (!n.IsScalar()) return "expected " + type;
            auto v = parse_double(n.Scalar());
            if (!v) return "expected " + type + ", got '" + n.Scalar() + "'";
            if (*v < lo || *v > hi)
              return "value " + n.Scalar() + " out of range (expected " + type + ")";
            ref(c) = *v;
            return std::nullopt;
          }};
}

template <class Ref>
KeySpec bool_key(std::string key, Ref ref) {
  return {key, "true or false",
          [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (n.IsScalar()) {
              const std::string& s = n.Scalar();
              if (s == "true" || s == "True" || s == "TRUE") return ref(c) = true, std::nullopt;
              if (s == "false" || s == "False" || s == "FALSE") return ref(c) = false, std::nullopt;
            }
            return "expected true or false, got '" + scalar_text(n) + "'";
          }};
}

template <class Ref>
KeySpec choice_key(std::string key, std::vector<std::string> choices, Ref ref) {
  std::string type = "one of";
  for (auto& ch : choices) type += " " + ch;
  return {key, type, [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (n.IsScalar())
              for (std::size_t i = 0; i < choices.size(); ++i)
                if (n.Scalar() == choices[i]) {
                  ref(c, i, choices[i]);
                  return std::nullopt;
                }
            return "expected " + type + ", got '" + scalar_text(n) + "'";
          }};
}

template <class Ref>
KeySpec string_key(std::string key, Ref ref) {
  return {key, "string", [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (!n.IsScalar()) return "expected a string";
            ref(c) = n.Scalar();
            return std::nullopt;
          }};
}

template <class Ref>
KeySpec int_list_key(std::string key, long long lo, long long hi, Ref ref) {
  return {key, "list of integers",
          [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (!n.IsSequence()) return "expected a list of integers, got '" + scalar_text(n) + "'";
            std::vector<int> out;
            for (const auto& e : n) {
              auto v = e.IsScalar() ? parse_int(e.Scalar()) : std::nullopt;
              if (!v || *v < lo || *v > hi)
                return "element '" + scalar_text(e) + "' is not an integer in [" +
                       std::to_string(lo) + ", " + std::to_string(hi) + "]";
              out.push_back(static_cast<int>(*v));
            }
            ref(c) = out;
            return std::nullopt;
          }};
}

const std::vector<KeySpec>& key_table() {
  static const std::vector<KeySpec> table = [] {
    constexpr long long kMaxInt = INT_MAX;
    std::vector<KeySpec> t;
    t.push_back(
        int_key("model.vocab", 2, kMaxInt, [](RunConfig& c) -> int& { return c.model.vocab; }));
    t.push_back(
        int_key("model.seq_len", 1, kMaxInt, [](RunConfig& c) -> int& { return c.model.seq_len; }));
    t.push_back(
        int_key("model.hidden", 1, kMaxInt, [](RunConfig& c) -> int& { return c.model.hidden; }));
    t.push_back(
        int_key("model.heads", 1, kMaxInt, [](RunConfig& c) -> int& { return c.model.heads; }));
    t.push_back(
        int_key("model.layers", 1, kMaxInt, [](RunConfig& c) -> int& { return c.model.layers; }));
    t.push_back(int_key("model.ffn", 1, kMaxInt, [](RunConfig& c) -> int& { return c.model.ffn; }));
    t.push_back(int_key("model.moe.experts", 0, kMaxInt,
                        [](RunConfig& c) -> int& { return c.model.moe.experts; }));
    t.push_back(int_key("model.moe.top_k", 1, kMaxInt,
                        [](RunConfig& c) -> int& { return c.model.moe.top_k; }));
    t.push_back(int_key("model.moe.every", 1, kMaxInt,
                        [](RunConfig& c) -> int& { return c.model.moe.every; }));
    t.push_back(real_key("model.moe.capacity_factor", 0, 1e6,
                         [](RunConfig& c) -> double& { return c.model.moe.capacity_factor; }));
    t.push_back(real_key("model.moe.aux_loss_coef", 0, 1e6,
                         [](RunConfig& c) -> double& { return c.model.moe.aux_loss_coef; }));
    t.push_back(real_key("model.moe.router_skew", 0, 1e6,
                         [](RunConfig& c) -> double& { return c.model.moe.router_skew; }));
    t.push_back(int_key("train.global_batch", 1, kMaxInt,
                        [](RunConfig& c) -> int& { return c.train.global_batch; }));
    t.push_back(int_key("train.micro_batch", 1, kMaxInt,
                        [](RunConfig& c) -> int& { return c.train.micro_batch; }));
    t.push_back(
        int_key("train.steps", 1, kMaxInt, [](RunConfig& c) -> int& { return c.train.steps; }));
    t.push_back(int_key("train.warmup_steps", 0, kMaxInt,
                        [](RunConfig& c) -> int& { return c.train.warmup_steps; }));
    t.push_back(real_key("train.lr", 0, 1e3, [](RunConfig& c) -> double& { return c.train.lr; }));
    t.push_back(real_key("train.beta1", 0, 0.999999,
                         [](RunConfig& c) -> double& { return c.train.beta1; }));
    t.push_back(real_key("train.beta2", 0, 0.999999,
                         [](RunConfig& c) -> double& { return c.train.beta2; }));
    t.push_back(
        real_key("train.adam_eps", 0, 1, [](RunConfig& c) -> double& { return c.train.adam_eps; }));
    t.push_back(real_key("train.weight_decay", 0, 1e3,
                         [](RunConfig& c) -> double& { return c.train.weight_decay; }));
    t.push_back(real_key("train.grad_clip", 0, 1e30,
                         [](RunConfig& c) -> double& { return c.train.grad_clip; }));
    t.push_back(int_key("train.seed", 0, LLONG_MAX,
                        [](RunConfig& c) -> std::uint64_t& { return c.train.seed; }));
    t.push_back(int_key("train.corpus_branching", 1, kMaxInt,
                        [](RunConfig& c) -> int& { return c.train.corpus_branching; }));
    t.push_back(int_key("train.fault_step", -1, kMaxInt,
                        [](RunConfig& c) -> int& { return c.train.fault_step; }));
    t.push_back(int_key("train.fault_rank", 0, kMaxInt,
                        [](RunConfig& c) -> int& { return c.train.fault_rank; }));
    t.push_back(choice_key("train.precision", {"fp64", "fp32", "bf16"},
                           [](RunConfig& c, std::size_t i, const std::string&) {
                             c.train.precision = static_cast<model::Precision>(i);
                           }));
    t.push_back(
        int_key("parallel.tp", 1, kMaxInt, [](RunConfig& c) -> int& { return c.parallel.tp; }));
    t.push_back(
        int_key("parallel.pp", 1, kMaxInt, [](RunConfig& c) -> int& { return c.parallel.pp; }));
    t.push_back(
        int_key("parallel.dp", 1, kMaxInt, [](RunConfig& c) -> int& { return c.parallel.dp; }));
    t.push_back(
        int_key("parallel.ep", 1, kMaxInt, [](RunConfig& c) -> int& { return c.parallel.ep; }));
    t.push_back(
        int_key("parallel.zero", 0, 3, [](RunConfig& c) -> int& { return c.parallel.zero; }));
    t.push_back(choice_key(
        "parallel.schedule", {"gpipe", "1f1b", "interleaved"},
        [](RunConfig& c, std::size_t, const std::string& s) { c.parallel.schedule = s; }));
    t.push_back(int_key("parallel.virtual_stages", 1, kMaxInt,
                        [](RunConfig& c) -> int& { return c.parallel.virtual_stages; }));
    t.push_back(
        int_list_key("parallel.stage_layers", 0, kMaxInt,
                     [](RunConfig& c) -> std::vector<int>& { return c.parallel.stage_layers; }));
    t.push_back(bool_key("parallel.sequence_parallel",
                         [](RunConfig& c) -> bool& { return c.parallel.sequence_parallel; }));
    t.push_back(
        choice_key("parallel.order", {"tp-pp-dp", "tp-dp-pp"},
                   [](RunConfig& c, std::size_t, const std::string& s) { c.parallel.order = s; }));
    t.push_back(
        choice_key("comm.backend", {"mpi", "nccl"},
                   [](RunConfig& c, std::size_t, const std::string& s) { c.comm.backend = s; }));
    t.push_back(real_key("comm.bucket_mb", 1e-6, 1e6,
                         [](RunConfig& c) -> double& { return c.comm.bucket_mb; }));
    t.push_back(bool_key("comm.overlap", [](RunConfig& c) -> bool& { return c.comm.overlap; }));
    t.push_back(real_key("hardware.peak_flops", 0, 1e30,
                         [](RunConfig& c) -> double& { return c.hardware.peak_flops; }));
    t.push_back(
        choice_key("hardware.gemm", {"auto", "portable"},
                   [](RunConfig& c, std::size_t, const std::string& s) { c.hardware.gemm = s; }));
    t.push_back(
        bool_key("hardware.calibrate", [](RunConfig& c) -> bool& { return c.hardware.calibrate; }));
    t.push_back(
        string_key("output.dir", [](RunConfig& c) -> std::string& { return c.output.dir; }));
    t.push_back(bool_key("output.trace", [](RunConfig& c) -> bool& { return c.output.trace; }));
    return t;
  }();
  return table;
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

struct Source {
  std::string path;
  std::set<std::string> overridden;  // keys whose value came from --set
  std::string where(const std::string& key, const YAML::Node& n) const {
    if (overridden.count(key)) return "--set";
    const auto m = n.Mark();
    if (m.line >= 0) return path + ":" + std::to_string(m.line + 1);
    return path;
  }
};

void walk(const YAML::Node& node, const std::string& prefix, RunConfig& cfg, const Source& src,
          std::vector<DeckError>& errors) {
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    if (!seen.insert(name).second) {
      errors.push_back({key, src.where(key, kv.first), "duplicate key"});
      continue;
    }
    if (prefix.empty() && name == "sweep") continue;
    if (const KeySpec* spec = find_key(key)) {
      if (auto err = spec->apply(cfg, kv.second))
        errors.push_back({key, src.where(key, kv.second), *err});
    } else if (is_section_prefix(key)) {
      if (kv.second.IsMap()) {
        walk(kv.second, key, cfg, src, errors);
      } else if (!kv.second.IsNull()) {
        errors.push_back({key, src.where(key, kv.second), "expected a map of keys"});
      }
    } else {
      errors.push_back({key, src.where(key, kv.first), "unknown key"});
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

// Constraints between keys for one point; world = 0 skips the world-size checks.
std::vector<DeckError> check_constraints(const RunConfig& c, int world, const std::string& where) {
  std::vector<DeckError> e;
  auto err = [&](const std::string& key, const std::string& msg) {
    e.push_back({key, where, msg});
  };
  const auto& m = c.model;
  const auto& t = c.train;
  const auto& p = c.parallel;
  if (m.hidden % m.heads != 0)
    err("model.heads", "heads = " + std::to_string(m.heads) +
                           " does not divide model.hidden = " + std::to_string(m.hidden));
  if (m.moe.experts > 0 && m.moe.top_k > m.moe.experts)
    err("model.moe.top_k", "top_k = " + std::to_string(m.moe.top_k) +
                               " exceeds model.moe.experts = " + std::to_string(m.moe.experts));
  if (t.global_batch % t.micro_batch != 0)
    err("train.micro_batch",
        "micro_batch = " + std::to_string(t.micro_batch) +
            " does not divide train.global_batch = " + std::to_string(t.global_batch));
  if (t.warmup_steps >= t.steps)
    err("train.warmup_steps",
        "warmup_steps = " + std::to_string(t.warmup_steps) +
            " leaves no measured step of train.steps = " + std::to_string(t.steps));
  if (static_cast<long long>(t.micro_batch) * m.seq_len > INT_MAX / 4)
    err("train.micro_batch", "micro_batch * seq_len overflows the token index");
  const long long w = static_cast<long long>(p.tp) * p.pp * p.dp;
  if (world > 0 && w != world)
    err("parallel", "tp * pp * dp = " + std::to_string(p.tp) + " * " + std::to_string(p.pp) +
                        " * " + std::to_string(p.dp) + " = " + std::to_string(w) +
                        " but the run has " + std::to_string(world) + " ranks");
  if (p.dp % p.ep != 0)
    err("parallel.ep",
        "ep = " + std::to_string(p.ep) + " does not divide parallel.dp = " + std::to_string(p.dp));
  if (t.global_batch % (static_cast<long long>(p.dp) * t.micro_batch) != 0)
    err("train.global_batch", "global_batch = " + std::to_string(t.global_batch) +
                                  " is not a multiple of parallel.dp * train.micro_batch = " +
                                  std::to_string(p.dp) + " * " + std::to_string(t.micro_batch));
  // What each axis needs of the model and the batch (checked even for axes not built yet, so
  // a deck learns everything that is wrong with it at once).
  auto num = [](long long v) { return std::to_string(v); };
  if (p.tp > 1) {
    if (m.heads % p.tp != 0)
      err("parallel.tp", "tp = " + num(p.tp) + " does not divide model.heads = " + num(m.heads));
    if (m.ffn % p.tp != 0)
      err("parallel.tp", "tp = " + num(p.tp) + " does not divide model.ffn = " + num(m.ffn));
    if (p.sequence_parallel && m.seq_len % p.tp != 0)
      err("parallel.sequence_parallel", "tp = " + num(p.tp) + " does not divide model.seq_len = " +
                                            num(m.seq_len) + " (sequence parallelism shards it)");
  }
  if (p.pp > 1) {
    const long long micro =
        t.global_batch / std::max(1LL, static_cast<long long>(p.dp) * t.micro_batch);
    const long long chunks = static_cast<long long>(p.pp) * p.virtual_stages;
    if (m.layers < chunks)
      err("parallel.pp",
          "pp * virtual_stages = " + num(chunks) + " exceeds model.layers = " + num(m.layers));
    if (p.schedule == "interleaved" && micro % p.pp != 0)
      err("train.micro_batch",
          "the interleaved schedule needs micro-batches per replica (" + num(micro) +
              " = global_batch / (dp * micro_batch)) divisible by parallel.pp = " + num(p.pp));
    if (!p.stage_layers.empty()) {
      long long sum = 0;
      int smallest = 1;
      for (int l : p.stage_layers) {
        sum += l;
        smallest = std::min(smallest, l);
      }
      if (static_cast<long long>(p.stage_layers.size()) != chunks || sum != m.layers ||
          smallest < 1)
        err("parallel.stage_layers",
            "needs pp * virtual_stages = " + num(chunks) +
                " entries >= 1 summing to model.layers = " + num(m.layers));
    }
  }
  if (p.schedule != "interleaved" && p.virtual_stages != 1)
    err("parallel.virtual_stages",
        "virtual_stages = " + num(p.virtual_stages) + " needs parallel.schedule: interleaved");
  if (m.moe.experts > 0 && m.moe.experts % p.ep != 0)
    err("parallel.ep",
        "ep = " + num(p.ep) + " does not divide model.moe.experts = " + num(m.moe.experts));
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

std::vector<std::pair<std::string, std::vector<YAML::Node>>> read_sweep(
    const YAML::Node& root, const Source& src, int world, std::set<std::string>& auto_keys,
    std::vector<DeckError>& errors) {
  std::vector<std::pair<std::string, std::vector<YAML::Node>>> out;
  const YAML::Node sw = root["sweep"];
  if (!sw || sw.IsNull()) return out;
  if (!sw.IsMap()) {
    errors.push_back({"sweep", src.where("sweep", sw), "expected a map of dotted keys to lists"});
    return out;
  }
  for (const auto& kv : sw) {
    const std::string key = kv.first.Scalar();
    const std::string full = "sweep." + key;
    if (!find_key(key)) {
      errors.push_back({full, src.where(full, kv.first), "unknown key '" + key + "'"});
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
      values.clear();
      for (int d = 1; d <= world; ++d)
        if (world % d == 0) values.push_back(YAML::Node(d));
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

}  // namespace

Deck load_deck(const std::string& path, const std::vector<std::string>& overrides, int world) {
  Deck deck;
  deck.path = path;
  Source src{path, {}};
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    deck.errors.push_back({"", path, "cannot open the deck"});
    return deck;
  } catch (const YAML::Exception& ex) {
    deck.errors.push_back({"", path + ":" + std::to_string(ex.mark.line + 1), ex.msg});
    return deck;
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    deck.errors.push_back({"", path, "a deck is a map of sections (model, train, ...)"});
    return deck;
  }
  for (const auto& ov : overrides) {
    const auto eq = ov.find('=');
    if (eq == std::string::npos || eq == 0) {
      deck.errors.push_back({ov, "--set", "expected key=value"});
      continue;
    }
    const std::string key = ov.substr(0, eq);
    YAML::Node value;
    try {
      value = YAML::Load(ov.substr(eq + 1));
    } catch (const YAML::Exception& ex) {
      deck.errors.push_back({key, "--set", "cannot parse value: " + ex.msg});
      continue;
    }
    if (!find_key(key) && key.rfind("sweep.", 0) != 0) {
      deck.errors.push_back({key, "--set", "unknown key"});
      continue;
    }
    set_path(root, key, value);
    src.overridden.insert(key);
  }
  move_auto_degrees_to_sweep(root);
  std::set<std::string> auto_keys;
  const auto sweep = read_sweep(root, src, world, auto_keys, deck.errors);
  const bool auto_grid = auto_keys.count("parallel.tp") || auto_keys.count("parallel.pp") ||
                         auto_keys.count("parallel.dp");

  RunConfig base;
  walk(root, "", base, src, deck.errors);
  // Keep going after errors so that one `check` lists every problem, but only judge the
  // constraints between keys when every key parsed.
  const bool keys_ok = deck.errors.empty();

  // Cartesian product of the swept values, last key fastest.
  std::vector<std::size_t> idx(sweep.size(), 0);
  const bool swept = !sweep.empty();
  while (true) {
    SweepPoint pt;
    pt.config = base;
    std::vector<DeckError> point_errors;
    for (std::size_t i = 0; i < sweep.size(); ++i) {
      const auto& [key, values] = sweep[i];
      const YAML::Node& v = values[idx[i]];
      pt.settings.emplace_back(key, scalar_text(v));
      if (auto err = find_key(key)->apply(pt.config, v))
        point_errors.push_back({"sweep." + key, src.where("sweep." + key, v), *err});
    }
    const auto& gp = pt.config.parallel;
    const bool not_a_factorisation =
        (auto_grid && static_cast<long long>(gp.tp) * gp.pp * gp.dp != world) ||
        (auto_keys.count("parallel.ep") && gp.dp % gp.ep != 0);
    if (not_a_factorisation) {
      // Not one of the factorisations `auto` stands for: not a point at all.
    } else if (!point_errors.empty()) {
      deck.errors.insert(deck.errors.end(), point_errors.begin(), point_errors.end());
    } else if (keys_ok) {
      auto cons = check_constraints(pt.config, world, path);
      if (!cons.empty()) {
        if (!swept) {
          deck.errors.insert(deck.errors.end(), cons.begin(), cons.end());
        } else {
          for (const auto& c : cons)
            pt.skip_reason += (pt.skip_reason.empty() ? "" : "; ") + c.to_string();
        }
      }
    }
    if (!not_a_factorisation) deck.points.push_back(std::move(pt));
    std::size_t d = sweep.size();
    while (d > 0) {
      --d;
      if (++idx[d] < sweep[d].second.size()) break;
      idx[d] = 0;
      if (d == 0) {
        d = sweep.size() + 1;
        break;
      }
    }
    if (sweep.empty() || d == sweep.size() + 1) break;
  }
  // Duplicate messages (the same bad swept value in several points) are reported once.
  std::vector<DeckError> unique;
  std::set<std::string> seen;
  for (auto& e : deck.errors)
    if (seen.insert(e.to_string()).second) unique.push_back(e);
  deck.errors = unique;
  return deck;
}

std::vector<std::string> deck_key_reference() {
  std::vector<std::string> out;
  for (const auto& k : key_table()) out.push_back(k.key + ": " + k.type);
  return out;
}

}  // namespace paraxis::driver
