// Softmax cross-entropy throughput at language-model-head shapes (tokens x vocabulary), forward
// (the row's log-sum-exp and the summed loss) and backward (dlogits), fp32 and bf16 logits, with
// a copy of the same bytes at the same shape as the family's baseline in the same run.
// bytes/s counts the minimal traffic: the forward reads the logits once (lse[N] and the targets
// are a column's worth, counted too); the backward reads the logits and writes dlogits.
// Every row checks its outputs (lse and the summed loss; dlogits) against
// cross_entropy_reference's fp64 loops on the same inputs (bench_check.hpp).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "paraxis/kernels/cross_entropy.hpp"

namespace pk = paraxis::kernels;
using paraxis::bench::bench_copy;
using paraxis::bench::check_output;
using paraxis::bench::fill_formula;
using paraxis::bench::host_values;
using paraxis::bench::set_bytes;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;

// Cross-entropy of rows of `v` logits in fp64: lse(i) = log sum_j exp(logits(i, j)), the loss
// sum_i lse(i) - logits(i, target(i)) and, when asked, dlogits = (softmax - onehot) / rows.
struct CeReference {
  std::vector<double> lse, loss, dlogits;
};
CeReference cross_entropy_reference(const std::vector<double>& logits,
                                    const std::vector<double>& targets, int v, bool gradient) {
  const std::size_t n = targets.size();
  CeReference r{std::vector<double>(n), std::vector<double>(1, 0.0), {}};
  if (gradient) r.dlogits.resize(logits.size());
  for (std::size_t i = 0; i < n; ++i) {
    const double* x = &logits[i * v];
    const double mx = *std::max_element(x, x + v);
    double sum = 0;
    for (int j = 0; j < v; ++j) sum += std::exp(x[j] - mx);
    r.lse[i] = mx + std::log(sum);
    const int target = static_cast<int>(targets[i]);
    r.loss[0] += r.lse[i] - x[target];
    if (gradient)
      for (int j = 0; j < v; ++j)
        r.dlogits[i * v + j] = (std::exp(x[j] - r.lse[i]) - (j == target ? 1.0 : 0.0)) / n;
  }
  return r;
}

template <class T>
struct CeData {
  using A = pk::acc_t<T>;
  pk::View2<T, Exec> logits, dlogits;
  pk::View1<int, Exec> targets;
  pk::View1<A, Exec> lse;
  CeData(int n, int v)
      : logits("logits", n, v), dlogits("dlogits", n, v), targets("targets", n), lse("lse", n) {
    fill_formula(logits, 1);
    auto t = Kokkos::create_mirror_view(targets);
    for (int i = 0; i < n; ++i) t(i) = static_cast<int>((i * 977L) % v);
    Kokkos::deep_copy(targets, t);
    pk::cross_entropy_forward(Exec(), logits, targets, v, lse);
    Kokkos::fence();
  }
};

template <class T>
void bench_fwd(benchmark::State& state, int n, int v) {
  CeData<T> d(n, v);
  const auto loss = pk::cross_entropy_forward(Exec(), d.logits, d.targets, v, d.lse);
  const auto ref = cross_entropy_reference(host_values(d.logits), host_values(d.targets), v, false);
  check_output(state, "lse", d.lse, ref.lse);
  paraxis::bench::check_values(state, "loss", {loss}, ref.loss,
                               paraxis::bench::check_tolerance<decltype(loss)>());
  for (auto _ : state) {
    benchmark::DoNotOptimize(pk::cross_entropy_forward(Exec(), d.logits, d.targets, v, d.lse));
    Kokkos::fence();
  }
  set_bytes(state, 1.0 * n * v * sizeof(T) + n * (sizeof(int) + sizeof(typename CeData<T>::A)));
}

template <class T>
void bench_bwd(benchmark::State& state, int n, int v) {
  CeData<T> d(n, v);
  pk::cross_entropy_backward(Exec(), d.logits, d.targets, d.lse, v, 1.0 / n, d.dlogits);
  const auto ref = cross_entropy_reference(host_values(d.logits), host_values(d.targets), v, true);
  check_output(state, "dlogits", d.dlogits, ref.dlogits);
  for (auto _ : state) {
    pk::cross_entropy_backward(Exec(), d.logits, d.targets, d.lse, v, 1.0 / n, d.dlogits);
    Kokkos::fence();
  }
  set_bytes(state, 2.0 * n * v * sizeof(T) + n * (sizeof(int) + sizeof(typename CeData<T>::A)));
}

const bool registered = [] {
  // 512 tokens (inputs/small.yaml's micro-batch) over its 4,096-word vocabulary and over GPT-2's
  // 50,304 (padded) words.
  // And one shape past the cache: 4x the last-level cache in bf16 (bench_util.hpp) at 4,096 words.
  for (auto [n, v] : {std::pair{512, 4096}, std::pair{512, 50304},
                      std::pair{paraxis::bench::past_cache_rows<paraxis::bf16>(4096), 4096}}) {
    if (n == 0) continue;  // PARAXIS_BENCH_IN_CACHE_ONLY
    const std::string s = std::to_string(n) + "x" + std::to_string(v);
    const std::size_t elems = static_cast<std::size_t>(n) * v;
    benchmark::RegisterBenchmark(("cross_entropy/fwd/" + s).c_str(), bench_fwd<float>, n, v)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("cross_entropy/bwd/" + s).c_str(), bench_bwd<float>, n, v)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("cross_entropy/baseline_copy/" + s).c_str(), bench_copy<float>,
                                 elems)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("cross_entropy/fwd/bf16/" + s).c_str(), bench_fwd<paraxis::bf16>,
                                 n, v)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("cross_entropy/bwd/bf16/" + s).c_str(), bench_bwd<paraxis::bf16>,
                                 n, v)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("cross_entropy/baseline_copy/bf16/" + s).c_str(),
                                 bench_copy<paraxis::bf16>, elems)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
