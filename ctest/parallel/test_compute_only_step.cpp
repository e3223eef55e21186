// One engine for training and calibration (issue 30, "One engine"): the compute calibration
// times parallel::make_compute_only_trainer, the training step's own engine with every
// collective a local copy. These tests fail when the two stop being the same step:
//   - on a grid of one rank (local copies and MPI then move the same bytes) both trainers give
//     bitwise the same losses, gradient norms and parameters, for each schedule, recomputation
//     and ZeRO path a grid of one runs;
//   - on 2 ranks (pp, dp with ZeRO 1-3 and overlap, tp with sequence parallelism, ep) both
//     run the same compute actions (kind, micro-batch, chunk, in order) and issue the same
//     communication calls (axis, operation and bytes; the all-to-all's bytes follow the
//     routing, which the copies change, so its calls are counted only);
//   - the compute calibration (driver calibrate_compute) holds the memory the step it times
//     holds (the engine's on a grid, the single-rank trainer's without): bitwise the same
//     peak, so a calibration that built its own step would differ;
//   - on 2 ranks with pp = 2 it keeps every timed action of each chunk (five steps' micro-batches,
//     the holder's, whose mean over the samples kept is the chunk's time) and a positive engine
//     time per action for the bubble's replay; without a pipeline neither.
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/statistics.hpp"
#include "config/parallel_config.hpp"
#include "driver/calibration_detail.hpp"
#include "training_run.hpp"

using namespace ptest;

namespace {

driver::RunConfig deck(const std::vector<std::string>& more) {
  std::vector<std::string> o{"train.steps=2", "train.precision=fp64"};
  o.insert(o.end(), more.begin(), more.end());
  return tiny(o);
}

std::vector<model::StepResult> steps(model::Trainer& t, int n) {
  std::vector<model::StepResult> out;
  for (int s = 0; s < n; ++s) out.push_back(t.step());
  return out;
}

using Action = std::tuple<std::string, int, int>;  // span name, micro-batch, chunk
std::vector<Action> actions(const model::StepResult& r) {
  std::vector<Action> out;
  for (const auto& sp : r.spans) out.emplace_back(sp.name, sp.micro_batch, sp.chunk);
  return out;
}

using Call = std::tuple<std::string, std::string, std::size_t>;  // axis, op, bytes
// Sorted: non-blocking calls are recorded when they complete, which the timing decides.
std::vector<Call> calls(const model::StepResult& r) {
  std::vector<Call> out;
  for (const auto& c : r.comm_spans) {
    const bool routed = std::string(c.op) == "all_to_all_v";
    out.emplace_back(c.axis, c.op, routed ? 0 : c.bytes);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

namespace {

std::string label(const std::vector<std::string>& settings) {
  std::string out;
  for (const auto& s : settings) out += s + " ";
  return out;
}

// Two steps of the training step (make_parallel_trainer) and of the calibration's
// (make_compute_only_trainer) on a grid over `world`, and what each holds afterwards.
struct BothSteps {
  std::vector<model::StepResult> real, local;
  std::vector<double> real_params, local_params;
  std::size_t real_peak = 0, local_peak = 0;
};

BothSteps run_both(const driver::RunConfig& c, MPI_Comm world) {
  parallel::ProcessGrid grid(world, c.parallel);
  auto real = parallel::make_parallel_trainer(c.model, c.train, c.parallel, c.comm, grid);
  auto local = parallel::make_compute_only_trainer(c.model, c.train, c.parallel, c.comm, grid);
  BothSteps out;
  out.real = steps(*real, 2);
  out.local = steps(*local, 2);
  out.real_params = real->parameters();
  out.local_params = local->parameters();
  out.real_peak = real->memory().peak_bytes;
  out.local_peak = local->memory().peak_bytes;
  return out;
}

}  // namespace

TEST(compute_only_step, on_a_grid_of_one_it_is_the_training_step_bitwise) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"model.moe.experts=0", "parallel.schedule=gpipe"},
      {"parallel.schedule=zb-h1"},
      {"train.recompute=selective"},
      {"train.recompute=full", "comm.overlap=true"},
  };
  for (const auto& more : cases) {
    const std::string what = label(more);
    const BothSteps r = run_both(deck(more), MPI_COMM_SELF);
    for (std::size_t s = 0; s < r.real.size(); ++s) {
      EXPECT_EQ(r.real[s].loss, r.local[s].loss) << what << "step " << s;
      EXPECT_EQ(r.real[s].grad_norm, r.local[s].grad_norm) << what << "step " << s;
      EXPECT_EQ(actions(r.real[s]), actions(r.local[s])) << what << "step " << s;
    }
    EXPECT_EQ(r.real_params, r.local_params) << what;
    EXPECT_EQ(r.real_peak, r.local_peak) << what;
  }
}

TEST(compute_only_step, on_two_ranks_it_runs_the_same_actions_and_calls) {
  if (world_size() != 2) GTEST_SKIP() << "two ranks";
  const std::vector<std::vector<std::string>> cases = {
      {"parallel.pp=2", "parallel.schedule=1f1b", "train.recompute=full"},
      {"parallel.pp=2", "parallel.schedule=zb-h1", "train.recompute=selective"},
      {"parallel.dp=2", "parallel.zero=1"},
      {"parallel.dp=2", "parallel.zero=2", "comm.overlap=true"},
      {"parallel.dp=2", "parallel.zero=3", "comm.overlap=true", "train.recompute=full"},
      {"parallel.tp=2", "parallel.sequence_parallel=true", "train.recompute=full"},
      {"parallel.dp=2", "parallel.ep=2", "parallel.zero=3"},
  };
  for (const auto& more : cases) {
    const std::string what = label(more);
    const BothSteps r = run_both(deck(more), MPI_COMM_WORLD);
    for (std::size_t s = 0; s < r.real.size(); ++s) {
      EXPECT_EQ(actions(r.real[s]), actions(r.local[s])) << what << "step " << s;
      EXPECT_EQ(calls(r.real[s]), calls(r.local[s])) << what << "step " << s;
      EXPECT_FALSE(calls(r.local[s]).empty()) << what << "step " << s;
    }
  }
}

// The calibration's peak is the step's: the engine's on a grid (here a grid of one rank on
// each process; the calibration's reduction over the world then takes the larger of two equal
// peaks), the single-rank trainer's without one.
TEST(compute_only_step, the_calibration_holds_the_memory_of_the_step_it_times) {
  for (const auto& more : std::vector<std::vector<std::string>>{
           {"train.recompute=selective"}, {"parallel.schedule=zb-h1", "comm.overlap=true"}}) {
    const auto c = deck(more);
    parallel::ProcessGrid grid(MPI_COMM_SELF, c.parallel);
    auto engine = parallel::make_parallel_trainer(c.model, c.train, c.parallel, c.comm, grid);
    const auto r = steps(*engine, 6);  // as many steps as the calibration runs
    const auto cal = driver::calibration_detail::calibrate_compute(c, &grid);
    EXPECT_EQ(cal.peak_bytes, engine->memory().peak_bytes) << more.front();
    EXPECT_GT(cal.forward_s.at(0), 0) << more.front();
    EXPECT_GT(cal.backward_s.at(0), 0) << more.front();
    EXPECT_GT(cal.optimizer_s, 0) << more.front();
    EXPECT_EQ(cal.backward_weight_s.at(0) > 0, r.back().backward_weight_actions > 0)
        << more.front();
    auto single = model::make_trainer(c.model, c.train);
    steps(*single, 6);
    const auto one = driver::calibration_detail::calibrate_compute(c, nullptr);
    EXPECT_EQ(one.peak_bytes, single->memory().peak_bytes) << more.front();
    EXPECT_GT(one.optimizer_s, 0) << more.front();
  }
}

// A pipelined point's calibration keeps what the bubble's replay draws from (docs/report.md,
// "Calibration"): per chunk, 5 x m samples of each action (W's only for a split backward), each
// chunk's from the rank that holds it, so that the samples it counts average to its time exactly;
// and the engine's time per action. A point without a pipeline keeps neither.
TEST(compute_only_step, a_pipelined_calibration_keeps_its_action_samples) {
  if (world_size() != 2) GTEST_SKIP() << "two ranks";
  for (const char* schedule : {"parallel.schedule=1f1b", "parallel.schedule=zb-h1"}) {
    const auto c = deck({"parallel.pp=2", schedule});
    parallel::ProcessGrid grid(MPI_COMM_WORLD, c.parallel);
    const auto cal = driver::calibration_detail::calibrate_compute(c, &grid);
    const std::size_t n = 5 * config::micro_batches(c.train, c.parallel);
    const bool split = cal.backward_weight_samples_s.size() == 2;
    EXPECT_EQ(split, std::string(schedule) == "parallel.schedule=zb-h1");
    ASSERT_EQ(cal.forward_samples_s.size(), 2u) << schedule;
    ASSERT_EQ(cal.action_overhead_s.size(), 2u) << schedule;
    for (std::size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(cal.forward_samples_s[k].size(), n) << schedule << " chunk " << k;
      EXPECT_EQ(cal.backward_samples_s[k].size(), n) << schedule << " chunk " << k;
      EXPECT_EQ(driver::repeated_action_time(cal.forward_samples_s[k]), cal.forward_s[k]);
      EXPECT_EQ(driver::repeated_action_time(cal.backward_samples_s[k]), cal.backward_s[k]);
      if (split) {
        EXPECT_EQ(driver::repeated_action_time(cal.backward_weight_samples_s[k]),
                  cal.backward_weight_s[k]);
      }
      EXPECT_GT(cal.action_overhead_s[k], 0) << schedule << " chunk " << k;
    }
  }
  const auto c = deck({"parallel.dp=2"});
  parallel::ProcessGrid grid(MPI_COMM_WORLD, c.parallel);
  const auto cal = driver::calibration_detail::calibrate_compute(c, &grid);
  EXPECT_TRUE(cal.forward_samples_s.empty());
  EXPECT_TRUE(cal.action_overhead_s.empty());
}
