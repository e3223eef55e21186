// provenance_common (provenance_common.hpp): the one builder of every program's provenance.
#include "driver/provenance_common.hpp"

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "parallel/mpi_staging.hpp"
#include "paraxis/build_info.hpp"
#include "paraxis/kernels/blas_info.hpp"

namespace paraxis::driver {

using nlohmann::json;

namespace {

// The first line of MPI_Get_library_version (name and version) and, for MPICH, its device line
// ("ch4:ucx"), whitespace runs collapsed: "MPICH Version: 4.0.2, MPICH Device: ch4:ucx".
std::string mpi_library() {
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  std::istringstream lines(std::string(lib, static_cast<std::size_t>(len)));
  std::string line, out;
  for (int i = 0; std::getline(lines, line); ++i) {
    if (i > 0 && line.find("Device") == std::string::npos) continue;
    std::istringstream words(line);
    std::string w, joined;
    while (words >> w) joined += (joined.empty() ? "" : " ") + w;
    if (!joined.empty()) out += (out.empty() ? "" : ", ") + joined;
  }
  return out;
}

// Every rank's host name, gathered to every rank.
std::vector<std::string> rank_hosts(int world) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  std::vector<char> all(static_cast<std::size_t>(world) * MPI_MAX_PROCESSOR_NAME, '\0');
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> hosts;
  for (int r = 0; r < world; ++r)
    hosts.emplace_back(&all[static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
  return hosts;
}

void add_mpi(json& p) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const std::vector<std::string> per_rank = rank_hosts(world);
  std::map<std::string, int> ranks_on;
  for (const auto& h : per_rank) ++ranks_on[h];
  int most = 0;
  for (const auto& [h, n] : ranks_on) most = std::max(most, n);
  std::set<std::string> hosts(per_rank.begin(), per_rank.end());
  const parallel::MpiGpuQuery& gpu = parallel::mpi_gpu_support();
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  p["mpi_library"] = mpi_library();
  p["mpi_version"] = std::to_string(major) + "." + std::to_string(minor);
  p["mpi_gpu_aware"] = parallel::to_string(gpu.answer);
  p["mpi_gpu_query"] = gpu.how;
  p["world"] = world;
  p["hosts"] = hosts;
  // More ranks than cores on a host: every figure includes time-sharing.
  p["max_ranks_per_host"] = most;
}

}  // namespace

std::string command_line_of(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

json provenance_common(const std::string& command_line, ProvenanceScope scope) {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const kernels::BlasInfo blas = kernels::detect_blas();
  const kernels::CpuInfo cpu = kernels::detect_cpu();
  // Only the vector-width flags the BLAS warning reads: the full list says nothing more.
  json vector_flags = json::array();
  for (const char* f : {"avx", "avx2", "avx512f", "avx512bw", "avx512dq", "avx512vl"})
    if (std::find(cpu.flags.begin(), cpu.flags.end(), f) != cpu.flags.end())
      vector_flags.push_back(f);
  json p{{"paraxis_version", build_info::version},
         {"command_line", command_line},
         {"git_hash", build_info::git_hash},
         {"kokkos_version", build_info::kokkos_version},
         {"kokkos_devices", build_info::kokkos_devices},
         {"execution_space", Kokkos::DefaultExecutionSpace::name()},
         {"threads", Kokkos::DefaultExecutionSpace().concurrency()},
         {"compiler", build_info::cxx_compiler},
         {"cxx_flags", build_info::cxx_flags},
         {"build_type", build_info::build_type},
         {"native_arch", build_info::native_arch},
         {"kokkos_kernels", build_info::kokkos_kernels},
         {"blas_library", blas.library},
         {"blas_core", blas.core},
         {"cpu_model", kernels::cpu_model_string(cpu)},
         {"cpu_vector_flags", vector_flags},
         {"cores_per_host", std::thread::hardware_concurrency()},
         {"date", date}};
  if (scope == ProvenanceScope::mpi_world) add_mpi(p);
  return p;
}

}  // namespace paraxis::driver
