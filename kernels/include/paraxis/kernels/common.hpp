// Shared vocabulary of the kernel library: View aliases, accumulation types, shape checks.
// Kernels are templated on the execution space and on their View types; every View must be
// accessible from the space that runs the kernel (checked at compile time).
#pragma once

#include <Kokkos_Core.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "paraxis/kernels/bf16.hpp"

namespace paraxis::kernels {

template <class T, class Space>
using View1 = Kokkos::View<T*, Kokkos::LayoutRight, typename Space::memory_space>;
template <class T, class Space>
using View2 = Kokkos::View<T**, Kokkos::LayoutRight, typename Space::memory_space>;
template <class T, class Space>
using View3 = Kokkos::View<T***, Kokkos::LayoutRight, typename Space::memory_space>;

// Accumulation type: fp32 for fp32 and bf16 storage, fp64 for fp64 storage.
template <class T>
struct accum {
  using type = float;
};
template <>
struct accum<double> {
  using type = double;
};
template <class T>
using acc_t = typename accum<std::remove_cv_t<T>>::type;

template <class V>
using value_t = std::remove_cv_t<typename V::value_type>;

// Compile-time check that a View can be read/written from ExecSpace.
template <class ExecSpace, class... Views>
constexpr void assert_accessible() {
  static_assert(
      (Kokkos::SpaceAccessibility<ExecSpace, typename Views::memory_space>::accessible && ...),
      "paraxis kernel: a View is not accessible from the execution space running the kernel");
}

template <class V>
std::string shape_string(const V& v) {
  std::ostringstream os;
  os << '[';
  for (unsigned r = 0; r < V::rank; ++r) os << (r ? "," : "") << v.extent(r);
  os << ']';
  return os.str();
}

// Throws std::invalid_argument naming the kernel, the argument, its shape and the expected one.
template <class V>
void require_shape(const char* kernel, const char* arg, const V& v,
                   std::initializer_list<std::size_t> expected) {
  bool ok = expected.size() == V::rank;
  unsigned r = 0;
  for (auto e : expected) {
    if (ok && v.extent(r) != e) ok = false;
    ++r;
  }
  if (!ok) {
    std::ostringstream os;
    os << kernel << ": " << arg << " has shape " << shape_string(v) << ", expected [";
    r = 0;
    for (auto e : expected) os << (r++ ? "," : "") << e;
    os << ']';
    throw std::invalid_argument(os.str());
  }
}

}  // namespace paraxis::kernels
