// Multi-rank test programs end promptly when one rank fails. A rank whose assertion ends a test
// case early leaves the others inside that case, waiting in one of its collectives; without
// this they would hang until a deadline (the watchdog's, the checkpoint layer's) or CTest's
// timeout. At the end of every case each rank enters a barrier on a communicator of its own (a
// duplicate of the world, so it never matches a collective of the test); a rank whose case
// failed waits for its peers at most kGraceSeconds, then names the case and ends the job with
// MPI_Abort. Ranks whose case passed wait without a limit: a case that hangs on every rank is the
// deadlines' business. The verdict does not depend on the machine's load: a peer that is only
// slow loses its own report, and the job fails either way.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "test_run_outcome.hpp"

namespace paraxis_test {

class EndJobOnFailure : public ::testing::EmptyTestEventListener {
 public:
  static constexpr double kGraceSeconds = 10.0;

  EndJobOnFailure() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &rank_);
  }

  void OnTestEnd(const ::testing::TestInfo& t) override {
    const bool failed = t.result()->Failed();
    MPI_Request req;
    MPI_Ibarrier(comm_, &req);
    const auto start = std::chrono::steady_clock::now();
    int done = 0;
    for (MPI_Test(&req, &done, MPI_STATUS_IGNORE); !done;
         MPI_Test(&req, &done, MPI_STATUS_IGNORE)) {
      const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
      if (failed && waited.count() > kGraceSeconds) {
        std::fprintf(stderr,
                     "[rank %d] failed %s.%s and its peers have not finished it %.0f s later "
                     "(they wait in one of its collectives): ending the job\n",
                     rank_, t.test_suite_name(), t.name(), kGraceSeconds);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
};

// The job's exit code from every rank's run_outcome: a failure on any rank fails the job, which
// skipped only where every rank skipped everything.
inline int agreed_outcome(int rc) {
  int mine[2] = {rc != 0 && rc != kSkipped ? 1 : 0, rc == kSkipped ? 1 : 0}, all[2] = {0, 0};
  MPI_Allreduce(&mine[0], &all[0], 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&mine[1], &all[1], 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all[0] ? 1 : all[1] ? kSkipped : 0;
}

// Appends the guard to GoogleTest's listeners (which own it). Call after MPI_Init and
// InitGoogleTest, on every rank.
inline void end_job_on_failure() {
  ::testing::UnitTest::GetInstance()->listeners().Append(new EndJobOnFailure);
}

}  // namespace paraxis_test
