// A display reporter that counts the rows that failed (SkipWithError: a wrong result, or any
// other error a benchmark reports) while the default reporter (--benchmark_format) prints
// them, so that bench_main can exit non-zero: Google Benchmark itself returns 0 either way.
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace paraxis::bench {

namespace detail {
// Whether a run failed: Run::error_occurred up to Google Benchmark 1.7, Run::skipped
// (SkippedWithError) from 1.8 on.
template <class R>
auto run_failed(const R& r, int) -> decltype(r.skipped == decltype(r.skipped)::SkippedWithError) {
  return r.skipped == decltype(r.skipped)::SkippedWithError;
}
template <class R>
bool run_failed(const R& r, long) {
  return r.error_occurred;
}
}  // namespace detail

class ErrorCountReporter : public benchmark::BenchmarkReporter {
 public:
  ErrorCountReporter() : inner_(benchmark::CreateDefaultDisplayReporter()) {}

  bool ReportContext(const Context& context) override { return inner_->ReportContext(context); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (detail::run_failed(r, 0)) failed_.push_back(r.benchmark_name());
    inner_->ReportRuns(runs);
  }
  void Finalize() override { inner_->Finalize(); }

  // The names of the rows that failed, in the order they ran.
  const std::vector<std::string>& failed() const { return failed_; }

 private:
  // Owned by Google Benchmark (a static it creates once and never frees).
  benchmark::BenchmarkReporter* inner_;
  std::vector<std::string> failed_;
};

}  // namespace paraxis::bench
