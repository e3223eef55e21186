// Device buffers and an MPI library that cannot read them (comm.mpi_gpu_aware, docs/parallel.md,
// "Device buffers and MPI"): what the library says about the build's device memory (asked once,
// where its header offers a query), the rule that turns the deck's setting into "stage or not",
// the process-wide setting the MPI communicators are created with, and the staging itself: a
// grow-only pool of host buffers per communicator and the copies between them and the caller's
// buffers. A staged operation copies its input to host memory, calls MPI on host buffers and
// copies its result back, inside the communicator's call, so its CommEvent includes the copies.
// No Kokkos here (the copies and buffers live in mpi_staging.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "config/parallel_config.hpp"

namespace paraxis::parallel {

// The device memory of the build: Kokkos' default memory space when the host cannot read it
// (none: it can; other: a device MPI has no query for, e.g. OpenMP target offload).
enum class DeviceKind { none, cuda, hip, sycl, other };
DeviceKind build_device_kind();
const char* to_string(DeviceKind k);

// What the MPI library says about reading `DeviceKind` memory: yes, no, unknown (its header
// declares no query for that kind), not_applicable (a host-only build: nothing to ask).
enum class MpiGpuSupport { yes, no, unknown, not_applicable };
const char* to_string(MpiGpuSupport s);  // "yes", "no", "unknown", "n/a"

struct MpiGpuQuery {
  MpiGpuSupport answer = MpiGpuSupport::unknown;
  std::string how;  // the call that answered, or why none could
};
// Asks the library (after MPI_Init) about `kind`; DeviceKind::none answers not_applicable.
MpiGpuQuery query_mpi_gpu_support(DeviceKind kind);
// query_mpi_gpu_support(build_device_kind()), asked once per process.
const MpiGpuQuery& mpi_gpu_support();

// The rule: yes never stages, no always does (a host build too: the test path); automatic
// stages in a device build unless the library says yes (unknown stages: a copy too many is
// slow, a device pointer handed to an MPI that cannot read it is a crash), and never in a
// host-only build.
bool staging_for(config::MpiGpuAware setting, MpiGpuSupport library, bool device_build);

// The setting the MPI communicators made from now on use (make_communicator reads it when it
// builds one); the driver sets it to each point's comm.mpi_gpu_aware. Default: automatic.
void set_mpi_gpu_aware(config::MpiGpuAware setting);
config::MpiGpuAware mpi_gpu_aware_setting();
// staging_for(the setting, mpi_gpu_support().answer, build_device_kind() != none).
bool mpi_staging();
// The line for the user when automatic stages only because the library cannot say.
std::string unknown_support_note();
// Bytes every StagingPool of the process has copied in and out so far (tests: did a run stage?).
std::size_t staged_bytes_in_process();

// Host buffers reused across calls: a buffer is leased for one operation (a non-blocking one
// holds it until its completion) and returns to the pool when the lease ends. A lease asks for
// the smallest free buffer that fits, else grows the largest free one, else adds one; sizes are
// rounded up to a power of two, so a repeated pattern of calls allocates nothing after its
// first round. Device builds with CUDA allocate pinned host memory (faster copies).
class StagingPool {
 public:
  struct Buffer;
  using Lease = std::shared_ptr<Buffer>;
  StagingPool();
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;
  Lease lease(std::size_t bytes);
  static char* data(const Lease& l);
  std::size_t allocations() const { return allocations_; }    // buffers allocated or grown
  std::size_t staged_bytes() const { return staged_bytes_; }  // copied in and out, in all
  // Copies between the caller's buffer (any memory the build's default space can copy: device
  // or host) and a staging buffer; both fence the device first, so the caller's kernels have
  // finished writing, and the copy back has landed when they return.
  void to_host(char* host, const void* user, std::size_t bytes);
  void from_host(void* user, const char* host, std::size_t bytes);

 private:
  std::vector<Lease> buffers_;
  std::size_t allocations_ = 0, staged_bytes_ = 0;
};

}  // namespace paraxis::parallel
