// Helpers shared by the kernel tests: a fixed-seed generator, host<->device View transfer
// through std::vector<double>, rounding of reference inputs to the storage type, and
// comparisons that report the worst element. Views live in the memory space of the execution
// space a test runs on (a template argument: the tests are typed over ../exec_spaces.hpp).
#pragma once

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../exec_spaces.hpp"
#include "paraxis/kernels/common.hpp"

namespace ktest {

template <class T, class Space>
using V1 = paraxis::kernels::View1<T, Space>;
template <class T, class Space>
using V2 = paraxis::kernels::View2<T, Space>;
template <class T, class Space>
using V3 = paraxis::kernels::View3<T, Space>;

// splitmix64: fixed seed, same sequence on every machine.
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * (static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0));
  }
  int integer(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

inline std::vector<double> random_vec(std::size_t n, std::uint64_t seed, double lo = -1.0,
                                      double hi = 1.0) {
  Rng r(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = r.uniform(lo, hi);
  return v;
}

// The values as storage type T holds them (so references see exactly the kernel's inputs).
template <class T>
std::vector<double> rounded(std::vector<double> v) {
  for (auto& x : v) x = static_cast<double>(static_cast<T>(x));
  return v;
}

template <class V>
void fill(const V& v, const std::vector<double>& data) {
  using T = typename V::non_const_value_type;
  auto h = Kokkos::create_mirror_view(v);
  EXPECT_EQ(h.span(), data.size());
  for (std::size_t k = 0; k < data.size() && k < h.span(); ++k)
    h.data()[k] = static_cast<T>(data[k]);
  Kokkos::deep_copy(v, h);
}

// Device Views of Space's memory space holding d (row-major), converted to T.
template <class T, class Space>
V1<T, Space> make1(const std::vector<double>& d) {
  V1<T, Space> v("v1", d.size());
  fill(v, d);
  return v;
}
template <class T, class Space>
V2<T, Space> make2(std::size_t r, std::size_t c, const std::vector<double>& d) {
  V2<T, Space> v("v2", r, c);
  fill(v, d);
  return v;
}
template <class T, class Space>
V3<T, Space> make3(std::size_t a, std::size_t b, std::size_t c, const std::vector<double>& d) {
  V3<T, Space> v("v3", a, b, c);
  fill(v, d);
  return v;
}

template <class V>
std::vector<double> to_host(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<double> out(h.span());
  for (std::size_t k = 0; k < h.span(); ++k) out[k] = static_cast<double>(h.data()[k]);
  return out;
}

template <class V>
bool bitwise_equal(const V& a, const V& b) {
  auto ha = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a);
  auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b);
  return ha.span() == hb.span() &&
         std::memcmp(ha.data(), hb.data(), ha.span() * sizeof(typename V::value_type)) == 0;
}

// |got - ref| <= atol + rtol * |ref| elementwise; reports the worst element.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& ref,
                         double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double worst = 0.0;
  std::size_t at = 0;
  bool ok = true;
  for (std::size_t k = 0; k < got.size(); ++k) {
    const double err = std::fabs(got[k] - ref[k]);
    const double excess = err - (atol + rtol * std::fabs(ref[k]));
    if (!(excess <= 0.0)) ok = false;
    if (!(excess <= worst)) {
      worst = excess;
      at = k;
    }
  }
  EXPECT_TRUE(ok) << what << ": element " << at << " got " << got[at] << " expected " << ref[at]
                  << " (atol " << atol << ", rtol " << rtol << ")";
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) s += a[k] * b[k];
  return s;
}

inline std::vector<double> axpy(const std::vector<double>& x, double h,
                                const std::vector<double>& d) {
  std::vector<double> r(x);
  for (std::size_t k = 0; k < r.size(); ++k) r[k] += h * d[k];
  return r;
}

// Central difference of a scalar function along direction d: (f(x+hd) - f(x-hd)) / 2h.
template <class F>
double directional_fd(const F& f, const std::vector<double>& x, const std::vector<double>& d,
                      double h = 1e-5) {
  return (f(axpy(x, h, d)) - f(axpy(x, -h, d))) / (2.0 * h);
}

// Runs f, expects std::invalid_argument whose message contains every string in parts.
template <class F>
void expect_shape_error(const F& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg << " lacks " << p;
  }
}

// A device View of the given integers (token ids, targets).
template <class Space>
paraxis::kernels::View1<int, Space> int_view(const std::vector<int>& t) {
  paraxis::kernels::View1<int, Space> v("ktest::ints", t.size());
  auto h = Kokkos::create_mirror_view(v);
  for (std::size_t k = 0; k < t.size(); ++k) h(k) = t[k];
  Kokkos::deep_copy(v, h);
  return v;
}

}  // namespace ktest
