// Validation of summary.json for the report (summary_reader.hpp). Each check names the JSON path
// of the field, so a user can find it in the file; values are shown as JSON, shortened.
#include "analysis/summary_reader.hpp"

#include <climits>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "analysis/point_status.hpp"
#include "analysis/results_schema.hpp"
#include "config/config_rules.hpp"
#include "deck/run_config.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver {

using nlohmann::json;
namespace pm = paraxis::perfmodel;

namespace {

constexpr long long kMaxInt = INT_MAX;
constexpr double kInf = HUGE_VAL;
using results_schema::shown;

std::string num(long long v) {
  return std::to_string(v);
}

std::string range_text(const char* what, double lo, double hi) {
  const auto kind = std::string(what) == "an integer" ? results_schema::Kind::integer
                                                      : results_schema::Kind::number;
  return results_schema::range_text(kind, {lo, hi, false});
}

// Path-aware checks: every failure throws std::runtime_error "<file>: <path>: <what>".
class Checker {
 public:
  explicit Checker(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw std::runtime_error(file_ + ": " + (path.empty() ? std::string() : path + ": ") + what);
  }
  static std::string at(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string at(const std::string& path, std::size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  const json& object(const json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "expected an object, got " + shown(v));
    return v;
  }
  const json& array(const json& v, const std::string& path) const {
    if (!v.is_array()) fail(path, "expected an array, got " + shown(v));
    return v;
  }
  // `obj` is an object (checked by the caller).
  const json& need(const json& obj, const std::string& path, const char* key) const {
    const auto it = obj.find(key);
    if (it == obj.end()) fail(at(path, key), "missing");
    return *it;
  }
  static const json* maybe(const json& obj, const char* key) {
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  const json& child(const json& obj, const std::string& path, const char* key) const {
    return object(need(obj, path, key), at(path, key));
  }

  long long integer(const json& v, const std::string& path, long long lo, long long hi) const {
    const std::string want = range_text("an integer", lo, hi);
    if (!v.is_number_integer()) fail(path, "expected " + want + ", got " + shown(v));
    // The parser stores every non-negative integer as unsigned: check its size before the range.
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
      fail(path, "expected " + want + ", got " + shown(v));
    const auto x = v.get<std::int64_t>();
    if (x < lo || x > hi) fail(path, "expected " + want + ", got " + shown(v));
    return x;
  }
  long long integer(const json& obj, const std::string& path, const char* key, long long lo,
                    long long hi) const {
    return integer(need(obj, path, key), at(path, key), lo, hi);
  }

  // A finite number in [lo, hi] ((lo, hi] with lo_open).
  double number(const json& v, const std::string& path, double lo, double hi = kInf,
                bool lo_open = false) const {
    const std::string want =
        results_schema::range_text(results_schema::Kind::number, {lo, hi, lo_open});
    if (!v.is_number()) fail(path, "expected " + want + ", got " + shown(v));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || (lo_open && x == lo) || x > hi)
      fail(path, "expected " + want + ", got " + shown(v));
    return x;
  }
  double number(const json& obj, const std::string& path, const char* key, double lo,
                double hi = kInf, bool lo_open = false) const {
    return number(need(obj, path, key), at(path, key), lo, hi, lo_open);
  }

  std::string string(const json& obj, const std::string& path, const char* key) const {
    const json& v = need(obj, path, key);
    if (!v.is_string()) fail(at(path, key), "expected a string, got " + shown(v));
    return v.get<std::string>();
  }
  std::string choice(const json& obj, const std::string& path, const char* key,
                     const std::vector<std::string>& choices) const {
    const std::string s = string(obj, path, key);
    std::string list;
    for (const auto& c : choices) {
      if (s == c) return s;
      list += std::string(list.empty() ? "" : ", ") + c;
    }
    fail(at(path, key), "expected one of " + list + ", got " + shown(json(s)));
  }
  bool boolean(const json& obj, const std::string& path, const char* key) const {
    const json& v = need(obj, path, key);
    if (!v.is_boolean()) fail(at(path, key), "expected true or false, got " + shown(v));
    return v.get<bool>();
  }

 private:
  std::string file_;
};

// The shape of a point: what the report and the performance models divide by and index with.
struct Shape {
  long long tp = 1, pp = 1, dp = 1, ep = 1, v = 1, micro_batches = 1;
};

// config.model: types and ranges; rc takes what the rules between keys read.
void check_model(const Checker& c, const json& cfg, const std::string& path, RunConfig& rc) {
  const std::string mp = Checker::at(path, "model");
  const json& m = c.child(cfg, path, "model");
  c.integer(m, mp, "vocab", 2, kMaxInt);
  rc.model.seq_len = static_cast<int>(c.integer(m, mp, "seq_len", 1, kMaxInt));
  rc.model.hidden = static_cast<int>(c.integer(m, mp, "hidden", 1, kMaxInt));
  rc.model.heads = static_cast<int>(c.integer(m, mp, "heads", 1, kMaxInt));
  rc.model.layers = static_cast<int>(c.integer(m, mp, "layers", 1, kMaxInt));
  rc.model.ffn = static_cast<int>(c.integer(m, mp, "ffn", 1, kMaxInt));
  const std::string ep_ = Checker::at(mp, "moe");
  const json& e = c.child(m, mp, "moe");
  rc.model.moe.experts = static_cast<int>(c.integer(e, ep_, "experts", 0, kMaxInt));
  rc.model.moe.top_k = static_cast<int>(c.integer(e, ep_, "top_k", 1, kMaxInt));
  c.integer(e, ep_, "every", 1, kMaxInt);
  for (const char* k : {"capacity_factor", "aux_loss_coef", "router_skew"}) c.number(e, ep_, k, 0);
}

void check_train(const Checker& c, const json& cfg, const std::string& path, RunConfig& rc) {
  const std::string tr = Checker::at(path, "train");
  const json& t = c.child(cfg, path, "train");
  rc.train.global_batch = static_cast<int>(c.integer(t, tr, "global_batch", 1, kMaxInt));
  rc.train.micro_batch = static_cast<int>(c.integer(t, tr, "micro_batch", 1, kMaxInt));
  rc.train.steps = static_cast<int>(c.integer(t, tr, "steps", 1, kMaxInt));
  rc.train.warmup_steps = static_cast<int>(c.integer(t, tr, "warmup_steps", 0, kMaxInt));
  c.number(t, tr, "lr", 0);
  c.integer(t, tr, "seed", 0, LLONG_MAX);
  c.choice(t, tr, "precision", model::precision_names());
}

Shape check_parallel(const Checker& c, const json& cfg, const std::string& path, RunConfig& rc) {
  const std::string pa = Checker::at(path, "parallel");
  const json& p = c.child(cfg, path, "parallel");
  Shape s;
  s.tp = c.integer(p, pa, "tp", 1, kMaxInt);
  s.pp = c.integer(p, pa, "pp", 1, kMaxInt);
  s.dp = c.integer(p, pa, "dp", 1, kMaxInt);
  s.ep = c.integer(p, pa, "ep", 1, kMaxInt);
  c.integer(p, pa, "zero", 0, config::kMaxZeroStage);
  const std::string schedule = c.string(p, pa, "schedule");
  try {
    schedule::parse_schedule(schedule);
  } catch (const std::exception& x) {
    c.fail(Checker::at(pa, "schedule"), x.what());
  }
  s.v = c.integer(p, pa, "virtual_stages", 1, kMaxInt);
  const std::string sl = Checker::at(pa, "stage_layers");
  const json& stage_layers = c.array(c.need(p, pa, "stage_layers"), sl);
  for (std::size_t i = 0; i < stage_layers.size(); ++i)
    rc.parallel.stage_layers.push_back(
        static_cast<int>(c.integer(stage_layers[i], Checker::at(sl, i), 1, kMaxInt)));
  rc.parallel.sequence_parallel = c.boolean(p, pa, "sequence_parallel");
  c.choice(p, pa, "order", config::rank_order_names());
  rc.parallel.tp = static_cast<int>(s.tp);
  rc.parallel.pp = static_cast<int>(s.pp);
  rc.parallel.dp = static_cast<int>(s.dp);
  rc.parallel.ep = static_cast<int>(s.ep);
  rc.parallel.virtual_stages = static_cast<int>(s.v);
  return s;
}

void check_comm_hardware(const Checker& c, const json& cfg, const std::string& path) {
  const std::string cm = Checker::at(path, "comm"), hw = Checker::at(path, "hardware");
  const json& k = c.child(cfg, path, "comm");
  c.choice(k, cm, "backend", config::comm_backend_names());
  c.number(k, cm, "bucket_mb", 0, kInf, true);
  c.boolean(k, cm, "overlap");
  const json& h = c.child(cfg, path, "hardware");
  c.number(h, hw, "peak_flops", 0);
  c.string(h, hw, "gemm");
  if (Checker::maybe(h, "calibrate")) c.boolean(h, hw, "calibrate");
}

Shape check_config(const Checker& c, const json& cfg, const std::string& path) {
  RunConfig rc;  // what the rules between keys read (config/config_rules.hpp)
  check_model(c, cfg, path, rc);
  check_train(c, cfg, path, rc);
  Shape s = check_parallel(c, cfg, path, rc);
  check_comm_hardware(c, cfg, path);
  // The rules between keys that let the point run at all (the deck's, stated once).
  for (const auto& v : config::rule_violations(rc.model, rc.train, rc.parallel, 0))
    c.fail(Checker::at(path, v.keys.front()), v.message);
  s.micro_batches = config::micro_batches(rc.train, rc.parallel);  // exact: the rules hold
  const long long chunks = s.pp * s.v;  // both <= INT_MAX: no overflow in 64 bits
  if (chunks > kMaxReportScheduleChunks / s.micro_batches)
    c.fail(Checker::at(Checker::at(path, "parallel"), "pp"),
           "pp * virtual_stages * micro-batches = " + num(chunks) + " * " + num(s.micro_batches) +
               " exceeds the report's limit of " + num(kMaxReportScheduleChunks));
  return s;
}

// The calibration's rules beyond its fields' types and ranges (results_schema): known axes and
// operations, [bytes, seconds] samples, one compute figure per model chunk.
void check_calibration(const Checker& c, const json& cal, const std::string& path, const Shape& s) {
  const std::string cp = Checker::at(path, "comm");
  for (const auto& [axis, ops] : cal.at("comm").items()) {
    const std::string ap = Checker::at(cp, axis);
    if (axis != "tp" && axis != "pp" && axis != "dp" && axis != "ep")
      c.fail(ap, "unknown axis (expected tp, pp, dp or ep)");
    for (const auto& [op, f] : ops.items()) {
      const std::string op_path = Checker::at(ap, op);
      try {
        collective_named(op);
      } catch (const std::exception& x) {
        c.fail(op_path, x.what());
      }
      const std::string sp = Checker::at(op_path, "samples");
      const json& samples = f.at("samples");
      for (std::size_t i = 0; i < samples.size(); ++i)
        if (samples[i].size() != 2)
          c.fail(Checker::at(sp, i), "expected [bytes, seconds], got " + shown(samples[i]));
    }
  }
  const std::string kp = Checker::at(path, "compute");
  const json& k = cal.at("compute");
  const long long chunks = s.pp * s.v;
  for (const auto& [key, a] : k.items())
    if (key.find("_per_chunk") != std::string::npos && static_cast<long long>(a.size()) != chunks)
      c.fail(Checker::at(kp, key), "expected " + num(chunks) +
                                       " entries (one per model chunk: pp * virtual_stages), got " +
                                       num(static_cast<long long>(a.size())));
}

// The per-call accounting's axis (docs/results.md, `calls`; driver/call_accounting.hpp).
void check_calls(const Checker& c, const json& calls, const std::string& path) {
  const std::string rp = Checker::at(path, "rows");
  const json& rows = calls.at("rows");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const json& axis = rows[i].at("axis");
    if (axis != "tp" && axis != "pp" && axis != "dp" && axis != "ep" && axis != "world")
      c.fail(Checker::at(Checker::at(rp, i), "axis"),
             "expected one of tp, pp, dp, ep, world, got " + shown(axis));
  }
}

// The per-rank, per-step series (docs/results.md, `rank_series`; driver/point_json.cpp): only the
// series paraxis writes, one array per rank of the grid, one value per step. The diagnosis and
// the report's "Noise" index them by rank and step, so their shape is checked.
void check_rank_series(const Checker& c, const json& rs, const std::string& path, long long world) {
  const json& steps = rs.at("steps");
  for (const auto& [name, per_rank] : rs.items()) {
    if (name == "steps") continue;
    const std::string np = Checker::at(path, name);
    const bool comm = name.rfind("comm.", 0) == 0;
    if (!comm && name != "step_s" && name != "compute_s" && name != "bubble_fraction")
      c.fail(np, "not a per-rank series paraxis writes");
    if (c.array(per_rank, np).size() != static_cast<std::size_t>(world))
      c.fail(np,
             num(static_cast<long long>(per_rank.size())) + " ranks, the grid has " + num(world));
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      const std::string rp = Checker::at(np, r);
      if (c.array(per_rank[r], rp).size() != steps.size())
        c.fail(rp, num(static_cast<long long>(per_rank[r].size())) + " values for " +
                       num(static_cast<long long>(steps.size())) + " steps");
    }
  }
}

// The rules between an ok point's fields (their types and ranges: check_declared): the config's
// own rules, the grid against the config, and the parts the report indexes with.
void check_ok_point(const Checker& c, const json& p, const std::string& path) {
  const Shape s = check_config(c, p.at("config"), Checker::at(path, "config"));
  const std::string gp = Checker::at(path, "grid");
  const json& g = p.at("grid");
  const long long world = g.at("world").get<long long>();
  const std::pair<const char*, long long> axes[] = {
      {"tp", s.tp}, {"pp", s.pp}, {"dp", s.dp}, {"ep", s.ep}};
  for (const auto& [axis, degree] : axes)
    if (g.at(axis).get<long long>() != degree)
      c.fail(Checker::at(gp, axis),
             "differs from config.parallel." + std::string(axis) + " = " + num(degree));
  if (world != s.tp * s.pp * s.dp)
    c.fail(Checker::at(gp, "world"),
           num(world) + " is not tp * pp * dp = " + num(s.tp * s.pp * s.dp));
  if (const json* cal = Checker::maybe(p, "calibration"))
    check_calibration(c, *cal, Checker::at(path, "calibration"), s);
  if (const json* calls = Checker::maybe(p, "calls"))
    check_calls(c, *calls, Checker::at(path, "calls"));
  if (const json* rs = Checker::maybe(p, "rank_series"))
    check_rank_series(c, *rs, Checker::at(path, "rank_series"), world);
  // fault.slow_axis's record (docs/results.md), which the sensitivity section reads.
  if (const json* sa = Checker::maybe(p, "slow_axis")) {
    const json& axis = sa->at("axis");
    if (axis != "none" && axis != "tp" && axis != "pp" && axis != "dp" && axis != "ep")
      c.fail(Checker::at(Checker::at(path, "slow_axis"), "axis"),
             "expected one of none, tp, pp, dp, ep, got " + shown(axis));
  }
}

// The schema string: this paraxis reads its own version only (docs/results.md, "Schema
// versions"); an older or newer summary is refused naming both versions.
void check_version(const Checker& c, const json& j) {
  const std::string schema = c.string(j, "", "schema");
  const std::string want = results_schema::kSummaryVersion;
  if (schema != want)
    c.fail("schema", "this summary is " + shown(json(schema)) + "; this paraxis reads \"" + want +
                         "\" only (docs/results.md, \"Schema versions\": run it again with this "
                         "paraxis, or report it with the paraxis that wrote it)");
}

// Every declared field's type and range, and the fields the report needs (results_schema.hpp,
// reader mode: of a point that is not ok only its index, status and settings).
void check_declared(const Checker& c, const json& j) {
  const auto v =
      results_schema::check(j, results_schema::File::summary, results_schema::Mode::reader, 1);
  if (!v.empty()) c.fail(v.front().path, v.front().what);
}

}  // namespace

pm::Collective collective_named(const std::string& op) {
  for (auto k : {pm::Collective::all_reduce, pm::Collective::reduce_scatter,
                 pm::Collective::all_gather, pm::Collective::all_to_all, pm::Collective::broadcast,
                 pm::Collective::reduce, pm::Collective::point_to_point})
    if (op == pm::to_string(k)) return k;
  throw std::invalid_argument("unknown collective '" + op + "'");
}

void validate_summary(const json& j, const std::string& name) {
  const Checker c(name);
  if (!j.is_object()) c.fail("", "expected a JSON object, got " + shown(j));
  check_version(c, j);
  check_declared(c, j);
  const json& points = j.at("points");
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string path = Checker::at("points", i);
    const std::string status = points[i].at("status").get<std::string>();
    const auto parsed = parse_point_status(status);
    if (!parsed)
      c.fail(Checker::at(path, "status"),
             shown(json(status)) +
                 ", expected \"ok\", \"diverged: ...\", \"failed: ...\" or "
                 "\"skipped: ...\"");
    if (parsed->is_ok()) check_ok_point(c, points[i], path);
  }
}

json read_summary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not valid JSON: " + e.what());
  }
  validate_summary(j, path);
  return j;
}

}  // namespace paraxis::driver
