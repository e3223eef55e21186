// The provenance of a run in summary.json: build, Kokkos, compiler, MPI library, hosts (gathered
// from every rank), threads and date, so a result can be traced to what produced it.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <set>
#include <thread>

#include "driver/results.hpp"
#include "paraxis/build_info.hpp"

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
              {"world", world},
              {"hosts", hosts},
              // More ranks than cores on a host: every figure includes time-sharing.
              {"max_ranks_per_host", most_ranks},
              {"cores_per_host", std::thread::hardware_concurrency()},
              {"date", date}};
}

}  // namespace paraxis::driver
