// Device buffers and MPI (mpi_staging.hpp): the library's answer, the staging rule and setting,
// and the host buffers and copies of a staged operation.
#include "parallel/mpi_staging.hpp"

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <atomic>

// Open MPI declares its GPU queries in mpi-ext.h (MPIX_CUDA_AWARE_SUPPORT, MPIX_ROCM_AWARE_SUPPORT
// say whether it was built with them); MPICH >= 4.0 declares MPIX_GPU_query_support in mpi.h,
// with the MPIX_GPU_SUPPORT_* kinds as macros.
#if defined(OPEN_MPI) && OPEN_MPI && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#define PARAXIS_HAVE_MPI_EXT 1
#endif
#endif

namespace paraxis::parallel {

DeviceKind build_device_kind() {
  using Mem = Kokkos::DefaultExecutionSpace::memory_space;
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible) return DeviceKind::none;
#if defined(KOKKOS_ENABLE_CUDA)
  return DeviceKind::cuda;
#elif defined(KOKKOS_ENABLE_HIP)
  return DeviceKind::hip;
#elif defined(KOKKOS_ENABLE_SYCL)
  return DeviceKind::sycl;
#else
  return DeviceKind::other;
#endif
}

const char* to_string(DeviceKind k) {
  switch (k) {
    case DeviceKind::none:
      return "none";
    case DeviceKind::cuda:
      return "cuda";
    case DeviceKind::hip:
      return "hip";
    case DeviceKind::sycl:
      return "sycl";
    case DeviceKind::other:
      return "device";
  }
  return "unknown";
}

const char* to_string(MpiGpuSupport s) {
  switch (s) {
    case MpiGpuSupport::yes:
      return "yes";
    case MpiGpuSupport::no:
      return "no";
    case MpiGpuSupport::unknown:
      return "unknown";
    case MpiGpuSupport::not_applicable:
      return "n/a";
  }
  return "unknown";
}

MpiGpuQuery query_mpi_gpu_support(DeviceKind kind) {
  if (kind == DeviceKind::none)
    return {MpiGpuSupport::not_applicable, "host-only build: no device memory to ask about"};
#if defined(MPIX_GPU_SUPPORT_CUDA)
  if (kind == DeviceKind::other)
    return {MpiGpuSupport::unknown, "MPIX_GPU_query_support knows no kind for this device"};
  const int type = kind == DeviceKind::cuda  ? MPIX_GPU_SUPPORT_CUDA
                   : kind == DeviceKind::hip ? MPIX_GPU_SUPPORT_HIP
                                             : MPIX_GPU_SUPPORT_ZE;
  const char* name = kind == DeviceKind::cuda  ? "MPIX_GPU_SUPPORT_CUDA"
                     : kind == DeviceKind::hip ? "MPIX_GPU_SUPPORT_HIP"
                                               : "MPIX_GPU_SUPPORT_ZE";
  int supported = 0;
  const std::string how = std::string("MPIX_GPU_query_support(") + name + ")";
  if (MPIX_GPU_query_support(type, &supported) != MPI_SUCCESS)
    return {MpiGpuSupport::unknown, how + " failed"};
  return {supported ? MpiGpuSupport::yes : MpiGpuSupport::no, how};
#elif defined(PARAXIS_HAVE_MPI_EXT)
  if (kind == DeviceKind::cuda) {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return {MPIX_Query_cuda_support() ? MpiGpuSupport::yes : MpiGpuSupport::no,
            "MPIX_Query_cuda_support()"};
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
    return {MpiGpuSupport::no, "mpi-ext.h: MPIX_CUDA_AWARE_SUPPORT = 0"};
#endif
  }
  if (kind == DeviceKind::hip) {
#if defined(MPIX_ROCM_AWARE_SUPPORT) && MPIX_ROCM_AWARE_SUPPORT
    return {MPIX_Query_rocm_support() ? MpiGpuSupport::yes : MpiGpuSupport::no,
            "MPIX_Query_rocm_support()"};
#elif defined(MPIX_ROCM_AWARE_SUPPORT)
    return {MpiGpuSupport::no, "mpi-ext.h: MPIX_ROCM_AWARE_SUPPORT = 0"};
#endif
  }
  return {MpiGpuSupport::unknown,
          std::string("mpi-ext.h declares no query for ") + to_string(kind) + " memory"};
#else
  return {MpiGpuSupport::unknown,
          std::string("the MPI header declares no query for ") + to_string(kind) + " memory"};
#endif
}

const MpiGpuQuery& mpi_gpu_support() {
  static const MpiGpuQuery q = query_mpi_gpu_support(build_device_kind());
  return q;
}

bool staging_for(config::MpiGpuAware setting, MpiGpuSupport library, bool device_build) {
  switch (setting) {
    case config::MpiGpuAware::yes:
      return false;
    case config::MpiGpuAware::no:
      return true;
    case config::MpiGpuAware::automatic:
      break;
  }
  return device_build && library != MpiGpuSupport::yes;
}

namespace {
std::atomic<int> g_setting{static_cast<int>(config::MpiGpuAware::automatic)};
std::atomic<std::size_t> g_staged_bytes{0};
}  // namespace

std::size_t staged_bytes_in_process() {
  return g_staged_bytes.load();
}

void set_mpi_gpu_aware(config::MpiGpuAware setting) {
  g_setting = static_cast<int>(setting);
}

config::MpiGpuAware mpi_gpu_aware_setting() {
  return static_cast<config::MpiGpuAware>(g_setting.load());
}

bool mpi_staging() {
  return staging_for(mpi_gpu_aware_setting(), mpi_gpu_support().answer,
                     build_device_kind() != DeviceKind::none);
}

std::string unknown_support_note() {
  const auto& q = mpi_gpu_support();
  return std::string("the MPI library cannot say whether it reads ") +
         to_string(build_device_kind()) + " memory (" + q.how +
         "): MPI buffers are staged through host memory; set comm.mpi_gpu_aware: yes if it is "
         "GPU-aware";
}

// ---- staging buffers and copies

namespace {
#if defined(KOKKOS_ENABLE_CUDA)
using StagingSpace = Kokkos::CudaHostPinnedSpace;
#else
using StagingSpace = Kokkos::HostSpace;
#endif
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
using UserBytes = Kokkos::View<char*, Kokkos::DefaultExecutionSpace::memory_space, Unmanaged>;
using HostBytes = Kokkos::View<char*, Kokkos::HostSpace, Unmanaged>;

std::size_t rounded(std::size_t bytes) {
  std::size_t c = 4096;
  while (c < bytes) c *= 2;
  return c;
}
}  // namespace

struct StagingPool::Buffer {
  Kokkos::View<char*, StagingSpace> bytes;
  std::size_t capacity() const { return bytes.extent(0); }
};

StagingPool::StagingPool() = default;
StagingPool::~StagingPool() = default;

char* StagingPool::data(const Lease& l) {
  return l ? l->bytes.data() : nullptr;
}

StagingPool::Lease StagingPool::lease(std::size_t bytes) {
  // Free: held by the pool alone.
  Lease* fit = nullptr;
  Lease* largest = nullptr;
  for (auto& b : buffers_) {
    if (b.use_count() != 1) continue;
    if (b->capacity() >= bytes && (!fit || b->capacity() < (*fit)->capacity())) fit = &b;
    if (!largest || b->capacity() > (*largest)->capacity()) largest = &b;
  }
  if (fit) return *fit;
  if (!largest) {
    buffers_.push_back(std::make_shared<Buffer>());
    largest = &buffers_.back();
  }
  // Drop the old allocation first: the peak is the new size, not both.
  (*largest)->bytes = {};
  (*largest)->bytes = Kokkos::View<char*, StagingSpace>(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "paraxis::mpi_staging"), rounded(bytes));
  ++allocations_;
  return *largest;
}

void StagingPool::to_host(char* host, const void* user, std::size_t bytes) {
  if (bytes == 0) return;
  // deep_copy fences before it copies: the kernels that wrote `user` have finished.
  Kokkos::deep_copy(HostBytes(host, bytes),
                    UserBytes(static_cast<char*>(const_cast<void*>(user)), bytes));
  staged_bytes_ += bytes;
  g_staged_bytes += bytes;
}

void StagingPool::from_host(void* user, const char* host, std::size_t bytes) {
  if (bytes == 0) return;
  Kokkos::deep_copy(UserBytes(static_cast<char*>(user), bytes),
                    HostBytes(const_cast<char*>(host), bytes));
  staged_bytes_ += bytes;
  g_staged_bytes += bytes;
}

}  // namespace paraxis::parallel
