// Entry point of the paraxis benchmark executables: Kokkos for the whole run, provenance in
// the benchmark context (so it lands in --benchmark_format=json output).
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <string>
#include <thread>

#include "paraxis/build_info.hpp"

int main(int argc, char** argv) {
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
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
