// Token + position embedding throughput at a GPT-2-like shape: 4096 tokens (4 sequences of
// 1024), hidden 512, vocabulary 50304, fp32 and bf16 storage (the gradients dwte/dwpe are fp32,
// as ParamStore holds them), with a copy of the same [tokens, hidden] elements in the same
// storage type in the same run ("embedding/baseline_copy/4096x512",
// "embedding/baseline_copy/bf16/4096x512"). bytes/s counts the minimal traffic: forward reads
// the distinct vocabulary rows the tokens use, the position rows and the tokens, and writes X;
// backward reads dX and the tokens and reads + writes the distinct dwte rows and the dwpe
// rows, and has its own copy of the same bytes ("embedding/baseline_copy/bwd_bytes/4096x512",
// bench_copy_bytes.hpp). Every iteration fences; rates use wall time (UseRealTime).
// Every row checks its output (X; dwte and dwpe) against the sums of rows of the same inputs
// in fp64 on the host (bench_check.hpp).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_copy_bytes.hpp"
#include "bench_util.hpp"
#include "paraxis/kernels/embedding.hpp"

namespace pk = paraxis::kernels;
using paraxis::bench::bench_copy;
using paraxis::bench::check_output;
using paraxis::bench::fill_formula;
using paraxis::bench::host_values;
using paraxis::bench::set_bytes;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;

constexpr int kTokens = 4096, kSeq = 1024, kHidden = 512, kVocab = 50304;

// Token ids spread over the vocabulary by a fixed integer hash (no clock, no RNG state).
std::vector<int> token_ids() {
  std::vector<int> t(kTokens);
  for (int i = 0; i < kTokens; ++i) {
    std::uint64_t z = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i + 1);
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    t[i] = static_cast<int>((z ^ (z >> 29)) % static_cast<std::uint64_t>(kVocab));
  }
  return t;
}

// The vocabulary rows the kernels touch.
long distinct_ids() {
  std::vector<char> seen(kVocab, 0);
  long d = 0;
  for (int t : token_ids())
    if (!seen[t]) ++d, seen[t] = 1;
  return d;
}

pk::View1<int, Exec> make_tokens() {
  const auto ids = token_ids();
  pk::View1<int, Exec> t("tokens", kTokens);
  auto h = Kokkos::create_mirror_view(t);
  for (int i = 0; i < kTokens; ++i) h(i) = ids[i];
  Kokkos::deep_copy(t, h);
  return t;
}

// Adds row `from` of src to row `to` of dst (rows of kHidden values): the references'
// only operation. Forward: X(n) = wte(token n) + wpe(n mod seq); backward: dwte(token n) and
// dwpe(n mod seq) sum dX(n) over n, from zero.
void add_row(std::vector<double>& dst, std::size_t to, const std::vector<double>& src,
             std::size_t from) {
  for (int j = 0; j < kHidden; ++j) dst[to * kHidden + j] += src[from * kHidden + j];
}

// Minimal traffic of each pass, in bytes.
template <class T>
double fwd_bytes() {
  return (static_cast<double>(distinct_ids()) + kSeq + kTokens) * kHidden * sizeof(T) +
         kTokens * sizeof(int);
}
template <class T>
double bwd_bytes() {
  using A = pk::acc_t<T>;
  return static_cast<double>(kTokens) * kHidden * sizeof(T) +
         2.0 * (static_cast<double>(distinct_ids()) + kSeq) * kHidden * sizeof(A) +
         kTokens * sizeof(int);
}

template <class T>
void bench_fwd(benchmark::State& state) {
  auto tokens = make_tokens();
  pk::View2<T, Exec> wte("wte", kVocab, kHidden), wpe("wpe", kSeq, kHidden),
      X("X", kTokens, kHidden);
  fill_formula(wte, 1);
  fill_formula(wpe, 2);
  pk::embedding_forward(Exec(), tokens, wte, wpe, kSeq, 0, X);
  {
    const auto ids = token_ids();
    const auto w = host_values(wte), p = host_values(wpe);
    std::vector<double> expected(static_cast<std::size_t>(kTokens) * kHidden, 0.0);
    for (int n = 0; n < kTokens; ++n)
      add_row(expected, n, w, ids[n]), add_row(expected, n, p, n % kSeq);
    check_output(state, "X", X, expected);
  }
  for (auto _ : state) {
    pk::embedding_forward(Exec(), tokens, wte, wpe, kSeq, 0, X);
    Kokkos::fence();
  }
  set_bytes(state, fwd_bytes<T>());
}

template <class T>
void bench_bwd(benchmark::State& state) {
  using A = pk::acc_t<T>;
  auto tokens = make_tokens();
  pk::View2<T, Exec> dX("dX", kTokens, kHidden);
  pk::View2<A, Exec> dwte("dwte", kVocab, kHidden), dwpe("dwpe", kSeq, kHidden);
  fill_formula(dX, 3);
  pk::embedding_backward(Exec(), tokens, dX, kSeq, 0, dwte, dwpe);  // onto zeros
  {
    const auto ids = token_ids();
    const auto dx = host_values(dX);
    std::vector<double> expected_wte(static_cast<std::size_t>(kVocab) * kHidden, 0.0),
        expected_wpe(static_cast<std::size_t>(kSeq) * kHidden, 0.0);
    for (int n = 0; n < kTokens; ++n)
      add_row(expected_wte, ids[n], dx, n), add_row(expected_wpe, n % kSeq, dx, n);
    check_output(state, "dwte", dwte, expected_wte);
    check_output(state, "dwpe", dwpe, expected_wpe);
  }
  for (auto _ : state) {
    pk::embedding_backward(Exec(), tokens, dX, kSeq, 0, dwte, dwpe);
    Kokkos::fence();
  }
  set_bytes(state, bwd_bytes<T>());
}

const bool registered = [] {
  const std::string s = std::to_string(kTokens) + "x" + std::to_string(kHidden);
  const std::size_t elements = static_cast<std::size_t>(kTokens) * kHidden;
  benchmark::RegisterBenchmark(("embedding/fwd/" + s).c_str(), bench_fwd<float>)->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/bwd/" + s).c_str(), bench_bwd<float>)->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/fwd/bf16/" + s).c_str(), bench_fwd<paraxis::bf16>)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/bwd/bf16/" + s).c_str(), bench_bwd<paraxis::bf16>)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/baseline_copy/" + s).c_str(), bench_copy<float>,
                               elements)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/baseline_copy/bf16/" + s).c_str(),
                               bench_copy<paraxis::bf16>, elements)
      ->UseRealTime();
  // The backward pass's own bytes (fp32 gradients: about 3x the [tokens, hidden] copy's).
  using paraxis::bench::copy_elements;
  benchmark::RegisterBenchmark(("embedding/baseline_copy/bwd_bytes/" + s).c_str(),
                               bench_copy<float>, copy_elements<float>(bwd_bytes<float>()))
      ->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/baseline_copy/bwd_bytes/bf16/" + s).c_str(),
                               bench_copy<paraxis::bf16>,
                               copy_elements<paraxis::bf16>(bwd_bytes<paraxis::bf16>()))
      ->UseRealTime();
  return true;
}();

}  // namespace
