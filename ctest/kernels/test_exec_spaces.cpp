// The execution-space list the typed tests run over (../exec_spaces.hpp): every backend the
// Kokkos build enables is in it exactly once, the default spaces included, each under its own
// instance name; a kernel launched on each instance runs on that space.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../exec_spaces.hpp"

namespace {

template <class List, class T>
struct Count;
template <class... Ts, class T>
struct Count<::testing::Types<Ts...>, T> {
  static constexpr int value = (0 + ... + int(std::is_same_v<Ts, T>));
};
template <class T>
constexpr int count_in_list = Count<paraxis_test::ExecSpaces, T>::value;

template <class List>
struct Names;
template <class... Ts>
struct Names<::testing::Types<Ts...>> {
  static std::vector<std::string> get() {
    return {paraxis_test::ExecSpaceNames::GetName<Ts>(0)...};
  }
  static int count() { return static_cast<int>(sizeof...(Ts)); }
};

// The backends the configuration enables, counted from Kokkos' own macros.
constexpr int enabled_backends() {
  int n = 0;
#ifdef KOKKOS_ENABLE_SERIAL
  ++n;
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  ++n;
#endif
#ifdef KOKKOS_ENABLE_THREADS
  ++n;
#endif
#ifdef KOKKOS_ENABLE_HPX
  ++n;
#endif
#ifdef KOKKOS_ENABLE_CUDA
  ++n;
#endif
#ifdef KOKKOS_ENABLE_HIP
  ++n;
#endif
#ifdef KOKKOS_ENABLE_SYCL
  ++n;
#endif
#ifdef KOKKOS_ENABLE_OPENMPTARGET
  ++n;
#endif
  return n;
}

TEST(exec_spaces, every_enabled_backend_once_defaults_included) {
  EXPECT_EQ(count_in_list<Kokkos::DefaultExecutionSpace>, 1);
  EXPECT_EQ(count_in_list<Kokkos::DefaultHostExecutionSpace>, 1);
#ifdef KOKKOS_ENABLE_SERIAL
  EXPECT_EQ(count_in_list<Kokkos::Serial>, 1);
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  EXPECT_EQ(count_in_list<Kokkos::OpenMP>, 1);
#endif
#ifdef KOKKOS_ENABLE_THREADS
  EXPECT_EQ(count_in_list<Kokkos::Threads>, 1);
#endif
#ifdef KOKKOS_ENABLE_CUDA
  EXPECT_EQ(count_in_list<Kokkos::Cuda>, 1);
#endif
  // The default spaces are enabled backends themselves, so the list holds nothing else.
  const auto names = Names<paraxis_test::ExecSpaces>::get();
  EXPECT_EQ(static_cast<int>(names.size()), enabled_backends());
  EXPECT_EQ(names.front(), std::string(Kokkos::DefaultExecutionSpace::name()));
  // Instance names must differ, or GoogleTest would register two suites under one name.
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
}

TEST(exec_spaces, product_pairs_every_space_with_every_type) {
  using P = paraxis_test::SpaceProduct<::testing::Types<double, float>>;
  EXPECT_EQ((Count<P, std::pair<Kokkos::DefaultExecutionSpace, double>>::value), 1);
  EXPECT_EQ((Count<P, std::pair<Kokkos::DefaultExecutionSpace, float>>::value), 1);
  using DefaultFloat = std::pair<Kokkos::DefaultExecutionSpace, float>;
  EXPECT_EQ(paraxis_test::SpaceProductNames::GetName<DefaultFloat>(0),
            std::string(Kokkos::DefaultExecutionSpace::name()) + "_fp32");
  // Every space times both types, nothing more.
  EXPECT_EQ(Names<P>::count(), 2 * static_cast<int>(Names<paraxis_test::ExecSpaces>::get().size()));
}

PARAXIS_EXEC_SPACE_TEST_SUITE(exec_space_instance);

}  // namespace

// Outside the unnamed namespace and the test body: CUDA's extended lambdas must sit in a
// function with external linkage, not in a private member such as a TestBody.
namespace exec_spaces_test {
// Fills a View of Space's memory with 0..n-1 on Space and sums it there.
template <class Space>
long fill_and_sum(Kokkos::View<long*, typename Space::memory_space> v) {
  const int n = static_cast<int>(v.extent(0));
  Kokkos::parallel_for(
      "exec_spaces::fill", Kokkos::RangePolicy<Space>(0, n), KOKKOS_LAMBDA(int i) { v(i) = i; });
  long sum = 0;
  Kokkos::parallel_reduce(
      "exec_spaces::sum", Kokkos::RangePolicy<Space>(0, n),
      KOKKOS_LAMBDA(int i, long& s) { s += v(i); }, sum);
  return sum;
}
}  // namespace exec_spaces_test

namespace {

// The sum of 0..n-1 computed on each instance's space is exact, the View written there reads
// back through a host mirror, and the instance carries the space's name.
TYPED_TEST(exec_space_instance, reduction_runs_on_the_space) {
  using Space = TypeParam;
  const int n = 1000;
  Kokkos::View<long*, typename Space::memory_space> v("v", n);
  EXPECT_EQ(exec_spaces_test::fill_and_sum<Space>(v), long(n) * (n - 1) / 2);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  EXPECT_EQ(h(n - 1), n - 1);
  EXPECT_EQ(::testing::UnitTest::GetInstance()->current_test_suite()->name(),
            std::string("exec_space_instance/") + Space::name());
}

}  // namespace
