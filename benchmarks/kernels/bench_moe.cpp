// MoE data movement at GPT-block shapes (tokens x hidden: 4096x512, 1024x1536), 8 experts,
// top-2, dropless: the dispatch gather into expert order and its backward ("moe_gather/fwd",
// "moe_gather/bwd") and the gated combine back into token order and its backward
// ("moe_combine/fwd", "moe_combine/bwd"), fp32 and bf16 storage, each family with a copy of the
// same [tokens, hidden] elements in the same storage type in the same run
// ("moe_gather/baseline_copy/4096x512", "moe_combine/baseline_copy/bf16/4096x512") and a copy
// of each op's own bytes ("moe_combine/baseline_copy/bwd_bytes/4096x512",
// bench_copy_bytes.hpp: the op's working set, which outgrows the cache first). The
// routing (fixed expert choices from an integer hash) is built once, outside the timing.
// bytes/s counts the minimal traffic (P = 2 x tokens expert rows): gather reads X once and
// writes Xe; its backward reads dXe and reads + writes dX; combine reads Ye and the gates and
// writes Y; its backward reads dY, Ye and the gates and writes dYe and dgate (routing indices
// counted too). Every iteration fences; rates use wall time (UseRealTime).
// Every row checks its outputs against check_op: the expert-major layout of moe.hpp
// rebuilt on the host from the expert choices, and the op's sums over it in fp64
// (bench_check.hpp); the gather exactly.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench_copy_bytes.hpp"
#include "bench_floors.hpp"
#include "bench_util.hpp"
#include "paraxis/kernels/moe.hpp"

namespace pk = paraxis::kernels;
using paraxis::bench::bench_copy;
using paraxis::bench::check_output;
using paraxis::bench::fill_formula;
using paraxis::bench::host_values;
using paraxis::bench::set_bytes;

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
constexpr int kExperts = 8, kTopK = 2;

enum class Op { gather_fwd, gather_bwd, combine_fwd, combine_bwd };

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
  return z ^ (z >> 29);
}

// Minimal traffic of one op (P = n * top-k expert rows: dropless).
template <class T>
double op_bytes(int n, int h, Op op) {
  const double nh = static_cast<double>(n) * h * sizeof(T);
  const double ph = nh * kTopK;
  const double gates = static_cast<double>(n) * kTopK * sizeof(T);
  const double index = static_cast<double>(n) * kTopK * sizeof(int);
  switch (op) {
    case Op::gather_fwd:
      return nh + ph + index;
    case Op::gather_bwd:
      return ph + 2 * nh + index;
    case Op::combine_fwd:
      return ph + nh + gates + index;
    case Op::combine_bwd:
      return nh + 2 * ph + 2 * gates + index;
  }
  return 0;
}

// The permuted row of each assignment a = n * k + j (moe.hpp's layout, dropless): experts in
// order, and within an expert its assignments in order.
std::vector<std::size_t> expert_rows(const std::vector<double>& idx) {
  std::vector<std::size_t> row(idx.size());
  std::size_t next = 0;
  for (int e = 0; e < kExperts; ++e)
    for (std::size_t a = 0; a < idx.size(); ++a)
      if (static_cast<int>(idx[a]) == e) row[a] = next++;
  return row;
}

// The op's outputs in fp64 from the host copies of its inputs (x: the token rows X as they were
// before the op, e1: the expert rows E1) and checks them. Every op adds or scales whole rows of
// h values: out(to) += w * in(from).
template <class V, class G>
void check_op(benchmark::State& state, Op op, int h, const std::vector<double>& idx,
              const std::vector<double>& x, const std::vector<double>& e1, const V& X, const V& E1,
              const V& E2, const G& gate, const G& dgate) {
  const auto row = expert_rows(idx);
  const auto g = host_values(gate);
  auto add = [h](std::vector<double>& out, std::size_t to, double w, const std::vector<double>& in,
                 std::size_t from) {
    for (int c = 0; c < h; ++c) out[to * h + c] += w * in[from * h + c];
  };
  std::vector<double> rows(e1.size(), 0.0), tokens(x.size(), 0.0), dg(idx.size(), 0.0);
  if (op == Op::gather_bwd) tokens = x;  // accumulates onto dX
  for (std::size_t a = 0; a < idx.size(); ++a) {
    const std::size_t n = a / kTopK;
    if (op == Op::gather_fwd) add(rows, row[a], 1.0, x, n);
    if (op == Op::gather_bwd) add(tokens, n, 1.0, e1, row[a]);
    if (op == Op::combine_fwd) add(tokens, n, g[a], e1, row[a]);
    if (op == Op::combine_bwd) add(rows, row[a], g[a], x, n);
    for (int c = 0; op == Op::combine_bwd && c < h; ++c) dg[a] += x[n * h + c] * e1[row[a] * h + c];
  }
  if (op == Op::gather_fwd) check_output(state, "Xe", E1, rows, paraxis::bench::kExact);
  if (op == Op::gather_bwd) check_output(state, "dX", X, tokens);
  if (op == Op::combine_fwd) check_output(state, "Y", X, tokens);
  if (op == Op::combine_bwd) check_output(state, "dYe", E2, rows);
  if (op == Op::combine_bwd) check_output(state, "dgate", dgate, dg);
}

// floor (gather_fwd only): the floor row, whole rows copied by memcpy from the routing's
// slot_token (bench_floors.hpp), the kernel's output exactly.
template <class T>
void bench_op(benchmark::State& state, int n, int h, Op op, bool floor) {
  // Two distinct experts per token from a fixed hash: roughly balanced, no capacity drops.
  pk::View2<int, Exec> idx("idx", n, kTopK);
  auto hi = Kokkos::create_mirror_view(idx);
  for (int t = 0; t < n; ++t) {
    const std::uint64_t z = mix(0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(t + 1));
    hi(t, 0) = static_cast<int>(z % kExperts);
    hi(t, 1) = static_cast<int>((hi(t, 0) + 1 + (z >> 8) % (kExperts - 1)) % kExperts);
  }
  Kokkos::deep_copy(idx, hi);
  pk::MoeRouting<Exec::memory_space> r(n, kExperts, kTopK);
  pk::moe_build_routing(Exec(), idx, 0, r);
  const int rows = r.rows;
  // X: tokens (X, dX, Y or dY by op); E1, E2: expert rows (Xe, dXe, Ye, dYe by op).
  pk::View2<T, Exec> X("X", n, h), E1("E1", rows, h), E2("E2", rows, h), gate("gate", n, kTopK),
      dgate("dgate", n, kTopK);
  fill_formula(X, 1);
  fill_formula(E1, 2);
  fill_formula(gate, 3);
  auto run = [&] {
    if constexpr (paraxis::bench::floors::host_v<Exec>) {
      if (floor && op == Op::gather_fwd) {
        paraxis::bench::floors::gather_rows<Exec>(pk::View2<const T, Exec>(X),
                                                  pk::View1<const int, Exec>(r.slot_token), E1);
        return;
      }
    }
    switch (op) {
      case Op::gather_fwd:
        pk::moe_gather(Exec(), X, r, E1);
        break;
      case Op::gather_bwd:
        pk::moe_gather_backward(Exec(), E1, r, X);
        break;
      case Op::combine_fwd:
        pk::moe_combine_forward(Exec(), E1, gate, r, X);
        break;
      case Op::combine_bwd:
        pk::moe_combine_backward(Exec(), X, E1, gate, r, E2, dgate);
        break;
    }
  };
  const auto x = host_values(X);
  run();
  check_op(state, op, h, host_values(idx), x, host_values(E1), X, E1, E2, gate, dgate);
  for (auto _ : state) {
    run();
    Kokkos::fence();
  }
  set_bytes(state, op_bytes<T>(n, h, op));
}

}  // namespace

namespace {

const bool registered = [] {
  const struct {
    const char* family;
    const char* pass;
    Op op;
  } ops[] = {{"moe_gather", "fwd", Op::gather_fwd},
             {"moe_gather", "bwd", Op::gather_bwd},
             {"moe_combine", "fwd", Op::combine_fwd},
             {"moe_combine", "bwd", Op::combine_bwd}};
  // Two in-cache shapes and one past the cache (4x the last-level cache in bf16, more in fp32:
  // bench_util.hpp; one shape for both storage types, so they share the name).
  for (auto [n, h] : {std::pair{4096, 512}, std::pair{1024, 1536},
                      std::pair{paraxis::bench::past_cache_rows<paraxis::bf16>(512), 512}}) {
    if (n == 0) continue;  // PARAXIS_BENCH_IN_CACHE_ONLY
    const std::string s = std::to_string(n) + "x" + std::to_string(h);
    const std::size_t elements = static_cast<std::size_t>(n) * h;
    for (const auto& o : ops) {
      const std::string f = o.family;
      benchmark::RegisterBenchmark((f + "/" + o.pass + "/" + s).c_str(), bench_op<float>, n, h,
                                   o.op, false)
          ->UseRealTime();
      benchmark::RegisterBenchmark((f + "/" + o.pass + "/bf16/" + s).c_str(),
                                   bench_op<paraxis::bf16>, n, h, o.op, false)
          ->UseRealTime();
      if (o.op == Op::gather_fwd) {
        benchmark::RegisterBenchmark((f + "/fwd/floor/memcpy/" + s).c_str(), bench_op<float>, n, h,
                                     o.op, true)
            ->UseRealTime();
        benchmark::RegisterBenchmark((f + "/fwd/floor/memcpy/bf16/" + s).c_str(),
                                     bench_op<paraxis::bf16>, n, h, o.op, true)
            ->UseRealTime();
      }
      // A copy of this op's bytes: the same working set (bench_copy_bytes.hpp).
      const std::string c = f + "/baseline_copy/" + o.pass + "_bytes/";
      benchmark::RegisterBenchmark(
          (c + s).c_str(), bench_copy<float>,
          paraxis::bench::copy_elements<float>(op_bytes<float>(n, h, o.op)))
          ->UseRealTime();
      benchmark::RegisterBenchmark(
          (c + "bf16/" + s).c_str(), bench_copy<paraxis::bf16>,
          paraxis::bench::copy_elements<paraxis::bf16>(op_bytes<paraxis::bf16>(n, h, o.op)))
          ->UseRealTime();
    }
    for (const char* f : {"moe_gather", "moe_combine"}) {
      benchmark::RegisterBenchmark((std::string(f) + "/baseline_copy/" + s).c_str(),
                                   bench_copy<float>, elements)
          ->UseRealTime();
      benchmark::RegisterBenchmark((std::string(f) + "/baseline_copy/bf16/" + s).c_str(),
                                   bench_copy<paraxis::bf16>, elements)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
