// paraxis-bench-model: model FLOP/s of whole training steps on a deck (default
// inputs/small.yaml, or $PARAXIS_BENCH_DECK), beside the GEMM at the model's own MLP shape
// measured in the same run, so the ratio says how much the non-GEMM work costs.
// Checked (bench_check.hpp), outside the timed loop: each model/step row's losses of its
// first two steps (the first also the warm-up) against the same deck trained in fp64 (the
// reference variant, computed once), within the tolerance of the deck's precision; each GEMM
// row's C against its exact value (A = 0.5, B = 0.25: every element 0.125 k).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_check.hpp"
#include "deck/deck.hpp"
#include "model/gpt_model.hpp"
#include "model/trainer.hpp"
#include "paraxis/kernels/gemm.hpp"

namespace {

using namespace paraxis;
using Space = Kokkos::DefaultExecutionSpace;

driver::RunConfig bench_config() {
  const char* env = std::getenv("PARAXIS_BENCH_DECK");
  const std::string path = env ? env : PARAXIS_INPUTS_DIR "/small.yaml";
  const auto deck = driver::load_deck(path, {}, 1);
  if (!deck.errors.empty()) throw std::runtime_error(deck.errors.front().to_string());
  return deck.points.front().config;
}

constexpr int kCheckedSteps = 2;

// The losses of the deck's first kCheckedSteps steps trained in fp64 with the automatic GEMM.
const std::vector<double>& reference_losses() {
  static const std::vector<double> losses = [] {
    auto cfg = bench_config();
    cfg.train.precision = model::Precision::fp64;
    auto trainer = model::make_trainer(cfg.model, cfg.train);
    std::vector<double> l;
    for (int s = 0; s < kCheckedSteps; ++s) l.push_back(trainer->step().loss);
    return l;
  }();
  return losses;
}

double loss_tolerance(model::Precision p) {
  switch (p) {
    case model::Precision::bf16:
      return bench::check_tolerance<bf16>();
    case model::Precision::fp32:
      return bench::check_tolerance<float>();
    case model::Precision::fp64:
      return bench::check_tolerance<double>();
  }
  return 0;
}

void model_step(benchmark::State& state, kernels::GemmVariant automatic) {
  const auto cfg = bench_config();
  const auto& reference = reference_losses();
  kernels::set_automatic_gemm(automatic);
  auto trainer = model::make_trainer(cfg.model, cfg.train);
  std::vector<double> losses;  // the first step is also the warm-up: first-touch of every buffer
  for (int s = 0; s < kCheckedSteps; ++s) losses.push_back(trainer->step().loss);
  bench::check_values(state, "loss", losses, reference, loss_tolerance(cfg.train.precision));
  for (auto _ : state) trainer->step();  // step() fences before it returns
  kernels::set_automatic_gemm(kernels::GemmVariant::automatic);
  const double tokens = static_cast<double>(cfg.train.global_batch) * cfg.model.seq_len;
  state.counters["FLOP/s"] =
      benchmark::Counter(3.0 * model::forward_flops_per_token(cfg.model) * tokens,
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens/s"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
}

// The model's MLP GEMM: (micro_batch * seq_len) x ffn x hidden.
void mlp_gemm(benchmark::State& state, kernels::GemmVariant variant) {
  const auto cfg = bench_config();
  const int m = cfg.train.micro_batch * cfg.model.seq_len, n = cfg.model.ffn, k = cfg.model.hidden;
  kernels::View2<float, Space> A("A", m, k), B("B", k, n), C("C", m, n);
  Kokkos::deep_copy(A, 0.5f);
  Kokkos::deep_copy(B, 0.25f);
  kernels::gemm(Space(), kernels::Trans::N, kernels::Trans::N, 1.0, A, B, 0.0, C, variant);
  bench::check_output(state, "C", C,
                      std::vector<double>(static_cast<std::size_t>(m) * n, 0.125 * k));
  for (auto _ : state) {
    kernels::gemm(Space(), kernels::Trans::N, kernels::Trans::N, 1.0, A, B, 0.0, C, variant);
    Kokkos::fence();
  }
  state.SetLabel(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK_CAPTURE(model_step, portable, paraxis::kernels::GemmVariant::portable)
    ->Name("model/step/portable")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
BENCHMARK_CAPTURE(model_step, vendor, paraxis::kernels::GemmVariant::automatic)
    ->Name("model/step/vendor")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
BENCHMARK_CAPTURE(mlp_gemm, portable, paraxis::kernels::GemmVariant::portable)
    ->Name("gemm/portable/model-mlp")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(mlp_gemm, vendor, paraxis::kernels::GemmVariant::automatic)
    ->Name("gemm/vendor/model-mlp")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
