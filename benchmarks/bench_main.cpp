// Entry point of the paraxis benchmark executables: Kokkos for the whole run, provenance in
// the benchmark context (so it lands in --benchmark_format=json output; the keys of summary.json's
// provenance, driver/provenance_common.hpp), including the BLAS library, the core it chose and
// the CPU model, with a warning on stderr when that BLAS runs generic kernels on a CPU with wider
// vector units (every BLAS figure would be misleading).
// Exits 1 when any row failed (a wrong result: bench_check.hpp), naming the rows on stderr;
// --corrupt-for-test makes every check see a wrong element (the test of that path).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <iostream>
#include <string>
#include <thread>

#include "bench_check.hpp"
#include "driver/provenance_common.hpp"
#include "error_count_reporter.hpp"
#include "kernels/bench_util.hpp"
#include "paraxis/kernels/blas_info.hpp"

namespace {

// Removes --corrupt-for-test from argv (Google Benchmark rejects flags it does not know) and
// says whether it was there.
bool take_corrupt_flag(int& argc, char** argv) {
  const auto end = std::remove_if(
      argv + 1, argv + argc, [](const char* a) { return std::string(a) == "--corrupt-for-test"; });
  const bool found = end != argv + argc;
  argc = static_cast<int>(end - argv);
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command_line = paraxis::driver::command_line_of(argc, argv);
  if (take_corrupt_flag(argc, argv)) paraxis::bench::corrupt_checks_for_test();
  Kokkos::ScopeGuard kokkos(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // The provenance every paraxis program records, under the same keys as summary.json's
  // (driver/provenance_common.hpp); the context takes strings: others as JSON text. `date` is
  // Google Benchmark's own context key already.
  const auto provenance =
      paraxis::driver::provenance_common(command_line, paraxis::driver::ProvenanceScope::process);
  for (const auto& [key, value] : provenance.items())
    if (key != "date")
      benchmark::AddCustomContext(key, value.is_string() ? value.get<std::string>() : value.dump());
  const auto blas = paraxis::kernels::detect_blas();
  const auto cpu = paraxis::kernels::detect_cpu();
  // The past-cache shapes of the memory-bound families are sized from this (bench_util.hpp).
  const auto& llc = paraxis::bench::last_level_cache();
  benchmark::AddCustomContext("llc_bytes", std::to_string(llc.bytes));
  benchmark::AddCustomContext("llc_source", llc.source);
  if (const auto warning = paraxis::kernels::blas_core_warning(blas.core, cpu.flags))
    std::cerr << "WARNING: " << *warning << "\n";
  paraxis::bench::ErrorCountReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  for (const auto& name : reporter.failed()) std::cerr << "FAILED: " << name << "\n";
  if (!reporter.failed().empty())
    std::cerr << reporter.failed().size() << " benchmark row(s) failed (see their messages)\n";
  return reporter.failed().empty() ? 0 : 1;
}
