// The divisors of a count, ascending, found in O(sqrt(n)) steps with 64-bit arithmetic: a rank
// count may be as large as INT_MAX (a machine of 2,147,483,647 devices), where counting up to n
// would take seconds and `k <= n; ++k` in int never ends (k wraps, and n % 0 is SIGFPE). The
// deck's `auto` degrees and the planner's shapes both enumerate with it.
#pragma once

#include <vector>

namespace paraxis::config {

// Every d >= 1 with n % d == 0, ascending; {} for n < 1.
inline std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (long long d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      low.push_back(static_cast<int>(d));
      if (d * d != n) high.push_back(static_cast<int>(n / d));
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

}  // namespace paraxis::config
