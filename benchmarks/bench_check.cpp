// The comparison behind every benchmark row's `wrong` counter (bench_check.hpp), and the
// benchmark context entry that says the rows are checked.
#include "bench_check.hpp"

#include <cmath>
#include <sstream>

namespace paraxis::bench {

namespace {

double rms(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

bool corrupt_for_test = false;

// Registered before main: Google Benchmark keeps custom context in a map it creates on demand.
const bool context_added = [] {
  benchmark::AddCustomContext("checked", kCheckRule);
  return true;
}();

}  // namespace

void corrupt_checks_for_test() {
  corrupt_for_test = true;
}

std::size_t check_values(benchmark::State& state, const std::string& output,
                         std::vector<double> got, const std::vector<double>& ref, double tol) {
  if (corrupt_for_test && !got.empty()) got[0] += 1.0 + std::fabs(got[0]);
  std::ostringstream msg;
  if (got.size() != ref.size()) {
    msg << output << ": " << got.size() << " elements, the reference has " << ref.size();
    state.counters["wrong"] += static_cast<double>(ref.size());
    state.SkipWithError(msg.str().c_str());
    return ref.size();
  }
  const double scale = rms(ref);
  std::size_t wrong = 0, worst = 0;
  double worst_excess = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(got[i] - ref[i]), bound = tol * (std::fabs(ref[i]) + scale);
    if (err <= bound) continue;  // NaN fails here too
    const double excess = bound > 0 ? err / bound : err;
    if (wrong == 0 || !(excess <= worst_excess)) worst = i, worst_excess = excess;
    ++wrong;
  }
  state.counters["wrong"] += static_cast<double>(wrong);
  if (wrong > 0) {
    msg.precision(9);
    msg << "wrong result: " << output << ": " << wrong << " of " << ref.size()
        << " elements outside tol " << tol << " * (|ref| + rms " << scale << "); element " << worst
        << ": got " << got[worst] << ", reference " << ref[worst];
    state.SkipWithError(msg.str().c_str());
  }
  return wrong;
}

}  // namespace paraxis::bench
