// bf16 conversion: round to nearest even, NaN and Inf kept, round trip exact for bf16 values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "paraxis/kernels/bf16.hpp"
#include "paraxis/kernels/row_lanes.hpp"

using paraxis::bf16;

namespace {
float from_bits32(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

TEST(bf16, exact_values_round_trip) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65280.0f, 1.0f / 1024}) {
    EXPECT_EQ(static_cast<float>(bf16(f)), f) << f;
  }
  EXPECT_TRUE(std::signbit(static_cast<float>(bf16(-0.0f))));
}

TEST(bf16, rounds_to_nearest_even) {
  // 1 + 2^-8 lies exactly between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(bf16(from_bits32(0x3f808000u)).bits, 0x3f80u);
  // 1 + 3 * 2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up to even.
  EXPECT_EQ(bf16(from_bits32(0x3f818000u)).bits, 0x3f82u);
  // Just above the half-way point rounds up, just below rounds down.
  EXPECT_EQ(bf16(from_bits32(0x3f808001u)).bits, 0x3f81u);
  EXPECT_EQ(bf16(from_bits32(0x3f807fffu)).bits, 0x3f80u);
  // Negative numbers mirror positive ones.
  EXPECT_EQ(bf16(from_bits32(0xbf818000u)).bits, 0xbf82u);
}

TEST(bf16, keeps_inf_and_nan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bf16(inf).bits, 0x7f80u);
  EXPECT_EQ(bf16(-inf).bits, 0xff80u);
  EXPECT_TRUE(std::isinf(static_cast<float>(bf16(inf))));
  // A NaN whose payload sits only in the low 16 bits would truncate to Inf without care.
  const float low_payload_nan = from_bits32(0x7f800001u);
  ASSERT_TRUE(std::isnan(low_payload_nan));
  EXPECT_TRUE(std::isnan(static_cast<float>(bf16(low_payload_nan))));
  EXPECT_TRUE(std::isnan(static_cast<float>(bf16(std::numeric_limits<float>::quiet_NaN()))));
  // The largest float rounds up to Inf (round to nearest), as IEEE specifies.
  EXPECT_TRUE(std::isinf(static_cast<float>(bf16(std::numeric_limits<float>::max()))));
}

TEST(bf16, relative_error_bounded_by_half_ulp) {
  // bf16 has 8 significant bits: relative rounding error at most 2^-8.
  for (int i = 1; i < 5000; ++i) {
    const float f = 0.001f * static_cast<float>(i) * static_cast<float>(i);
    const float r = static_cast<float>(bf16(f));
    EXPECT_LE(std::fabs(r - f), std::ldexp(std::fabs(f), -8)) << f;
  }
}

// Every upper half (sign, exponent, the 7 kept bits) with the low halves that decide the rounding
// (0, 1, just below, at and above the tie, all ones, and others) against the definition written
// out with branches: NaN -> its top 16 bits with the quiet bit set; otherwise the nearer of the
// two bf16 values around it, the even one on a tie (bf16.hpp's vectorized form is branch-free).
// (All 2^32 patterns agree too: 18 s, too long for the default suite.)
TEST(bf16, every_upper_half_rounds_as_defined) {
  unsigned long long wrong = 0;
  std::uint32_t first = 0;
  for (std::uint32_t b = 0; b < (1u << 16) * 12u; ++b) {
    static const std::uint32_t lows[12] = {0x0000u, 0x0001u, 0x3fffu, 0x7ffeu, 0x7fffu, 0x8000u,
                                           0x8001u, 0x8002u, 0xbfffu, 0xc000u, 0xfffeu, 0xffffu};
    const std::uint32_t u = ((b / 12u) << 16) | lows[b % 12u];
    std::uint32_t want;
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
      want = (u >> 16) | 0x40u;
    } else {
      const std::uint32_t down = u >> 16, rest = u & 0xffffu;
      const bool up = rest > 0x8000u || (rest == 0x8000u && (down & 1u));
      want = (down + (up ? 1u : 0u)) & 0xffffu;
    }
    if (bf16::round_from_float(from_bits32(u)) != want && wrong++ == 0) first = u;
  }
  EXPECT_EQ(wrong, 0u) << "first at bits 0x" << std::hex << first;
}

// The host rows' block store (row_lanes.hpp store_row: vcvtne2ps2bf16 where the build targets
// AVX512-BF16, which reads subnormals as zero) is bitwise the scalar rounding: the same 786,432
// patterns stored 32 at a time, blocks of every kind (a subnormal among normal values included),
// plus a row whose length is not a multiple of 32 (the tail).
TEST(bf16, row_store_rounds_as_scalar) {
  constexpr std::uint32_t n = (1u << 16) * 12u + 7u;
  std::vector<float> in(n);
  for (std::uint32_t b = 0; b < n; ++b) {
    static const std::uint32_t lows[12] = {0x0000u, 0x0001u, 0x3fffu, 0x7ffeu, 0x7fffu, 0x8000u,
                                           0x8001u, 0x8002u, 0xbfffu, 0xc000u, 0xfffeu, 0xffffu};
    // Interleave upper halves so most blocks mix subnormal-free and arbitrary values.
    const std::uint32_t hi = (b / 12u * 40503u) & 0xffffu;
    in[b] = from_bits32((hi << 16) | lows[b % 12u]);
  }
  in[64] = from_bits32(0x00000001u);  // a block of normal values but one subnormal
  for (std::uint32_t j = 96; j < 128; ++j) in[j] = 1.0f + static_cast<float>(j) / 256.0f;
  std::vector<bf16> out(n);
  paraxis::kernels::detail::store_row(out.data(), static_cast<int>(n),
                                      [&](int k) { return in[k]; });
  unsigned long long wrong = 0;
  std::uint32_t first = 0;
  for (std::uint32_t k = 0; k < n; ++k)
    if (out[k].bits != bf16::round_from_float(in[k]) && wrong++ == 0) first = k;
  EXPECT_EQ(wrong, 0u) << "first at element " << first;
  RecordProperty("host_bf16_cvt", PARAXIS_HOST_BF16_CVT);  // which path ran
}
