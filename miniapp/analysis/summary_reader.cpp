// Validation of summary.json for the report (summary_reader.hpp). Each check names the JSON path
// of the field, so a user can find it in the file; values are shown as JSON, shortened.
#include "analysis/summary_reader.hpp"

#include <climits>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "analysis/point_status.hpp"
#include "config/config_rules.hpp"
#include "deck/run_config.hpp"
#include "schedule/pipeline_schedule.hpp"

namespace paraxis::driver {

using nlohmann::json;
namespace pm = paraxis::perfmodel;

namespace {

constexpr long long kMaxInt = INT_MAX;
constexpr double kInf = HUGE_VAL;

std::string shown(const json& v) {
  // error_handler replace: a string with invalid UTF-8 must not make the message itself throw.
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string num(long long v) {
  return std::to_string(v);
}

std::string range_text(const char* what, double lo, double hi, bool lo_open = false) {
  std::ostringstream os;
  os << what;
  if (hi >= static_cast<double>(kMaxInt))
    os << (lo_open ? " > " : " >= ") << lo;
  else
    os << " in " << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
  return os.str();
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
  void opt_integer(const json& obj, const std::string& path, const char* key, long long lo,
                   long long hi) const {
    if (maybe(obj, key)) integer(obj, path, key, lo, hi);
  }

  // A finite number in [lo, hi] ((lo, hi] with lo_open).
  double number(const json& v, const std::string& path, double lo, double hi = kInf,
                bool lo_open = false) const {
    const std::string want = range_text("a finite number", lo, hi, lo_open);
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
  void opt_number(const json& obj, const std::string& path, const char* key, double lo,
                  double hi = kInf) const {
    if (maybe(obj, key)) number(obj, path, key, lo, hi);
  }

  std::string string(const json& obj, const std::string& path, const char* key) const {
    const json& v = need(obj, path, key);
    if (!v.is_string()) fail(at(path, key), "expected a string, got " + shown(v));
    return v.get<std::string>();
  }
  void opt_string(const json& obj, const std::string& path, const char* key) const {
    if (maybe(obj, key)) string(obj, path, key);
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

  // An array of `n` finite numbers > 0 (n < 0: any length).
  // Entries > 0 (>= 0 when zero_allowed).
  void positive_array(const json& obj, const std::string& path, const char* key, long long n,
                      bool zero_allowed = false) const {
    const std::string p = at(path, key);
    const json& a = array(need(obj, path, key), p);
    if (n >= 0 && static_cast<long long>(a.size()) != n)
      fail(p, "expected " + num(n) + " entries (one per model chunk: pp * virtual_stages), got " +
                  num(static_cast<long long>(a.size())));
    for (std::size_t i = 0; i < a.size(); ++i) number(a[i], at(p, i), 0, kInf, !zero_allowed);
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

void check_calibration(const Checker& c, const json& cal, const std::string& path, const Shape& s) {
  c.object(cal, path);
  c.opt_number(cal, path, "seconds", 0);
  const std::string cp = Checker::at(path, "comm");
  const json& comm = c.child(cal, path, "comm");
  for (const auto& [axis, ops] : comm.items()) {
    const std::string ap = Checker::at(cp, axis);
    if (axis != "tp" && axis != "pp" && axis != "dp" && axis != "ep")
      c.fail(ap, "unknown axis (expected tp, pp, dp or ep)");
    c.object(ops, ap);
    for (const auto& [op, f] : ops.items()) {
      const std::string op_path = Checker::at(ap, op);
      try {
        collective_named(op);
      } catch (const std::exception& x) {
        c.fail(op_path, x.what());
      }
      c.object(f, op_path);
      c.integer(f, op_path, "ranks", 1, kMaxInt);
      c.number(f, op_path, "alpha_s", 0);
      c.number(f, op_path, "beta_s_per_byte", 0);
      for (const char* k : {"latency_s", "beta_eff_s_per_byte", "rms_residual_s"})
        c.opt_number(f, op_path, k, -kInf);
      c.opt_number(f, op_path, "async_progress", 0, 1);
      const std::string sp = Checker::at(op_path, "samples");
      const json& samples = c.array(c.need(f, op_path, "samples"), sp);
      for (std::size_t i = 0; i < samples.size(); ++i) {
        const std::string ip = Checker::at(sp, i);
        if (!samples[i].is_array() || samples[i].size() != 2)
          c.fail(ip, "expected [bytes, seconds], got " + shown(samples[i]));
        c.number(samples[i][0], Checker::at(ip, 0), 0);
        c.number(samples[i][1], Checker::at(ip, 1), 0);
      }
    }
  }
  const std::string kp = Checker::at(path, "compute");
  const json& k = c.child(cal, path, "compute");
  const long long chunks = s.pp * s.v;
  c.positive_array(k, kp, "forward_s_per_chunk", chunks);
  c.positive_array(k, kp, "backward_s_per_chunk", chunks);
  for (const char* opt : {"forward_mean_s_per_chunk", "backward_mean_s_per_chunk"})
    if (Checker::maybe(k, opt)) c.positive_array(k, kp, opt, chunks);
  // W of a split backward: 0 for schedules that run backwards whole.
  for (const char* opt : {"backward_weight_s_per_chunk", "backward_weight_mean_s_per_chunk"})
    if (Checker::maybe(k, opt)) c.positive_array(k, kp, opt, chunks, /*zero_allowed=*/true);
  c.number(k, kp, "optimizer_s", 0);
  c.number(k, kp, "flops_per_s", 0);
  c.opt_integer(k, kp, "peak_bytes", 0, LLONG_MAX);
}

// The checkpoint figures of a point (docs/results.md; analysis/report_checkpoint.cpp reads them):
// every save's per-rank spreads and totals, the restore, the automatic cadence.
void check_checkpoints(const Checker& c, const json& p, const std::string& path) {
  auto spread = [&](const json& obj, const std::string& op, const char* key, bool required) {
    const json* v = Checker::maybe(obj, key);
    if (!v && !required) return;
    const std::string sp = Checker::at(op, key);
    const json& o = c.object(v ? *v : c.need(obj, op, key), sp);
    for (const char* k : {"min", "mean", "max"}) c.number(c.need(o, sp, k), Checker::at(sp, k), 0);
  };
  if (const json* saves = Checker::maybe(p, "checkpoints")) {
    const std::string sp = Checker::at(path, "checkpoints");
    c.array(*saves, sp);
    for (std::size_t i = 0; i < saves->size(); ++i) {
      const std::string ep = Checker::at(sp, i);
      const json& e = c.object((*saves)[i], ep);
      c.integer(e, ep, "step", 0, kMaxInt);
      for (const char* k : {"bytes", "write_s"}) spread(e, ep, k, true);
      for (const char* k : {"exposed_s", "staged_bytes", "staging_s", "join_wait_s"})
        spread(e, ep, k, false);
      c.number(c.need(e, ep, "total_bytes"), Checker::at(ep, "total_bytes"), 0);
      c.number(c.need(e, ep, "total_s"), Checker::at(ep, "total_s"), 0);
      c.number(c.need(e, ep, "aggregate_bytes_per_s"), Checker::at(ep, "aggregate_bytes_per_s"), 0);
      if (const json* b = Checker::maybe(e, "baseline")) {
        const std::string bp = Checker::at(ep, "baseline");
        c.object(*b, bp);
        spread(*b, bp, "write_s", true);
      }
    }
  }
  if (const json* r = Checker::maybe(p, "resumed")) {
    const std::string rp = Checker::at(path, "resumed");
    c.object(*r, rp);
    c.integer(*r, rp, "step", 0, kMaxInt);
    for (const char* k : {"read_s", "bytes"}) spread(*r, rp, k, true);
    if (Checker::maybe(*r, "restart_to_first_step_s"))
      c.number(r->at("restart_to_first_step_s"), Checker::at(rp, "restart_to_first_step_s"), 0);
  }
  if (const json* a = Checker::maybe(p, "checkpoint_auto")) {
    const std::string ap = Checker::at(path, "checkpoint_auto");
    c.object(*a, ap);
    for (const char* k : {"checkpoint_s", "step_s", "system_mtbf_s", "daly_interval_s"})
      c.number(c.need(*a, ap, k), Checker::at(ap, k), 0);
    c.integer(*a, ap, "every", 1, kMaxInt);
  }
}

// The per-call accounting of a point (docs/results.md, `calls`; driver/call_accounting.hpp).
void check_calls(const Checker& c, const json& calls, const std::string& path) {
  c.object(calls, path);
  c.integer(calls, path, "rank", 0, kMaxInt);
  c.integer(calls, path, "steps", 0, kMaxInt);
  const std::string rp = Checker::at(path, "rows");
  const json& rows = c.array(c.need(calls, path, "rows"), rp);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string ip = Checker::at(rp, i);
    const json& r = c.object(rows[i], ip);
    for (const char* k : {"axis", "op"})
      if (!c.need(r, ip, k).is_string()) c.fail(Checker::at(ip, k), "expected a string");
    const json& axis = r.at("axis");
    if (axis != "tp" && axis != "pp" && axis != "dp" && axis != "ep" && axis != "world")
      c.fail(Checker::at(ip, "axis"), "expected one of tp, pp, dp, ep, world, got " + shown(axis));
    c.integer(r, ip, "bucket_bytes", 0, LLONG_MAX);
    c.integer(r, ip, "calls", 1, LLONG_MAX);
    for (const char* k : {"bytes", "measured_s", "measured_median_s", "wait_s"})
      c.number(r, ip, k, 0);
    const json& pred = c.need(r, ip, "predicted_s");
    if (!pred.is_null()) c.number(pred, Checker::at(ip, "predicted_s"), 0);
  }
}

// The per-rank, per-step series (docs/results.md, `rank_series`; driver/point_json.cpp): `steps`
// the step numbers, then per metric one array per rank of one finite value per step. The
// diagnosis and the report's "Noise" index them by rank and step, so their shape is checked.
void check_rank_series(const Checker& c, const json& rs, const std::string& path,
                       long long world) {
  c.object(rs, path);
  const std::string sp = Checker::at(path, "steps");
  const json& steps = c.array(c.need(rs, path, "steps"), sp);
  for (std::size_t k = 0; k < steps.size(); ++k) c.integer(steps[k], Checker::at(sp, k), 0, kMaxInt);
  for (const auto& [name, per_rank] : rs.items()) {
    if (name == "steps") continue;
    const bool comm = name.rfind("comm.", 0) == 0;
    if (!comm && name != "step_s" && name != "compute_s" && name != "bubble_fraction")
      c.fail(Checker::at(path, name), "not a per-rank series paraxis writes");
    const std::string np = Checker::at(path, name);
    if (c.array(per_rank, np).size() != static_cast<std::size_t>(world))
      c.fail(np, num(static_cast<long long>(per_rank.size())) + " ranks, the grid has " + num(world));
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      const std::string rp = Checker::at(np, r);
      if (c.array(per_rank[r], rp).size() != steps.size())
        c.fail(rp, num(static_cast<long long>(per_rank[r].size())) + " values for " +
                       num(static_cast<long long>(steps.size())) + " steps");
      for (std::size_t k = 0; k < steps.size(); ++k)
        c.number(per_rank[r][k], Checker::at(rp, k), name == "bubble_fraction" ? -kInf : 0);
    }
  }
}

void check_ok_point(const Checker& c, const json& p, const std::string& path) {
  const std::string cp = Checker::at(path, "config");
  const Shape s = check_config(c, c.child(p, path, "config"), cp);
  const std::string gp = Checker::at(path, "grid");
  const json& g = c.child(p, path, "grid");
  const long long world = c.integer(g, gp, "world", 1, kMaxInt);
  const std::pair<const char*, long long> axes[] = {
      {"tp", s.tp}, {"pp", s.pp}, {"dp", s.dp}, {"ep", s.ep}};
  for (const auto& [axis, degree] : axes)
    if (c.integer(g, gp, axis, 1, kMaxInt) != degree)
      c.fail(Checker::at(gp, axis),
             "differs from config.parallel." + std::string(axis) + " = " + num(degree));
  if (world != s.tp * s.pp * s.dp)
    c.fail(Checker::at(gp, "world"),
           num(world) + " is not tp * pp * dp = " + num(s.tp * s.pp * s.dp));

  const std::string tp_ = Checker::at(path, "time");
  const json& t = c.child(p, path, "time");
  c.number(t, tp_, "step_median_s", 0, kInf, true);
  for (const char* k : {"bubble_fraction", "bubble_fraction_model", "bubble_fraction_ideal"})
    c.opt_number(t, tp_, k, -kInf);
  if (const json* ranks = Checker::maybe(t, "ranks")) {
    const std::string rp = Checker::at(tp_, "ranks");
    c.object(*ranks, rp);
    for (const auto& [name, stat] : ranks->items()) {
      const std::string sp = Checker::at(rp, name);
      c.object(stat, sp);
      for (const char* k : {"mean", "min", "max"}) c.opt_number(stat, sp, k, -kInf);
    }
  }
  const std::string mp = Checker::at(tp_, "comm");
  const json& comm = c.child(t, tp_, "comm");
  for (const char* axis : {"tp", "pp", "dp", "ep"})
    c.opt_number(c.child(comm, mp, axis), Checker::at(mp, axis), "bytes", 0);

  const std::string memp = Checker::at(path, "memory");
  const json& mem = c.child(p, path, "memory");
  for (const char* k :
       {"params_bytes", "grads_bytes", "optimizer_bytes", "activations_peak_bytes", "peak_bytes"})
    c.opt_number(mem, memp, k, 0);
  // MFU and HFU (null without hardware.peak_flops; hfu absent before issue 18's results).
  if (const json* tput = Checker::maybe(p, "throughput")) {
    const std::string tpp = Checker::at(path, "throughput");
    c.object(*tput, tpp);
    for (const char* k : {"mfu", "hfu"})
      if (const json* v = Checker::maybe(*tput, k); v && !v->is_null())
        c.number(*v, Checker::at(tpp, k), 0);
  }
  if (const json* cal = Checker::maybe(p, "calibration"))
    check_calibration(c, *cal, Checker::at(path, "calibration"), s);
  if (const json* calls = Checker::maybe(p, "calls"))
    check_calls(c, *calls, Checker::at(path, "calls"));
  check_checkpoints(c, p, path);
  if (const json* rs = Checker::maybe(p, "rank_series"))
    check_rank_series(c, *rs, Checker::at(path, "rank_series"), world);
  // fault.slow_axis's record (docs/results.md), which the sensitivity section reads.
  if (const json* sa = Checker::maybe(p, "slow_axis")) {
    const std::string sp = Checker::at(path, "slow_axis");
    c.object(*sa, sp);
    const json& axis = c.need(*sa, sp, "axis");
    if (!axis.is_string() ||
        (axis != "none" && axis != "tp" && axis != "pp" && axis != "dp" && axis != "ep"))
      c.fail(Checker::at(sp, "axis"), "expected one of none, tp, pp, dp, ep, got " + shown(axis));
    c.number(c.need(*sa, sp, "factor"), Checker::at(sp, "factor"), 1, 1e6);
    const std::string lp = Checker::at(sp, "links");
    for (const auto& [name, l] : c.object(c.need(*sa, sp, "links"), lp).items()) {
      const std::string np = Checker::at(lp, name);
      c.object(l, np);
      for (const char* k : {"alpha_s", "bytes_per_s"})
        c.number(c.need(l, np, k), Checker::at(np, k), 0);
    }
  }
}

void check_provenance(const Checker& c, const json& prov) {
  const std::string path = "provenance";
  c.object(prov, path);
  if (const json* hosts = Checker::maybe(prov, "hosts")) {
    const std::string hp = Checker::at(path, "hosts");
    c.array(*hosts, hp);
    for (std::size_t i = 0; i < hosts->size(); ++i)
      if (!(*hosts)[i].is_string())
        c.fail(Checker::at(hp, i), "expected a string, got " + shown((*hosts)[i]));
  }
  for (const char* k : {"world", "max_ranks_per_host", "cores_per_host"})
    c.opt_integer(prov, path, k, 0, kMaxInt);
  for (const char* k : {"execution_space", "mpi_library", "git_hash", "date", "blas_library",
                        "blas_core", "cpu_model", "blas_threads_from"})
    c.opt_string(prov, path, k);
  c.opt_integer(prov, path, "blas_threads", -1, kMaxInt);  // -1: the BLAS cannot say
  // Read by the report's BLAS warning (blas_warning_of).
  if (const json* flags = Checker::maybe(prov, "cpu_vector_flags")) {
    const std::string fp = Checker::at(path, "cpu_vector_flags");
    c.array(*flags, fp);
    for (std::size_t i = 0; i < flags->size(); ++i)
      if (!(*flags)[i].is_string())
        c.fail(Checker::at(fp, i), "expected a string, got " + shown((*flags)[i]));
  }
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
  const std::string schema = c.string(j, "", "schema");
  if (schema != "paraxis.summary/1")
    c.fail("schema", shown(json(schema)) + ", expected \"paraxis.summary/1\"");
  if (const json* prov = Checker::maybe(j, "provenance")) check_provenance(c, *prov);
  const json& points = c.array(c.need(j, "", "points"), "points");
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string path = Checker::at("points", i);
    const json& p = c.object(points[i], path);
    c.integer(p, path, "index", 0, kMaxInt);
    const std::string status = c.string(p, path, "status");
    const auto parsed = parse_point_status(status);
    if (!parsed)
      c.fail(Checker::at(path, "status"),
             shown(json(status)) + ", expected \"ok\", \"diverged: ...\", \"failed: ...\" or "
             "\"skipped: ...\"");
    if (const json* settings = Checker::maybe(p, "settings"))
      c.object(*settings, Checker::at(path, "settings"));
    if (parsed->is_ok()) check_ok_point(c, p, path);
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
