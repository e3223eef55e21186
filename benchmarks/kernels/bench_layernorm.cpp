// LayerNorm forward/backward throughput at GPT-block shapes (tokens x hidden), fp32 and bf16
// storage, with a copy of the same [tokens, hidden] array in the same storage type
// (bench_util.hpp's bench_copy) as the bandwidth baseline of the same run, and a copy of the
// backward pass's bytes ("layernorm/baseline_copy/bwd_bytes/4096x512", bench_copy_bytes.hpp).
// bytes/s counts the minimal traffic: each input read once, each output written once
// (dgamma/dbeta read and written: they accumulate). Every iteration fences; rates use wall time
// (UseRealTime), which is what device work needs. Every row checks its outputs (Y, mean, rstd;
// dX, dgamma, dbeta) against layernorm_reference's fp64 loops on the same inputs
// (bench_check.hpp).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "bench_copy_bytes.hpp"
#include "bench_util.hpp"
#include "paraxis/kernels/layernorm.hpp"

namespace pk = paraxis::kernels;
using paraxis::bench::check_output;
using paraxis::bench::fill_formula;
using paraxis::bench::host_values;
using paraxis::bench::set_bytes;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
constexpr double kEps = 1e-5;

// LayerNorm (layernorm.hpp's definition: biased variance, rstd = 1/sqrt(var + eps)) and its
// gradients for dY in fp64, one row at a time; dgamma and dbeta summed from zero.
struct LnReference {
  std::vector<double> y, mean, rstd, dx, dgamma, dbeta;
};
LnReference layernorm_reference(int n, int h, const std::vector<double>& X,
                                const std::vector<double>& gamma, const std::vector<double>& beta,
                                const std::vector<double>& dY) {
  LnReference r{std::vector<double>(X.size()), std::vector<double>(n),
                std::vector<double>(n),        std::vector<double>(X.size()),
                std::vector<double>(h, 0.0),   std::vector<double>(h, 0.0)};
  for (int i = 0; i < n; ++i) {
    const std::size_t row = static_cast<std::size_t>(i) * h;
    double mu = 0, var = 0, mg = 0, mgx = 0;
    for (int j = 0; j < h; ++j) mu += X[row + j] / h;
    for (int j = 0; j < h; ++j) var += (X[row + j] - mu) * (X[row + j] - mu) / h;
    const double rs = 1.0 / std::sqrt(var + kEps);
    for (int j = 0; j < h; ++j) {
      const double xhat = (X[row + j] - mu) * rs, g = dY[row + j] * gamma[j];
      r.y[row + j] = xhat * gamma[j] + beta[j];
      mg += g / h;
      mgx += g * xhat / h;
      r.dgamma[j] += dY[row + j] * xhat;
      r.dbeta[j] += dY[row + j];
    }
    for (int j = 0; j < h; ++j)
      r.dx[row + j] = rs * (dY[row + j] * gamma[j] - mg - (X[row + j] - mu) * rs * mgx);
    r.mean[i] = mu;
    r.rstd[i] = rs;
  }
  return r;
}

template <class T>
struct LnData {
  using A = pk::acc_t<T>;
  int n, h;
  pk::View2<T, Exec> X, Y, dY, dX;
  pk::View1<T, Exec> gamma, beta;
  pk::View1<A, Exec> mean, rstd, dgamma, dbeta;
  LnData(int n_, int h_)
      : n(n_),
        h(h_),
        X("X", n, h),
        Y("Y", n, h),
        dY("dY", n, h),
        dX("dX", n, h),
        gamma("g", h),
        beta("b", h),
        mean("m", n),
        rstd("r", n),
        dgamma("dg", h),
        dbeta("db", h) {
    fill_formula(X, 1);
    fill_formula(dY, 2);
    fill_formula(gamma, 3);
    fill_formula(beta, 4);
    pk::layernorm_forward(Exec(), X, gamma, beta, kEps, Y, mean, rstd);
    Kokkos::fence();
  }
  LnReference reference() const {
    return layernorm_reference(n, h, host_values(X), host_values(gamma), host_values(beta),
                               host_values(dY));
  }
};

// Minimal traffic of each pass, in bytes.
template <class T>
double fwd_bytes(int n, int h) {
  using A = pk::acc_t<T>;
  return 2.0 * n * h * sizeof(T) + 2.0 * h * sizeof(T) + 2.0 * n * sizeof(A);
}
template <class T>
double bwd_bytes(int n, int h) {
  using A = pk::acc_t<T>;
  return 3.0 * n * h * sizeof(T) + 1.0 * h * sizeof(T) + 2.0 * n * sizeof(A) + 4.0 * h * sizeof(A);
}

template <class T>
void bench_fwd(benchmark::State& state, int n, int h) {
  LnData<T> d(n, h);
  const LnReference ref = d.reference();
  check_output(state, "Y", d.Y, ref.y);
  check_output(state, "mean", d.mean, ref.mean);
  check_output(state, "rstd", d.rstd, ref.rstd);
  for (auto _ : state) {
    pk::layernorm_forward(Exec(), d.X, d.gamma, d.beta, kEps, d.Y, d.mean, d.rstd);
    Kokkos::fence();
  }
  set_bytes(state, fwd_bytes<T>(n, h));
}

template <class T>
void bench_bwd(benchmark::State& state, int n, int h) {
  LnData<T> d(n, h);
  pk::layernorm_backward(Exec(), d.dY, d.X, d.gamma, d.mean, d.rstd, d.dX, d.dgamma, d.dbeta);
  const LnReference ref = d.reference();
  check_output(state, "dX", d.dX, ref.dx);
  check_output(state, "dgamma", d.dgamma, ref.dgamma);
  check_output(state, "dbeta", d.dbeta, ref.dbeta);
  for (auto _ : state) {
    pk::layernorm_backward(Exec(), d.dY, d.X, d.gamma, d.mean, d.rstd, d.dX, d.dgamma, d.dbeta);
    Kokkos::fence();
  }
  set_bytes(state, bwd_bytes<T>(n, h));
}

const bool registered = [] {
  // Two in-cache shapes and one past the cache (4x the last-level cache in bf16, more in fp32:
  // bench_util.hpp; one shape for both storage types, so they share the name).
  for (auto [n, h] : {std::pair{4096, 512}, std::pair{1024, 1536},
                      std::pair{paraxis::bench::past_cache_rows<paraxis::bf16>(512), 512}}) {
    if (n == 0) continue;  // PARAXIS_BENCH_IN_CACHE_ONLY
    const std::string s = std::to_string(n) + "x" + std::to_string(h);
    benchmark::RegisterBenchmark(("layernorm/fwd/" + s).c_str(), bench_fwd<float>, n, h)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("layernorm/bwd/" + s).c_str(), bench_bwd<float>, n, h)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("layernorm/fwd/bf16/" + s).c_str(), bench_fwd<paraxis::bf16>, n,
                                 h)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("layernorm/bwd/bf16/" + s).c_str(), bench_bwd<paraxis::bf16>, n,
                                 h)
        ->UseRealTime();
    const std::size_t elements = static_cast<std::size_t>(n) * h;
    benchmark::RegisterBenchmark(("layernorm/baseline_copy/" + s).c_str(),
                                 paraxis::bench::bench_copy<float>, elements)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("layernorm/baseline_copy/bf16/" + s).c_str(),
                                 paraxis::bench::bench_copy<paraxis::bf16>, elements)
        ->UseRealTime();
    // The backward pass moves 1.5x the forward's bytes: its own copy of the same bytes (a
    // larger working set may leave the cache the [n, h] copy stays in).
    benchmark::RegisterBenchmark(("layernorm/baseline_copy/bwd_bytes/" + s).c_str(),
                                 paraxis::bench::bench_copy<float>,
                                 paraxis::bench::copy_elements<float>(bwd_bytes<float>(n, h)))
        ->UseRealTime();
    benchmark::RegisterBenchmark(
        ("layernorm/baseline_copy/bwd_bytes/bf16/" + s).c_str(),
        paraxis::bench::bench_copy<paraxis::bf16>,
        paraxis::bench::copy_elements<paraxis::bf16>(bwd_bytes<paraxis::bf16>(n, h)))
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
