// Data parallelism and ZeRO on 2, 3 or 4 ranks (dp = the world size) reproduce the
// single-rank run of inputs/tiny.yaml: loss of every step and final parameters within 1e-9
// (fp64) / 1e-4 (fp32), reruns bitwise identical; resident memory follows the ZeRO model;
// data-parallel bytes per step are exactly what the stage sends.
#include <string>

#include "model/gpt_model.hpp"
#include "training_run.hpp"

using namespace ptest;

namespace {

// tiny.yaml with 3 steps; micro_batch 1 so each rank has several micro-batches to accumulate.
// global_batch 12 is divisible by dp in {2, 3, 4}.
driver::RunConfig deck_config(const std::string& precision, int micro_batch = 1) {
  return tiny({"train.steps=3", "train.precision=" + precision, "train.global_batch=12",
               "train.micro_batch=" + std::to_string(micro_batch)});
}

struct DpRun : TrainedRun {
  std::vector<std::size_t> dp_bytes;
};

DpRun run_parallel(driver::RunConfig c, int zero, bool overlap = false, double bucket_mb = 25,
                   config::CommBackend backend = config::CommBackend::mpi) {
  c.parallel.dp = world_size();
  c.parallel.zero = zero;
  c.comm.overlap = overlap;
  c.comm.bucket_mb = bucket_mb;
  c.comm.backend = backend;
  DpRun r;
  static_cast<TrainedRun&>(r) = ptest::run_parallel(c);
  for (const auto& step : r.comm) r.dp_bytes.push_back(step.at("dp").bytes);
  return r;
}

}  // namespace

TEST(data_parallel, every_zero_stage_matches_single_rank_fp64) {
  const auto c = deck_config("fp64");
  const TrainedRun ref = run_reference(c);
  for (int zero = 0; zero <= 3; ++zero)
    expect_matches(run_parallel(c, zero), ref, "zero " + std::to_string(zero));
}

TEST(data_parallel, every_zero_stage_matches_single_rank_fp32) {
  const auto c = deck_config("fp32");
  const TrainedRun ref = run_reference(c);
  for (int zero = 0; zero <= 3; ++zero)
    expect_matches(run_parallel(c, zero), ref, "zero " + std::to_string(zero));
}

TEST(data_parallel, bf16_tracks_single_rank) {
  const auto c = deck_config("bf16");
  const TrainedRun ref = run_reference(c);
  // bf16's tolerance: the loss within 2e-2 relative, the parameters compared but not bounded
  // (driver::verify_tolerance).
  for (int zero : {0, 3})
    expect_matches(run_parallel(c, zero), ref, "bf16 zero " + std::to_string(zero));
}

TEST(data_parallel, reruns_are_bitwise_identical) {
  const auto c = deck_config("fp32");
  for (int zero : {0, 2, 3}) {
    const TrainedRun a = run_parallel(c, zero), b = run_parallel(c, zero);
    EXPECT_EQ(a.loss, b.loss) << "zero " << zero;
    EXPECT_EQ(a.params, b.params) << "zero " << zero;
  }
}

TEST(data_parallel, overlap_matches_and_moves_the_same_bytes_at_every_stage) {
  const auto c = deck_config("fp64");
  const TrainedRun ref = run_reference(c);
  for (int zero = 0; zero <= 3; ++zero) {
    // ~10 KB buckets: several reductions in flight during the backward.
    const DpRun plain = run_parallel(c, zero, false, 0.01);
    const DpRun overlapped = run_parallel(c, zero, true, 0.01);
    const TrainedRun again = run_parallel(c, zero, true, 0.01);
    expect_matches(overlapped, ref, "overlap zero " + std::to_string(zero));
    EXPECT_EQ(overlapped.dp_bytes, plain.dp_bytes) << "zero " << zero;
    EXPECT_EQ(overlapped.params, again.params) << "zero " << zero << ": overlapped reruns differ";
    // The accumulation order is the same with and without overlap, but MPI may reduce a
    // non-blocking collective with another algorithm than the blocking one; with two ranks
    // each element is a + b either way, so the bits must agree.
    if (world_size() == 2) {
      EXPECT_EQ(overlapped.loss, plain.loss) << "zero " << zero;
      EXPECT_EQ(overlapped.params, plain.params) << "zero " << zero;
    }
  }
}

TEST(data_parallel, bytes_per_step_are_what_each_stage_sends) {
  const int dp = world_size();
  for (const char* precision : {"fp32", "bf16"}) {
    const auto c = deck_config(precision);
    const int m = c.train.global_batch / (dp * c.train.micro_batch);  // local micro-batches
    ASSERT_GE(m, 2) << "the test needs gradient accumulation to see the m-dependence";
    const std::size_t g = 4, t = std::string(precision) == "bf16" ? 2 : 4;
    // Padded flat size of the ZeRO layout (units padded to a multiple of dp) and of stage 0.
    std::size_t P1 = 0, Pz = 0;
    if (std::string(precision) == "bf16") {
      P1 = model::GptModel<bf16>(c.model, 1, 1, false).params().elements();
      Pz = model::GptModel<bf16>(c.model, 1, dp, false).params().elements();
    } else {
      P1 = model::GptModel<float>(c.model, 1, 1, false).params().elements();
      Pz = model::GptModel<float>(c.model, 1, dp, false).params().elements();
    }
    const std::size_t norm = 8;  // the global gradient norm's all-reduce (stages >= 1)
    const std::size_t expected[4] = {
        P1 * g,                      // 0: one all-reduce of every gradient
        Pz * g + Pz * t + norm,      // 1: reduce-scatter once + all-gather parameters
        m * Pz * g + Pz * t + norm,  // 2: reduce-scatter every micro-batch (grows with m)
        m * (2 * Pz * t + Pz * g) +
            norm};  // 3: gather forward + backward, reduce-scatter, per micro-batch
    for (int zero = 0; zero <= 3; ++zero) {
      const DpRun r = run_parallel(c, zero);
      for (auto b : r.dp_bytes) EXPECT_EQ(b, expected[zero]) << precision << " zero " << zero;
    }
  }
}

TEST(data_parallel, resident_memory_follows_the_zero_model) {
  const int dp = world_size();
  const auto c = deck_config("bf16");
  model::MemoryReport mem[4];
  for (int zero = 0; zero <= 3; ++zero) mem[zero] = run_parallel(c, zero).memory;
  const double slack = 1.05;  // unit padding to multiples of 16 elements and of dp
  // Stage 1: optimizer state (fp32 m, v, master) ~ 1/dp.
  EXPECT_LE(mem[1].optimizer_bytes, slack * mem[0].optimizer_bytes / dp);
  EXPECT_GE(mem[1].optimizer_bytes, mem[0].optimizer_bytes / dp / slack);
  // Stage 2: gradients too (only the owned shard stays between steps).
  EXPECT_LE(mem[2].grads_bytes, slack * mem[0].grads_bytes / dp);
  EXPECT_GT(mem[1].grads_bytes, mem[0].grads_bytes - 1);  // stage 1 keeps full gradients
  // Stage 3: parameters too.
  EXPECT_LE(mem[3].params_bytes, slack * mem[0].params_bytes / dp);
  EXPECT_LE(mem[3].optimizer_bytes, slack * mem[0].optimizer_bytes / dp);
  EXPECT_GT(mem[2].params_bytes, mem[0].params_bytes - 1);  // stage 2 keeps full parameters
  // Transient buffers (full gradients in stage 2, gathered units in stage 3) show in the peaks.
  EXPECT_GE(mem[2].grads_peak_bytes, mem[0].grads_bytes);
  EXPECT_GT(mem[3].params_peak_bytes, mem[3].params_bytes);
  EXPECT_EQ(mem[0].grads_peak_bytes, mem[0].grads_bytes);  // nothing transient at stage 0
  EXPECT_GT(mem[2].peak_bytes, mem[2].params_bytes + mem[2].grads_bytes + mem[2].optimizer_bytes +
                                   mem[2].activations_peak_bytes);
}

TEST(data_parallel, recorded_routing_is_gathered_in_single_rank_order) {
  auto c = deck_config("fp64");
  c.train.steps = 2;
  c.parallel.dp = world_size();
  c.parallel.zero = 1;
  const auto ref = run_reference(c, /*record_routing=*/true);
  const auto par = ptest::run_parallel(c, /*record_routing=*/true);
  const std::size_t tokens = static_cast<std::size_t>(c.train.global_batch) * c.model.seq_len;
  for (int s = 0; s < 2; ++s) {
    ASSERT_EQ(ref.steps[s].routing.size(), tokens * c.model.moe.top_k * c.model.moe_layer_count());
    EXPECT_EQ(par.steps[s].routing, ref.steps[s].routing) << "step " << s;
  }
}

#ifdef PARAXIS_ENABLE_NCCL
// CUDA builds: the NCCL backend (device buffers, the Kokkos stream) reproduces the
// single-rank run too. Runs wherever a GPU per rank exists.
TEST(data_parallel, nccl_backend_matches_single_rank_fp64) {
  const auto c = deck_config("fp64");
  const TrainedRun ref = run_reference(c);
  for (int zero : {0, 1, 2, 3})
    expect_matches(run_parallel(c, zero, true, 25, config::CommBackend::nccl), ref,
                   "nccl zero " + std::to_string(zero));
}
#endif

// comm.overlap with dp = 2 under every pipeline schedule (pp = 2, 4 ranks): the reductions
// start inside the pipelined backward, so each schedule's order of backwards decides when a
// unit's gradients are final. fp64, every ZeRO stage, against the single-rank run.
TEST(data_parallel, overlap_under_every_pipeline_schedule_matches_single_rank) {
  if (world_size() != 4) GTEST_SKIP() << "dp = 2 x pp = 2: needs 4 ranks";
  for (const char* schedule : {"gpipe", "1f1b", "interleaved"}) {
    const bool inter = std::string(schedule) == "interleaved";
    // 4 sequences per replica in micro-batches of 1: m = 4 per stage (interleaved: 4 layers,
    // v = 2 chunks of one layer per stage).
    auto c = tiny({"train.steps=2", "train.precision=fp64", "train.global_batch=8",
                   "train.micro_batch=1", inter ? "model.layers=4" : "model.layers=2",
                   "parallel.pp=2", "parallel.dp=2", "comm.overlap=true", "comm.bucket_mb=0.01",
                   std::string("parallel.schedule=") + schedule,
                   inter ? "parallel.virtual_stages=2" : "parallel.virtual_stages=1"});
    const TrainedRun ref = run_reference(c);
    for (int zero : {0, 1, 2, 3}) {
      c.parallel.zero = zero;
      expect_matches(ptest::run_parallel(c), ref,
                     std::string(schedule) + " overlap zero " + std::to_string(zero));
    }
  }
}
