// Entry point of the paraxis benchmark executables: Kokkos for the whole run, provenance in
// the benchmark context (so it lands in --benchmark_format=json output), including the BLAS
// library, the core it chose and the CPU model, with a warning on stderr when that BLAS runs
// generic kernels on a CPU with wider vector units (every BLAS figure would be misleading).
// Exits 1 when any row failed (a wrong result: bench_check.hpp), naming the rows on stderr;
// --corrupt-for-test makes every check see a wrong element (the test of that path).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <iostream>
#include <string>
#include <thread>

#include "bench_check.hpp"
#include "error_count_reporter.hpp"
#include "kernels/bench_util.hpp"
#include "paraxis/build_info.hpp"
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
  if (take_corrupt_flag(argc, argv)) paraxis::bench::corrupt_checks_for_test();
  Kokkos::ScopeGuard kokkos(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("paraxis_version", paraxis::build_info::version);
  benchmark::AddCustomContext("paraxis_git", paraxis::build_info::git_hash);
  benchmark::AddCustomContext("paraxis_cxx", paraxis::build_info::cxx_compiler);
  benchmark::AddCustomContext("paraxis_cxx_flags", paraxis::build_info::cxx_flags);
  benchmark::AddCustomContext("paraxis_native_arch",
                              paraxis::build_info::native_arch ? "on" : "off");
  benchmark::AddCustomContext("kokkos_version", paraxis::build_info::kokkos_version);
  benchmark::AddCustomContext("kokkos_execution_space", Kokkos::DefaultExecutionSpace::name());
  benchmark::AddCustomContext("kokkos_concurrency",
                              std::to_string(Kokkos::DefaultExecutionSpace().concurrency()));
  benchmark::AddCustomContext("kokkos_kernels", paraxis::build_info::kokkos_kernels ? "yes" : "no");
  const auto blas = paraxis::kernels::detect_blas();
  const auto cpu = paraxis::kernels::detect_cpu();
  benchmark::AddCustomContext("blas_library", blas.library);
  benchmark::AddCustomContext("blas_core", blas.core);
  benchmark::AddCustomContext("cpu_model", paraxis::kernels::cpu_model_string(cpu));
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
