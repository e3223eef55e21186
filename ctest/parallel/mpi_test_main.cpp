// GoogleTest entry point for multi-rank tests: MPI, then Kokkos; every rank runs every test and
// the exit code is non-zero when any rank failed, so mpiexec reports the failure. A rank whose
// assertion ends a test early leaves the others waiting in that test's collectives: it ends the
// job 10 s later (ctest/mpi_failure_guard.hpp); a test that stalls on every rank ends at the
// watchdog's deadline, 120 s here (not paraxis run's 600 s), with the watchdog's diagnosis.
#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>

#include "../mpi_failure_guard.hpp"
#include "parallel/watchdog.hpp"

namespace {
// What ranks other than 0 print: their failures only, each line naming the rank (the default
// printer, which rank 0 keeps, would repeat every rank's progress).
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    if (t.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, t.test_suite_name(), t.name());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  paraxis::parallel::watchdog::configure(120.0);  // tests that need another deadline set their own
  if (rank != 0) {
    // Only rank 0 prints the progress; the others print their failures.
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  paraxis_test::end_job_on_failure();
  int failed = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    failed = paraxis_test::run_outcome(RUN_ALL_TESTS());
  }
  const int any = paraxis_test::agreed_outcome(failed);
  MPI_Finalize();
  return any;
}
