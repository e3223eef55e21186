// Machine description loader (machine_file.hpp): YAML parsed by yaml-cpp, every key checked
// against its type and range, all problems collected so a user fixes them in one pass.
#include "deck/machine_file.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "deck/deck.hpp"
#include "deck/yaml_document.hpp"
#include "io/input_file.hpp"

namespace paraxis::driver {

namespace pm = paraxis::perfmodel;

namespace {

const char* const kTopKeys[] = {"name",
                                "devices_per_node",
                                "nodes",
                                "peak_flops",
                                "memory_gb",
                                "achievable_fraction",
                                "intra_node",
                                "inter_node",
                                "mtbf_hours_per_device",
                                "checkpoint_s",
                                "storage_gbs_per_node",
                                "pipeline_transfers",
                                "memory_bandwidth_gbs",
                                "memory_efficiency",
                                "gemm_efficiency",
                                "gradient_accumulation_bytes",
                                "gemm_tile"};
const char* const kLinkKeys[] = {"latency_us", "bandwidth_gbs"};

template <std::size_t N>
std::string list_of(const char* const (&keys)[N]) {
  std::string s;
  for (const char* k : keys) s += std::string(s.empty() ? "" : ", ") + k;
  return s;
}

class Loader {
 public:
  explicit Loader(std::string name) : name_(std::move(name)) {}

  std::string where(const YAML::Mark& m) const {
    return m.line >= 0 ? name_ + ":" + std::to_string(m.line + 1) : name_;
  }
  void error(const YAML::Mark& m, const std::string& key, const std::string& what) {
    errors_.push_back(where(m) + ": " + (key.empty() ? "" : "'" + key + "': ") + what);
  }
  const std::vector<std::string>& errors() const { return errors_; }

  // The keys of map `n` (dotted under `prefix`): unknown and duplicate ones are errors.
  template <std::size_t N>
  void check_keys(const YAML::Node& n, const std::string& prefix, const char* const (&known)[N]) {
    std::set<std::string> seen;
    for (const auto& kv : n) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      const std::string full = prefix.empty() ? key : prefix + "." + key;
      bool ok = false;
      for (const char* k : known) ok = ok || key == k;
      if (!ok)
        error(kv.first.Mark(), full, "unknown key (expected one of " + list_of(known) + ")");
      else if (!seen.insert(key).second)
        error(kv.first.Mark(), full, "duplicate key");
    }
  }

  // The value of `key` in map `n`, or nullopt (an error when required).
  std::optional<YAML::Node> find(const YAML::Node& n, const std::string& prefix, const char* key,
                                 bool required) {
    const YAML::Node v = n[key];
    if (v && v.IsNull()) {
      // A null value's mark points past it: name the line of its key.
      for (const auto& kv : n)
        if (kv.first.IsScalar() && kv.first.Scalar() == key)
          error(kv.first.Mark(), prefix.empty() ? key : prefix + "." + key, "has no value");
      return std::nullopt;
    }
    if (v) return v;
    if (required) error(n.Mark(), prefix.empty() ? key : prefix + "." + key, "missing");
    return std::nullopt;
  }

  // A finite number > lo (>= lo with closed) and <= hi.
  std::optional<double> real(const YAML::Node& v, const std::string& key, double lo, double hi,
                             bool closed) {
    std::ostringstream want;
    want << "a finite number " << (closed ? ">= " : "> ") << lo;
    if (hi < HUGE_VAL) want << " and <= " << hi;
    if (!v.IsScalar()) {
      error(v.Mark(), key, "expected " + want.str() + ", got " + node_kind(v));
      return std::nullopt;
    }
    const std::string& s = v.Scalar();
    char* end = nullptr;
    const double x = s.empty() ? 0 : std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x) || x < lo ||
        (!closed && x == lo) || x > hi) {
      error(v.Mark(), key, "expected " + want.str() + ", got '" + s + "'");
      return std::nullopt;
    }
    return x;
  }

  std::optional<long long> integer(const YAML::Node& v, const std::string& key) {
    const std::string want = "an integer in [1, " + std::to_string(INT_MAX) + "]";
    if (!v.IsScalar()) {
      error(v.Mark(), key, "expected " + want + ", got " + node_kind(v));
      return std::nullopt;
    }
    const std::string& s = v.Scalar();
    const char* b = s.data();
    const char* e = b + s.size();
    if (b != e && *b == '+') ++b;
    long long x = 0;
    const auto [ptr, ec] = std::from_chars(b, e, x);
    if (b == e || ec != std::errc() || ptr != e || x < 1 || x > INT_MAX) {
      error(v.Mark(), key, "expected " + want + ", got '" + s + "'");
      return std::nullopt;
    }
    return x;
  }

 private:
  std::string name_;
  std::vector<std::string> errors_;
};

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += (s.empty() ? "" : "\n") + l;
  return s;
}

// name (default: the file's), devices_per_node and nodes (their product within an int).
void read_name_and_size(Loader& ld, const YAML::Node& root, MachineFile& m) {
  if (auto v = ld.find(root, "", "name", false)) {
    if (v->IsScalar() && !v->Scalar().empty())
      m.name = v->Scalar();
    else
      ld.error(v->Mark(), "name", "expected a non-empty string");
  }
  std::optional<long long> per_node, nodes;
  if (auto v = ld.find(root, "", "devices_per_node", true))
    per_node = ld.integer(*v, "devices_per_node");
  if (auto v = ld.find(root, "", "nodes", true)) nodes = ld.integer(*v, "nodes");
  if (per_node && nodes) {
    // The planner and the MTBF count devices in an int.
    if (*per_node * *nodes > INT_MAX)
      ld.error(root["nodes"].Mark(), "nodes",
               "nodes * devices_per_node = " + std::to_string(*nodes) + " * " +
                   std::to_string(*per_node) + " exceeds " + std::to_string(INT_MAX) + " devices");
    m.machine.devices_per_node = static_cast<int>(*per_node);
    m.machine.nodes = static_cast<int>(*nodes);
  }
}

// intra_node and inter_node: {latency_us, bandwidth_gbs} each.
void read_links(Loader& ld, const YAML::Node& root, pm::Machine& mc) {
  for (const char* key : {"intra_node", "inter_node"}) {
    auto link = ld.find(root, "", key, true);
    if (!link) continue;
    if (!link->IsMap()) {
      ld.error(link->Mark(), key, "expected a map {latency_us, bandwidth_gbs}");
      continue;
    }
    ld.check_keys(*link, key, kLinkKeys);
    pm::LinkCost& c = std::strcmp(key, "intra_node") == 0 ? mc.intra_node : mc.inter_node;
    const std::string k = key;
    // Bounds keep alpha and 1 / bandwidth finite and positive: 1e-300 GB/s would overflow.
    if (auto v = ld.find(*link, k, "latency_us", true))
      if (auto x = ld.real(*v, k + ".latency_us", 0, 1e30, false)) c.alpha = *x * 1e-6;
    if (auto v = ld.find(*link, k, "bandwidth_gbs", true))
      if (auto x = ld.real(*v, k + ".bandwidth_gbs", 1e-9, 1e30, false)) c.beta = 1.0 / (*x * 1e9);
  }
}

// How the pipeline engine treats its transfers: overlapped (the default) or blocking.
void read_pipeline_transfers(Loader& ld, const YAML::Node& root, pm::Machine& mc) {
  auto v = ld.find(root, "", "pipeline_transfers", false);
  if (!v) return;
  const std::string s = v->IsScalar() ? v->Scalar() : "";
  if (s == "blocking" || s == "overlapped")
    mc.blocking_pipeline_transfers = s == "blocking";
  else
    ld.error(
        v->Mark(), "pipeline_transfers",
        "expected overlapped or blocking, got " + (v->IsScalar() ? "'" + s + "'" : node_kind(*v)));
}

// The work-dependent compute model (compute_efficiency.hpp): on when a bandwidth is given.
void read_compute_model(Loader& ld, const YAML::Node& root, pm::Machine& mc) {
  pm::ComputeEfficiency& ce = mc.compute;
  if (auto v = ld.find(root, "", "memory_bandwidth_gbs", false))
    if (auto x = ld.real(*v, "memory_bandwidth_gbs", 1e-9, 1e30, false))
      ce.memory_bytes_per_s = *x * 1e9;
  for (const char* key : {"memory_efficiency", "gemm_efficiency", "gradient_accumulation_bytes"}) {
    const bool memory = std::strcmp(key, "memory_efficiency") == 0;
    const bool bytes = std::strcmp(key, "gradient_accumulation_bytes") == 0;
    auto v = ld.find(root, "", key, false);
    if (!v) continue;
    if (!root["memory_bandwidth_gbs"])
      ld.error(v->Mark(), key, "needs memory_bandwidth_gbs (the work-dependent compute model)");
    if (auto x = ld.real(*v, key, 0, bytes ? 1e3 : 1, bytes))
      (bytes    ? ce.gradient_accumulation_bytes
       : memory ? ce.memory_efficiency
                : ce.gemm_efficiency) = *x;
  }
  if (auto v = ld.find(root, "", "gemm_tile", false)) {
    if (!root["memory_bandwidth_gbs"])
      ld.error(v->Mark(), "gemm_tile",
               "needs memory_bandwidth_gbs (the work-dependent compute model)");
    if (!v->IsSequence() || v->size() != 2) {
      ld.error(v->Mark(), "gemm_tile", "expected [rows, columns], two integers >= 1");
    } else {
      const auto r = ld.integer((*v)[0], "gemm_tile[0]");
      const auto c = ld.integer((*v)[1], "gemm_tile[1]");
      if (r) ce.tile_m = static_cast<int>(*r);
      if (c) ce.tile_n = static_cast<int>(*c);
    }
  }
  ce.peak_flops = ce.memory_bytes_per_s > 0 ? mc.peak_flops : 0;
}

}  // namespace

MachineFile load_machine_text(const std::string& text, const std::string& name) {
  YAML::Node root;
  try {
    root = single_yaml_document(text, name, "machine description");
  } catch (const YamlDocumentError& e) {
    throw std::invalid_argument(e.where + ": not valid YAML: " + e.what());
  }
  Loader ld(name);
  if (!root.IsMap())
    throw std::invalid_argument(name + ": expected a map of keys (" + list_of(kTopKeys) + ")");
  ld.check_keys(root, "", kTopKeys);
  MachineFile m;
  m.name = name;
  read_name_and_size(ld, root, m);
  if (auto v = ld.find(root, "", "peak_flops", true))
    if (auto x = ld.real(*v, "peak_flops", 0, HUGE_VAL, false)) m.machine.peak_flops = *x;
  // 1e30 GB bounds the bytes well inside a double.
  if (auto v = ld.find(root, "", "memory_gb", true))
    if (auto x = ld.real(*v, "memory_gb", 0, 1e30, false)) m.machine.memory_bytes = *x * 1e9;
  if (auto v = ld.find(root, "", "achievable_fraction", false))
    if (auto x = ld.real(*v, "achievable_fraction", 0, 1, false))
      m.machine.achievable_fraction = *x;
  read_links(ld, root, m.machine);
  read_pipeline_transfers(ld, root, m.machine);
  if (auto v = ld.find(root, "", "mtbf_hours_per_device", false))
    if (auto x = ld.real(*v, "mtbf_hours_per_device", 0, 1e30, true)) m.mtbf_hours_per_device = *x;
  if (auto v = ld.find(root, "", "checkpoint_s", false))
    if (auto x = ld.real(*v, "checkpoint_s", 0, 1e30, true)) m.checkpoint_s = *x;
  if (auto v = ld.find(root, "", "storage_gbs_per_node", false))
    if (auto x = ld.real(*v, "storage_gbs_per_node", 0, 1e30, true)) m.storage_gbs_per_node = *x;
  read_compute_model(ld, root, m.machine);
  if (!ld.errors().empty()) throw std::invalid_argument(joined(ld.errors()));
  return m;
}

MachineFile load_machine_file(const std::string& path) {
  std::string text;
  try {
    text = io::read_regular_file(path, "machine description", kMaxDeckBytes);
  } catch (const io::ReadError& e) {
    throw std::invalid_argument(e.what());
  }
  return load_machine_text(text, path);
}

}  // namespace paraxis::driver
