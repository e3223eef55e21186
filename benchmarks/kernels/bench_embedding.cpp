// Token + position embedding throughput at a GPT-2-like shape: 4096 tokens (4 sequences of
// 1024), hidden 512, vocabulary 50304, fp32 and bf16 storage (the gradients dwte/dwpe are fp32,
// as ParamStore holds them), with a copy of the same [tokens, hidden] elements in the same
// storage type in the same run ("embedding/baseline_copy/4096x512",
// "embedding/baseline_copy/bf16/4096x512"). bytes/s counts the minimal traffic: forward reads
// the distinct vocabulary rows the tokens use, the position rows and the tokens, and writes X;
// backward reads dX and the tokens and reads + writes the distinct dwte rows and the dwpe
// rows, and has its own copy of the same bytes ("embedding/baseline_copy/bwd_bytes/4096x512",
// bench_copy_bytes.hpp). A second token count, past the cache (past_cache_rows: a
// [tokens, hidden] copy of at least 4x the last-level cache), has the same four rows with its
// own copies. Every iteration fences; rates use wall time (UseRealTime).
// Every row checks its output (X; dwte and dwpe) against the sums of rows of the same inputs
// in fp64 on the host (bench_check.hpp).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_copy_bytes.hpp"
#include "bench_floors.hpp"
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

// kTokens: the in-cache shape; the past-cache one has past_cache_rows<T>(kHidden) tokens.
constexpr int kTokens = 4096, kSeq = 1024, kHidden = 512, kVocab = 50304;

// Token ids spread over the vocabulary by a fixed integer hash (no clock, no RNG state).
std::vector<int> token_ids(int tokens) {
  std::vector<int> t(tokens);
  for (int i = 0; i < tokens; ++i) {
    std::uint64_t z = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i + 1);
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    t[i] = static_cast<int>((z ^ (z >> 29)) % static_cast<std::uint64_t>(kVocab));
  }
  return t;
}

// The vocabulary rows the kernels touch.
long distinct_ids(int tokens) {
  std::vector<char> seen(kVocab, 0);
  long d = 0;
  for (int t : token_ids(tokens))
    if (!seen[t]) ++d, seen[t] = 1;
  return d;
}

pk::View1<int, Exec> make_tokens(int tokens) {
  const auto ids = token_ids(tokens);
  pk::View1<int, Exec> t("tokens", tokens);
  auto h = Kokkos::create_mirror_view(t);
  for (int i = 0; i < tokens; ++i) h(i) = ids[i];
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

// Minimal traffic of each pass, in bytes (positions = false: without the position rows, the floors'
// bytes).
template <class T>
double fwd_bytes(int tokens, bool positions = true) {
  return (static_cast<double>(distinct_ids(tokens)) + (positions ? kSeq : 0) + tokens) * kHidden *
             sizeof(T) +
         tokens * sizeof(int);
}
template <class T>
double bwd_bytes(int tokens, bool positions = true) {
  using A = pk::acc_t<T>;
  return static_cast<double>(tokens) * kHidden * sizeof(T) +
         2.0 * (static_cast<double>(distinct_ids(tokens)) + (positions ? kSeq : 0)) * kHidden *
             sizeof(A) +
         tokens * sizeof(int);
}

template <class T>
void bench_fwd(benchmark::State& state, int n_tokens) {
  auto tokens = make_tokens(n_tokens);
  pk::View2<T, Exec> wte("wte", kVocab, kHidden), wpe("wpe", kSeq, kHidden),
      X("X", n_tokens, kHidden);
  fill_formula(wte, 1);
  fill_formula(wpe, 2);
  pk::embedding_forward(Exec(), tokens, wte, wpe, kSeq, 0, X);
  {
    const auto ids = token_ids(n_tokens);
    const auto w = host_values(wte), p = host_values(wpe);
    std::vector<double> expected(static_cast<std::size_t>(n_tokens) * kHidden, 0.0);
    for (int n = 0; n < n_tokens; ++n)
      add_row(expected, n, w, ids[n]), add_row(expected, n, p, n % kSeq);
    check_output(state, "X", X, expected);
  }
  for (auto _ : state) {
    pk::embedding_forward(Exec(), tokens, wte, wpe, kSeq, 0, X);
    Kokkos::fence();
  }
  set_bytes(state, fwd_bytes<T>(n_tokens));
}

template <class T>
void bench_bwd(benchmark::State& state, int n_tokens) {
  using A = pk::acc_t<T>;
  auto tokens = make_tokens(n_tokens);
  pk::View2<T, Exec> dX("dX", n_tokens, kHidden);
  pk::View2<A, Exec> dwte("dwte", kVocab, kHidden), dwpe("dwpe", kSeq, kHidden);
  fill_formula(dX, 3);
  pk::embedding_backward(Exec(), tokens, dX, kSeq, 0, dwte, dwpe);  // onto zeros
  {
    const auto ids = token_ids(n_tokens);
    const auto dx = host_values(dX);
    std::vector<double> expected_wte(static_cast<std::size_t>(kVocab) * kHidden, 0.0),
        expected_wpe(static_cast<std::size_t>(kSeq) * kHidden, 0.0);
    for (int n = 0; n < n_tokens; ++n)
      add_row(expected_wte, ids[n], dx, n), add_row(expected_wpe, n % kSeq, dx, n);
    check_output(state, "dwte", dwte, expected_wte);
    check_output(state, "dwpe", dwpe, expected_wpe);
  }
  for (auto _ : state) {
    pk::embedding_backward(Exec(), tokens, dX, kSeq, 0, dwte, dwpe);
    Kokkos::fence();
  }
  set_bytes(state, bwd_bytes<T>(n_tokens));
}

// Floors (bench_floors.hpp), same tokens, tables and bytes as the passes: forward gathers the
// token rows of wte into X by memcpy (no position rows); backward adds each dX row onto its
// token's dwte row in token order (no bucketing, no dwpe).
template <class T>
void bench_fwd_floor(benchmark::State& state, int n_tokens) {
  auto tokens = make_tokens(n_tokens);
  pk::View2<T, Exec> wte("wte", kVocab, kHidden), X("X", n_tokens, kHidden);
  fill_formula(wte, 1);
  if constexpr (paraxis::bench::floors::host_v<Exec>) {
    auto run = [&] {
      paraxis::bench::floors::gather_rows<Exec>(pk::View2<const T, Exec>(wte),
                                                pk::View1<const int, Exec>(tokens), X);
    };
    run();
    const auto ids = token_ids(n_tokens);
    const auto w = host_values(wte);
    std::vector<double> expected(static_cast<std::size_t>(n_tokens) * kHidden, 0.0);
    for (int n = 0; n < n_tokens; ++n) add_row(expected, n, w, ids[n]);
    check_output(state, "X", X, expected, paraxis::bench::kExact);
    for (auto _ : state) {
      run();
      Kokkos::fence();
    }
  }
  set_bytes(state, fwd_bytes<T>(n_tokens, false));
}

template <class T>
void bench_bwd_floor(benchmark::State& state, int n_tokens) {
  using A = pk::acc_t<T>;
  auto tokens = make_tokens(n_tokens);
  pk::View2<T, Exec> dX("dX", n_tokens, kHidden);
  pk::View2<A, Exec> dwte("dwte", kVocab, kHidden);
  fill_formula(dX, 3);
  if constexpr (paraxis::bench::floors::host_v<Exec>) {
    auto run = [&] {
      paraxis::bench::floors::scatter_add_rows<Exec>(pk::View2<const T, Exec>(dX),
                                                     pk::View1<const int, Exec>(tokens), dwte);
    };
    run();
    const auto ids = token_ids(n_tokens);
    const auto dx = host_values(dX);
    std::vector<double> expected(static_cast<std::size_t>(kVocab) * kHidden, 0.0);
    for (int n = 0; n < n_tokens; ++n) add_row(expected, ids[n], dx, n);
    check_output(state, "dwte", dwte, expected);
    for (auto _ : state) {
      run();
      Kokkos::fence();
    }
  }
  set_bytes(state, bwd_bytes<T>(n_tokens, false));
}

// The rows of one storage type at `tokens` tokens: forward, backward, the copy of the same
// [tokens, hidden] elements and the copy of the backward pass's own bytes (fp32 gradients:
// about 3x the [tokens, hidden] copy's).
template <class T>
void register_shape(int tokens) {
  const std::string t = std::is_same_v<T, float> ? "" : "bf16/";
  const std::string s = std::to_string(tokens) + "x" + std::to_string(kHidden);
  const std::size_t elements = static_cast<std::size_t>(tokens) * kHidden;
  using paraxis::bench::copy_elements;
  benchmark::RegisterBenchmark(("embedding/fwd/" + t + s).c_str(), bench_fwd<T>, tokens)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/bwd/" + t + s).c_str(), bench_bwd<T>, tokens)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/fwd/floor/gather/" + t + s).c_str(), bench_fwd_floor<T>,
                               tokens)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/bwd/floor/scatter/" + t + s).c_str(), bench_bwd_floor<T>,
                               tokens)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/baseline_copy/" + t + s).c_str(), bench_copy<T>,
                               elements)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("embedding/baseline_copy/bwd_bytes/" + t + s).c_str(),
                               bench_copy<T>, copy_elements<T>(bwd_bytes<T>(tokens)))
      ->UseRealTime();
}

// In the cache (4096 tokens) and past it (a [tokens, hidden] copy of at least 4x the LLC).
const bool registered = [] {
  for (int tokens : {kTokens, paraxis::bench::past_cache_rows<float>(kHidden)})
    if (tokens > 0) register_shape<float>(tokens);
  for (int tokens : {kTokens, paraxis::bench::past_cache_rows<paraxis::bf16>(kHidden)})
    if (tokens > 0) register_shape<paraxis::bf16>(tokens);
  return true;
}();

}  // namespace
