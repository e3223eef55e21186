// GEMM throughput: paraxis's portable kernel, the vendor path (KokkosBlas -> OpenBLAS on host)
// and a direct cblas_sgemm baseline in the same run, at 512^3, at the shapes of a transformer
// MLP with tokens = hidden = 512 (up-projection 512x2048x512 and down-projection 512x512x2048,
// named MxNxK), at the backward products of that MLP (weight gradient x^T dy: TN; input
// gradient dy w^T: NT) and at inputs/small.yaml's attention products (32 = micro_batch x heads
// matrices of seq 128 x head_dim 64: scores q k^T, NT, and context p v, NN). All row-major
// fp32 (alpha 1, beta 0) unless the name says bf16. Each iteration fences, so the timer sees
// finished work only.
//
// `gemm/portable` rows are labelled with the C tile the host kernel chose for the space's
// thread count; on a threaded host space `gemm/portable-tile/<shape>/<mc>x<nc>` rows run the
// same products with explicit tiles (the choice against its alternatives).
//
// `openblas` rows are single-threaded (the Serial kernel's baseline); on a threaded execution
// space `openblas-mt` rows give OpenBLAS as many threads as the space has (the threaded
// kernel's baseline).
//
// Every row checks its C (outside the timed loop, bench_check.hpp) against the fp64 product of
// the same inputs on the host, computed once per shape. The inputs are multiples of 1/16 in
// [-0.5, 0.5], exact in bf16 too, so the bf16 row shares the fp32 rows' reference.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench_check.hpp"
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
  pk::Trans ta = pk::Trans::N, tb = pk::Trans::N;
  int batch = 0;  // 0: one rank-2 GEMM; > 0: gemm_batched over rank-3 Views
};
const Shape kCube{512, 512, 512};
const Shape kUp{512, 2048, 512};
const Shape kDown{512, 512, 2048};
const Shape kUpWeightGrad{512, 2048, 512, pk::Trans::T, pk::Trans::N};
const Shape kUpInputGrad{512, 512, 2048, pk::Trans::N, pk::Trans::T};
const Shape kAttnScores{128, 128, 64, pk::Trans::N, pk::Trans::T, 32};
const Shape kAttnContext{128, 64, 128, pk::Trans::N, pk::Trans::N, 32};

// "512" is the cube; the rest spell out MxNxK, a batch count in front ("32x128x128x64") and
// the transposes after ("/TN") when not NN.
std::string shape_name(const Shape& s) {
  std::string name =
      s.m == s.n && s.n == s.k && s.batch == 0
          ? std::to_string(s.m)
          : std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
  if (s.batch > 0) name = "attn/" + std::to_string(s.batch) + "x" + name;
  if (s.ta != pk::Trans::N || s.tb != pk::Trans::N)
    name += std::string("/") + char(s.ta) + char(s.tb);
  return name;
}

template <class V>
void fill_formula(const V& v, int salt) {
  using T = typename V::non_const_value_type;
  auto h = Kokkos::create_mirror_view(v);
  const std::size_t rows = v.span() / v.extent(V::rank - 1), cols = v.extent(V::rank - 1);
  T* data = h.data();
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j)
      data[i * cols + j] = T(static_cast<float>((i * 7 + j * 13 + salt) % 17) / 16.0f - 0.5f);
  Kokkos::deep_copy(v, h);
}

void set_rate(benchmark::State& state, const Shape& s) {
  const double batch = s.batch > 0 ? s.batch : 1;
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * batch * s.m * s.n * s.k,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// OpenBLAS defaults to one thread per core; `openblas`, `vendor` and the Serial portable
// kernel they are compared with are single-threaded (the vendor path calls the same library).
void set_blas_threads(int threads) {
#ifdef PARAXIS_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
#else
  (void)threads;
#endif
}

// Extents of op's operand: rows x cols of the stored matrix.
int stored_rows(pk::Trans t, int r, int c) {
  return t == pk::Trans::N ? r : c;
}
int stored_cols(pk::Trans t, int r, int c) {
  return t == pk::Trans::N ? c : r;
}

// op(A) op(B) of every matrix of the batch in fp64, from the inputs the rows fill (salts 1
// and 2), row-major [batch][m][n]: the reference of every row of the shape, computed once.
const std::vector<double>& reference_product(const Shape& s) {
  static std::map<std::string, std::vector<double>> cache;
  std::vector<double>& C = cache[shape_name(s)];
  if (!C.empty()) return C;
  const int batch = s.batch > 0 ? s.batch : 1;
  const int ar = stored_rows(s.ta, s.m, s.k), ac = stored_cols(s.ta, s.m, s.k);
  const int br = stored_rows(s.tb, s.k, s.n), bc = stored_cols(s.tb, s.k, s.n);
  Kokkos::View<double***, Kokkos::LayoutRight, Kokkos::HostSpace> A("A", batch, ar, ac),
      B("B", batch, br, bc);
  fill_formula(A, 1);
  fill_formula(B, 2);
  C.assign(static_cast<std::size_t>(batch) * s.m * s.n, 0.0);
  std::vector<double> b_row(s.n);
  for (int p = 0; p < batch; ++p)
    for (int l = 0; l < s.k; ++l) {
      for (int j = 0; j < s.n; ++j) b_row[j] = s.tb == pk::Trans::N ? B(p, l, j) : B(p, j, l);
      for (int i = 0; i < s.m; ++i) {
        const double a = s.ta == pk::Trans::N ? A(p, i, l) : A(p, l, i);
        double* c = &C[(static_cast<std::size_t>(p) * s.m + i) * s.n];
        for (int j = 0; j < s.n; ++j) c[j] += a * b_row[j];
      }
    }
  return C;
}

template <class T>
void bench_paraxis(benchmark::State& state, Shape s, pk::GemmVariant v) {
  set_blas_threads(1);
  using TC = std::conditional_t<std::is_same_v<T, paraxis::bf16>, float, T>;
  const int ar = stored_rows(s.ta, s.m, s.k), ac = stored_cols(s.ta, s.m, s.k);
  const int br = stored_rows(s.tb, s.k, s.n), bc = stored_cols(s.tb, s.k, s.n);
  if (s.batch == 0) {
    Kokkos::View<T**, Mem> A("A", ar, ac), B("B", br, bc);
    Kokkos::View<TC**, Mem> C("C", s.m, s.n);
    fill_formula(A, 1);
    fill_formula(B, 2);
    pk::gemm(Exec(), s.ta, s.tb, 1.0, A, B, 0.0, C, v);
    paraxis::bench::check_output(state, "C", C, reference_product(s));
    for (auto _ : state) {
      pk::gemm(Exec(), s.ta, s.tb, 1.0, A, B, 0.0, C, v);
      Kokkos::fence();
    }
  } else {
    Kokkos::View<T***, Mem> A("A", s.batch, ar, ac), B("B", s.batch, br, bc);
    Kokkos::View<TC***, Mem> C("C", s.batch, s.m, s.n);
    fill_formula(A, 1);
    fill_formula(B, 2);
    pk::gemm_batched(Exec(), s.ta, s.tb, 1.0, A, B, 0.0, C, v);
    paraxis::bench::check_output(state, "C", C, reference_product(s));
    for (auto _ : state) {
      pk::gemm_batched(Exec(), s.ta, s.tb, 1.0, A, B, 0.0, C, v);
      Kokkos::fence();
    }
  }
  set_rate(state, s);
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    // The C tile the host kernel picked for this space's thread count (fp32 register block).
    using Tiles = pk::detail::gemm_tiles<Exec, float>;
    const auto t =
        pk::detail::gemm_host_tile_shape(s.m, s.n, s.batch > 0 ? s.batch : 1, Exec().concurrency(),
                                         Tiles::MR, Tiles::NR, Tiles::MC, Tiles::NC);
    state.SetLabel("tile " + std::to_string(t.mc) + "x" + std::to_string(t.nc));
  }
}

// The portable kernel with an explicit C tile (rank 2, fp32, NN): the run-time choice against
// its alternatives on a threaded host space.
void bench_tile(benchmark::State& state, Shape s, pk::detail::GemmTileShape t) {
  Kokkos::View<float**, Mem> A("A", s.m, s.k), B("B", s.k, s.n), C("C", s.m, s.n);
  fill_formula(A, 1);
  fill_formula(B, 2);
  pk::detail::gemm_portable(Exec(), pk::Trans::N, pk::Trans::N, 1.0, A, B, 0.0, C, t);
  paraxis::bench::check_output(state, "C", C, reference_product(s));
  for (auto _ : state) {
    pk::detail::gemm_portable(Exec(), pk::Trans::N, pk::Trans::N, 1.0, A, B, 0.0, C, t);
    Kokkos::fence();
  }
  set_rate(state, s);
}

#ifdef PARAXIS_HAVE_OPENBLAS
void bench_openblas(benchmark::State& state, Shape s, int threads) {
  set_blas_threads(threads);
  const int batch = s.batch > 0 ? s.batch : 1;
  const int ar = stored_rows(s.ta, s.m, s.k), ac = stored_cols(s.ta, s.m, s.k);
  const int br = stored_rows(s.tb, s.k, s.n), bc = stored_cols(s.tb, s.k, s.n);
  Kokkos::View<float***, Kokkos::LayoutRight, Kokkos::HostSpace> A("A", batch, ar, ac),
      B("B", batch, br, bc), C("C", batch, s.m, s.n);
  fill_formula(A, 1);
  fill_formula(B, 2);
  const auto ta = s.ta == pk::Trans::N ? CblasNoTrans : CblasTrans;
  const auto tb = s.tb == pk::Trans::N ? CblasNoTrans : CblasTrans;
  auto product = [&] {
    for (int p = 0; p < batch; ++p)
      cblas_sgemm(CblasRowMajor, ta, tb, s.m, s.n, s.k, 1.0f, &A(p, 0, 0), ac, &B(p, 0, 0), bc,
                  0.0f, &C(p, 0, 0), s.n);
  };
  product();
  paraxis::bench::check_output(state, "C", C, reference_product(s));
  for (auto _ : state) {
    product();
    benchmark::ClobberMemory();
  }
  set_blas_threads(1);
  set_rate(state, s);
}
#endif

void register_family(const Shape& s) {
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
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible) {
    benchmark::RegisterBenchmark(("gemm/openblas" + tail).c_str(), bench_openblas, s, 1)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    // The threaded baseline, registered only where the space is threaded. Registration runs
    // before Kokkos::initialize, so the thread count is read when the benchmark runs.
    if (!pk::detail::is_serial_space<Exec>())
      benchmark::RegisterBenchmark(
          ("gemm/openblas-mt" + tail).c_str(),
          [s](benchmark::State& state) { bench_openblas(state, s, Exec().concurrency()); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  }
#endif
}

// Registered at static-initialisation time so --benchmark_filter sees them; the runs
// themselves happen after Kokkos is initialised in bench_main.
const bool registered = [] {
  for (const Shape& s : {kCube, kUp, kDown, kUpWeightGrad, kUpInputGrad, kAttnScores, kAttnContext})
    register_family(s);
  // Explicit tiles, threaded host spaces only (on Serial the choice is always the largest).
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible &&
                !pk::detail::is_serial_space<Exec>())
    for (const Shape& s : {kCube, kUp, kDown})
      for (auto t : {pk::detail::GemmTileShape{512, 512}, pk::detail::GemmTileShape{256, 512},
                     pk::detail::GemmTileShape{512, 256}, pk::detail::GemmTileShape{256, 256},
                     pk::detail::GemmTileShape{128, 512}, pk::detail::GemmTileShape{128, 128}})
        benchmark::RegisterBenchmark(("gemm/portable-tile/" + shape_name(s) + "/" +
                                      std::to_string(t.mc) + "x" + std::to_string(t.nc))
                                         .c_str(),
                                     bench_tile, s, t)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
  benchmark::RegisterBenchmark("gemm/portable-bf16/512", bench_paraxis<paraxis::bf16>, kCube,
                               pk::GemmVariant::portable)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  return true;
}();

}  // namespace
