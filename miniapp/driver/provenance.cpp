// The provenance of a run in summary.json: build, Kokkos, compiler, MPI library, hosts (gathered
// from every rank), threads and date, so a result can be traced to what produced it; and the
// BLAS the process runs with the core it chose and the CPU (rank 0's, paraxis/kernels/
// blas_info.hpp), since a BLAS on generic kernels shifts every calibrated compute figure; and
// whether the MPI library reads device memory and the run stages its MPI buffers through host
// memory (provenance_mpi.hpp), since staging is part of every communication figure.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <set>
#include <thread>

#include "driver/provenance.hpp"
#include "driver/provenance_mpi.hpp"
#include "driver/results.hpp"
#include "parallel/mpi_staging.hpp"
#include "paraxis/build_info.hpp"
#include "paraxis/kernels/blas_info.hpp"

namespace paraxis::driver {

using nlohmann::json;

json provenance_json(int world, const std::string& command_line) {
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  std::string mpi(lib, static_cast<std::size_t>(len));
  while (!mpi.empty() && (mpi.back() == '\n' || mpi.back() == ' ')) mpi.pop_back();
  const auto nl = mpi.find('\n');
  if (nl != std::string::npos) mpi = mpi.substr(0, nl);

  // Host names of every rank, gathered to rank 0.
  char name[MPI_MAX_PROCESSOR_NAME];
  int nlen = 0;
  MPI_Get_processor_name(name, &nlen);
  std::vector<char> all(static_cast<std::size_t>(world) * MPI_MAX_PROCESSOR_NAME, '\0');
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, '\0');
  std::copy(name, name + nlen, mine.begin());
  MPI_Gather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
             MPI_CHAR, 0, MPI_COMM_WORLD);
  std::set<std::string> hosts;
  std::map<std::string, int> ranks_on;
  for (int r = 0; r < world; ++r) {
    const std::string h(&all[static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    hosts.insert(h);
    ++ranks_on[h];
  }
  int most_ranks = 0;
  for (const auto& [h, n] : ranks_on) most_ranks = std::max(most_ranks, n);

  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const kernels::BlasInfo blas = kernels::detect_blas();
  const kernels::CpuInfo cpu = kernels::detect_cpu();
  // Only the vector-width flags the BLAS warning reads: the full list is long and says nothing
  // more about a figure.
  json vector_flags = json::array();
  for (const char* f : {"avx", "avx2", "avx512f", "avx512bw", "avx512dq", "avx512vl"})
    if (std::find(cpu.flags.begin(), cpu.flags.end(), f) != cpu.flags.end())
      vector_flags.push_back(f);
  const parallel::MpiGpuQuery& gpu = parallel::mpi_gpu_support();
  return json{{"paraxis_version", build_info::version},
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
              {"mpi_library", mpi},
              {"mpi_gpu_aware", parallel::to_string(gpu.answer)},
              {"mpi_gpu_query", gpu.how},
              {"blas_library", blas.library},
              {"blas_core", blas.core},
              {"cpu_model", kernels::cpu_model_string(cpu)},
              {"cpu_vector_flags", vector_flags},
              {"world", world},
              {"hosts", hosts},
              // More ranks than cores on a host: every figure includes time-sharing.
              {"max_ranks_per_host", most_ranks},
              {"cores_per_host", std::thread::hardware_concurrency()},
              {"date", date}};
}

std::string record_mpi_staging(json& provenance, const std::vector<SweepPoint>& points) {
  const parallel::MpiGpuQuery& gpu = parallel::mpi_gpu_support();
  const bool device = parallel::build_device_kind() != parallel::DeviceKind::none;
  int on = 0, off = 0;
  bool unsure = false;
  for (const auto& p : points) {
    if (!p.skip_reason.empty()) continue;
    const auto setting = p.config.comm.mpi_gpu_aware;
    const bool staged = parallel::staging_for(setting, gpu.answer, device);
    ++(staged ? on : off);
    unsure = unsure || (staged && setting == config::MpiGpuAware::automatic &&
                        gpu.answer == parallel::MpiGpuSupport::unknown);
  }
  provenance["mpi_staging"] = on && off ? "per point" : on ? "on" : "off";
  return unsure ? parallel::unknown_support_note() : std::string();
}

std::optional<std::string> blas_warning_of(const json& provenance) {
  const auto core = provenance.find("blas_core");
  const auto flags = provenance.find("cpu_vector_flags");
  if (core == provenance.end() || !core->is_string() || flags == provenance.end() ||
      !flags->is_array())
    return std::nullopt;
  std::vector<std::string> f;
  for (const auto& v : *flags)
    if (v.is_string()) f.push_back(v.get<std::string>());
  return kernels::blas_core_warning(core->get<std::string>(), f);
}

}  // namespace paraxis::driver
