// GEMM against a plain host reference computed in double: every (op(A), op(B)) combination,
// unaligned and multi-tile sizes, alpha/beta (beta = 0 over NaN), fp64 / fp32 / bf16 / mixed
// storage, strided and LayoutLeft Views, batched, vendor vs portable; shape errors, variant
// errors and bitwise repeatability; the host tile choice for a thread count, and the same
// bits under every tiling (so under every thread count).
//
// Tolerance: with unit roundoff u of the accumulation type a dot product of length k obeys
// |computed - exact| <= k*u*sum|a||b| (first order); alpha, beta and the final add add two more
// roundings, and a C stored narrower than the accumulator adds one rounding of its own type.
// The bound is checked per entry, so it is tight where values are small and cannot hide an
// indexing error (which moves entries by O(sum|a||b|)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "../exec_spaces.hpp"
#include "paraxis/kernels/gemm.hpp"

namespace pk = paraxis::kernels;
using paraxis::bf16;
using pk::GemmVariant;
using pk::Trans;

namespace {

// Every test runs once per enabled execution space (../exec_spaces.hpp); Views live in that
// space's memory space.
PARAXIS_EXEC_SPACE_TEST_SUITE(gemm);

// Deterministic values in [-1, 1): splitmix64 of (seed, index).
double hashed_value(std::uint64_t seed, std::uint64_t idx) {
  std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + idx + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}

template <class T>
double unit_roundoff() {
  if constexpr (std::is_same_v<T, double>) return 0x1.0p-53;
  if constexpr (std::is_same_v<T, float>) return 0x1.0p-24;
  return 0x1.0p-8;  // bf16: 8 significant bits
}

template <class T>
double to_double(T x) {
  return static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, bf16>, float, T>>(x));
}

template <class V>
void fill(const V& v, std::uint64_t seed) {
  using T = typename V::non_const_value_type;
  auto h = Kokkos::create_mirror_view(v);
  std::uint64_t idx = 0;
  if constexpr (V::rank == 2) {
    for (std::size_t i = 0; i < v.extent(0); ++i)
      for (std::size_t j = 0; j < v.extent(1); ++j) h(i, j) = T(hashed_value(seed, idx++));
  } else {
    for (std::size_t b = 0; b < v.extent(0); ++b)
      for (std::size_t i = 0; i < v.extent(1); ++i)
        for (std::size_t j = 0; j < v.extent(2); ++j) h(b, i, j) = T(hashed_value(seed, idx++));
  }
  Kokkos::deep_copy(v, h);
}

template <class V>
void fill_nan(const V& v) {
  using T = typename V::non_const_value_type;
  auto h = Kokkos::create_mirror_view(v);
  const T nan = T(std::numeric_limits<float>::quiet_NaN());
  if constexpr (V::rank == 2) {
    for (std::size_t i = 0; i < v.extent(0); ++i)
      for (std::size_t j = 0; j < v.extent(1); ++j) h(i, j) = nan;
  } else {
    for (std::size_t b = 0; b < v.extent(0); ++b)
      for (std::size_t i = 0; i < v.extent(1); ++i)
        for (std::size_t j = 0; j < v.extent(2); ++j) h(b, i, j) = nan;
  }
  Kokkos::deep_copy(v, h);
}

// Host reference for one batch entry: C = alpha*op(A)*op(B) + beta*C0 in double, plus the
// per-entry error bound described at the top of the file. HA/HB/HC0 are rank-3 host mirrors.
template <class Acc, class TC, class HA, class HB, class HC>
void expect_matches_reference(const char* what, Trans ta, Trans tb, double alpha, double beta,
                              const HA& hA, const HB& hB, const HC& hC0, const HC& hC, int batch,
                              int m, int n, int k) {
  const double u = unit_roundoff<Acc>();
  const double u_out = std::is_same_v<TC, Acc> ? 0.0 : unit_roundoff<TC>();
  int bad = 0;
  for (int p = 0; p < batch; ++p)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0, mag = 0;
        for (int l = 0; l < k; ++l) {
          const double a = to_double(ta == Trans::N ? hA(p, i, l) : hA(p, l, i));
          const double b = to_double(tb == Trans::N ? hB(p, l, j) : hB(p, j, l));
          s += a * b;
          mag += std::abs(a * b);
        }
        const double c0 = beta == 0 ? 0.0 : beta * to_double(hC0(p, i, j));
        const double ref = alpha * s + c0;
        const double tol =
            (k + 3) * u * (std::abs(alpha) * mag + std::abs(c0)) + u_out * std::abs(ref) + 1e-300;
        const double got = to_double(hC(p, i, j));
        if (!(std::abs(got - ref) <= tol) && bad++ < 5)
          ADD_FAILURE() << what << " op" << char(ta) << char(tb) << " m=" << m << " n=" << n
                        << " k=" << k << " batch " << p << " C(" << i << "," << j << ")=" << got
                        << " reference " << ref << " tolerance " << tol;
      }
  EXPECT_EQ(bad, 0) << what;
}

// A host copy as a rank-3 View (a batch of one for rank 2). Always a fresh allocation: on a
// host space create_mirror_view would alias the device View and a "before" copy would change.
template <class V>
auto as_rank3_host(const V& v) {
  auto h = Kokkos::create_mirror_view(v);
  Kokkos::deep_copy(h, v);
  constexpr bool r3 = V::rank == 3;
  Kokkos::View<typename V::non_const_value_type***, Kokkos::LayoutRight, Kokkos::HostSpace> r(
      "ref", r3 ? v.extent(0) : 1, v.extent(r3 ? 1 : 0), v.extent(r3 ? 2 : 1));
  for (std::size_t p = 0; p < r.extent(0); ++p)
    for (std::size_t i = 0; i < r.extent(1); ++i)
      for (std::size_t j = 0; j < r.extent(2); ++j) {
        if constexpr (r3) {
          r(p, i, j) = h(p, i, j);
        } else {
          r(p, i, j) = h(i, j);
        }
      }
  return r;
}

// Runs one GEMM (rank 2, or rank 3 with `batch` > 0) and compares with the reference.
template <class TA, class TB, class TC, class Space, class Layout = Kokkos::LayoutRight>
void check(Trans ta, Trans tb, int m, int n, int k, double alpha, double beta, GemmVariant v,
           int batch = 0, bool nan_c = false) {
  using Acc = std::conditional_t<std::is_same_v<TA, double> || std::is_same_v<TB, double> ||
                                     std::is_same_v<TC, double>,
                                 double, float>;
  using Mem = typename Space::memory_space;
  const int ar = ta == Trans::N ? m : k, ac = ta == Trans::N ? k : m;
  const int br = tb == Trans::N ? k : n, bc = tb == Trans::N ? n : k;
  std::string what = std::string(pk::to_string(v)) + (batch ? " batched" : "");
  if (batch == 0) {
    Kokkos::View<TA**, Layout, Mem> A("A", ar, ac);
    Kokkos::View<TB**, Layout, Mem> B("B", br, bc);
    Kokkos::View<TC**, Layout, Mem> C("C", m, n);
    fill(A, 1);
    fill(B, 2);
    if (nan_c)
      fill_nan(C);
    else
      fill(C, 3);
    auto hC0 = as_rank3_host(C);
    pk::gemm(Space(), ta, tb, alpha, Kokkos::View<const TA**, Layout, Mem>(A), B, beta, C, v);
    Kokkos::fence();
    expect_matches_reference<Acc, TC>(what.c_str(), ta, tb, alpha, beta, as_rank3_host(A),
                                      as_rank3_host(B), hC0, as_rank3_host(C), 1, m, n, k);
  } else {
    Kokkos::View<TA***, Layout, Mem> A("A", batch, ar, ac);
    Kokkos::View<TB***, Layout, Mem> B("B", batch, br, bc);
    Kokkos::View<TC***, Layout, Mem> C("C", batch, m, n);
    fill(A, 4);
    fill(B, 5);
    if (nan_c)
      fill_nan(C);
    else
      fill(C, 6);
    auto hC0 = as_rank3_host(C);
    pk::gemm_batched(Space(), ta, tb, alpha, A, B, beta, C, v);
    Kokkos::fence();
    expect_matches_reference<Acc, TC>(what.c_str(), ta, tb, alpha, beta, as_rank3_host(A),
                                      as_rank3_host(B), hC0, as_rank3_host(C), batch, m, n, k);
  }
}

const Trans kTrans[] = {Trans::N, Trans::T};
struct Mnk {
  int m, n, k;
};
// Unaligned mixes, degenerate vectors, and cases spanning several C tiles (in M and in N) and
// several K panels on every tile configuration (host tiles are up to 512 x 512, KC >= 128).
const Mnk kShapes[] = {{1, 1, 1},    {37, 53, 129}, {129, 37, 53},   {53, 129, 37}, {1, 129, 53},
                       {129, 1, 37}, {37, 53, 1},   {197, 531, 517}, {531, 45, 260}};

template <class Space>
std::vector<GemmVariant> variants_for_floats() {
  using VF = Kokkos::View<float**, typename Space::memory_space>;
  std::vector<GemmVariant> v{GemmVariant::portable, GemmVariant::automatic};
  if (pk::gemm_vendor_applies<VF, VF, VF>()) v.push_back(GemmVariant::vendor);
  return v;
}

}  // namespace

TYPED_TEST(gemm, fp64_all_transposes_match_reference) {
  using Space = TypeParam;
  for (auto v : variants_for_floats<Space>())
    for (Trans ta : kTrans)
      for (Trans tb : kTrans)
        for (auto s : kShapes)
          check<double, double, double, Space>(ta, tb, s.m, s.n, s.k, 1.0, 0.0, v);
}

TYPED_TEST(gemm, fp32_all_transposes_alpha_beta_match_reference) {
  using Space = TypeParam;
  for (auto v : variants_for_floats<Space>())
    for (Trans ta : kTrans)
      for (Trans tb : kTrans)
        for (auto s : kShapes)
          check<float, float, float, Space>(ta, tb, s.m, s.n, s.k, -0.75, 1.5, v);
}

TYPED_TEST(gemm, fp32_layout_left_matches_reference) {
  using Space = TypeParam;
  for (auto v : variants_for_floats<Space>())
    for (Trans ta : kTrans)
      for (Trans tb : kTrans)
        check<float, float, float, Space, Kokkos::LayoutLeft>(ta, tb, 53, 37, 129, 2.0, -1.0, v);
}

TYPED_TEST(gemm, beta_zero_ignores_nan_in_c) {
  using Space = TypeParam;
  for (auto v : variants_for_floats<Space>())
    for (Trans ta : kTrans)
      for (Trans tb : kTrans) {
        check<float, float, float, Space>(ta, tb, 37, 53, 129, 1.25, 0.0, v, 0, true);
        check<double, double, double, Space>(ta, tb, 129, 37, 53, 1.0, 0.0, v, 0, true);
        check<float, float, float, Space>(ta, tb, 37, 53, 129, 1.0, 0.0, v, 3, true);
      }
  // K spanning several panels: later panels add to C, which must not have kept the NaN.
  check<float, float, float, Space>(Trans::N, Trans::N, 37, 53, 600, 1.0, 0.0,
                                    GemmVariant::portable, 0, true);
  check<bf16, bf16, bf16, Space>(Trans::N, Trans::T, 37, 53, 600, 1.0, 0.0, GemmVariant::portable,
                                 0, true);
}

TYPED_TEST(gemm, bf16_inputs_fp32_output_accumulate_in_fp32) {
  using Space = TypeParam;
  for (Trans ta : kTrans)
    for (Trans tb : kTrans)
      for (auto s : kShapes)
        check<bf16, bf16, float, Space>(ta, tb, s.m, s.n, s.k, 1.0, 0.5, GemmVariant::automatic);
}

TYPED_TEST(gemm, bf16_everywhere_and_mixed_storage) {
  using Space = TypeParam;
  for (Trans ta : kTrans)
    for (Trans tb : kTrans) {
      check<bf16, bf16, bf16, Space>(ta, tb, 37, 53, 300, 1.0, 1.0, GemmVariant::automatic);
      check<bf16, float, float, Space>(ta, tb, 53, 129, 37, 0.5, 0.0, GemmVariant::automatic);
      // Any fp64 operand makes the accumulation fp64; a float C is then rounded once.
      check<float, double, float, Space>(ta, tb, 129, 37, 300, 1.0, 2.0, GemmVariant::automatic);
      check<bf16, bf16, double, Space>(ta, tb, 37, 129, 53, 1.0, 1.0, GemmVariant::automatic);
    }
}

TYPED_TEST(gemm, batched_matches_reference) {
  using Space = TypeParam;
  for (auto v : variants_for_floats<Space>())
    for (Trans ta : kTrans)
      for (Trans tb : kTrans) {
        check<float, float, float, Space>(ta, tb, 37, 53, 129, 1.0, 0.5, v, 3);
        check<double, double, double, Space>(ta, tb, 53, 1, 37, -1.0, 1.0, v, 2);
      }
  for (Trans ta : kTrans)
    for (Trans tb : kTrans)
      check<bf16, bf16, float, Space>(ta, tb, 53, 37, 129, 1.0, 0.0, GemmVariant::automatic, 4);
}

TYPED_TEST(gemm, strided_and_padded_views_match_reference) {
  using Space = TypeParam;
  using Mem = typename Space::memory_space;
  // A: 37x53 stored column-major with leading dimension 40 inside a flat buffer (LayoutStride,
  // so only the portable kernel applies). C: a window of a wider row-major matrix (LayoutRight
  // with a padded row stride, which the vendor BLAS takes as its leading dimension).
  Kokkos::View<float*, Mem> Abuf("Abuf", 40 * 53);
  Kokkos::View<float**, Kokkos::LayoutStride, Mem> A(Abuf.data(),
                                                     Kokkos::LayoutStride(37, 1, 53, 40));
  Kokkos::View<float**, Mem> B("B", 53, 129), Cbig("Cbig", 40, 140);
  static_assert(!pk::gemm_vendor_applies<decltype(A), decltype(B), decltype(B)>());
  fill(A, 7);
  fill(B, 8);
  for (auto v : variants_for_floats<Space>()) {
    fill(Cbig, 9);
    auto C = Kokkos::subview(Cbig, Kokkos::make_pair(3, 40), Kokkos::make_pair(5, 134));
    auto hC0 = as_rank3_host(C);
    if (v == GemmVariant::vendor) {
      // A is not BLAS-shaped; copy it into a plain View for the vendor run.
      Kokkos::View<float**, Mem> Ac("Ac", 37, 53);
      Kokkos::deep_copy(Ac, A);
      pk::gemm(Space(), Trans::N, Trans::N, 1.0, Ac, B, 1.0, C, v);
    } else {
      pk::gemm(Space(), Trans::N, Trans::N, 1.0, A, B, 1.0, C, v);
    }
    Kokkos::fence();
    expect_matches_reference<float, float>(pk::to_string(v), Trans::N, Trans::N, 1.0, 1.0,
                                           as_rank3_host(A), as_rank3_host(B), hC0,
                                           as_rank3_host(C), 1, 37, 129, 53);
    // Entries of Cbig outside the window are untouched.
    auto hbig = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Cbig);
    Kokkos::View<float**, Kokkos::HostSpace> fresh("fresh", 40, 140);
    fill(fresh, 9);
    int changed = 0;
    for (int i = 0; i < 40; ++i)
      for (int j = 0; j < 140; ++j)
        if ((i < 3 || j < 5 || j >= 134) && hbig(i, j) != fresh(i, j)) ++changed;
    EXPECT_EQ(changed, 0) << pk::to_string(v);
  }
}

TYPED_TEST(gemm, zero_k_scales_c_by_beta) {
  using Space = TypeParam;
  using Mem = typename Space::memory_space;
  for (auto v : variants_for_floats<Space>()) {
    Kokkos::View<float**, Mem> A("A", 5, 0), B("B", 0, 7), C("C", 5, 7);
    Kokkos::deep_copy(C, 2.0f);
    pk::gemm(Space(), Trans::N, Trans::N, 1.0, A, B, 0.5, C, v);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
    EXPECT_EQ(h(4, 6), 1.0f) << pk::to_string(v);
    fill_nan(C);
    pk::gemm(Space(), Trans::N, Trans::N, 1.0, A, B, 0.0, C, v);
    Kokkos::deep_copy(h, C);
    EXPECT_EQ(h(0, 0), 0.0f) << pk::to_string(v);
  }
}

TYPED_TEST(gemm, shape_mismatch_throws_with_all_shapes) {
  using Space = TypeParam;
  using Mem = typename Space::memory_space;
  Kokkos::View<float**, Mem> A("A", 4, 5), B("B", 6, 7), C("C", 4, 7);
  try {
    pk::gemm(Space(), Trans::N, Trans::N, 1.0, A, B, 0.0, C);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[4,5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[6,7]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[4,7]"), std::string::npos) << msg;
  }
  Kokkos::View<float***, Mem> A3("A3", 2, 4, 5), B3("B3", 3, 5, 7), C3("C3", 2, 4, 7);
  try {
    pk::gemm_batched(Space(), Trans::N, Trans::N, 1.0, A3, B3, 0.0, C3);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[2,4,5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3,5,7]"), std::string::npos) << msg;
  }
  // Transposes count: op(A) = A^T is 5x4, which does not match C's 4 rows.
  EXPECT_THROW(pk::gemm(Space(), Trans::T, Trans::N, 1.0, A, B, 0.0, C), std::invalid_argument);
}

TYPED_TEST(gemm, vendor_where_it_does_not_apply_throws) {
  using Space = TypeParam;
  using Mem = typename Space::memory_space;
  Kokkos::View<bf16**, Mem> A("A", 4, 5), B("B", 5, 7);
  Kokkos::View<float**, Mem> C("C", 4, 7);
  static_assert(!pk::gemm_vendor_applies<decltype(A), decltype(B), decltype(C)>());
  try {
    pk::gemm(Space(), Trans::N, Trans::N, 1.0, A, B, 0.0, C, GemmVariant::vendor);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("vendor"), std::string::npos) << e.what();
  }
  Kokkos::View<float***, Kokkos::LayoutLeft, Mem> A3("A3", 2, 4, 5), B3("B3", 2, 5, 7),
      C3("C3", 2, 4, 7);
  EXPECT_THROW(
      pk::gemm_batched(Space(), Trans::N, Trans::N, 1.0, A3, B3, 0.0, C3, GemmVariant::vendor),
      std::invalid_argument);
}

#ifdef PARAXIS_HAVE_KOKKOSKERNELS
TYPED_TEST(gemm, vendor_applies_to_matching_float_and_double_views) {
  using Space = TypeParam;
  using Mem = typename Space::memory_space;
  using VR = Kokkos::View<float**, Kokkos::LayoutRight, Mem>;
  using VRc = Kokkos::View<const float**, Kokkos::LayoutRight, Mem>;
  using VL = Kokkos::View<double**, Kokkos::LayoutLeft, Mem>;
  using VL3 = Kokkos::View<double***, Kokkos::LayoutLeft, Mem>;
  using VR3 = Kokkos::View<double***, Kokkos::LayoutRight, Mem>;
  static_assert(pk::gemm_vendor_applies<VRc, VR, VR>());
  static_assert(pk::gemm_vendor_applies<VL, VL, VL>());
  static_assert(pk::gemm_vendor_applies<VR3, VR3, VR3>());
  static_assert(!pk::gemm_vendor_applies<VL3, VL3, VL3>());
  static_assert(!pk::gemm_vendor_applies<VR, VR, VRc>());
  static_assert(!pk::gemm_vendor_applies<VR, Kokkos::View<float**, Kokkos::LayoutLeft, Mem>, VR>());
}
#endif

TYPED_TEST(gemm, repeated_calls_are_bitwise_identical) {
  using Space = TypeParam;
  using Mem = typename Space::memory_space;
  for (auto v : variants_for_floats<Space>()) {
    Kokkos::View<float**, Mem> A("A", 197, 300), B("B", 531, 300), C1("C1", 197, 531),
        C2("C2", 197, 531);
    fill(A, 11);
    fill(B, 12);
    fill(C1, 13);
    Kokkos::deep_copy(C2, C1);
    pk::gemm(Space(), Trans::N, Trans::T, 0.5, A, B, 1.0, C1, v);
    pk::gemm(Space(), Trans::N, Trans::T, 0.5, A, B, 1.0, C2, v);
    auto h1 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C1);
    auto h2 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C2);
    EXPECT_EQ(std::memcmp(h1.data(), h2.data(), h1.span() * sizeof(float)), 0) << pk::to_string(v);
  }
}

// ---- host tiling: gemm_host_tile_shape (one team per thread, tiles chosen at run time)

namespace {
using pk::detail::gemm_host_tile_shape;
using pk::detail::GemmTileShape;
constexpr int kMR = 8, kNR = 32, kMC = 512, kNC = 512;  // fp32 host register block and maxima

long tiles_of(const GemmTileShape& t, int m, int n, int batch) {
  return long(batch) * ((m + t.mc - 1) / t.mc) * ((n + t.nc - 1) / t.nc);
}
}  // namespace

#if PARAXIS_GEMM_HOST_VECTORS
// The host packing of transposed panels moves values only: its output is bitwise the plain
// loop's, for every K length (8-blocks and the tail), both destination strides the tiles use
// (MR = 8, NR = 16 / 32), padded source lines, and bit patterns arithmetic would change (NaN
// payloads, signed zeros, subnormals).
template <class T, class Bits>
void expect_transpose_pack_is_a_copy() {
  for (int ldd : {8, 16, 32})
    for (int kc : {1, 7, 8, 9, 64, 127, 128}) {
      const long lds = kc + 3;
      std::vector<T> src(8 * lds), got(kc * ldd, T(-1)), want(kc * ldd, T(-1));
      for (std::size_t i = 0; i < src.size(); ++i) {
        Bits b = static_cast<Bits>(0x9E3779B97F4A7C15ull * (i + 1) >> (64 - 8 * sizeof(T)));
        std::memcpy(&src[i], &b, sizeof(T));
      }
      for (int p = 0; p < kc; ++p)
        for (int r = 0; r < 8; ++r) want[p * ldd + r] = src[r * lds + p];
      pk::detail::transpose_pack8(got.data(), ldd, src.data(), lds, kc);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(T)), 0)
          << "ldd " << ldd << " kc " << kc;
    }
}

TEST(gemm_host_pack, transposed_panel_is_bitwise_the_plain_copy) {
  expect_transpose_pack_is_a_copy<float, std::uint32_t>();
  expect_transpose_pack_is_a_copy<double, std::uint64_t>();
}
#endif

TEST(gemm_host_tiles, one_thread_takes_the_largest_tile) {
  // The Serial tiling as it always was: one tile up to 512 x 512, full tiles beyond.
  for (auto s : {Mnk{512, 512, 512}, Mnk{512, 2048, 512}, Mnk{128, 64, 128}, Mnk{37, 53, 1}}) {
    const auto t = gemm_host_tile_shape(s.m, s.n, 1, 1, kMR, kNR, kMC, kNC);
    EXPECT_EQ(t.mc, std::min(kMC, (s.m + kMR - 1) / kMR * kMR)) << s.m << "x" << s.n;
    EXPECT_EQ(t.nc, std::min(kNC, (s.n + kNR - 1) / kNR * kNR)) << s.m << "x" << s.n;
  }
}

TEST(gemm_host_tiles, every_thread_gets_an_equal_share) {
  // 512^3 on 2 threads: two halves; on 16 threads: sixteen 128 x 128 tiles; the MLP's
  // 512 x 2048 on 2 threads: an even number of tiles no larger than 512 x 512.
  auto t = gemm_host_tile_shape(512, 512, 1, 2, kMR, kNR, kMC, kNC);
  EXPECT_EQ(tiles_of(t, 512, 512, 1), 2) << t.mc << "x" << t.nc;
  t = gemm_host_tile_shape(512, 512, 1, 16, kMR, kNR, kMC, kNC);
  EXPECT_EQ(t.mc, 128);
  EXPECT_EQ(t.nc, 128);
  t = gemm_host_tile_shape(512, 2048, 1, 2, kMR, kNR, kMC, kNC);
  EXPECT_EQ(tiles_of(t, 512, 2048, 1) % 2, 0) << t.mc << "x" << t.nc;
  // A batch with a tile per thread already is not cut further (attention: 32 heads x 128^2).
  t = gemm_host_tile_shape(128, 128, 32, 2, kMR, kNR, kMC, kNC);
  EXPECT_EQ(t.mc, 128);
  EXPECT_EQ(t.nc, 128);
}

TEST(gemm_host_tiles, tiles_are_register_blocks_within_the_maxima_and_balanced) {
  for (int threads : {1, 2, 3, 4, 16, 64})
    for (int batch : {1, 3, 32})
      for (auto s : kShapes) {
        const auto t = gemm_host_tile_shape(s.m, s.n, batch, threads, kMR, kNR, kMC, kNC);
        const std::string what = std::to_string(s.m) + "x" + std::to_string(s.n) + " batch " +
                                 std::to_string(batch) + " threads " + std::to_string(threads);
        EXPECT_TRUE(t.mc > 0 && t.mc % kMR == 0 && t.mc <= kMC) << what << ": mc " << t.mc;
        EXPECT_TRUE(t.nc > 0 && t.nc % kNR == 0 && t.nc <= kNC) << what << ": nc " << t.nc;
        // No tile is padding only, and the busiest thread's share is at most twice its
        // fair share of the work (padded to whole register blocks) plus one narrow tile.
        EXPECT_LT(t.mc, s.m + kMR) << what;
        EXPECT_LT(t.nc, s.n + kNR) << what;
        const long tiles = tiles_of(t, s.m, s.n, batch);
        const double busiest = double((tiles + threads - 1) / threads) * t.mc * t.nc;
        const double fair =
            double(batch) * ((s.m + kMR - 1) / kMR * kMR) * ((s.n + kNR - 1) / kNR * kNR) / threads;
        EXPECT_LE(busiest, 2 * fair + double(kMC) * kNR)
            << what << ": tile " << t.mc << "x" << t.nc << ", " << tiles << " tiles";
      }
}

TYPED_TEST(gemm, every_tiling_gives_the_same_bits) {
  // A threaded space picks its C tile from the thread count; the bits must not depend on it
  // (KC, the only blocking that orders the sums, is fixed). Edge tiles, one-block tiles and
  // the largest tile, fp32 and bf16 into a float C, N and T operands, rank 2 and batched.
  using Space = TypeParam;
  using Mem = typename Space::memory_space;
  if (!Kokkos::SpaceAccessibility<Space, Kokkos::HostSpace>::accessible)
    GTEST_SKIP() << "device spaces use one fixed tile per team";
  const GemmTileShape tilings[] = {{8, 32}, {24, 96}, {136, 64}, {512, 512}, {256, 160}};
  Kokkos::View<float**, Mem> A("A", 300, 197), B("B", 531, 300), C0("C0", 197, 531),
      C("C", 197, 531);
  Kokkos::View<bf16***, Mem> A3("A3", 3, 61, 130), B3("B3", 3, 130, 77);
  Kokkos::View<float***, Mem> D0("D0", 3, 61, 77), D("D", 3, 61, 77);
  fill(A, 21);
  fill(B, 22);
  fill(C0, 23);
  fill(A3, 24);
  fill(B3, 25);
  // Fresh host copies (a host space's mirror view would alias C0 and D0).
  Kokkos::View<float**, Kokkos::HostSpace> expected("expected", 197, 531);
  Kokkos::View<float***, Kokkos::HostSpace> expected3("expected3", 3, 61, 77);
  for (std::size_t i = 0; i <= std::size(tilings); ++i) {
    const GemmTileShape t = i == 0 ? GemmTileShape{} : tilings[i - 1];  // first: the space's own
    Kokkos::deep_copy(C, C0);
    pk::detail::gemm_portable(Space(), Trans::T, Trans::T, 0.5, A, B, 1.0, C, t);
    pk::detail::gemm_portable(Space(), Trans::N, Trans::N, 1.0, A3, B3, 0.0, D, t);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
    auto h3 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), D);
    if (i == 0) {
      Kokkos::deep_copy(expected, h);
      Kokkos::deep_copy(expected3, h3);
      continue;
    }
    EXPECT_EQ(std::memcmp(h.data(), expected.data(), h.span() * sizeof(float)), 0)
        << "tile " << t.mc << "x" << t.nc;
    EXPECT_EQ(std::memcmp(h3.data(), expected3.data(), h3.span() * sizeof(float)), 0)
        << "batched, tile " << t.mc << "x" << t.nc;
  }
  // The forced tiles themselves are right (not only equal to each other).
  Kokkos::deep_copy(C, C0);
  pk::detail::gemm_portable(Space(), Trans::T, Trans::T, 0.5, A, B, 1.0, C, GemmTileShape{8, 32});
  Kokkos::fence();
  expect_matches_reference<float, float>("tile 8x32", Trans::T, Trans::T, 0.5, 1.0,
                                         as_rank3_host(A), as_rank3_host(B), as_rank3_host(C0),
                                         as_rank3_host(C), 1, 197, 531, 300);
}

TYPED_TEST(gemm, forced_tile_that_is_not_a_register_block_multiple_throws) {
  using Space = TypeParam;
  using Mem = typename Space::memory_space;
  if (!Kokkos::SpaceAccessibility<Space, Kokkos::HostSpace>::accessible)
    GTEST_SKIP() << "device spaces use one fixed tile per team";
  Kokkos::View<float**, Mem> A("A", 40, 40), B("B", 40, 40), C("C", 40, 40);
  try {
    pk::detail::gemm_portable(Space(), Trans::N, Trans::N, 1.0, A, B, 0.0, C,
                              GemmTileShape{12, 32});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("12x32"), std::string::npos) << e.what();
  }
}
