// Products of non-negative integers that report overflow instead of wrapping (signed overflow is
// undefined behaviour, and a wrapped world size or sweep size is a wrong answer): the deck uses it
// for world sizes, micro-batch counts and sweep sizes; anything that multiplies user-given
// integers can.
#pragma once

#include <climits>
#include <initializer_list>
#include <optional>

namespace paraxis::config {

// The product of `factors`, or nullopt when a factor is negative or the product exceeds `limit`.
inline std::optional<long long> checked_product(std::initializer_list<long long> factors,
                                                long long limit = LLONG_MAX) {
  for (long long f : factors)
    if (f < 0) return std::nullopt;
  for (long long f : factors)
    if (f == 0) return 0;  // a zero anywhere: no overflow, whatever the other factors are
  long long p = 1;
  for (long long f : factors) {
    if (p > limit / f) return std::nullopt;
    p *= f;
  }
  return p;
}

// a * b and a + b for counts (a, b >= 0) that stop at LLONG_MAX instead of wrapping.
inline long long saturating_mul(long long a, long long b) {
  return checked_product({a, b}).value_or(LLONG_MAX);
}
inline long long saturating_add(long long a, long long b) {
  return a > LLONG_MAX - b ? LLONG_MAX : a + b;
}

}  // namespace paraxis::config
