// GoogleTest entry point for the checkpoint storage tests: MPI only (the storage layer has no
// Kokkos). Every rank runs every test; the ranks share one temporary folder (rank 0 creates it
// and names it to the others: checkpoints are written by all ranks into one root), removed when
// every rank passed and kept, with its path printed, when one failed. The exit code is non-zero
// when any rank failed; a rank that fails a test while its peers wait in that test's collectives
// ends the job 10 s later (ctest/mpi_failure_guard.hpp).
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "../mpi_failure_guard.hpp"

namespace {
// Ranks other than 0 print only their failures, each naming the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char dir[4096] = {0};
  if (rank == 0) {
    const char* base = std::getenv("TMPDIR");
    std::string d = std::string(base && *base ? base : "/tmp") + "/paraxis-ckpt-test.XXXXXX";
    if (::mkdtemp(d.data()) == nullptr) {
      std::perror(("checkpoint tests: cannot create " + d).c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    std::snprintf(dir, sizeof dir, "%s", d.c_str());
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  ::setenv("TEST_TMPDIR", (std::string(dir) + "/").c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  paraxis_test::end_job_on_failure();
  const int failed = paraxis_test::run_outcome(RUN_ALL_TESTS());
  const int any = paraxis_test::agreed_outcome(failed);
  if (rank == 0) {
    std::error_code ec;
    if (any == 0 || any == paraxis_test::kSkipped)
      std::filesystem::remove_all(dir, ec);
    else
      std::fprintf(stderr, "checkpoint tests: temporary files kept in %s\n", dir);
  }
  MPI_Finalize();
  return any;
}
