// Softmax throughput: row softmax at [rows x columns] (GPT-block and vocabulary-like widths) and
// the causal, scaled softmax of attention at [batch*heads x seq x seq], forward and backward,
// fp32 and bf16 storage, each family with a copy of the same elements at the same shape and
// storage type in the same run ("softmax/rows/baseline_copy/4096x512",
// "softmax/causal/baseline_copy/bf16/8x512x512"): a kernel's bytes/s over its copy's is how
// close it gets to the memory bandwidth it could have. bytes/s counts the minimal traffic: the
// row softmax reads S (and dP) and writes P (dS); the causal one reads only the unmasked lower
// triangle but writes every output element (masked zeros included). Every iteration fences;
// rates use wall time (UseRealTime), which is what device work needs.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <string>

#include "bench_util.hpp"
#include "paraxis/kernels/softmax.hpp"

namespace pk = paraxis::kernels;
using paraxis::bench::bench_copy;
using paraxis::bench::fill_formula;
using paraxis::bench::set_bytes;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;

template <class T>
void bench_rows(benchmark::State& state, int r, int c, bool backward) {
  pk::View2<T, Exec> S("S", r, c), P("P", r, c), dP("dP", r, c), dS("dS", r, c);
  fill_formula(S, 1);
  fill_formula(dP, 2);
  pk::softmax_forward(Exec(), S, P);
  Kokkos::fence();
  for (auto _ : state) {
    if (backward)
      pk::softmax_backward(Exec(), P, dP, dS);
    else
      pk::softmax_forward(Exec(), S, P);
    Kokkos::fence();
  }
  set_bytes(state, (backward ? 3.0 : 2.0) * r * c * sizeof(T));
}

template <class T>
void bench_causal(benchmark::State& state, int b, int t, bool backward) {
  pk::View3<T, Exec> S("S", b, t, t), P("P", b, t, t), dP("dP", b, t, t), dS("dS", b, t, t);
  fill_formula(S, 3);
  fill_formula(dP, 4);
  const double scale = 0.125;
  pk::causal_softmax_forward(Exec(), S, scale, P);
  Kokkos::fence();
  for (auto _ : state) {
    if (backward)
      pk::causal_softmax_backward(Exec(), P, dP, scale, dS);
    else
      pk::causal_softmax_forward(Exec(), S, scale, P);
    Kokkos::fence();
  }
  const double tri = 0.5 * b * t * (t + 1.0), full = 1.0 * b * t * t;
  set_bytes(state, ((backward ? 2.0 : 1.0) * tri + full) * sizeof(T));
}

// Registers one storage type's kernels and copy baselines; `tag` is "" (fp32) or "bf16/".
template <class T>
void register_type(const std::string& tag) {
  for (auto [r, c] : {std::pair{4096, 512}, std::pair{256, 8192}}) {
    const std::string s = tag + std::to_string(r) + "x" + std::to_string(c);
    benchmark::RegisterBenchmark(("softmax/rows/fwd/" + s).c_str(), bench_rows<T>, r, c, false)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("softmax/rows/bwd/" + s).c_str(), bench_rows<T>, r, c, true)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("softmax/rows/baseline_copy/" + s).c_str(), bench_copy<T>,
                                 static_cast<std::size_t>(r) * c)
        ->UseRealTime();
  }
  for (auto [b, t] : {std::pair{32, 256}, std::pair{8, 512}}) {
    const std::string s =
        tag + std::to_string(b) + "x" + std::to_string(t) + "x" + std::to_string(t);
    benchmark::RegisterBenchmark(("softmax/causal/fwd/" + s).c_str(), bench_causal<T>, b, t, false)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("softmax/causal/bwd/" + s).c_str(), bench_causal<T>, b, t, true)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("softmax/causal/baseline_copy/" + s).c_str(), bench_copy<T>,
                                 static_cast<std::size_t>(b) * t * t)
        ->UseRealTime();
  }
}

const bool registered = [] {
  register_type<float>("");
  register_type<paraxis::bf16>("bf16/");
  return true;
}();

}  // namespace
