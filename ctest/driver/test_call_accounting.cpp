// Per-call accounting (driver/call_accounting.hpp; docs/report.md, "Calls"): calls grouped per
// (axis, op, power-of-two size bucket) over the measured steps only, each predicted with the
// calibrated fit of its own operation and communicator size (perfmodel::call_time), totals and
// medians as stated, no prediction without a calibration; and the calibration's fits mapped onto
// the models' links as the report's step model takes them.
#include <gtest/gtest.h>

#include <cmath>

#include "../perfmodel/perfmodel_test_util.hpp"
#include "driver/calibration_detail.hpp"
#include "driver/call_accounting.hpp"
#include "perfmodel/collectives.hpp"
#include "perfmodel/step_traffic.hpp"

namespace pd = paraxis::driver;
namespace pm = paraxis::perfmodel;
using paraxis::model::StepResult;

namespace {

StepResult step(int n, std::vector<StepResult::CommSpan> spans) {
  StepResult s;
  s.step = n;
  s.comm_spans = std::move(spans);
  return s;
}

// A call of `seconds` on `ranks` ranks.
StepResult::CommSpan call(const char* axis, const char* op, std::size_t bytes, double seconds,
                          int ranks, double wait = 0) {
  return {axis, op, 10.0, 10.0 + seconds, seconds, bytes, wait, ranks};
}

pd::CommCalibration fit(const char* axis, const char* op, double alpha, double beta) {
  pd::CommCalibration f;
  f.axis = axis;
  f.op = op;
  f.ranks = 2;
  f.alpha = alpha;
  f.beta = beta;
  return f;
}

const pd::CallRow* find(const std::vector<pd::CallRow>& rows, const std::string& axis,
                        const std::string& op, std::uint64_t bucket) {
  for (const auto& r : rows)
    if (r.axis == axis && r.op == op && r.bucket_bytes == bucket) return &r;
  return nullptr;
}

}  // namespace

TEST(call_accounting, rows_per_axis_op_and_power_of_two_bucket_over_measured_steps) {
  const std::vector<StepResult> steps = {
      // Warm-up (step 0 < warmup 1): left out.
      step(0, {call("tp", "all_reduce", 1000, 9.0, 2)}),
      step(1, {call("tp", "all_reduce", 1000, 1e-3, 2, 1e-4),
               call("tp", "all_reduce", 1023, 3e-3, 2), call("tp", "all_reduce", 1024, 5e-3, 2),
               call("pp", "isend", 4096, 1e-4, 2), call("pp", "irecv", 4096, 2e-4, 2)}),
      step(2, {call("tp", "all_reduce", 600, 2e-3, 2, 2e-4), call("dp", "barrier", 0, 1e-3, 2)}),
  };
  const auto rows = pd::call_rows(steps, 1, nullptr);
  ASSERT_EQ(rows.size(), 5u);
  // 600, 1000 and 1023 bytes share the bucket 512; 1024 opens the next.
  const pd::CallRow* r = find(rows, "tp", "all_reduce", 512);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->calls, 3);
  EXPECT_DOUBLE_EQ(r->bytes, 2623.0);
  EXPECT_NEAR(r->measured_s, 6e-3, 1e-15);
  EXPECT_NEAR(r->measured_median_s, 2e-3, 1e-15);
  EXPECT_NEAR(r->wait_s, 3e-4, 1e-15);
  EXPECT_FALSE(r->predicted_s);  // no calibration
  ASSERT_NE(find(rows, "tp", "all_reduce", 1024), nullptr);
  EXPECT_EQ(find(rows, "tp", "all_reduce", 1024)->calls, 1);
  // Sends are point-to-point calls, receives their own row; barrier stays as logged.
  EXPECT_NE(find(rows, "pp", "point_to_point", 4096), nullptr);
  EXPECT_NE(find(rows, "pp", "receive", 4096), nullptr);
  EXPECT_NE(find(rows, "dp", "barrier", 0), nullptr);
}

TEST(call_accounting, each_call_predicted_with_its_operation_and_group) {
  // tp all-reduce fitted alone; reduce-scatter takes the axis's link (the first fit).
  const pd::CommCosts costs = pd::comm_costs_of(
      {fit("tp", "all_reduce", 2e-6, 1e-9), fit("dp", "reduce_scatter", 5e-6, 4e-9)});
  const std::vector<StepResult> steps = {
      step(0, {call("tp", "all_reduce", 4096, 1e-3, 2), call("tp", "all_reduce", 4096, 1e-3, 4),
               call("tp", "reduce_scatter", 2048, 1e-3, 2),
               call("dp", "reduce_scatter", 2048, 1e-3, 2), call("dp", "barrier", 0, 1e-3, 2)})};
  const auto rows = pd::call_rows(steps, 0, &costs);
  const pm::LinkCost tp{2e-6, 1e-9, 0}, dp{5e-6, 4e-9, 0};
  // Ring all-reduce on 2 and on 4 ranks (a call's own group size).
  const double ar = pm::ring_all_reduce_time(2, 4096, tp) + pm::ring_all_reduce_time(4, 4096, tp);
  EXPECT_DOUBLE_EQ(find(rows, "tp", "all_reduce", 4096)->predicted_s.value(), ar);
  EXPECT_DOUBLE_EQ(find(rows, "tp", "reduce_scatter", 2048)->predicted_s.value(),
                   pm::ring_reduce_scatter_time(2, 2048, tp));
  EXPECT_DOUBLE_EQ(find(rows, "dp", "reduce_scatter", 2048)->predicted_s.value(),
                   pm::ring_reduce_scatter_time(2, 2048, dp));
  // What the model does not describe has no prediction.
  EXPECT_FALSE(find(rows, "dp", "barrier", 0)->predicted_s);
  EXPECT_FALSE(pd::predicted_call_s(costs, "world", "all_reduce", 2, 8));
}

TEST(call_accounting, costs_as_the_step_model_takes_them) {
  pd::CommCalibration ar = fit("dp", "all_reduce", 3e-6, 2e-9);
  ar.async_progress = 0.25;
  const pd::CommCosts c = pd::comm_costs_of({ar, fit("dp", "all_gather", 7e-6, 5e-9)});
  EXPECT_EQ(c.links.dp.alpha, 3e-6);  // the axis's link: its first fit
  EXPECT_EQ(c.op_links.dp.at(pm::Collective::all_gather).beta, 5e-9);
  EXPECT_EQ(c.dp_overlap(pm::Collective::all_reduce), 0.25);
  // Without the reduce-scatter's own (a calibration before it was measured): the all-reduce's.
  EXPECT_EQ(c.dp_overlap(pm::Collective::reduce_scatter), 0.25);
  pd::CommCalibration rs = fit("dp", "reduce_scatter", 4e-6, 2e-9);
  rs.async_progress = 0.0;
  const pd::CommCosts both = pd::comm_costs_of({ar, rs});
  EXPECT_EQ(both.dp_overlap(pm::Collective::reduce_scatter), 0.0);  // each reduction its own
  EXPECT_EQ(both.dp_overlap(pm::Collective::all_reduce), 0.25);
  EXPECT_EQ(c.links.tp.alpha, 0.0);
  EXPECT_EQ(pd::comm_costs_of({}).dp_overlap(pm::Collective::all_reduce), 1.0);
}

TEST(call_accounting, summary_json_counts_measured_steps) {
  const std::vector<StepResult> steps = {step(0, {call("tp", "all_gather", 64, 1e-5, 2)}),
                                         step(1, {call("tp", "all_gather", 64, 2e-5, 2)})};
  const auto j = pd::calls_json(steps, 1, nullptr);
  EXPECT_EQ(j["rank"], 0);
  EXPECT_EQ(j["steps"], 1);
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_EQ(j["rows"][0]["bucket_bytes"], 64);
  EXPECT_TRUE(j["rows"][0]["predicted_s"].is_null());
}

// The step's data-parallel calls in issue order take their positions' times in the calibrated
// sequence (CommCosts::dp_sequence) when they are its calls in its order: the first bucket its
// first position's (after the backward), a later bucket of the same size its own position's;
// a step whose calls are others takes each call's curve.
TEST(call_accounting, the_nth_dp_call_takes_the_nth_position_of_the_sequence) {
  pd::CommCosts costs = pd::comm_costs_of({fit("dp", "all_reduce", 1e-5, 1e-9)});
  using C = pm::Collective;
  costs.dp_sequence = {{C::all_reduce, 1000, 2, true, 7e-3},
                       {C::all_reduce, 4000, 2, false, 1e-3},
                       {C::all_reduce, 1000, 2, false, 2e-3}};
  const auto as_issued =
      step(1, {call("dp", "all_reduce", 1000, 1e-3, 2), call("tp", "all_reduce", 1000, 1e-3, 2),
               call("dp", "all_reduce", 4000, 1e-3, 2), call("dp", "all_reduce", 1000, 1e-3, 2)});
  const auto p = pd::step_call_predictions(as_issued, costs);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].value(), 7e-3);
  EXPECT_EQ(p[1], pd::predicted_call_s(costs, "tp", "all_reduce", 2, 1000));  // not dp
  EXPECT_EQ(p[2].value(), 1e-3);
  EXPECT_EQ(p[3].value(), 2e-3);
  const auto rows = pd::call_rows({as_issued}, 0, &costs);
  EXPECT_DOUBLE_EQ(find(rows, "dp", "all_reduce", 512)->predicted_s.value(), 9e-3);
  // Logged in another order (overlapped requests completing out of order): each call its own
  // size's first free position.
  const auto swapped =
      step(1, {call("dp", "all_reduce", 4000, 1e-3, 2), call("dp", "all_reduce", 1000, 1e-3, 2),
               call("dp", "all_reduce", 1000, 1e-3, 2)});
  const auto q = pd::step_call_predictions(swapped, costs);
  EXPECT_EQ(q[0].value(), 1e-3);
  EXPECT_EQ(q[1].value(), 7e-3);
  EXPECT_EQ(q[2].value(), 2e-3);
  // Other calls (a size the sequence does not hold): each call's curve.
  const auto other =
      step(1, {call("dp", "all_reduce", 1000, 1e-3, 2), call("dp", "all_reduce", 4000, 1e-3, 2),
               call("dp", "all_reduce", 2000, 1e-3, 2)});
  const auto o = pd::step_call_predictions(other, costs);
  const double curve = pd::predicted_call_s(costs, "dp", "all_reduce", 2, 1000).value();
  EXPECT_EQ(o[0].value(), curve);
  EXPECT_NE(curve, 7e-3);
}

// ZeRO 2: the sequence holds every micro-batch's reduce-scatters (the same sizes again); a step
// that logs its calls in issue order gives its n-th data-parallel call position n's time.
TEST(call_accounting, zero2_dp_calls_take_their_positions_in_issue_order) {
  pm::Scenario sc;
  sc.dp = 2;
  sc.zero = 2;
  sc.global_batch = 4;  // two micro-batches of 1 per replica
  pm::ParamUnit a, b;
  a.padded = 256;
  b.padded = 512;
  a.group = b.group = 2;
  pd::CommCosts costs = pd::comm_costs_of({fit("dp", "all_reduce", 1e-5, 1e-9)});
  costs.dp_sequence = pm::data_parallel_call_sequence(sc, {a, b});
  ASSERT_EQ(costs.dp_sequence.size(), 7u);  // 2 x (b, a) reduce-scatters, norm, a, b gathers
  std::vector<StepResult::CommSpan> spans;
  for (std::size_t k = 0; k < costs.dp_sequence.size(); ++k) {
    auto& q = costs.dp_sequence[k];
    q.seconds = 1e-3 * double(k + 1);
    spans.push_back(call("dp", pm::to_string(q.op), static_cast<std::size_t>(q.bytes), 1e-3, 2));
  }
  EXPECT_EQ(costs.dp_sequence[0].bytes, 2048.0);  // b's gradients first: its backward ends first
  EXPECT_EQ(costs.dp_sequence[2].bytes, 2048.0);
  const auto p = pd::step_call_predictions(step(1, spans), costs);
  ASSERT_EQ(p.size(), 7u);
  for (std::size_t k = 0; k < p.size(); ++k) EXPECT_EQ(p[k].value(), 1e-3 * double(k + 1)) << k;
}

// The sequence travels with the calibration's JSON form into the costs the models take.
TEST(call_accounting, the_sequence_round_trips_through_the_calibration_json) {
  pd::Calibration cal;
  cal.comm = {fit("dp", "all_reduce", 1e-5, 1e-9)};
  cal.dp_sequence = {{{pm::Collective::reduce_scatter, 2048, 2, true, 3e-5},
                      {pm::Collective::all_gather, 2048, 2, true, 4e-5, 0.25}},
                     6u << 20,
                     1e-3,
                     2e-4};
  const pd::Calibration back = pd::calibration_from_json(pd::calibration_to_json(cal));
  EXPECT_EQ(back.dp_sequence.sweep_bytes, 6u << 20);
  EXPECT_EQ(back.dp_sequence.later_sweep_s, 2e-4);
  const auto costs = pd::comm_costs_of_calibration(back);
  ASSERT_EQ(costs.dp_sequence.size(), 2u);
  EXPECT_EQ(costs.dp_sequence[1].op, pm::Collective::all_gather);
  EXPECT_TRUE(costs.dp_sequence[1].after_compute);
  EXPECT_EQ(costs.dp_sequence[1].seconds, 4e-5);
  EXPECT_EQ(costs.dp_sequence[1].compute_share, 0.25);  // ZeRO 3's share of one micro-batch
  EXPECT_EQ(costs.dp_sequence[0].compute_share, 0.0);
  // Without one (dp = 1, ZeRO 2-3, older summaries): no sequence.
  EXPECT_FALSE(pd::calibration_to_json(pd::Calibration{}).contains("dp_sequence"));
}

// The tensor-parallel sequence (one micro-batch of stage 0, timed) travels with the
// calibration's JSON form; comm_costs_of_point expands it over the step (tp_step: every
// micro-batch's calls at their positions' times, the once-per-step norm untimed), and a step
// whose tp calls are those calls takes each its position's time, the norm its curve's.
TEST(call_accounting, tp_calls_take_their_positions_in_the_timed_micro_batch) {
  const paraxis::model::ModelConfig m = perfmodel_test::tiny_model();
  pm::Scenario sc;
  sc.tp = 2;
  sc.global_batch = 4;
  sc.micro_batch = 2;  // two micro-batches
  pd::Calibration cal;
  cal.comm = {fit("tp", "all_reduce", 1e-5, 1e-9)};
  cal.tp_sequence.calls = pm::tensor_parallel_call_sequence(m, sc, 0);
  auto& timed = cal.tp_sequence.calls;
  ASSERT_EQ(timed.size(), 20u);  // embedding, 4 x 2 blocks, 2 loss; head, 4 x 2 blocks
  for (std::size_t k = 0; k < timed.size(); ++k) timed[k].seconds = 1e-3 * double(k + 1);
  EXPECT_TRUE(timed[0].after_compute);  // the first: after the previous backward
  EXPECT_EQ(timed[0].compute_share, 0.0);
  EXPECT_GT(timed[2].compute_share, 0.0);  // a block's attention reduction: after its GEMMs
  EXPECT_FALSE(timed[10].after_compute);   // the loss's second, right after its first
  const pd::Calibration back = pd::calibration_from_json(pd::calibration_to_json(cal));
  ASSERT_EQ(back.tp_sequence.calls.size(), timed.size());
  EXPECT_EQ(back.tp_sequence.calls[2].compute_share, timed[2].compute_share);
  const pd::CommCosts costs = pd::comm_costs_of_point(back, m, sc);
  ASSERT_EQ(costs.tp_step.size(), 41u);  // 2 micro-batches of 20, the norm
  std::vector<StepResult::CommSpan> spans;
  for (const auto& q : costs.tp_step)
    spans.push_back(call("tp", pm::to_string(q.op), static_cast<std::size_t>(q.bytes), 1e-3, 2));
  const auto p = pd::step_call_predictions(step(1, spans), costs);
  ASSERT_EQ(p.size(), 41u);
  for (std::size_t k = 0; k < 40; ++k) EXPECT_EQ(p[k].value(), 1e-3 * double(k % 20 + 1)) << k;
  EXPECT_EQ(p[40], pd::predicted_call_s(costs, "tp", "all_reduce", 2, 8));
  // Another model's calls (another size): each call its curve's.
  spans[3].bytes = 4;
  const auto o = pd::step_call_predictions(step(1, spans), costs);
  EXPECT_EQ(o[0], pd::predicted_call_s(costs, "tp", "all_reduce", 2, spans[0].bytes));
  EXPECT_FALSE(pd::calibration_to_json(pd::Calibration{}).contains("tp_sequence"));
}

// A pipelined point's action samples and engine time per action travel with the calibration's
// JSON form; without them (pp = 1, an older summary) they are empty, and not written.
TEST(call_accounting, the_pipeline_samples_round_trip_through_the_calibration_json) {
  pd::Calibration cal;
  cal.compute.forward_s = cal.compute.backward_s = {2e-4, 3e-4};
  cal.compute.forward_samples_s = {{2e-4, 2.5e-4}, {3e-4, 3.5e-4}};
  cal.compute.backward_samples_s = {{4e-4, 4.5e-4}, {6e-4, 6.5e-4}};
  cal.compute.action_overhead_s = {1.5e-6, 2.5e-6};
  const pd::Calibration back = pd::calibration_from_json(pd::calibration_to_json(cal));
  EXPECT_EQ(back.compute.forward_samples_s, cal.compute.forward_samples_s);
  EXPECT_EQ(back.compute.backward_samples_s, cal.compute.backward_samples_s);
  EXPECT_TRUE(back.compute.backward_weight_samples_s.empty());
  EXPECT_EQ(back.compute.action_overhead_s, cal.compute.action_overhead_s);
  const auto none = pd::calibration_to_json(pd::Calibration{});
  EXPECT_FALSE(none.at("compute").contains("forward_samples_s_per_chunk"));
  EXPECT_FALSE(none.at("compute").contains("action_overhead_s_per_chunk"));
  EXPECT_TRUE(pd::calibration_from_json(none).compute.action_overhead_s.empty());
}

// A calibration of another bucket sequence misses the cache: the sequence is part of the key.
TEST(call_accounting, another_bucket_sequence_is_another_calibration) {
  using C = pm::Collective;
  pd::SequenceCalibration a{
      {{C::all_reduce, 33792, 2, true, 0}, {C::all_reduce, 265216, 2, false, 0}},
      1 << 20,
      1e-3,
      2e-4};
  pd::SequenceCalibration b = a;
  b.calls[1].bytes = 132608;
  pd::SequenceCalibration longer = a;
  longer.sweep_s = 2e-3;
  namespace cd = paraxis::driver::calibration_detail;
  EXPECT_EQ(cd::sequence_key("dp 2", a), cd::sequence_key("dp 2", a));
  EXPECT_NE(cd::sequence_key("dp 2", a), cd::sequence_key("dp 2", b));
  EXPECT_NE(cd::sequence_key("dp 2", a), cd::sequence_key("dp 2", longer));
  pd::SequenceCalibration shared = a;
  shared.calls[0].compute_share = 0.125;  // ZeRO 3: the compute before it, another stand-in
  EXPECT_NE(cd::sequence_key("dp 2", a), cd::sequence_key("dp 2", shared));
  EXPECT_NE(cd::sequence_key("dp 2", a), cd::sequence_key("dp 3", a));
}

// The calibrated spread between the ranks that hold a chunk (calibration_detail::median_spread),
// as the report reads a point's: two holders over five timed steps. One rank slowed in one step
// (a lost time slice: 10 ms more) leaves no spread, where the slowest holder's mean over the
// steps would put 1 ms on it; a rank 1 ms slower in every step (persistently uneven) gives 0.5 ms
// a step over the mean, per action over 4 micro-batches; a chunk with one holder has none.
TEST(calibration_spread, a_rank_slowed_in_one_step_is_not_an_uneven_rank) {
  namespace cd = paraxis::driver::calibration_detail;
  const std::vector<double> a = {20, 20, 20, 20, 20}, slowed_once = {20, 20, 20, 20, 30},
                            uneven = {21, 21, 21, 21, 21};
  const auto spread = [&](const std::vector<double>& x, const std::vector<double>& y) {
    std::vector<double> slowest, sum;
    for (std::size_t j = 0; j < x.size(); ++j) {
      slowest.push_back(std::max(x[j], y[j]));
      sum.push_back(x[j] + y[j]);
    }
    slowest.insert(slowest.end(), x.begin(), x.end());  // a second chunk, one holder
    sum.insert(sum.end(), x.begin(), x.end());
    return cd::median_spread(slowest, sum, {2, 1}, x.size(), 4);
  };
  EXPECT_EQ(spread(a, slowed_once), (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(spread(a, uneven), (std::vector<double>{0.5 / 4, 0.0}));
}
