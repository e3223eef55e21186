// Causal multi-head attention, unfused (attention.hpp: gemm_batched + causal softmax, the
// probabilities kept) against fused (fused_attention.hpp: tiled, online softmax, O(seq)
// memory), forward and backward, fp32 and bf16 storage, named
// attention/<unfused|fused>/<fwd|bwd>/[bf16/]b<batch>_s<seq>_h<heads>_d<hd>; s512 and s2048 are
// inputs/small.yaml's heads and head dimension (8 x 64) at batch 1.
// FLOP/s counts the useful causal work for both, so their rates compare directly: half of the
// dense T x T products, i.e. per (sequence, head) 2*T^2*hd forward (Q K^T and P V) and
// 4*T^2*hd backward (four products). The unfused kernel computes the full squares (at most
// half of GEMM speed); the fused backward recomputes Q K^T and dOut V^T in each of its two
// passes (7/4 of the counted work). bytes/s counts inputs and outputs only (Q, K, V, Out; dOut,
// Out, Q, K, V, dQ, dK, dV), not the T x T matrices. workspace_MiB: everything the workspace
// holds (saved + scratch). Every iteration fences; rates use wall time (UseRealTime).
// Every row checks Out (and the backward rows dQ, dK, dV) against attention_reference.hpp's
// fp64 loops on the same inputs, computed once per shape and storage type (bench_check.hpp).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>

#include "attention_reference.hpp"
#include "bench_util.hpp"
#include "paraxis/kernels/attention.hpp"
#include "paraxis/kernels/fused_attention.hpp"

namespace pk = paraxis::kernels;
using paraxis::bench::check_output;
using paraxis::bench::fill_formula;
using paraxis::bench::host_values;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;

using Shape = paraxis::bench::AttentionShape;

// The fp64 reference of the inputs of one shape and storage type T, computed on first use.
template <class T>
const paraxis::bench::AttentionReference& reference(const Shape& s, const pk::View2<T, Exec>& Q,
                                                    const pk::View2<T, Exec>& K,
                                                    const pk::View2<T, Exec>& V,
                                                    const pk::View2<T, Exec>& dOut) {
  static std::map<std::tuple<int, int, int, int>, paraxis::bench::AttentionReference> cache;
  const auto key = std::make_tuple(s.batch, s.seq, s.heads, s.hd);
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache
             .emplace(key, paraxis::bench::attention_reference(s, host_values(Q), host_values(K),
                                                               host_values(V), host_values(dOut)))
             .first;
  return it->second;
}

template <class T, bool Fused>
void bench_attention(benchmark::State& state, Shape s, bool backward) {
  const int n = s.batch * s.seq, e = s.heads * s.hd;
  pk::View2<T, Exec> Q("Q", n, e), K("K", n, e), V("V", n, e), Out("Out", n, e), dOut("dO", n, e),
      dQ("dQ", n, e), dK("dK", n, e), dV("dV", n, e);
  fill_formula(Q, 1);
  fill_formula(K, 2);
  fill_formula(V, 3);
  fill_formula(dOut, 4);
  using WS = std::conditional_t<Fused, pk::FusedAttentionWorkspace<T, Exec>,
                                pk::AttentionWorkspace<T, Exec>>;
  WS ws(s.batch, s.seq, s.heads, s.hd);
  auto forward = [&] {
    if constexpr (Fused)
      pk::fused_attention_forward(Exec(), Q, K, V, ws, Out);
    else
      pk::attention_forward(Exec(), Q, K, V, ws, Out);
  };
  auto backward_pass = [&] {
    if constexpr (Fused)
      pk::fused_attention_backward(Exec(), dOut, Out, ws, dQ, dK, dV);
    else
      pk::attention_backward(Exec(), dOut, ws, dQ, dK, dV);
  };
  const auto& ref = reference<T>(s, Q, K, V, dOut);
  forward();
  check_output(state, "Out", Out, ref.out);
  if (backward) {
    backward_pass();
    check_output(state, "dQ", dQ, ref.dq);
    check_output(state, "dK", dK, ref.dk);
    check_output(state, "dV", dV, ref.dv);
  }
  for (auto _ : state) {
    if (backward)
      backward_pass();
    else
      forward();
    Kokkos::fence();
  }
  const double per_head = static_cast<double>(s.seq) * s.seq * s.hd;
  const double flops = (backward ? 4.0 : 2.0) * per_head * s.batch * s.heads;
  const double bytes = (backward ? 8.0 : 4.0) * n * e * sizeof(T);
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  paraxis::bench::set_bytes(state, bytes);
  state.counters["workspace_MiB"] = static_cast<double>(ws.bytes()) / (1024.0 * 1024.0);
}

template <class T>
void register_pair(const std::string& dir, const std::string& name, Shape s, bool bwd) {
  benchmark::RegisterBenchmark(("attention/unfused/" + dir + name).c_str(),
                               bench_attention<T, false>, s, bwd)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("attention/fused/" + dir + name).c_str(), bench_attention<T, true>,
                               s, bwd)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

const bool registered = [] {
  for (Shape s :
       {Shape{4, 128, 8, 64}, Shape{1, 256, 4, 32}, Shape{1, 512, 8, 64}, Shape{1, 2048, 8, 64}}) {
    const std::string name = "b" + std::to_string(s.batch) + "_s" + std::to_string(s.seq) + "_h" +
                             std::to_string(s.heads) + "_d" + std::to_string(s.hd);
    for (bool bwd : {false, true}) {
      const std::string dir = bwd ? "bwd/" : "fwd/";
      register_pair<float>(dir, name, s, bwd);
      register_pair<paraxis::bf16>(dir + "bf16/", name, s, bwd);
    }
  }
  return true;
}();

}  // namespace
