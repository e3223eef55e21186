// The execution spaces a test runs on: every space this Kokkos build enables, as a GoogleTest
// type list, so that a typed test runs once per space instead of only on
// Kokkos::DefaultExecutionSpace. A kernel that is correct on the default space only (a race
// that a serial host space hides, a View in the wrong memory space) fails on another space.
//
// Use (one suite per test file or concept):
//   PARAXIS_EXEC_SPACE_TEST_SUITE(softmax);
//   TYPED_TEST(softmax, rows_match_host_fp64) {
//     using Space = TypeParam;  // the execution space of this instance
//     ...
//   }
// Test names read <suite>/<space>.<test>, e.g. softmax/Serial.rows_match_host_fp64, so
// `--gtest_filter=softmax/*` or `*/Cuda.*` select by suite or by space. A suite that is
// already typed over other parameters uses SpaceProduct (see below).
#pragma once

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <string>
#include <type_traits>
#include <utility>

#include "paraxis/kernels/bf16.hpp"

namespace paraxis_test {

namespace detail {

template <class... Ts>
struct TypeList {};

// Appends T to the list unless it is already there (the default space is also one of the
// named ones, and the default host space usually is too).
template <class List, class T>
struct Append;
template <class... Ts, class T>
struct Append<TypeList<Ts...>, T> {
  using type =
      std::conditional_t<(std::is_same_v<T, Ts> || ...), TypeList<Ts...>, TypeList<Ts..., T>>;
};
template <class List, class T>
using append_t = typename Append<List, T>::type;

// The list in the order below: the default space first, then the default host space, then
// every backend the configuration names (only one device backend can be enabled at a time).
using L0 = TypeList<Kokkos::DefaultExecutionSpace>;
using L1 = append_t<L0, Kokkos::DefaultHostExecutionSpace>;
#ifdef KOKKOS_ENABLE_SERIAL
using L2 = append_t<L1, Kokkos::Serial>;
#else
using L2 = L1;
#endif
#ifdef KOKKOS_ENABLE_OPENMP
using L3 = append_t<L2, Kokkos::OpenMP>;
#else
using L3 = L2;
#endif
#ifdef KOKKOS_ENABLE_THREADS
using L4 = append_t<L3, Kokkos::Threads>;
#else
using L4 = L3;
#endif
#ifdef KOKKOS_ENABLE_HPX
using L5 = append_t<L4, Kokkos::Experimental::HPX>;
#else
using L5 = L4;
#endif
#ifdef KOKKOS_ENABLE_CUDA
using L6 = append_t<L5, Kokkos::Cuda>;
#else
using L6 = L5;
#endif
// HIP left the Experimental namespace in Kokkos 4.0, SYCL in 4.5.
#if defined(KOKKOS_ENABLE_HIP) && KOKKOS_VERSION >= 40000
using L7 = append_t<L6, Kokkos::HIP>;
#elif defined(KOKKOS_ENABLE_HIP)
using L7 = append_t<L6, Kokkos::Experimental::HIP>;
#else
using L7 = L6;
#endif
#if defined(KOKKOS_ENABLE_SYCL) && KOKKOS_VERSION >= 40500
using L8 = append_t<L7, Kokkos::SYCL>;
#elif defined(KOKKOS_ENABLE_SYCL)
using L8 = append_t<L7, Kokkos::Experimental::SYCL>;
#else
using L8 = L7;
#endif
#ifdef KOKKOS_ENABLE_OPENMPTARGET
using AllSpaces = append_t<L8, Kokkos::Experimental::OpenMPTarget>;
#else
using AllSpaces = L8;
#endif

template <class List>
struct ToGtest;
template <class... Ts>
struct ToGtest<TypeList<Ts...>> {
  using type = ::testing::Types<Ts...>;
};

// Every (space, T) pair, spaces outermost.
template <class Spaces, class Ts>
struct Product;
template <class... Ss, class... Ts>
struct Product<TypeList<Ss...>, ::testing::Types<Ts...>> {
  template <class S>
  using Row = TypeList<std::pair<S, Ts>...>;
  template <class... Rows>
  struct Cat;
  template <class... As>
  struct Cat<TypeList<As...>> {
    using type = ::testing::Types<As...>;
  };
  template <class... As, class... Bs, class... Rest>
  struct Cat<TypeList<As...>, TypeList<Bs...>, Rest...> {
    using type = typename Cat<TypeList<As..., Bs...>, Rest...>::type;
  };
  using type = typename Cat<Row<Ss>...>::type;
};

}  // namespace detail

// The enabled execution spaces, deduplicated; never empty (the default space is always in).
using ExecSpaces = typename detail::ToGtest<detail::AllSpaces>::type;

// Instance names: the space's own name (Serial, OpenMP, Threads, Cuda, HIP, ...).
struct ExecSpaceNames {
  template <class Space>
  static std::string GetName(int) {
    return Space::name();
  }
};

// The name a SpaceProduct instance gives its second parameter; specialise it for each type
// used (there is no default, so an unnamed type is a compile error rather than a bare index).
template <class T>
struct ParamName;
template <>
struct ParamName<double> {
  static std::string get() { return "fp64"; }
};
template <>
struct ParamName<float> {
  static std::string get() { return "fp32"; }
};
template <>
struct ParamName<paraxis::bf16> {
  static std::string get() { return "bf16"; }
};

// A suite typed over (execution space, T) for every enabled space and every T of Ts (a
// ::testing::Types list): TypeParam is std::pair<Space, T>. Names read <space>_<T's name>.
template <class Ts>
using SpaceProduct = typename detail::Product<detail::AllSpaces, Ts>::type;
struct SpaceProductNames {
  template <class P>
  static std::string GetName(int) {
    return std::string(P::first_type::name()) + "_" + ParamName<typename P::second_type>::get();
  }
};

}  // namespace paraxis_test

// Declares the typed suite `suite` over every enabled execution space (ExecSpaces).
#define PARAXIS_EXEC_SPACE_TEST_SUITE(suite) \
  template <class Space>                     \
  class suite : public ::testing::Test {};   \
  TYPED_TEST_SUITE(suite, ::paraxis_test::ExecSpaces, ::paraxis_test::ExecSpaceNames)
