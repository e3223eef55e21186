// A copy baseline sized by bytes: bench_util.hpp's bench_copy<T>(state, elements) copies
// `elements` values (reads and writes each once, 2 * elements * sizeof(T) bytes), so a copy of
// the same bytes as a kernel pass moving `bytes` copies copy_elements<T>(bytes) values. It has
// the kernel's working set: when that outgrows the last-level cache, both run at memory speed,
// while a copy of one [tokens, hidden] array may still run from the cache.
#pragma once

#include <cstddef>

namespace paraxis::bench {

template <class T>
std::size_t copy_elements(double bytes) {
  return static_cast<std::size_t>(bytes / (2.0 * sizeof(T)) + 0.5);
}

}  // namespace paraxis::bench
