// bf16: paraxis's own bfloat16 storage type (Kokkos 3.4 has no bhalf_t, and its half_t is
// plain float on Serial). 1 sign, 8 exponent, 7 mantissa bits: the upper half of an IEEE
// float. Conversion from float rounds to nearest, ties to even, and keeps NaN (quietened)
// and +/-Inf. Arithmetic happens in float: a bf16 converts implicitly to float.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstring>

namespace paraxis {

struct bf16 {
  std::uint16_t bits;

  bf16() = default;
  KOKKOS_INLINE_FUNCTION explicit bf16(float f) : bits(round_from_float(f)) {}
  KOKKOS_INLINE_FUNCTION operator float() const {
    const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
  }

  // Branch-free (both results computed, one selected) so that a loop converting an array
  // vectorizes: integer adds, shifts and a compare per element.
  KOKKOS_INLINE_FUNCTION static std::uint16_t round_from_float(float f) {
    std::uint32_t u;
    memcpy(&u, &f, sizeof(u));
    // Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate. Inf
    // (mantissa 0) is unchanged; the largest finite values round up to Inf, as IEEE says.
    const std::uint32_t lsb = (u >> 16) & 1u;
    const std::uint32_t rounded = (u + 0x7fffu + lsb) >> 16;
    // NaN (exponent all ones, mantissa not 0): keep sign and payload's top bits, force the
    // quiet bit so it stays a NaN.
    const std::uint32_t quiet = (u >> 16) | 0x0040u;
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    return static_cast<std::uint16_t>(nan ? quiet : rounded);
  }
};

static_assert(sizeof(bf16) == 2, "bf16 must be two bytes");

}  // namespace paraxis
