// GEMM throughput: paraxis's portable kernel, the vendor path (KokkosBlas -> OpenBLAS on host)
// and a direct single-threaded cblas_sgemm baseline in the same run, at 512^3 and at the
// shapes of a transformer MLP with tokens = hidden = 512 (up-projection 512x2048x512 and
// down-projection 512x512x2048, named MxNxK). All row-major fp32 (C = A*B, alpha 1, beta 0)
// unless the name says bf16. Each iteration fences, so the timer sees finished work only.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <string>

#include "paraxis/kernels/gemm.hpp"

#ifdef PARAXIS_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace pk = paraxis::kernels;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;

struct Shape {
  int m, n, k;
};
// "512" is the cube; the rest spell out MxNxK.
const Shape kCube{512, 512, 512};
const Shape kUp{512, 2048, 512};
const Shape kDown{512, 512, 2048};

std::string shape_name(const Shape& s) {
  if (s.m == s.n && s.n == s.k) return std::to_string(s.m);
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

template <class V>
void fill_formula(const V& v, int salt) {
  using T = typename V::non_const_value_type;
  auto h = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < v.extent(0); ++i)
    for (std::size_t j = 0; j < v.extent(1); ++j)
      h(i, j) = T(static_cast<float>((i * 7 + j * 13 + salt) % 17) / 16.0f - 0.5f);
  Kokkos::deep_copy(v, h);
}

void set_rate(benchmark::State& state, const Shape& s) {
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * s.m * s.n * s.k, benchmark::Counter::kIsIterationInvariantRate);
}

// OpenBLAS defaults to one thread per core; every BLAS figure here is single-threaded, like
// the Serial portable kernel it is compared with (the vendor path calls the same library).
void single_thread_blas() {
#ifdef PARAXIS_HAVE_OPENBLAS
  openblas_set_num_threads(1);
#endif
}

template <class T>
void bench_paraxis(benchmark::State& state, Shape s, pk::GemmVariant v) {
  single_thread_blas();
  Kokkos::View<T**, Mem> A("A", s.m, s.k), B("B", s.k, s.n);
  Kokkos::View<std::conditional_t<std::is_same_v<T, paraxis::bf16>, float, T>**, Mem> C("C", s.m,
                                                                                        s.n);
  fill_formula(A, 1);
  fill_formula(B, 2);
  Kokkos::fence();
  for (auto _ : state) {
    pk::gemm(Exec(), pk::Trans::N, pk::Trans::N, 1.0, A, B, 0.0, C, v);
    Kokkos::fence();
  }
  set_rate(state, s);
}

#ifdef PARAXIS_HAVE_OPENBLAS
void bench_openblas(benchmark::State& state, Shape s) {
  single_thread_blas();
  Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> A("A", s.m, s.k), B("B", s.k, s.n),
      C("C", s.m, s.n);
  fill_formula(A, 1);
  fill_formula(B, 2);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, A.data(), s.k,
                B.data(), s.n, 0.0f, C.data(), s.n);
    benchmark::ClobberMemory();
  }
  set_rate(state, s);
}
#endif

// Registered at static-initialisation time so --benchmark_filter sees them; the runs
// themselves happen after Kokkos is initialised in bench_main.
const bool registered = [] {
  for (const Shape& s : {kCube, kUp, kDown}) {
    const std::string tail = "/" + shape_name(s);
    benchmark::RegisterBenchmark(("gemm/portable" + tail).c_str(), bench_paraxis<float>, s,
                                 pk::GemmVariant::portable)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    if (pk::gemm_vendor_applies<Kokkos::View<float**, Mem>, Kokkos::View<float**, Mem>,
                                Kokkos::View<float**, Mem>>())
      benchmark::RegisterBenchmark(("gemm/vendor" + tail).c_str(), bench_paraxis<float>, s,
                                   pk::GemmVariant::vendor)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
#ifdef PARAXIS_HAVE_OPENBLAS
    if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible)
      benchmark::RegisterBenchmark(("gemm/openblas" + tail).c_str(), bench_openblas, s)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
#endif
  }
  benchmark::RegisterBenchmark("gemm/portable-bf16/512", bench_paraxis<paraxis::bf16>, kCube,
                               pk::GemmVariant::portable)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  return true;
}();

}  // namespace
