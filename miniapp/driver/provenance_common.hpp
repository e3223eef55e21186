// The provenance every paraxis program records, built by one function: `paraxis run`
// (summary.json's `provenance`, provenance.cpp adds the run's own keys), paraxis-bench-comm (its
// JSON's `provenance`) and the benchmark executables (their Google Benchmark context,
// benchmarks/bench_main.cpp). The key names are declared once, in
// analysis/results_schema_table.cpp (PARAXIS_PROVENANCE_FIELDS; docs/results.md lists them), and
// CTest results_schema_run checks both benchmark programs' keys against that declaration.
// Library paraxis_provenance (Kokkos, MPI, the BLAS probe); no other part of the driver.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace paraxis::driver {

// none: the process only (Kokkos must be initialized); world: also the MPI job — the library,
// world, every rank's host, the most ranks on one host, whether the library reads device
// memory — which is collective over MPI_COMM_WORLD (every rank calls it; every rank gets it).
enum class ProvenanceScope { process, mpi_world };

// paraxis_version, git_hash, command_line, compiler, cxx_flags, build_type, native_arch,
// kokkos_version, kokkos_devices, kokkos_kernels, execution_space, threads, blas_library,
// blas_core, cpu_model, cpu_vector_flags, cores_per_host, date; with mpi_world also
// mpi_library, mpi_version, mpi_gpu_aware, mpi_gpu_query, world, hosts, max_ranks_per_host.
nlohmann::json provenance_common(const std::string& command_line, ProvenanceScope scope);

// argv joined by spaces: the command_line every program records.
std::string command_line_of(int argc, char** argv);

}  // namespace paraxis::driver
