// The MPI part of a run's provenance (provenance.cpp): whether the MPI library reads the build's
// device memory (mpi_gpu_aware, with the call that answered: mpi_gpu_query) and whether the
// run's points stage their MPI buffers through host memory (mpi_staging; comm.mpi_gpu_aware,
// parallel/mpi_staging.hpp, docs/parallel.md "Device buffers and MPI").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deck/deck.hpp"

namespace paraxis::driver {

// Adds "mpi_staging" to `provenance`: "on" or "off" when every point that runs agrees, "per
// point" when a sweep sets comm.mpi_gpu_aware differently (each point's config says). Returns a
// note for the user (empty: none) when a point stages only because the library cannot say.
std::string record_mpi_staging(nlohmann::json& provenance, const std::vector<SweepPoint>& points);

}  // namespace paraxis::driver
