// AdamW update throughput over the parameters of one GPT block (12 h^2: h = 512 and h = 1536),
// fp32 state (m, v, master weights) with fp32 gradients ("adamw/3145728") or bf16 gradients
// ("adamw/bf16/3145728"), with a copy of the same bytes in the gradient's storage type in the
// same run ("adamw/baseline_copy/3145728", "adamw/baseline_copy/bf16/3145728";
// bench_copy_bytes.hpp): 28 (26) bytes per parameter, so the copy has the update's working set.
// bytes/s counts the minimal traffic: the gradient read, m, v and master read and written.
// Every iteration fences; rates use wall time (UseRealTime). Every row checks m, v and the
// master weights after one update from zero moments (step 1) against adamw_reference's fp64
// formula on the same inputs (bench_check.hpp).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "bench_copy_bytes.hpp"
#include "bench_floors.hpp"
#include "bench_util.hpp"
#include "paraxis/kernels/adamw.hpp"

namespace pk = paraxis::kernels;
using paraxis::bench::bench_copy;
using paraxis::bench::check_output;
using paraxis::bench::fill_formula;
using paraxis::bench::host_values;
using paraxis::bench::set_bytes;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;

// One AdamW step t in fp64, in torch.optim.AdamW's order (adamw.hpp's header), updating m, v
// and master in place.
void adamw_reference(const pk::AdamWHyper& h, int t, double grad_scale,
                     const std::vector<double>& grad, std::vector<double>& m,
                     std::vector<double>& v, std::vector<double>& master) {
  const double c1 = 1.0 - std::pow(h.beta1, t), c2 = 1.0 - std::pow(h.beta2, t);
  for (std::size_t i = 0; i < grad.size(); ++i) {
    const double g = grad_scale * grad[i];
    m[i] = h.beta1 * m[i] + (1.0 - h.beta1) * g;
    v[i] = h.beta2 * v[i] + (1.0 - h.beta2) * g * g;
    master[i] -= h.lr * h.weight_decay * master[i];
    master[i] -= h.lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + h.eps);
  }
}

template <class G>
double update_bytes(std::size_t n) {
  return static_cast<double>(n) * (sizeof(G) + 6.0 * sizeof(float));
}

// The optimizer state of n parameters: gradient and master weights filled, m = v = 0.
template <class G>
struct AdamWState {
  pk::View1<G, Exec> grad;
  pk::View1<float, Exec> m, v, master;
  explicit AdamWState(std::size_t n) : grad("grad", n), m("m", n), v("v", n), master("master", n) {
    fill_formula(grad, 1);
    fill_formula(master, 2);
    Kokkos::fence();
  }
};

template <class G>
void bench_update(benchmark::State& state, std::size_t n) {
  const AdamWState<G> st(n);
  const auto &grad = st.grad, &m = st.m, &v = st.v, &master = st.master;
  pk::AdamWHyper h;
  h.lr = 1e-3;
  h.weight_decay = 0.1;
  {
    auto mr = host_values(m), vr = host_values(v), masterr = host_values(master);
    adamw_reference(h, 1, 0.5, host_values(grad), mr, vr, masterr);
    pk::adamw_update(Exec(), h, 1, 0.5, grad, m, v, master);
    check_output(state, "m", m, mr);
    check_output(state, "v", v, vr);
    check_output(state, "master", master, masterr);
  }
  int step = 0;
  for (auto _ : state) {
    pk::adamw_update(Exec(), h, ++step % 1000 + 1, 0.5, grad, m, v, master);
    Kokkos::fence();
  }
  set_bytes(state, update_bytes<G>(n));
}

// The floor (bench_floors.hpp): the update's streams (gradient read; m, v, master read and
// written) with one add each, from m = v = 0 and master = fill 2.
template <class G>
void bench_streams_floor(benchmark::State& state, std::size_t n) {
  const AdamWState<G> st(n);
  const auto &grad = st.grad, &m = st.m, &v = st.v, &master = st.master;
  if constexpr (paraxis::bench::floors::host_v<Exec>) {
    const auto g = host_values(grad);
    auto p = host_values(master);
    for (std::size_t i = 0; i < n; ++i) p[i] += g[i];
    paraxis::bench::floors::three_adds<Exec>(pk::View1<const G, Exec>(grad), m, v, master);
    check_output(state, "m", m, g);
    check_output(state, "v", v, g);
    check_output(state, "master", master, p);
    for (auto _ : state) {
      paraxis::bench::floors::three_adds<Exec>(pk::View1<const G, Exec>(grad), m, v, master);
      Kokkos::fence();
    }
  }
  set_bytes(state, update_bytes<G>(n));
}

const bool registered = [] {
  for (int hidden : {512, 1536}) {
    const std::size_t n = 12ull * hidden * hidden;
    const std::string s = std::to_string(n);
    benchmark::RegisterBenchmark(("adamw/" + s).c_str(), bench_update<float>, n)->UseRealTime();
    benchmark::RegisterBenchmark(("adamw/bf16/" + s).c_str(), bench_update<paraxis::bf16>, n)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("adamw/floor/streams/" + s).c_str(), bench_streams_floor<float>,
                                 n)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("adamw/floor/streams/bf16/" + s).c_str(),
                                 bench_streams_floor<paraxis::bf16>, n)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("adamw/baseline_copy/" + s).c_str(), bench_copy<float>,
                                 paraxis::bench::copy_elements<float>(update_bytes<float>(n)))
        ->UseRealTime();
    benchmark::RegisterBenchmark(
        ("adamw/baseline_copy/bf16/" + s).c_str(), bench_copy<paraxis::bf16>,
        paraxis::bench::copy_elements<paraxis::bf16>(update_bytes<paraxis::bf16>(n)))
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
