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
  // vectorizes: a float compare, integer adds, shifts and a masked or per element.
  KOKKOS_INLINE_FUNCTION static std::uint16_t round_from_float(float f) {
    std::uint32_t u;
    memcpy(&u, &f, sizeof(u));
    // Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate. Inf
    // (mantissa 0) is unchanged; the largest finite values round up to Inf, as IEEE says.
    // NaN (f != f): keep sign and payload's top bits, force the quiet bit so it stays a NaN.
    // The NaN test is the float compare (one vector compare into a mask, merged into the
    // result by a masked or); an integer test of the bits (and, compare) and a select of two
    // shifted results cost a fifth more per converted element (bitwise the same results, all
    // 2^32 inputs; docs/perf-log/2026-12-05-kernels-followup.md).
    const std::uint32_t lsb = (u >> 16) & 1u;
    const std::uint32_t r = f != f ? (u | 0x00400000u) : (u + 0x7fffu + lsb);
    return static_cast<std::uint16_t>(r >> 16);
  }
};

static_assert(sizeof(bf16) == 2, "bf16 must be two bytes");

}  // namespace paraxis
