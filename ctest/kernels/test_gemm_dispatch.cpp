// set_automatic_gemm: `automatic` follows the process-wide choice, explicit variants do not.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include "../exec_spaces.hpp"
#include "paraxis/kernels/gemm.hpp"

using namespace paraxis::kernels;

namespace {
// Runs once per enabled execution space (../exec_spaces.hpp).
PARAXIS_EXEC_SPACE_TEST_SUITE(gemm_dispatch);

template <class Space>
View2<float, Space> filled(int r, int c, int salt) {
  View2<float, Space> v("v", r, c);
  auto h = Kokkos::create_mirror_view(v);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j)
      h(i, j) = static_cast<float>(((i * 7 + j * 13 + salt) % 17) - 8) / 9.0f;
  Kokkos::deep_copy(v, h);
  return v;
}

template <class Space>
std::vector<float> run(GemmVariant v) {
  auto A = filled<Space>(67, 129, 1), B = filled<Space>(129, 45, 2);
  View2<float, Space> C("C", 67, 45);
  gemm(Space(), Trans::N, Trans::N, 1.0, A, B, 0.0, C, v);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
  return std::vector<float>(h.data(), h.data() + h.size());
}
}  // namespace

TYPED_TEST(gemm_dispatch, automatic_follows_the_process_wide_choice) {
  using Space = TypeParam;
  const auto portable = run<Space>(GemmVariant::portable);
  set_automatic_gemm(GemmVariant::portable);
  EXPECT_EQ(automatic_gemm(), GemmVariant::portable);
  EXPECT_EQ(run<Space>(GemmVariant::automatic), portable);
  set_automatic_gemm(GemmVariant::automatic);
  EXPECT_EQ(automatic_gemm(), GemmVariant::automatic);
  if constexpr (gemm_vendor_applies<View2<float, Space>, View2<float, Space>,
                                    View2<float, Space>>()) {
    EXPECT_EQ(run<Space>(GemmVariant::automatic), run<Space>(GemmVariant::vendor));
    // The vendor and portable kernels sum in different orders: not bitwise equal in general.
  } else {
    EXPECT_EQ(run<Space>(GemmVariant::automatic), portable);
  }
  EXPECT_THROW(set_automatic_gemm(GemmVariant::vendor), std::invalid_argument);
}
