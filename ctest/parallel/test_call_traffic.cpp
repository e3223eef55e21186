// The planner's traffic formulae (perfmodel/step_traffic.hpp) against the engine's own list of
// calls: for every rank, every call its step recorded (StepResult::comm_spans, what the CommLog
// saw), grouped by (axis, operation, bytes), equals the calls step_traffic counts for the
// rank's pipeline stage and data-parallel index, call for call and byte for byte. Counts and
// bytes are exact and do not depend on the machine's load.
//
// Covered: tp, tp + sp; pp under gpipe, 1f1b, interleaved and zb-h1; dp under ZeRO 0-3 (bf16
// too, several buckets, overlap); ep (with ZeRO 3); recomputation selective and full; and on 4
// ranks tp x pp (sp, zb-h1, interleaved with MoE) and tp x dp. Expert parallelism's row
// exchanges carry as many bytes as the routing sent, which the model gives as an expectation
// (uniform routing): their counts are compared exactly, their bytes only as a total with the
// routing the run measured; the expert counts exchange (E x 4 bytes) exactly.
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "perfmodel/call_prediction.hpp"
#include "perfmodel/parallel_config.hpp"
#include "perfmodel/step_time.hpp"
#include "perfmodel/step_traffic.hpp"
#include "training_run.hpp"

using namespace ptest;
namespace pm = paraxis::perfmodel;

namespace {

// (axis, operation, bytes per call): a receive is ("pp", "receive", 0): its bytes are the
// sender's.
using CallKey = std::tuple<std::string, std::string, long long>;
using CallCounts = std::map<CallKey, long>;

std::string key_op(const pm::LoggedOp& o) {
  return pm::call_name(o);
}

CallCounts engine_calls(const model::StepResult& s, std::vector<std::string>* unknown) {
  CallCounts n;
  for (const auto& c : s.comm_spans) {
    pm::LoggedOp o;
    if (!pm::logged_op(c.op, &o)) {
      unknown->push_back(std::string(c.axis) + ":" + c.op);
      continue;
    }
    const long long bytes = o.receive ? 0 : static_cast<long long>(c.bytes);
    ++n[{c.axis, key_op(o), bytes}];
  }
  return n;
}

CallCounts model_calls(const pm::StepTraffic& t) {
  CallCounts n;
  const std::pair<const char*, const pm::AxisTraffic*> axes[] = {
      {"tp", &t.tp}, {"pp", &t.pp}, {"dp", &t.dp}, {"ep", &t.ep}};
  for (const auto& [axis, tr] : axes) {
    for (const auto& o : tr->ops) n[{axis, pm::to_string(o.op), std::llround(o.bytes)}] += o.count;
    if (tr->receives > 0) n[{axis, "receive", 0}] += tr->receives;
  }
  return n;
}

std::string describe(const CallCounts& n) {
  std::ostringstream os;
  for (const auto& [k, count] : n)
    os << "  " << std::get<0>(k) << " " << std::get<1>(k) << " " << std::get<2>(k) << " B x "
       << count << "\n";
  return os.str();
}

// Expert parallelism's row exchanges: kept apart from the exact comparison (see above).
bool is_row_exchange(const CallKey& k, long long counts_bytes) {
  return std::get<0>(k) == "ep" && std::get<1>(k) == "all_to_all" && std::get<2>(k) != counts_bytes;
}

// inputs/tiny.yaml, 2 steps, 8 sequences in micro-batches of 2, with the case's settings.
driver::RunConfig deck(std::vector<std::string> set) {
  std::vector<std::string> o{"train.steps=2", "train.global_batch=8", "train.micro_batch=2"};
  o.insert(o.end(), set.begin(), set.end());
  return tiny(o);
}

// The model's calls for this rank in the configuration `set`.
pm::StepTraffic model_traffic(const driver::RunConfig& c) {
  const pm::Scenario sc = pm::scenario_of(c.parallel, c.comm, c.train);
  const auto coords = parallel::grid_coords_of(c.parallel, world_rank());
  return pm::step_traffic(c.model, sc, coords.pp, coords.dp);
}

// The step model's communication (perfmodel::traffic_time over step_traffic's calls) is the sum
// of the per-call predictions (perfmodel::call_time) of the calls the run recorded, each on its
// own communicator's size; receives are not in the step model's sums. Expert parallelism's
// bytes follow the routing, so its axis is left out.
void expect_step_model_sums_the_calls(const model::StepResult& step, const driver::RunConfig& c,
                                      const pm::StepTraffic& traffic, const std::string& what) {
  const pm::LinkCost link{3e-6, 2e-9, 0};
  std::map<std::string, double> recorded;
  for (const auto& s : step.comm_spans) {
    pm::LoggedOp o;
    if (!pm::logged_op(s.op, &o) || o.receive) continue;
    recorded[s.axis] += pm::call_time(o.op, s.ranks, static_cast<double>(s.bytes), link);
  }
  const auto& p = c.parallel;
  const std::tuple<const char*, const pm::AxisTraffic*, int> axes[] = {
      {"tp", &traffic.tp, p.tp}, {"pp", &traffic.pp, p.pp}, {"dp", &traffic.dp, p.dp}};
  for (const auto& [axis, tr, group] : axes) {
    const double model = pm::traffic_time(*tr, group, link);
    EXPECT_NEAR(recorded[axis], model, 1e-9 * model) << what << axis;
  }
}

// The calls of `axis` this rank's step recorded, in the order the log holds them.
pm::CallSequence recorded_calls(const model::StepResult& step, const char* axis) {
  pm::CallSequence out;
  for (const auto& s : step.comm_spans) {
    pm::LoggedOp o;
    if (std::string(s.axis) == axis && pm::logged_op(s.op, &o) && !o.receive)
      out.push_back({o.op, static_cast<double>(s.bytes), s.ranks, false, 0.0});
  }
  return out;
}

std::string describe(const pm::CallSequence& seq) {
  std::ostringstream os;
  for (const auto& q : seq) os << " " << pm::to_string(q.op) << ":" << q.bytes << "/" << q.group;
  return os.str();
}

// The sequence the calibration times (perfmodel::data_parallel_call_sequence, this rank's stage)
// against the calls the step made: the same calls in the same order, op, bytes and group. With
// comm.overlap the gradient reductions are logged when they complete, later than issued: the
// other calls keep their order, and every call takes a position of its own
// (perfmodel::sequence_call_times, which the per-call predictions use).
void expect_dp_calls_in_sequence_order(const model::StepResult& step, const driver::RunConfig& c,
                                       const std::string& what) {
  const pm::Scenario sc = pm::scenario_of(c.parallel, c.comm, c.train);
  const auto coords = parallel::grid_coords_of(c.parallel, world_rank());
  const pm::CallSequence want = pm::data_parallel_call_sequence(c.model, sc, coords.pp);
  const pm::CallSequence got = recorded_calls(step, "dp");
  const std::string both = what + "\nstep:    " + describe(got) + "\nsequence:" + describe(want);
  ASSERT_EQ(got.size(), want.size()) << both;
  auto blocking = [&](const pm::CallSequence& seq) {
    pm::CallSequence out;
    for (const auto& q : seq)
      if (!c.comm.overlap || q.op == pm::Collective::all_gather || q.bytes == 8) out.push_back(q);
    return out;
  };
  const auto a = blocking(got), b = blocking(want);
  ASSERT_EQ(a.size(), b.size()) << both;
  for (std::size_t k = 0; k < a.size(); ++k)
    EXPECT_TRUE(a[k].op == b[k].op && a[k].bytes == b[k].bytes && a[k].group == b[k].group)
        << "call " << k << " " << both;
  EXPECT_EQ(pm::sequence_call_times(want, got).size(), want.size()) << both;
}

// The tensor-parallel calls of stage 0 as the calibration times them and the step model and the
// per-call predictions place them (perfmodel::tensor_parallel_call_sequence, one micro-batch,
// expanded over the schedule by tensor_parallel_step_sequence) against the calls the step made:
// the same calls in the same order, op, bytes and group, position by position; and on every
// rank its own stage's sequence, mb times, with the once-per-step calls, is its step's traffic.
void expect_tp_calls_in_sequence_order(const model::StepResult& step, const driver::RunConfig& c,
                                       const std::string& what) {
  const pm::Scenario sc = pm::scenario_of(c.parallel, c.comm, c.train);
  const auto coords = parallel::grid_coords_of(c.parallel, world_rank());
  const pm::CallSequence timed = pm::tensor_parallel_call_sequence(c.model, sc, coords.pp);
  const pm::CallSequence got = recorded_calls(step, "tp");
  // One micro-batch of this rank's stage: an mb-th of its calls but the once-per-step ones.
  const auto extras = pm::tensor_parallel_step_extras(c.model, sc, coords.pp);
  pm::AxisTraffic per_step;
  per_step.add(pm::traffic_of(timed), sc.micro_batches());
  for (auto& o : per_step.ops) o.group = 0;
  per_step.add(extras);
  EXPECT_TRUE(pm::same_calls(per_step, pm::tensor_parallel_step_traffic(c.model, sc, coords.pp)))
      << what << "\nsequence:" << describe(timed);
  // Rank 0's calls are the ones predicted; the once-per-step LayerNorm sum's size depends on the
  // data-parallel index (the slice the rank owns).
  if (coords.pp != 0 || coords.dp != 0) return;
  const pm::CallSequence want = pm::tensor_parallel_step_sequence(c.model, sc, timed);
  const std::string both = what + "\nstep:    " + describe(got) + "\nsequence:" + describe(want);
  ASSERT_EQ(got.size(), want.size()) << both;
  for (std::size_t k = 0; k < got.size(); ++k)
    ASSERT_TRUE(got[k].op == want[k].op && got[k].bytes == want[k].bytes &&
                got[k].group == want[k].group)
        << "call " << k << " " << both;
  EXPECT_EQ(pm::sequence_call_times(want, got).size(), want.size()) << both;
}

// Runs the case and compares every step of this rank with the model.
void expect_calls_match_model(const std::vector<std::string>& set) {
  std::string what;
  for (const auto& s : set) what += s + " ";
  const driver::RunConfig c = deck(set);
  const pm::StepTraffic traffic = model_traffic(c);
  const CallCounts want = model_calls(traffic);
  const long long counts_bytes = 4LL * c.model.moe.experts;
  const TrainedRun r = run_parallel(c);
  ASSERT_EQ(r.steps.size(), 2u) << what;
  for (const auto& step : r.steps) {
    std::vector<std::string> unknown;
    const CallCounts got = engine_calls(step, &unknown);
    EXPECT_TRUE(unknown.empty()) << what << ": calls the model does not describe, e.g. "
                                 << unknown.front();
    CallCounts got_exact, want_exact;
    long got_rows = 0, want_rows = 0;
    for (const auto& [k, n] : got)
      is_row_exchange(k, counts_bytes) ? void(got_rows += n) : void(got_exact[k] = n);
    for (const auto& [k, n] : want)
      is_row_exchange(k, counts_bytes) ? void(want_rows += n) : void(want_exact[k] = n);
    EXPECT_EQ(got_exact, want_exact)
        << what << "rank " << world_rank() << " step " << step.step << "\nengine:\n"
        << describe(got) << "model:\n"
        << describe(want);
    EXPECT_EQ(got_rows, want_rows) << what << ": expert row exchanges";
    // Per axis the totals (comm.<axis>.calls / bytes) agree with the model as well; the row
    // exchanges' bytes follow the routing, so ep bytes are not compared.
    EXPECT_EQ(step.comm.at("tp").calls, traffic.tp.calls()) << what;
    EXPECT_EQ(step.comm.at("pp").calls, traffic.pp.calls()) << what;
    EXPECT_EQ(step.comm.at("dp").calls, traffic.dp.calls()) << what;
    EXPECT_EQ(step.comm.at("ep").calls, traffic.ep.calls()) << what;
    EXPECT_EQ(static_cast<double>(step.comm.at("dp").bytes), traffic.dp.bytes()) << what;
    EXPECT_EQ(static_cast<double>(step.comm.at("tp").bytes), traffic.tp.bytes()) << what;
    EXPECT_EQ(static_cast<double>(step.comm.at("pp").bytes), traffic.pp.bytes()) << what;
    expect_step_model_sums_the_calls(step, c, traffic, what);
    if (c.parallel.dp > 1) expect_dp_calls_in_sequence_order(step, c, what);
    if (c.parallel.tp > 1) expect_tp_calls_in_sequence_order(step, c, what);
  }
}

#define REQUIRE_RANKS(n) \
  if (world_size() != (n)) GTEST_SKIP() << "needs " << (n) << " ranks, have " << world_size()

}  // namespace

// ---- 2 ranks: each axis alone.
TEST(call_traffic, tp2_with_and_without_sp) {
  REQUIRE_RANKS(2);
  expect_calls_match_model({"parallel.tp=2"});
  expect_calls_match_model({"parallel.tp=2", "parallel.sequence_parallel=true"});
  expect_calls_match_model({"parallel.tp=2", "train.precision=bf16"});
}

TEST(call_traffic, tp2_recompute_selective_and_full) {
  REQUIRE_RANKS(2);
  for (const char* sp : {"false", "true"})
    for (const char* r : {"selective", "full"})
      expect_calls_match_model({"parallel.tp=2", std::string("parallel.sequence_parallel=") + sp,
                                std::string("train.recompute=") + r});
}

TEST(call_traffic, pp2_every_schedule) {
  REQUIRE_RANKS(2);
  for (const char* s : {"gpipe", "1f1b", "zb-h1"})
    expect_calls_match_model({"parallel.pp=2", std::string("parallel.schedule=") + s});
  expect_calls_match_model({"parallel.pp=2", "parallel.schedule=interleaved",
                            "parallel.virtual_stages=2", "model.layers=4"});
  expect_calls_match_model({"parallel.pp=2", "parallel.schedule=1f1b", "train.recompute=full"});
  expect_calls_match_model(
      {"parallel.pp=2", "parallel.schedule=zb-h1", "train.recompute=selective"});
}

TEST(call_traffic, dp2_every_zero_stage) {
  REQUIRE_RANKS(2);
  for (int z = 0; z <= 3; ++z) {
    const std::string zero = "parallel.zero=" + std::to_string(z);
    expect_calls_match_model({"parallel.dp=2", zero});
    expect_calls_match_model({"parallel.dp=2", zero, "train.precision=bf16", "comm.overlap=true",
                              "comm.bucket_mb=0.01"});
  }
  expect_calls_match_model({"parallel.dp=2", "parallel.zero=3", "train.recompute=full"});
}

TEST(call_traffic, ep2_with_zero_and_recompute) {
  REQUIRE_RANKS(2);
  for (int z : {0, 3})
    expect_calls_match_model(
        {"parallel.dp=2", "parallel.ep=2", "parallel.zero=" + std::to_string(z)});
  expect_calls_match_model({"parallel.dp=2", "parallel.ep=2", "train.recompute=full"});
  expect_calls_match_model({"parallel.dp=2", "parallel.ep=2", "model.moe.capacity_factor=1.0"});
}

// ---- 4 ranks: axes stacked.
TEST(call_traffic, tp2_pp2_sp_every_schedule) {
  REQUIRE_RANKS(4);
  for (const char* s : {"1f1b", "zb-h1"})
    expect_calls_match_model({"parallel.tp=2", "parallel.pp=2", "parallel.sequence_parallel=true",
                              std::string("parallel.schedule=") + s});
  expect_calls_match_model({"parallel.tp=2", "parallel.pp=2", "parallel.schedule=interleaved",
                            "parallel.virtual_stages=2", "model.layers=4"});
}

TEST(call_traffic, tp2_dp2_zero1_and_3_sp) {
  REQUIRE_RANKS(4);
  for (const char* z : {"1", "3"})
    expect_calls_match_model({"parallel.tp=2", "parallel.dp=2", "parallel.sequence_parallel=true",
                              std::string("parallel.zero=") + z});
}

TEST(call_traffic, pp2_dp2_ep2_zero2_zb_h1) {
  REQUIRE_RANKS(4);
  expect_calls_match_model({"parallel.pp=2", "parallel.dp=2", "parallel.ep=2", "parallel.zero=2",
                            "parallel.schedule=zb-h1"});
}

// ZeRO-3 under zb-h1 gathers a unit before B only, the embedding's not at all there.
TEST(call_traffic, pp2_dp2_zero3_zb_h1_and_gpipe) {
  REQUIRE_RANKS(4);
  for (const char* s : {"zb-h1", "gpipe"})
    expect_calls_match_model({"parallel.pp=2", "parallel.dp=2", "parallel.zero=3",
                              std::string("parallel.schedule=") + s});
}

// Expert units reduced over dp / ep = 2 ranks (the edp group) beside the dense units over 4.
TEST(call_traffic, dp4_ep2_expert_units_over_their_own_group) {
  REQUIRE_RANKS(4);
  for (const char* z : {"0", "1", "3"})
    expect_calls_match_model({"parallel.dp=4", "parallel.ep=2", std::string("parallel.zero=") + z,
                              "comm.overlap=true", "comm.bucket_mb=0.01"});
}

// The comparison can fail: ZeRO-2's calls are not ZeRO-1's (it reduce-scatters after every
// micro-batch), nor are sequence parallelism's those of plain tensor parallelism.
TEST(call_traffic, a_different_configuration_is_told_apart) {
  REQUIRE_RANKS(2);
  const TrainedRun z2 = run_parallel(deck({"parallel.dp=2", "parallel.zero=2"}));
  std::vector<std::string> unknown;
  EXPECT_NE(engine_calls(z2.steps.at(1), &unknown),
            model_calls(model_traffic(deck({"parallel.dp=2", "parallel.zero=1"}))));
  EXPECT_EQ(engine_calls(z2.steps.at(1), &unknown),
            model_calls(model_traffic(deck({"parallel.dp=2", "parallel.zero=2"}))));
  const TrainedRun sp = run_parallel(deck({"parallel.tp=2", "parallel.sequence_parallel=true"}));
  EXPECT_NE(engine_calls(sp.steps.at(1), &unknown),
            model_calls(model_traffic(deck({"parallel.tp=2"}))));
  EXPECT_TRUE(unknown.empty());
}
