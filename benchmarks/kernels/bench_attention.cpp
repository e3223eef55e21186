// Causal multi-head attention (the unfused gemm_batched + causal softmax path), forward and
// backward, fp32 and bf16 storage, named attention/<fwd|bwd>/b<batch>_s<seq>_h<heads>_d<hd>.
// FLOP/s counts the useful causal work: half of the dense T x T products, i.e. per
// (sequence, head) 2*T^2*hd forward (Q K^T and P V) and 4*T^2*hd backward (four products);
// the kernel itself computes the full squares, so it can reach at most half of GEMM speed.
// bytes/s counts inputs and outputs only (Q, K, V, Out; dOut, Q, K, V, dQ, dK, dV), not the
// T x T probabilities: it is the traffic a fused kernel would need. Every iteration fences; rates
// use wall time (UseRealTime), which is what device work needs.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <string>

#include "bench_util.hpp"
#include "paraxis/kernels/attention.hpp"

namespace pk = paraxis::kernels;
using paraxis::bench::fill_formula;
using paraxis::bench::set_bytes;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;

struct Shape {
  int batch, seq, heads, hd;
};

template <class T>
void bench_attention(benchmark::State& state, Shape s, bool backward) {
  const int n = s.batch * s.seq, e = s.heads * s.hd;
  pk::View2<T, Exec> Q("Q", n, e), K("K", n, e), V("V", n, e), Out("Out", n, e), dOut("dO", n, e),
      dQ("dQ", n, e), dK("dK", n, e), dV("dV", n, e);
  fill_formula(Q, 1);
  fill_formula(K, 2);
  fill_formula(V, 3);
  fill_formula(dOut, 4);
  pk::AttentionWorkspace<T, Exec> ws(s.batch, s.seq, s.heads, s.hd);
  pk::attention_forward(Exec(), Q, K, V, ws, Out);
  Kokkos::fence();
  for (auto _ : state) {
    if (backward)
      pk::attention_backward(Exec(), dOut, ws, dQ, dK, dV);
    else
      pk::attention_forward(Exec(), Q, K, V, ws, Out);
    Kokkos::fence();
  }
  const double per_head = static_cast<double>(s.seq) * s.seq * s.hd;
  const double flops = (backward ? 4.0 : 2.0) * per_head * s.batch * s.heads;
  const double bytes = (backward ? 7.0 : 4.0) * n * e * sizeof(T);
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes/s"] = benchmark::Counter(
      bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::OneK::kIs1024);
  state.counters["workspace_MiB"] = static_cast<double>(ws.bytes()) / (1024.0 * 1024.0);
}

const bool registered = [] {
  for (Shape s : {Shape{4, 128, 8, 64}, Shape{1, 256, 4, 32}}) {
    const std::string name = "b" + std::to_string(s.batch) + "_s" + std::to_string(s.seq) + "_h" +
                             std::to_string(s.heads) + "_d" + std::to_string(s.hd);
    for (bool bwd : {false, true}) {
      const std::string dir = bwd ? "bwd/" : "fwd/";
      benchmark::RegisterBenchmark(("attention/" + dir + name).c_str(), bench_attention<float>, s,
                                   bwd)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("attention/" + dir + "bf16/" + name).c_str(),
                                   bench_attention<paraxis::bf16>, s, bwd)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
