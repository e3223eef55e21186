// Softmax throughput: row softmax at [rows x columns] (GPT-block and vocabulary-like widths) and
// the causal, scaled softmax of attention at [batch*heads x seq x seq], forward and backward,
// fp32 and bf16 storage, each family with a copy of the same elements at the same shape and
// storage type in the same run ("softmax/rows/baseline_copy/4096x512",
// "softmax/causal/baseline_copy/bf16/8x512x512"): a kernel's bytes/s over its copy's is how
// close it gets to the memory bandwidth it could have. bytes/s counts the minimal traffic: the
// row softmax reads S (and dP) and writes P (dS); the causal one reads only the unmasked lower
// triangle but writes every output element (masked zeros included). Every iteration fences;
// rates use wall time (UseRealTime), which is what device work needs. Every row checks its
// output (P forward, dS backward) against fp64 loops on the same inputs (the backward's: the
// stored P and dP) (bench_check.hpp).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "paraxis/kernels/softmax.hpp"

namespace pk = paraxis::kernels;
using paraxis::bench::bench_copy;
using paraxis::bench::check_output;
using paraxis::bench::fill_formula;
using paraxis::bench::host_values;
using paraxis::bench::set_bytes;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;

// Rows of `width` elements; causal: row r is row i = r mod width of a [width x width] matrix,
// whose elements j > i are masked (0 in P and dS).
int row_length(std::size_t row_start, int width, bool causal) {
  return causal ? static_cast<int>((row_start / width) % width) + 1 : width;
}

// P = softmax(scale * S) of each row in fp64.
std::vector<double> softmax_reference(const std::vector<double>& S, int width, double scale,
                                      bool causal) {
  std::vector<double> P(S.size(), 0.0);
  for (std::size_t row = 0; row < S.size(); row += width) {
    const int len = row_length(row, width, causal);
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < len; ++j) mx = std::max(mx, scale * S[row + j]);
    for (int j = 0; j < len; ++j) sum += P[row + j] = std::exp(scale * S[row + j] - mx);
    for (int j = 0; j < len; ++j) P[row + j] /= sum;
  }
  return P;
}

// dS = scale * P (dP - sum P dP) of each row in fp64, from the backward pass's inputs P (the
// forward pass's output as stored) and dP.
std::vector<double> softmax_backward_reference(const std::vector<double>& P,
                                               const std::vector<double>& dP, int width,
                                               double scale, bool causal) {
  std::vector<double> dS(P.size(), 0.0);
  for (std::size_t row = 0; row < P.size(); row += width) {
    const int len = row_length(row, width, causal);
    double pdp = 0;
    for (int j = 0; j < len; ++j) pdp += P[row + j] * dP[row + j];
    for (int j = 0; j < len; ++j) dS[row + j] = scale * P[row + j] * (dP[row + j] - pdp);
  }
  return dS;
}

// The row's check: P after the forward pass, dS after the backward pass.
template <class V>
void check_softmax(benchmark::State& state, const V& S, const V& dP, const V& P, const V& dS,
                   int width, double scale, bool causal, bool backward) {
  if (backward)
    check_output(state, "dS", dS,
                 softmax_backward_reference(host_values(P), host_values(dP), width, scale, causal));
  else
    check_output(state, "P", P, softmax_reference(host_values(S), width, scale, causal));
}

template <class T>
void bench_rows(benchmark::State& state, int r, int c, bool backward) {
  pk::View2<T, Exec> S("S", r, c), P("P", r, c), dP("dP", r, c), dS("dS", r, c);
  fill_formula(S, 1);
  fill_formula(dP, 2);
  pk::softmax_forward(Exec(), S, P);
  if (backward) pk::softmax_backward(Exec(), P, dP, dS);
  check_softmax(state, S, dP, P, dS, c, 1.0, false, backward);
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
  if (backward) pk::causal_softmax_backward(Exec(), P, dP, scale, dS);
  check_softmax(state, S, dP, P, dS, t, scale, true, backward);
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
  // Two in-cache shapes and one past the cache (4x the last-level cache, bench_util.hpp).
  for (auto [r, c] : {std::pair{4096, 512}, std::pair{256, 8192},
                      std::pair{paraxis::bench::past_cache_rows<T>(512), 512}}) {
    if (r == 0) continue;  // PARAXIS_BENCH_IN_CACHE_ONLY
    const std::string s = tag + std::to_string(r) + "x" + std::to_string(c);
    benchmark::RegisterBenchmark(("softmax/rows/fwd/" + s).c_str(), bench_rows<T>, r, c, false)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("softmax/rows/bwd/" + s).c_str(), bench_rows<T>, r, c, true)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("softmax/rows/baseline_copy/" + s).c_str(), bench_copy<T>,
                                 static_cast<std::size_t>(r) * c)
        ->UseRealTime();
  }
  for (auto [b, t] : {std::pair{32, 256}, std::pair{8, 512},
                      std::pair{paraxis::bench::past_cache_rows<T>(512 * 512), 512}}) {
    if (b == 0) continue;  // PARAXIS_BENCH_IN_CACHE_ONLY
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
