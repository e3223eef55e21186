// Elementwise kernels of a GPT block at its shapes (tokens x hidden), fp32 and bf16 storage:
// GeLU forward/backward, bias add and its gradient, the residual add (add_inplace), scaling,
// precision conversion and the row gather of expert dispatch. Each family registers a copy of
// the same elements at the same shape and storage type in the same run
// ("gelu/baseline_copy/4096x512", "gelu/baseline_copy/bf16/4096x512"): a kernel's bytes/s over
// its copy's is how close it gets to the bandwidth it could have. bytes/s counts the minimal
// traffic: every input read once, every output written once (in-place outputs read and
// written; the bias gradient reads dY and reads and writes its fp32 accumulator). Every
// iteration fences; rates use wall time (UseRealTime), which is what device work needs.
// Every row runs its kernel once before the timed loop and checks the output against the fp64
// formula of each element on the host copies of the same inputs (bench_check.hpp); copies
// (gather, bf16 -> fp32) exactly.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench_floors.hpp"
#include "bench_util.hpp"
#include "paraxis/kernels/elementwise.hpp"

namespace pk = paraxis::kernels;
using paraxis::bench::bench_copy;
using paraxis::bench::check_output;
using paraxis::bench::fill_formula;
using paraxis::bench::host_values;
using paraxis::bench::kExact;
using paraxis::bench::set_bytes;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using paraxis::bf16;

// The references: f of each element of x, of (x, y) element pairs, or of element k and its
// column k % h.
template <class F>
std::vector<double> each(const std::vector<double>& x, F f) {
  std::vector<double> r(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) r[k] = f(x[k]);
  return r;
}
template <class F>
std::vector<double> each(const std::vector<double>& x, const std::vector<double>& y, F f) {
  std::vector<double> r(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) r[k] = f(x[k], y[k % y.size()]);
  return r;
}

// GELU, tanh form (docs/model.md), and its derivative, in fp64: 0.5 x (1 + tanh z),
// z = sqrt(2/pi) (x + 0.044715 x^3).
constexpr double kSqrt2OverPi = 0.79788456080286536;
double gelu_reference(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}
double gelu_derivative_reference(double x) {
  const double t = std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
}

template <class T>
void gelu_fwd(benchmark::State& state, int n, int h) {
  pk::View2<T, Exec> X("X", n, h), Y("Y", n, h);
  fill_formula(X, 1);
  pk::gelu_forward(Exec(), X, Y);
  check_output(state, "Y", Y, each(host_values(X), gelu_reference));
  for (auto _ : state) {
    pk::gelu_forward(Exec(), X, Y);
    Kokkos::fence();
  }
  set_bytes(state, 2.0 * n * h * sizeof(T));
}

template <class T>
void gelu_bwd(benchmark::State& state, int n, int h) {
  pk::View2<T, Exec> X("X", n, h), dY("dY", n, h), dX("dX", n, h);
  fill_formula(X, 1);
  fill_formula(dY, 2);
  pk::gelu_backward(Exec(), X, dY, dX);
  check_output(state, "dX", dX, each(host_values(X), host_values(dY), [](double x, double dy) {
                 return dy * gelu_derivative_reference(x);
               }));
  for (auto _ : state) {
    pk::gelu_backward(Exec(), X, dY, dX);
    Kokkos::fence();
  }
  set_bytes(state, 3.0 * n * h * sizeof(T));
}

template <class T>
void bias_add(benchmark::State& state, int n, int h) {
  pk::View2<T, Exec> Y("Y", n, h);
  pk::View1<T, Exec> b("b", h);
  fill_formula(Y, 1);
  fill_formula(b, 2);
  const auto expected =
      each(host_values(Y), host_values(b), [](double y, double bj) { return y + bj; });
  pk::bias_add(Exec(), Y, b);
  check_output(state, "Y", Y, expected);
  for (auto _ : state) {
    pk::bias_add(Exec(), Y, b);
    Kokkos::fence();
  }
  set_bytes(state, 2.0 * n * h * sizeof(T) + 1.0 * h * sizeof(T));
}

// floor = true: the floor row (bench_floors.hpp's column_sums_by_rows, one column block per
// thread), the same sums in the same order as the kernel.
template <class T>
void bias_grad_run(benchmark::State& state, int n, int h, bool floor) {
  using A = pk::acc_t<T>;
  pk::View2<T, Exec> dY("dY", n, h);
  pk::View1<A, Exec> db("db", h);
  fill_formula(dY, 1);
  auto run = [&] {
    if constexpr (paraxis::bench::floors::host_v<Exec>) {
      if (floor) {
        paraxis::bench::floors::column_sums_by_rows<Exec>(pk::View2<const T, Exec>(dY), db,
                                                          Exec().concurrency());
        return;
      }
    }
    pk::bias_grad_accumulate(Exec(), dY, db);
  };
  run();  // onto db = 0
  std::vector<double> expected(h, 0.0);
  const auto dy = host_values(dY);
  for (std::size_t k = 0; k < dy.size(); ++k) expected[k % h] += dy[k];
  // Each db(j) adds n values in order in fp32: its rounding error grows with n (at most about
  // n 2^-24 sum_i |dY(i, j)|), while these inputs' column sums cancel to below 1. The tolerance
  // set at 4096 rows therefore scales with n / 4096 (at the past-cache shape, 32768 rows, the
  // error measured was 2e-4 absolute: 1.2e-8 of sum |dY|, against a tolerance of 1e-4).
  check_output(state, "db", db, expected,
               paraxis::bench::check_tolerance<A>() * std::max(1.0, n / 4096.0));
  for (auto _ : state) {
    run();
    Kokkos::fence();
  }
  set_bytes(state, 1.0 * n * h * sizeof(T) + 2.0 * h * sizeof(A));
}
template <class T>
void bias_grad(benchmark::State& state, int n, int h) {
  bias_grad_run<T>(state, n, h, false);
}
template <class T>
void bias_grad_floor(benchmark::State& state, int n, int h) {
  bias_grad_run<T>(state, n, h, true);
}

template <class T>
void residual(benchmark::State& state, int n, int h) {
  pk::View2<T, Exec> Y("Y", n, h), X("X", n, h);
  fill_formula(Y, 1);
  fill_formula(X, 2);
  const auto expected =
      each(host_values(Y), host_values(X), [](double y, double x) { return y + x; });
  pk::add_inplace(Exec(), Y, X);
  check_output(state, "Y", Y, expected);
  for (auto _ : state) {
    pk::add_inplace(Exec(), Y, X);
    Kokkos::fence();
  }
  set_bytes(state, 3.0 * n * h * sizeof(T));
}

template <class T>
void scale(benchmark::State& state, int n, int h) {
  pk::View2<T, Exec> X("X", n, h);
  fill_formula(X, 1);
  // 1.0, hidden from the optimizer (a visible 1.0 lets it drop x = 1 * x, loop and all): the
  // values stay put over millions of iterations, and the cost does not depend on alpha. Read
  // through a volatile: Google Benchmark 1.7's DoNotOptimize(double&) ("+m,r") hands GCC -O3
  // an undefined register, and alpha came out 0 or denormal (the check caught it).
  volatile double hidden_one = 1.0;
  const double alpha = hidden_one;
  const auto expected = each(host_values(X), [alpha](double x) { return alpha * x; });
  pk::scale_inplace(Exec(), X, alpha);
  check_output(state, "X", X, expected);
  for (auto _ : state) {
    pk::scale_inplace(Exec(), X, alpha);
    Kokkos::fence();
  }
  set_bytes(state, 2.0 * n * h * sizeof(T));
}

// fp32 -> bf16 (T = bf16: the storage type written) or bf16 -> fp32 (T = float).
template <class T>
void convert(benchmark::State& state, int n, int h) {
  using From = std::conditional_t<std::is_same_v<T, bf16>, float, bf16>;
  pk::View2<From, Exec> src("src", n, h);
  pk::View2<T, Exec> dst("dst", n, h);
  fill_formula(src, 1);
  pk::convert(Exec(), src, dst);
  // Into bf16: rounded (its tolerance); into fp32: exact.
  check_output(state, "dst", dst, host_values(src),
               std::is_same_v<T, bf16> ? paraxis::bench::check_tolerance<bf16>() : kExact);
  for (auto _ : state) {
    pk::convert(Exec(), src, dst);
    Kokkos::fence();
  }
  set_bytes(state, 1.0 * n * h * (sizeof(From) + sizeof(T)));
}

// Y = X(index, :) with index a permutation (row i takes row 7919 i mod n: odd stride, a
// bijection for n a power of two; scattered like expert dispatch).
template <class T>
void gather_run(benchmark::State& state, int n, int h, bool floor) {
  pk::View2<T, Exec> X("X", n, h), Y("Y", n, h);
  pk::View1<int, Exec> index("index", n);
  fill_formula(X, 1);
  auto hi = Kokkos::create_mirror_view(index);
  for (int i = 0; i < n; ++i) hi(i) = static_cast<int>((7919LL * i) % n);
  Kokkos::deep_copy(index, hi);
  auto run = [&] {
    if constexpr (paraxis::bench::floors::host_v<Exec>) {
      if (floor) {  // whole rows by memcpy (bench_floors.hpp)
        paraxis::bench::floors::gather_rows<Exec>(pk::View2<const T, Exec>(X),
                                                  pk::View1<const int, Exec>(index), Y);
        return;
      }
    }
    pk::gather_rows(Exec(), X, index, n, Y);
  };
  run();
  const auto x = host_values(X);
  std::vector<double> expected(x.size());
  for (std::size_t k = 0; k < x.size(); ++k)
    expected[k] = x[static_cast<std::size_t>(hi(static_cast<int>(k / h))) * h + k % h];
  check_output(state, "Y", Y, expected, kExact);
  for (auto _ : state) {
    run();
    Kokkos::fence();
  }
  set_bytes(state, 2.0 * n * h * sizeof(T) + 1.0 * n * sizeof(int));
}
template <class T>
void gather(benchmark::State& state, int n, int h) {
  gather_run<T>(state, n, h, false);
}
template <class T>
void gather_floor(benchmark::State& state, int n, int h) {
  gather_run<T>(state, n, h, true);
}

using Fn = void (*)(benchmark::State&, int, int);

// One family: its kernels for one storage type plus the copy of n*h elements of that type.
template <class T>
void register_family(const std::string& family,
                     std::initializer_list<std::pair<const char*, Fn>> kernels) {
  const std::string tag = std::is_same_v<T, bf16> ? "bf16/" : "";
  // Two in-cache shapes and one past the cache (4x the last-level cache, bench_util.hpp).
  for (auto [n, h] : {std::pair{4096, 512}, std::pair{1024, 1536},
                      std::pair{paraxis::bench::past_cache_rows<T>(512), 512}}) {
    if (n == 0) continue;  // PARAXIS_BENCH_IN_CACHE_ONLY
    const std::string s = tag + std::to_string(n) + "x" + std::to_string(h);
    for (const auto& [name, fn] : kernels)
      benchmark::RegisterBenchmark((family + "/" + name + s).c_str(), fn, n, h)->UseRealTime();
    benchmark::RegisterBenchmark((family + "/baseline_copy/" + s).c_str(), bench_copy<T>,
                                 static_cast<std::size_t>(n) * h)
        ->UseRealTime();
  }
}

template <class T>
void register_type() {
  register_family<T>("gelu", {{"fwd/", gelu_fwd<T>}, {"bwd/", gelu_bwd<T>}});
  register_family<T>("bias_add", {{"", bias_add<T>}});
  register_family<T>("bias_grad", {{"", bias_grad<T>}, {"floor/rows/", bias_grad_floor<T>}});
  register_family<T>("residual", {{"", residual<T>}});
  register_family<T>("scale", {{"", scale<T>}});
  register_family<T>("gather_rows", {{"", gather<T>}, {"floor/memcpy/", gather_floor<T>}});
  // convert/to/bf16/RxC: fp32 -> bf16; convert/to/RxC: bf16 -> fp32 (named by the type written).
  register_family<T>("convert", {{"to/", convert<T>}});
}

const bool registered = [] {
  register_type<float>();
  register_type<bf16>();
  return true;
}();

}  // namespace
