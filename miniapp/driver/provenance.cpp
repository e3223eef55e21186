// The provenance of a run in summary.json: what every paraxis program records (build, Kokkos,
// compiler, MPI library, hosts, threads, date, the BLAS and its core, the CPU:
// provenance_common.cpp), and what only a run has: whether its points stage their MPI buffers
// through host memory (provenance_mpi.hpp), since staging is part of every communication figure,
// and the BLAS warning derived from the keys (provenance.hpp).
#include <algorithm>

#include "driver/provenance.hpp"
#include "driver/provenance_common.hpp"
#include "driver/provenance_mpi.hpp"
#include "driver/results.hpp"
#include "parallel/mpi_staging.hpp"
#include "paraxis/kernels/blas_info.hpp"

namespace paraxis::driver {

using nlohmann::json;

// The keys every program records (provenance_common.hpp), MPI's included; `paraxis run` adds
// run_id, blas_threads and blas_threads_from (run_command.cpp) and mpi_staging (below).
json provenance_json(int /*world: provenance_common asks MPI_COMM_WORLD*/,
                     const std::string& command_line) {
  return provenance_common(command_line, ProvenanceScope::mpi_world);
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
