// Helpers shared by the kernel benchmarks: deterministic inputs, the bytes/s counter and the
// copy baseline.
#pragma once

#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <string>

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

// The last-level cache: the size of the highest-level data or unified cache of cpu 0, from
// sysfs (/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}; "32768K"), read once.
// Where sysfs says nothing (not Linux, a container hiding it) 32 MiB is assumed and `source`
// says so; bench_main records both in the benchmark context (llc_bytes, llc_source).
struct LastLevelCache {
  std::size_t bytes;
  std::string source;
};
inline LastLevelCache read_last_level_cache() {
  const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index";
  int best_level = 0;
  std::size_t best = 0;
  for (int i = 0; i < 16; ++i) {
    std::ifstream level(dir + std::to_string(i) + "/level"),
        type(dir + std::to_string(i) + "/type"), size(dir + std::to_string(i) + "/size");
    int l = 0;
    std::string t, sz;
    if (!(level >> l) || !(type >> t) || !(size >> sz) || t == "Instruction" || l < best_level)
      continue;
    const std::size_t unit = sz.back() == 'K' ? 1024 : sz.back() == 'M' ? 1024 * 1024 : 1;
    const std::size_t v = std::stoull(sz) * unit;
    if (l > best_level || v > best) best_level = l, best = v;
  }
  if (best == 0) return {std::size_t(32) << 20, "assumed (sysfs has no cache sizes)"};
  return {best, "sysfs cpu0 L" + std::to_string(best_level)};
}
inline const LastLevelCache& last_level_cache() {
  static const LastLevelCache llc = read_last_level_cache();
  return llc;
}

// The past-cache shape of a memory-bound family: the number of rows of `row_elements` values
// of T whose copy (bench_copy: each value read and written once) moves at least 4x the
// last-level cache, rounded up to a multiple of 64 rows. Every kernel of the family moves at
// least the copy's bytes at that shape, so it runs from memory, not from the cache.
// 0 (no such shape: the registering loops skip it) when PARAXIS_BENCH_IN_CACHE_ONLY is set, as
// the default suite's bench_kernels_rows_checked does (hundreds of MB per row, checked in fp64).
template <class T>
int past_cache_rows(std::size_t row_elements) {
  if (std::getenv("PARAXIS_BENCH_IN_CACHE_ONLY")) return 0;
  const double bytes = 4.0 * static_cast<double>(last_level_cache().bytes);
  const double row_bytes = 2.0 * static_cast<double>(row_elements) * sizeof(T);
  const long long rows = static_cast<long long>(bytes / row_bytes + 0.999999);
  return static_cast<int>((rows + 63) / 64 * 64);
}

}  // namespace paraxis::bench
