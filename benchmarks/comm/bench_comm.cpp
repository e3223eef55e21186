// paraxis-bench-comm: nccl-tests-style benchmark of the collectives every parallel axis uses,
// called through parallel::Communicator (MPI backend), with the raw MPI call on the same
// buffers timed in the same run. Blocks of paraxis and raw iterations alternate (ABBA order),
// so machine noise and cache state hit both sides alike; the ratio paraxis/raw is the figure.
// Sizes, algbw and busbw follow nccl-tests doc/PERFORMANCE.md; inputs are small integers so
// every result is exact and checked element by element (#wrong). Exit status 1 if any
// result or logged event is wrong. Each operation is one entry of collective_table.cpp (its
// calls, buffer layout and expected values); this file is the generic sweep over entries and
// sizes, with busbw from perfmodel::busbw_factor.
//
//   mpiexec -n 2 build/bin/paraxis-bench-comm [--min-bytes 8] [--max-bytes 64M] [--op all]
//       [--dtype float|double|bf16] [--iters N] [--warmup N] [--blocks N] [--json FILE]
//       [--mpi-gpu-aware auto|yes|no]
// --mpi-gpu-aware is comm.mpi_gpu_aware for the paraxis side (no: its buffers staged through
// host memory, docs/parallel.md; on a host build that measures the staging's cost against the
// raw call). The raw side always hands MPI the buffers themselves, so on a device build it needs
// an MPI that reads device memory: where the paraxis side stages there, the run is refused.
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/statistics.hpp"  // the one median
#include "collective_table.hpp"
#include "config/exit_codes.hpp"
#include "driver/provenance_common.hpp"
#include "parallel/comm_log.hpp"
#include "parallel/communicator.hpp"
#include "parallel/mpi_staging.hpp"
#include "paraxis/build_info.hpp"
#include "paraxis/kernels/bf16.hpp"

namespace {

namespace px = paraxis::parallel;
namespace bc = paraxis::bench_comm;
using Entry = bc::CollectiveEntry;
using bc::span_for;
using json = nlohmann::json;
using paraxis::driver::median;

struct Options {
  std::size_t min_bytes = 8, max_bytes = std::size_t(64) << 20;
  int step_factor = 2;
  int iters = 0;    // 0: scaled with the size (default_iters)
  int warmup = -1;  // per side and size; -1: default_warmup
  int blocks = 16;  // timed blocks per side, alternating with the other side
  std::string ops = "all", dtype = "float", json_path;
  bool corrupt_for_test = false;
};

// Fixed per size, identical on every rank: ~512 MiB of S per side, 8..1000 iterations (the
// default sweep, 8 B..64 MiB of all five operations, takes ~30 s on 2 ranks of a 2-core VM).
int default_iters(std::size_t bytes) {
  const double n = static_cast<double>(std::size_t(512) << 20) / static_cast<double>(bytes);
  return static_cast<int>(std::clamp(n, 8.0, 1000.0));
}
int default_warmup(int iters) {
  return std::clamp(iters / 8, 1, 5);
}

std::size_t parse_bytes(const std::string& s) {
  std::size_t pos = 0;
  const double v = std::stod(s, &pos);
  std::string unit = s.substr(pos);
  double mult = 1;
  if (unit == "" || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KiB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else
    throw std::invalid_argument("size '" + s + "': expected a number with K, M or G suffix");
  if (v <= 0) throw std::invalid_argument("size '" + s + "' must be positive");
  return static_cast<std::size_t>(v * mult);
}

std::string human_bytes(std::size_t b) {
  char buf[32];
  if (b >= (std::size_t(1) << 20) && b % (std::size_t(1) << 20) == 0)
    std::snprintf(buf, sizeof(buf), "%zu MiB", b >> 20);
  else if (b >= 1024 && b % 1024 == 0)
    std::snprintf(buf, sizeof(buf), "%zu KiB", b >> 10);
  else
    std::snprintf(buf, sizeof(buf), "%zu B", b);
  return buf;
}

template <class T>
struct TypeTraits;
template <>
struct TypeTraits<float> {
  static constexpr const char* name = "float";
  static MPI_Datatype mpi() { return MPI_FLOAT; }
  static MPI_Op sum() { return MPI_SUM; }
};
template <>
struct TypeTraits<double> {
  static constexpr const char* name = "double";
  static MPI_Datatype mpi() { return MPI_DOUBLE; }
  static MPI_Op sum() { return MPI_SUM; }
};

// The raw baseline needs its own bf16 type and sum: the same fp32 add and single rounding
// per pair as the paraxis MPI backend's user operation.
void raw_bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const paraxis::bf16*>(in);
  auto* b = static_cast<paraxis::bf16*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = paraxis::bf16(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}
MPI_Datatype g_raw_bf16 = MPI_DATATYPE_NULL;
MPI_Op g_raw_bf16_sum = MPI_OP_NULL;
template <>
struct TypeTraits<paraxis::bf16> {
  static constexpr const char* name = "bf16";
  static MPI_Datatype mpi() {
    if (g_raw_bf16 == MPI_DATATYPE_NULL) {
      MPI_Type_contiguous(2, MPI_BYTE, &g_raw_bf16);
      MPI_Type_commit(&g_raw_bf16);
    }
    return g_raw_bf16;
  }
  static MPI_Op sum() {
    if (g_raw_bf16_sum == MPI_OP_NULL) MPI_Op_create(&raw_bf16_sum, 1, &g_raw_bf16_sum);
    return g_raw_bf16_sum;
  }
};
void free_raw_types() {
  if (g_raw_bf16 != MPI_DATATYPE_NULL) MPI_Type_free(&g_raw_bf16);
  if (g_raw_bf16_sum != MPI_OP_NULL) MPI_Op_free(&g_raw_bf16_sum);
}

template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, paraxis::bf16>)
    return paraxis::bf16(static_cast<float>(v));
  else
    return static_cast<T>(v);
}
template <class T>
T sentinel() {
  return from_double<T>(std::numeric_limits<double>::quiet_NaN());
}

// One side's timing for one (op, size): per-block times (max over ranks) and the mean
// iteration time (each rank's total / iterations, max over ranks).
struct SideResult {
  std::vector<double> block_s;
  double time_s = 0;
  long wrong = 0;
};

struct Row {
  const Entry* op;
  std::size_t bytes, count;
  int iters, warmup, blocks;
  SideResult paraxis, raw;
  long log_errors = 0;
  double ratio() const { return paraxis.time_s / raw.time_s; }
  // Median over block pairs of paraxis block / raw block: robust to a preempted block.
  double pair_ratio() const;
};

double Row::pair_ratio() const {
  std::vector<double> r;
  for (std::size_t b = 0; b < paraxis.block_s.size(); ++b)
    r.push_back(paraxis.block_s[b] / raw.block_s[b]);
  return median(r);
}

// nccl-tests doc/PERFORMANCE.md: busbw = algbw * the operation's factor, from the
// performance model so measured and modelled bandwidths share one definition.
double busbw_factor(const Entry& op, int ranks) {
  return paraxis::perfmodel::busbw_factor(op.collective, ranks);
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a.empty() ? "unknown" : a + " " + b + " " + c;
}

// The generic sweep step: one table entry at one size, both sides, timed and checked.
template <class T>
class Bench {
 public:
  Bench(const Options& o, px::Communicator& comm, px::CommLog& log)
      : o_(o), comm_(comm), log_(log) {
    shape_.rank = comm.rank();
    shape_.ranks = comm.size();
    shape_.span = span_for(comm.size());
    const std::size_t cap = o.max_bytes / sizeof(T) + static_cast<std::size_t>(shape_.ranks);
    send_ = Kokkos::View<T*, Kokkos::HostSpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "send"), cap);
    recv_ = Kokkos::View<T*, Kokkos::HostSpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "recv"), cap);
    counts_.assign(static_cast<std::size_t>(shape_.ranks), 0);
    displs_.assign(static_cast<std::size_t>(shape_.ranks), 0);
  }

  // count: total elements as nccl-tests prints it (S / sizeof(T)); 0 when S is too small.
  std::size_t count_for(const Entry& op, std::size_t bytes) const {
    std::size_t c = bytes / sizeof(T);
    if (op.split_over_ranks) c -= c % static_cast<std::size_t>(shape_.ranks);
    return c;
  }

  Row run(const Entry& op, std::size_t bytes_requested, int iters, int warmup, int blocks) {
    Row row{&op, 0, count_for(op, bytes_requested), iters, warmup, blocks, {}, {}, 0};
    row.bytes = row.count * sizeof(T);
    const int n = shape_.ranks;
    shape_.count = row.count;
    shape_.per_rank = op.split_over_ranks ? row.count / static_cast<std::size_t>(n) : row.count;
    if (row.count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::invalid_argument(std::string(op.name) + " of " + std::to_string(row.bytes) +
                                  " B: " + std::to_string(row.count) +
                                  " elements exceed the MPI int count; lower --max-bytes");
    for (int p = 0; p < n; ++p) {
      counts_[p] = static_cast<int>(shape_.per_rank);
      displs_[p] = static_cast<int>(shape_.per_rank * static_cast<std::size_t>(p));
    }
    args_ = bc::CallArgs{send_.data(),      recv_.data(),         shape_.count,
                         shape_.per_rank,   counts_.data(),       displs_.data(),
                         px::dtype_of<T>(), TypeTraits<T>::mpi(), TypeTraits<T>::sum()};
    fill_inputs(op);
    blocks = std::min(blocks, iters);
    row.blocks = blocks;
    const int per_block = (iters + blocks - 1) / blocks;  // iterations round up to whole blocks
    row.iters = per_block * blocks;

    for (int i = 0; i < warmup; ++i) call(op, true);
    for (int i = 0; i < warmup; ++i) call(op, false);
    log_.clear();

    // ABBA: pair k runs paraxis first when k is even, raw first when k is odd.
    std::vector<double> mine(2 * static_cast<std::size_t>(blocks) + 2, 0.0);
    for (int b = 0; b < blocks; ++b) {
      for (int s = 0; s < 2; ++s) {
        const bool paraxis = (s == 0) == (b % 2 == 0);
        const double t = time_block(op, paraxis, per_block);
        mine[(paraxis ? 0 : blocks) + b] = t;
        mine[2 * blocks + (paraxis ? 0 : 1)] += t;
        if (paraxis) {
          if (log_.events().size() != expected_events(per_block)) ++row.log_errors;
          log_.clear();
        }
      }
    }
    std::vector<double> maxed(mine.size());
    MPI_Allreduce(mine.data(), maxed.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    row.paraxis.block_s.assign(maxed.begin(), maxed.begin() + blocks);
    row.raw.block_s.assign(maxed.begin() + blocks, maxed.begin() + 2 * blocks);
    row.paraxis.time_s = maxed[2 * blocks] / row.iters;
    row.raw.time_s = maxed[2 * blocks + 1] / row.iters;

    // Result check: a separate call on a poisoned output, as nccl-tests does.
    row.paraxis.wrong = check(op, true, row);
    row.raw.wrong = check(op, false, row);
    long counts[3] = {row.paraxis.wrong, row.raw.wrong, row.log_errors};
    MPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    row.paraxis.wrong = counts[0];
    row.raw.wrong = counts[1];
    row.log_errors = counts[2];
    return row;
  }

 private:
  // The output buffer: the send buffer for an in-place entry, else the receive buffer.
  Kokkos::View<T*, Kokkos::HostSpace>& out(const Entry& op) { return op.in_place ? send_ : recv_; }

  // A rooted entry starts every rank from the root's data (in place, so the check's refill
  // restores the root's input everywhere); the others from each rank's own.
  void fill_inputs(const Entry& op) {
    const int from = op.root >= 0 ? op.root : shape_.rank;
    const std::size_t n_send = op.send_elems(shape_);
    for (std::size_t i = 0; i < n_send; ++i) send_(i) = from_double<T>(shape_.input(from, i));
  }

  // In place, the root keeps its input and only the other ranks' buffers are poisoned.
  void poison_output(const Entry& op) {
    if (op.in_place && shape_.rank == op.root) return;
    auto& o = out(op);
    const std::size_t n_out = op.out_elems(shape_);
    for (std::size_t i = 0; i < n_out; ++i) o(i) = sentinel<T>();
  }

  void call(const Entry& op, bool paraxis) {
    if (paraxis)
      op.paraxis(comm_, args_);
    else
      op.raw(args_);
  }

  double time_block(const Entry& op, bool paraxis, int iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) call(op, paraxis);
    return MPI_Wtime() - t0;
  }

  // The communication layer records one event per call, except in a group of one, which moves
  // nothing (its collectives are local copies) and records none.
  std::size_t expected_events(int calls) const {
    return shape_.ranks > 1 ? static_cast<std::size_t>(calls) : 0;
  }

  long check(const Entry& op, bool paraxis, Row& row) {
    poison_output(op);
    log_.clear();
    call(op, paraxis);
    if (paraxis) {
      // The layer's event must carry the nccl-tests S of the call.
      const auto& ev = log_.events();
      if (ev.size() != expected_events(1) ||
          (!ev.empty() && (std::string(ev[0].op) != op.name || ev[0].bytes != row.bytes)))
        ++row.log_errors;
      log_.clear();
    }
    auto& o = out(op);
    const std::size_t n_out = op.out_elems(shape_);
    if (paraxis && o_.corrupt_for_test && shape_.rank == shape_.ranks - 1 && n_out > 0)
      o(0) = sentinel<T>();
    long wrong = 0;
    for (std::size_t i = 0; i < n_out; ++i) {
      const double got = static_cast<double>(o(i));
      if (!(got == op.expected(shape_, i))) ++wrong;
    }
    if (op.in_place) fill_inputs(op);  // the output overwrote the input
    return wrong;
  }

  const Options& o_;
  px::Communicator& comm_;
  px::CommLog& log_;
  bc::Shape shape_;
  bc::CallArgs args_;
  Kokkos::View<T*, Kokkos::HostSpace> send_, recv_;
  std::vector<int> counts_, displs_;
};

// What every paraxis program records (driver/provenance_common.hpp: the same keys as
// summary.json's provenance), and this benchmark's load average at the start.
json provenance(int /*world: provenance_common asks MPI_COMM_WORLD*/, const std::string& cmdline,
                const std::string& load) {
  json p = paraxis::driver::provenance_common(cmdline, paraxis::driver::ProvenanceScope::mpi_world);
  p["load_average_start"] = load;
  return p;
}

void print_header(const char* type, int ranks) {
  std::printf(
      "#\n# %s, %d ranks; time: mean per iteration, max over ranks. ratio: paraxis / raw time;\n"
      "# pairs: median over the interleaved block pairs of paraxis block / raw block time\n",
      type, ranks);
  std::printf("# %64s %-33s %s\n", "", "paraxis::parallel::Communicator", "raw MPI");
  std::printf("# %14s %12s %7s %15s %6s %5s %9s %7s %7s %6s %9s %7s %7s %6s %6s %6s\n", "size",
              "count", "type", "op", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
              "algbw", "busbw", "#wrong", "ratio", "pairs");
  std::printf("# %14s %12s %7s %15s %6s %5s %9s %7s %7s %6s %9s %7s %7s %6s %6s %6s\n", "(B)",
              "(elements)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
              "(GB/s)", "", "", "");
}

// One row of the table (rank 0), as nccl-tests prints it, then the ratio columns.
template <class T>
void print_row(const Row& row, const Entry& op, int n) {
  const double f = busbw_factor(op, n);
  const double alg_p = row.bytes / row.paraxis.time_s / 1e9;
  const double alg_r = row.bytes / row.raw.time_s / 1e9;
  std::printf(
      "  %14zu %12zu %7s %15s %6s %5d %9.2f %7.3f %7.3f %6ld %9.2f %7.3f %7.3f %6ld %6.3f "
      "%6.3f\n",
      row.bytes, row.count, TypeTraits<T>::name, op.name, op.redop, op.root,
      row.paraxis.time_s * 1e6, alg_p, alg_p * f, row.paraxis.wrong, row.raw.time_s * 1e6, alg_r,
      alg_r * f, row.raw.wrong, row.ratio(), row.pair_ratio());
  if (row.log_errors)
    std::printf("# %s %zu B: %ld CommLog events with a wrong op, count or byte total\n", op.name,
                row.bytes, row.log_errors);
  std::fflush(stdout);
}

// The figure: all-reduce through the layer vs the raw loop at >= 1 MiB.
void print_all_reduce_ratios(const std::vector<Row>& rows) {
  std::vector<double> big, big_pairs;
  for (const auto& r : rows)
    if (r.op->collective == paraxis::perfmodel::Collective::all_reduce &&
        r.bytes >= (std::size_t(1) << 20)) {
      big.push_back(r.ratio());
      big_pairs.push_back(r.pair_ratio());
    }
  if (!big.empty()) {
    std::printf("#\n# all_reduce paraxis/raw at >= 1 MiB, %zu sizes:\n", big.size());
    std::printf("#   ratio: min %.3f, median %.3f, max %.3f\n",
                *std::min_element(big.begin(), big.end()), median(big),
                *std::max_element(big.begin(), big.end()));
    std::printf("#   pairs: min %.3f, median %.3f, max %.3f\n",
                *std::min_element(big_pairs.begin(), big_pairs.end()), median(big_pairs),
                *std::max_element(big_pairs.begin(), big_pairs.end()));
  }
}

// --json: the options, the provenance and every row, both sides.
template <class T>
void write_json(const Options& o, const std::vector<Row>& rows, const json& prov, int n) {
  json j{{"schema", "paraxis.bench_comm/2"}, {"provenance", prov}};
  j["provenance"]["load_average_end"] = load_average();
  j["options"] = {{"min_bytes", o.min_bytes},     {"max_bytes", o.max_bytes},
                  {"step_factor", o.step_factor}, {"iters", o.iters},
                  {"warmup", o.warmup},           {"blocks", o.blocks},
                  {"dtype", TypeTraits<T>::name}, {"ops", o.ops}};
  j["results"] = json::array();
  for (const auto& r : rows) {
    const double f = busbw_factor(*r.op, n);
    auto side = [&](const SideResult& s) {
      std::vector<double> us;
      for (double b : s.block_s) us.push_back(b / (r.iters / r.blocks) * 1e6);
      const double alg = r.bytes / s.time_s / 1e9;
      return json{{"time_us", s.time_s * 1e6},
                  {"algbw_GBps", alg},
                  {"busbw_GBps", alg * f},
                  {"wrong", s.wrong},
                  {"block_time_us", us}};
    };
    j["results"].push_back({{"op", r.op->name},
                            {"raw_call", r.op->raw_call},
                            {"dtype", TypeTraits<T>::name},
                            {"redop", r.op->redop},
                            {"root", r.op->root},
                            {"bytes", r.bytes},
                            {"count", r.count},
                            {"iters", r.iters},
                            {"warmup", r.warmup},
                            {"blocks", r.blocks},
                            {"busbw_factor", f},
                            {"paraxis", side(r.paraxis)},
                            {"raw", side(r.raw)},
                            {"ratio", r.ratio()},
                            {"ratio_median_of_block_pairs", r.pair_ratio()},
                            {"log_errors", r.log_errors}});
  }
  std::ofstream out(o.json_path);
  if (!out) throw std::runtime_error("--json: cannot write '" + o.json_path + "'");
  out << j.dump(2) << "\n";
}

template <class T>
int run_all(const Options& o, const std::vector<const Entry*>& ops, px::Communicator& comm,
            px::CommLog& log, const json& prov) {
  const int rank = comm.rank(), n = comm.size();
  Bench<T> bench(o, comm, log);
  std::vector<Row> rows;
  if (rank == 0) print_header(TypeTraits<T>::name, n);
  for (const Entry* op : ops) {
    for (std::size_t bytes = o.min_bytes; bytes <= o.max_bytes;
         bytes *= static_cast<std::size_t>(o.step_factor)) {
      if (bench.count_for(*op, bytes) == 0) continue;
      const int iters = o.iters > 0 ? o.iters : default_iters(bytes);
      const int warmup = o.warmup >= 0 ? o.warmup : default_warmup(iters);
      Row row = bench.run(*op, bytes, iters, warmup, o.blocks);
      if (rank == 0) print_row<T>(row, *op, n);
      rows.push_back(std::move(row));
    }
  }

  long wrong = 0, log_errors = 0;
  for (const auto& r : rows) {
    wrong += r.paraxis.wrong + r.raw.wrong;
    log_errors += r.log_errors;
  }
  if (rank == 0) {
    print_all_reduce_ratios(rows);
    std::printf("# load average (1/5/15 min) at the end: %s\n", load_average().c_str());
    if (wrong == 0 && log_errors == 0)
      std::printf("# #wrong: 0 in %zu rows (paraxis and raw) OK\n", rows.size());
    else
      std::printf("# FAILED: %ld wrong result(s), %ld wrong CommLog event(s)\n", wrong, log_errors);
    std::fflush(stdout);
    if (!o.json_path.empty()) write_json<T>(o, rows, prov, n);
  }
  return (wrong == 0 && log_errors == 0) ? paraxis::exit_code::ok : paraxis::exit_code::not_ok;
}

// The command line into o, and --mpi-gpu-aware into gpu_aware. A parse error or --help: the
// code CLI11 ends the program with (it has printed why); an impossible size range throws.
std::optional<int> parse_options(int argc, char** argv, Options& o, std::string& gpu_aware) {
  std::string min_b = "8", max_b = "64M";
  CLI::App app{"paraxis-bench-comm: collectives through parallel::Communicator vs raw MPI"};
  app.add_option("--min-bytes,-b", min_b, "smallest size S (nccl-tests definition; K/M/G)");
  app.add_option("--max-bytes,-e", max_b, "largest size S");
  app.add_option("--step-factor,-f", o.step_factor, "size multiplier between rows")
      ->check(CLI::Range(2, 1024));
  app.add_option("--iters,-n", o.iters,
                 "timed iterations per side and size (0: 512 MiB / S, clamped to 8..1000)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--warmup,-w", o.warmup,
                 "warm-up iterations per side and size (-1: iters/8 in 1..5)")
      ->check(CLI::Range(-1, 1000000));
  app.add_option("--blocks", o.blocks, "timed blocks per side, alternating paraxis and raw")
      ->check(CLI::Range(1, 1000));
  app.add_option("--op", o.ops, "all, or a comma-separated list of operations");
  app.add_option("--dtype,-d", o.dtype, "element type")
      ->check(CLI::IsMember({"float", "double", "bf16"}));
  app.add_option("--json", o.json_path, "write results and provenance as JSON (rank 0)");
  gpu_aware = "auto";
  app.add_option("--mpi-gpu-aware", gpu_aware,
                 "comm.mpi_gpu_aware of the paraxis side (no: staged through host memory)")
      ->check(CLI::IsMember(paraxis::config::mpi_gpu_aware_names()));
  app.add_flag("--corrupt-for-test", o.corrupt_for_test,
               "poison one paraxis output element on the last rank (tests the check)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  o.min_bytes = parse_bytes(min_b);
  o.max_bytes = parse_bytes(max_b);
  if (o.min_bytes > o.max_bytes)
    throw std::invalid_argument("--min-bytes " + min_b + " exceeds --max-bytes " + max_b);
  return std::nullopt;
}

// Iteration counts decide who waits for whom: make sure every rank uses rank 0's.
void share_schedule(Options& o) {
  long sched[6] = {static_cast<long>(o.min_bytes),
                   static_cast<long>(o.max_bytes),
                   o.step_factor,
                   o.iters,
                   o.warmup,
                   o.blocks};
  MPI_Bcast(sched, 6, MPI_LONG, 0, MPI_COMM_WORLD);
  o.min_bytes = static_cast<std::size_t>(sched[0]);
  o.max_bytes = static_cast<std::size_t>(sched[1]);
  o.step_factor = static_cast<int>(sched[2]);
  o.iters = static_cast<int>(sched[3]);
  o.warmup = static_cast<int>(sched[4]);
  o.blocks = static_cast<int>(sched[5]);
}

// The table's banner (rank 0): the build, the MPI, the ranks, the sweep and the load.
void print_banner(const Options& o, const json& prov, int world, const std::string& load,
                  bool staging, const std::string& gpu_aware) {
  std::printf("# paraxis-bench-comm  paraxis %s (%s), %s\n", paraxis::build_info::version,
              paraxis::build_info::git_hash, prov.at("mpi_library").get<std::string>().c_str());
  std::printf("# ranks %d on %s; sizes %s..%s x%d; iters %s, warmup %s, blocks %d (ABBA)\n", world,
              prov.at("hosts").dump().c_str(), human_bytes(o.min_bytes).c_str(),
              human_bytes(o.max_bytes).c_str(), o.step_factor,
              o.iters > 0 ? std::to_string(o.iters).c_str() : "512 MiB/S in [8,1000]",
              o.warmup >= 0 ? std::to_string(o.warmup).c_str() : "iters/8 in [1,5]", o.blocks);
  std::printf("# load average (1/5/15 min) at the start: %s\n", load.c_str());
  if (staging)
    std::printf("# paraxis side staged through host memory (--mpi-gpu-aware %s)\n",
                gpu_aware.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = paraxis::exit_code::ok;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    try {
      Options o;
      std::string gpu_aware;
      if (const auto code = parse_options(argc, argv, o, gpu_aware)) {
        MPI_Finalize();
        return *code;
      }
      const std::vector<const Entry*> ops = bc::select_collectives(o.ops);

      share_schedule(o);

      std::string cmdline;
      for (int i = 0; i < argc; ++i) cmdline += (i ? " " : "") + std::string(argv[i]);
      const std::string load = load_average();
      json prov = provenance(world, cmdline, load);
      const auto& names = paraxis::config::mpi_gpu_aware_names();
      px::set_mpi_gpu_aware(static_cast<paraxis::config::MpiGpuAware>(
          std::find(names.begin(), names.end(), gpu_aware) - names.begin()));
      const bool staging = px::mpi_staging();
      if (staging && px::build_device_kind() != px::DeviceKind::none)
        throw std::invalid_argument(
            "--mpi-gpu-aware " + gpu_aware +
            ": the paraxis side stages through host memory, so this MPI is taken not to read "
            "device memory, and the raw side would hand it device buffers; use an MPI that "
            "does (--mpi-gpu-aware yes), or paraxis run with comm.mpi_gpu_aware: no to measure "
            "staging in training");
      prov["mpi_staging"] = staging ? "on" : "off";  // as summary.json's (--mpi-gpu-aware)

      px::CommLog log;
      auto comm = px::make_communicator(paraxis::config::CommBackend::mpi, MPI_COMM_WORLD,
                                        px::Axis::world, &log);
      if (rank == 0) print_banner(o, prov, world, load, staging, gpu_aware);
      if (o.dtype == "float")
        rc = run_all<float>(o, ops, *comm, log, prov);
      else if (o.dtype == "double")
        rc = run_all<double>(o, ops, *comm, log, prov);
      else
        rc = run_all<paraxis::bf16>(o, ops, *comm, log, prov);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "paraxis-bench-comm (rank %d): %s\n", rank, e.what());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, paraxis::exit_code::bad_input);
    }
  }
  free_raw_types();
  MPI_Finalize();
  return rc;
}
