// Counter-based initialisation: the value of element i of the logical (unsharded) tensor
// `name` depends only on (seed, name, i). Any rank holding any slice of a tensor generates
// exactly the values the single-rank run has there, whatever the parallel layout.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace paraxis::model {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a of the name, mixed with the seed: one stream key per (seed, tensor).
inline std::uint64_t stream_key(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return splitmix64(h ^ splitmix64(seed));
}

// Uniform in (0, 1): 53 random bits, never exactly 0.
inline double uniform01(std::uint64_t key, std::uint64_t counter) {
  const std::uint64_t r = splitmix64(key ^ splitmix64(counter));
  return (static_cast<double>(r >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal for element i (Box-Muller on counters 2i and 2i+1).
inline double normal01(std::uint64_t key, std::uint64_t i) {
  const double u1 = uniform01(key, 2 * i);
  const double u2 = uniform01(key, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace paraxis::model
