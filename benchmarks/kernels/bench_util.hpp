// Helpers shared by the kernel benchmarks: deterministic inputs, the bytes/s counter and the
// copy baseline.
#pragma once

#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cstddef>

#include "bench_check.hpp"

namespace paraxis::bench {

// Fills v (any rank, any storage type) from a formula of the element index: values in
// [-1, 1), never from the clock, different per salt.
template <class V>
void fill_formula(const V& v, int salt) {
  using T = typename V::non_const_value_type;
  auto h = Kokkos::create_mirror_view(v);
  for (std::size_t k = 0; k < h.span(); ++k)
    h.data()[k] =
        T(static_cast<float>((k * 7 + static_cast<std::size_t>(salt)) % 29) / 14.0f - 1.0f);
  Kokkos::deep_copy(v, h);
}

// GB/s as Google Benchmark reports rates: bytes moved per iteration (1 KiB = 1024 B).
inline void set_bytes(benchmark::State& state, double bytes) {
  state.counters["bytes/s"] = benchmark::Counter(
      bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::OneK::kIs1024);
}

// The copy baseline of a kernel family: Kokkos::deep_copy of `elements` values of T (read once,
// written once), registered beside the family's kernels so their bytes/s and the copy's come
// from the same run. Each memory-bound family registers one per shape and storage type, e.g.
// "layernorm/baseline_copy/4096x512" (fp32) and "layernorm/baseline_copy/bf16/4096x512".
// Checked like every row: the copy must equal its source exactly.
template <class T>
void bench_copy(benchmark::State& state, std::size_t elements) {
  using Exec = Kokkos::DefaultExecutionSpace;
  Kokkos::View<T*, Kokkos::LayoutRight, Exec::memory_space> x("copy_src", elements),
      y("copy_dst", elements);
  fill_formula(x, 5);
  Kokkos::deep_copy(y, x);
  check_output(state, "copy", y, host_values(x), kExact);
  for (auto _ : state) {
    Kokkos::deep_copy(y, x);
    Kokkos::fence();
  }
  set_bytes(state, 2.0 * static_cast<double>(elements) * sizeof(T));
}

}  // namespace paraxis::bench
