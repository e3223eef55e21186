// `paraxis run` and `paraxis check`. Rank 0 reads the deck and broadcasts it, so every rank
// validates the same text and sees the same errors (all leave together, nobody hangs). `run`
// prepares the output folder before any point trains (run_folder.hpp), runs each sweep point
// (point_run.hpp) with its failure hooks armed (point_faults.hpp), and rewrites the results after
// every point, checked and atomically, so an interrupted sweep keeps the points it finished.
// Exit codes: config/exit_codes.hpp (docs/results.md).
#include <mpi.h>

#include <cstdio>

#include "analysis/diagnosis.hpp"
#include "analysis/point_status.hpp"
#include "config/exit_codes.hpp"
#include "deck/deck.hpp"
#include "driver/commands.hpp"
#include "driver/last_words.hpp"
#include "driver/point_checkpoint.hpp"
#include "driver/point_faults.hpp"
#include "driver/point_run.hpp"
#include "driver/provenance.hpp"
#include "driver/provenance_mpi.hpp"
#include "driver/rank_agreement.hpp"
#include "driver/run_folder.hpp"
#include "parallel/mpi_staging.hpp"
#include "parallel/parallel_trainer.hpp"
#include "parallel/watchdog.hpp"
#include "paraxis/kernels/blas_info.hpp"

namespace paraxis::driver {

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void report_errors(const Deck& deck) {
  for (const auto& e : deck.errors)
    std::fprintf(stderr, "paraxis: error: %s\n", e.to_string().c_str());
  std::fprintf(stderr, "paraxis: %zu error(s) in %s\n", deck.errors.size(), deck.path.c_str());
}

// The deck as rank 0 reads it, parsed on every rank (rank_agreement.hpp).
Deck load_shared_deck(const std::string& path, const std::vector<std::string>& overrides,
                      int world) {
  std::string error;
  const std::string text = read_on_rank0_and_broadcast(path, error);
  if (!error.empty()) {
    Deck d;
    d.path = path;
    d.errors.push_back(DeckError{"", path, error});
    return d;
  }
  return load_deck_text(text, path, overrides, world);
}

void print_point_line(const PointResult& r, std::size_t i, std::size_t total, double point_s,
                      double left_s) {
  const auto& cfg = r.point.config;
  const double step_s = measured_median(r, [](const model::StepResult& s) { return s.time_s; });
  const double tokens = static_cast<double>(cfg.train.global_batch) * cfg.model.seq_len;
  std::printf("point %zu/%zu [%s] done in %.2f s: %s", i + 1, total, settings_text(r.point).c_str(),
              point_s, r.status.text().c_str());
  if (r.status.is_ok())
    std::printf(", step %.4f s, %.0f tokens/s, final loss %.6f", step_s,
                step_s > 0 ? tokens / step_s : 0.0, r.steps.back().loss);
  std::printf(", about %.0f s left\n", left_s);
  std::fflush(stdout);
}

// The run's provenance, and the BLAS's worker threads: those of the host execution space (1 on
// Serial), unless the user set them. Left alone OpenBLAS starts one per core in every rank, and
// ranks sharing a node then time-share its cores inside every GEMM above OpenBLAS's threading
// threshold (2 ranks on 2 cores: the demo's dp and pp points ran 2-4x slower than its tp points,
// whose halved GEMMs stay single-threaded; docs/performance.md).
nlohmann::json run_provenance(const Deck& deck, const RunOptions& opt, const std::string& run_id,
                              int world, int rank) {
  const std::string blas_env = kernels::blas_threads_from_environment();
  if (blas_env.empty())
    kernels::set_blas_threads(Kokkos::DefaultHostExecutionSpace().concurrency());
  nlohmann::json provenance = provenance_json(world, opt.command_line);
  provenance["run_id"] = run_id;
  provenance["blas_threads"] = kernels::blas_threads();
  provenance["blas_threads_from"] =
      blas_env.empty() ? "paraxis: the host execution space's threads" : "environment: " + blas_env;
  // Whether the points stage their MPI buffers through host memory (comm.mpi_gpu_aware,
  // docs/parallel.md "Device buffers and MPI"); said once when only the library's silence
  // makes them stage.
  const std::string staging_note = record_mpi_staging(provenance, deck.points);
  // Once, before any figure is measured: a BLAS on generic kernels skews them all.
  if (rank == 0) {
    if (const auto blas_warning = blas_warning_of(provenance))
      std::fprintf(stderr, "paraxis: warning: %s\n", blas_warning->c_str());
    if (!staging_note.empty()) std::fprintf(stderr, "paraxis: note: %s\n", staging_note.c_str());
  }
  return provenance;
}

// The state of a run between its points.
struct RunState {
  const Deck& deck;
  const RunOptions& opt;
  RunSetup& setup;
  int rank = 0, world = 1;
  std::vector<PointResult> results;
  Calibrator calibrator;
  double run_begin = 0;
  int not_ok = 0;
};

// A rank that throws in point i: alone, it records the point and keeps what it measured; with
// several ranks the others may be waiting for it in a collective: it says what its loss takes out
// (docs/diagnosis.md), leaves a failure record for `paraxis report` and ends the job (earlier
// points are already written). Returns the run's exit code.
int point_failed(RunState& s, PointResult& r, std::size_t i, const std::exception& ex) {
  const std::size_t total = s.deck.points.size();
  std::fprintf(stderr, "paraxis: error: rank %d failed in point %zu/%zu (%s): %s\n", s.rank, i + 1,
               total, settings_text(r.point).c_str(), ex.what());
  if (s.world > 1) {
    std::fprintf(stderr, "paraxis: %s\n",
                 diagnosis::loss_takes_out(r.point.config.parallel, s.rank).c_str());
    write_failure_record(s.setup.dir, dead_rank_record(r, s.rank, ex.what()));
    end_job(exit_code::rank_failed);
  }
  r.status = PointStatus::failed(ex.what());
  s.results.push_back(r);
  const int w = write_results(s.setup.dir, s.deck, s.setup.provenance, s.results, false);
  return w ? w : exit_code::rank_failed;
}

// Point i on every rank, its failure hooks armed (a hang's record, a dying rank's last words);
// returns -1 when the run goes on, else the exit code that ends it.
int train_point(RunState& s, std::size_t i, PointResult& r) {
  try {
    arm_failure_hooks(s.setup.dir, r, s.rank, s.world);
    // Every communicator the point makes (its grid, the calibration's, --verify's) stages or not
    // by the point's comm.mpi_gpu_aware.
    parallel::set_mpi_gpu_aware(r.point.config.comm.mpi_gpu_aware);
    const PointLineage& lineage = s.setup.claim.points[i];
    run_point(r.point.config,
              PointContext{s.world, s.rank, s.opt.verify, i, s.deck.points.size(), &s.calibrator,
                           s.setup.dir, lineage.resume, lineage},
              r);
    disarm_hang_record();
  } catch (const CheckpointError& ex) {
    // Agreed on every rank (point_checkpoint.hpp): no rank waits for another; the points before
    // are already written.
    disarm_hang_record();
    if (ex.report) std::fprintf(stderr, "paraxis: error: %s\n", ex.what());
    return ex.exit_code;
  } catch (const std::exception& ex) {
    disarm_hang_record();
    return point_failed(s, r, i, ex);
  }
  return -1;
}

// After point i: rank 0 rewrites the results (fault.dead_rank at: save dies in between) and
// prints the point's line; every rank learns whether the results were saved. Returns 0, or the
// write's exit code: a run that cannot write its results stops.
int save_point(RunState& s, std::size_t i, const PointResult& r, double point_begin) {
  const auto& dead = r.point.config.fault.dead_rank;
  const bool die_during_save = dead.at == DeadAt::save && dead.rank == s.rank;
  if (die_during_save && s.rank != 0)
    die_leaving_record(s.rank, "the results are saved", static_cast<int>(r.steps.size()));
  int written = 0;
  if (s.rank == 0) {
    written = write_results(s.setup.dir, s.deck, s.setup.provenance, s.results, die_during_save);
    const double now = model::steady_seconds();
    const std::size_t total = s.deck.points.size();
    const double per_point = (now - s.run_begin) / static_cast<double>(i + 1);
    if (written == 0)
      print_point_line(r, i, total, now - point_begin,
                       per_point * static_cast<double>(total - i - 1));
  }
  parallel::watchdog::broadcast(&written, 1, MPI_INT, 0, MPI_COMM_WORLD,
                                "broadcast the results' write status");
  return written;
}

// The steps of sweep point i: skipped by the deck's rules, or trained on every rank with its
// failure hooks armed; then tallied, and the run's results rewritten. Returns -1 when the run
// goes on, else the exit code that ends it.
int run_sweep_point(RunState& s, std::size_t i) {
  PointResult r;
  r.index = static_cast<int>(i);
  r.point = s.deck.points[i];
  r.world = s.world;
  const double point_begin = model::steady_seconds();
  if (!r.point.skip_reason.empty()) {
    r.status = PointStatus::skipped(r.point.skip_reason);
  } else if (const int rc = train_point(s, i, r); rc >= 0) {
    return rc;
  }
  if (r.status.counts_as_not_ok()) ++s.not_ok;
  s.results.push_back(r);
  const int written = save_point(s, i, r, point_begin);
  set_last_words({});
  return written ? written : -1;
}

}  // namespace

int check_command(const std::string& path, const std::vector<std::string>& overrides, int ranks) {
  const Deck deck = load_shared_deck(path, overrides, ranks);
  if (world_rank() != 0) return deck.errors.empty() ? exit_code::ok : exit_code::bad_input;
  if (!deck.errors.empty()) {
    report_errors(deck);
    return exit_code::bad_input;
  }
  int skipped = 0;
  for (std::size_t i = 0; i < deck.points.size(); ++i) {
    const auto& p = deck.points[i];
    if (!p.skip_reason.empty()) {
      ++skipped;
      std::printf("point %zu (%s): would be skipped: %s\n", i + 1, settings_text(p).c_str(),
                  p.skip_reason.c_str());
    }
  }
  std::printf("%s: ok, %zu point(s), %d would be skipped\n", path.c_str(), deck.points.size(),
              skipped);
  return exit_code::ok;
}

int run_command(const RunOptions& opt) {
  const int rank = world_rank(), world = world_size();
  const Deck deck = load_shared_deck(opt.deck, opt.overrides, world);
  if (!deck.errors.empty()) {
    if (rank == 0) report_errors(deck);
    return exit_code::bad_input;
  }
  RunSetup setup;
  if (const int rc = prepare_run(deck, opt, rank, setup); rc != exit_code::ok) return rc;
  setup.provenance = run_provenance(deck, opt, setup.claim.run_id, world, rank);
  RunState s{deck, opt, setup, rank, world, {}, {}, model::steady_seconds(), 0};
  // The last words capture a point's result: never called once the run returns.
  struct ClearLastWords {
    ~ClearLastWords() { set_last_words({}); }
  } clear_last_words;
  for (std::size_t i = 0; i < deck.points.size(); ++i)
    if (const int rc = run_sweep_point(s, i); rc >= 0) return rc;
  if (rank == 0)
    std::printf("results in %s/summary.json%s\n", setup.dir.c_str(),
                s.not_ok ? " (some points are not ok: see their status)" : "");
  return s.not_ok ? exit_code::not_ok : exit_code::ok;
}

}  // namespace paraxis::driver
