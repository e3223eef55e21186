// Which BLAS this process runs and on which CPU: the library and version, the core the BLAS
// chose at start-up (OpenBLAS picks its kernels per CPU and falls back to generic SSE ones on
// CPUs it does not know), and the CPU model. Recorded beside every benchmark and in a run's
// provenance, so a figure can be traced to the BLAS kernels that produced it. Kokkos-free and
// MPI-free (plain host code), so any layer or tool may call it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace paraxis::kernels {

struct BlasInfo {
  std::string library;  // e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY ...", "none (...)"
  std::string core;     // e.g. "SkylakeX", "Prescott"; "unknown (<why>)" when not queryable
};

struct CpuInfo {
  std::string model_name;          // /proc/cpuinfo "model name"
  int family = -1;                 // "cpu family"; -1 when absent
  int model = -1;                  // "model"; -1 when absent
  std::vector<std::string> flags;  // "flags" of the first processor
};

// The BLAS found in this process's global symbol scope (dlsym): OpenBLAS through
// openblas_get_config/openblas_get_corename, MKL through mkl_get_version_string, BLIS through
// bli_info_get_version_str. Nothing is assumed at build time: a query function that is not
// there is reported as such.
BlasInfo detect_blas();

// Parses /proc/cpuinfo text (the first processor's block). Missing fields stay empty / -1.
CpuInfo parse_cpuinfo(const std::string& text);

// /proc/cpuinfo of this machine; model_name "unknown (/proc/cpuinfo not readable)" elsewhere.
CpuInfo detect_cpu();

// "AMD EPYC (family 25, model 17)": the value of the cpu_model key.
std::string cpu_model_string(const CpuInfo& cpu);

// The warning for an OpenBLAS core whose kernels are narrower than the CPU's vector units:
// generic (SSE-only) or AVX kernels on a CPU with AVX2, or any of those or AVX2 kernels
// (Haswell, Zen) on a CPU with AVX-512 F, BW, DQ and VL (cpu_flags as /proc/cpuinfo names
// them), naming the fix (OPENBLAS_CORETYPE=SkylakeX or Haswell); nullopt when the core suits
// the CPU or is not an OpenBLAS core name.
std::optional<std::string> blas_core_warning(const std::string& core,
                                             const std::vector<std::string>& cpu_flags);

// blas_core_warning for this process and machine (detect_blas, detect_cpu).
std::optional<std::string> detected_blas_core_warning();

// The BLAS's own worker threads: OpenBLAS (openblas_get_num_threads), MKL
// (mkl_get_max_threads), BLIS (bli_thread_get_num_threads); -1 when the process's BLAS has no
// such query.
int blas_threads();

// Sets them (openblas_set_num_threads, mkl_set_num_threads, bli_thread_set_num_threads);
// false when the process's BLAS has no such function. n >= 1.
bool set_blas_threads(int n);

// The environment variable a user set the BLAS's threads with, as "NAME=value"
// (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS, MKL_NUM_THREADS, BLIS_NUM_THREADS, in OpenBLAS's
// order of precedence); empty when none is set.
std::string blas_threads_from_environment();

}  // namespace paraxis::kernels
