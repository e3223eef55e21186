// `paraxis run` and `paraxis check`. Rank 0 reads the deck and broadcasts it, so every rank
// validates the same text and sees the same errors (all leave together, nobody hangs). `run`
// prepares the output folder before any point trains, runs each sweep point (point_run.hpp),
// and rewrites the results after every point, checked and atomically, so an interrupted sweep
// keeps the points it finished. Exit codes: config/exit_codes.hpp (docs/results.md).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include "analysis/diagnosis.hpp"
#include "analysis/point_status.hpp"
#include "checkpoint/folder_lock.hpp"
#include "config/exit_codes.hpp"
#include "deck/deck.hpp"
#include "driver/checkpoint_claim.hpp"
#include "driver/commands.hpp"
#include "driver/last_words.hpp"
#include "driver/output_folder.hpp"
#include "driver/point_checkpoint.hpp"
#include "driver/point_run.hpp"
#include "driver/provenance.hpp"
#include "driver/provenance_mpi.hpp"
#include "driver/rank_agreement.hpp"
#include "driver/results.hpp"
#include "io/checked_file.hpp"
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

std::string default_out_dir() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[64];
  std::strftime(buf, sizeof(buf), "paraxis-run-%Y%m%d-%H%M%S", std::localtime(&now));
  return buf;
}

// A message, then the whole job ends with `code` (a rank cannot tell whether the others wait
// for it in a collective). mpiexec forwards output asynchronously and MPI_Abort tears the job
// down at once: give the message a moment to reach the user's terminal or batch log first.
[[noreturn]] void end_job(int code) {
  checkpoint::release_all_folder_locks();  // no destructor runs past MPI_Abort
  std::fflush(stdout);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

// A failing rank's record for `paraxis report` (diagnosis.hpp, failure_record_json), written
// before it ends the job; a record that cannot be written is reported and the job ends anyway.
void write_failure_record(const std::string& dir, const diagnosis::Failure& f) {
  const std::string path = dir + "/" + diagnosis::failure_file_name(f.rank);
  try {
    io::write_file_checked(path, diagnosis::failure_record_json(f).dump(1) + "\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraxis: error: the failure record was not written: %s\n", e.what());
  }
}

// While a point runs on several ranks, a watchdog expiry leaves a failure record (kind hang:
// the ranks that did not answer) and then ends the job as the default handler does.
void record_hangs(const std::string& dir, const PointResult& r, int rank) {
  const nlohmann::json config = config_to_json(r.point.config);
  nlohmann::json settings = nlohmann::json::object();
  for (const auto& [k, v] : r.point.settings) settings[k] = v;
  const int index = r.index;
  parallel::watchdog::set_expiry_handler(
      [dir, config, settings, index, rank](const parallel::watchdog::Diagnosis& d) {
        diagnosis::Failure f;
        f.kind = "hang";
        f.rank = rank;
        f.point_index = index;
        f.step = d.step;
        f.config = config;
        f.settings = settings;
        f.waited_s = d.elapsed_s;
        f.op = d.op;
        f.axis = d.axis;
        for (const auto& m : d.members) {
          if (m.arrival == parallel::watchdog::Arrival::not_answering)
            f.silent.push_back(m.world_rank);
          if (m.arrival != parallel::watchdog::Arrival::arrived)
            f.not_arrived.push_back(m.world_rank);
        }
        f.what = "watchdog: " + d.op + " on " + d.axis + " waited past comm.timeout_s";
        write_failure_record(dir, f);
        // Every member answered from elsewhere: the stalled rank is further down the chain, and a
        // rank waiting on it directly expires about now. Give it the time to ask its group and
        // write its record (answering the others' questions meanwhile) before the job ends.
        if (f.silent.empty()) {
          const double until = model::steady_seconds() + parallel::watchdog::grace_s() + 0.5;
          while (model::steady_seconds() < until) {
            parallel::watchdog::service();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
        checkpoint::release_all_folder_locks();
        parallel::watchdog::abort_job(d);
      });
}

// The failure record of a rank that dies in point r (kind dead_rank): the steps it completed
// and what it was doing.
diagnosis::Failure dead_rank_record(const PointResult& r, int rank, const std::string& what) {
  diagnosis::Failure f;
  f.kind = "dead_rank";
  f.rank = rank;
  f.point_index = r.index;
  f.step = static_cast<int>(r.steps.size());  // the steps it completed
  f.config = config_to_json(r.point.config);
  for (const auto& [k, v] : r.point.settings) f.settings[k] = v;
  f.what = what;
  return f;
}

// Rank 0 writes every result file; returns 0 or exit_code::write_failed. points.csv and
// summary.json agree whatever fails: summary.json's temporary file is written first, points.csv
// is replaced only once it is complete (and a rank dying there dies before either), and
// summary.json is renamed last, so a failed or interrupted save leaves both files as they were.
int write_results(const std::string& dir, const Deck& deck, const nlohmann::json& provenance,
                  const std::vector<PointResult>& results, bool die_during_save) {
  const PointResult& r = results.back();
  try {
    if (r.point.config.output.trace && !r.steps.empty()) write_trace(dir, r);
    // summary.json last: it is the file that says which points exist.
    write_summary(dir, deck.path, provenance, results, [&] {
      // fault.dead_rank, at: save: rank 0 dies between summary.json's temporary file and its
      // rename (the previous results must survive), leaving its record (last_words.hpp).
      if (die_during_save)
        die_leaving_record(0, "the results are saved", static_cast<int>(r.steps.size()));
      write_points_csv(dir, results);
    });
  } catch (const io::WriteError& e) {
    std::fprintf(stderr, "paraxis: error: %s; the previous results are left in place\n", e.what());
    return exit_code::write_failed;
  }
  return exit_code::ok;
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

// What a run settles before its first point: the output folder, the checkpoint roots it claimed
// (locks held until the run returns) and the provenance every summary records.
struct RunSetup {
  std::string dir;
  CheckpointClaim claim;
  nlohmann::json provenance;
};

// The checks before anything is written: --resume's limits, the checkpoint claim (before --force
// touches the output folder: the run's id, its lineages and the locks on the checkpoint roots it
// writes, or a refusal; checkpoint_claim.hpp), the output folder. Returns 0 or exit 2 (bad input),
// the same verdict on every rank.
int prepare_run(const Deck& deck, const RunOptions& opt, int rank, RunSetup& s) {
  // A checkpoint continues one point; --verify's reference would have to resume too.
  if (!opt.resume.empty() && (deck.points.size() != 1 || opt.verify)) {
    if (rank == 0)
      std::fprintf(stderr, "paraxis: error: --resume %s: %s\n", opt.resume.c_str(),
                   opt.verify ? "cannot be combined with --verify (the single-rank reference "
                                "does not resume)"
                              : ("continues one point, and the deck has " +
                                 std::to_string(deck.points.size()))
                                    .c_str());
    return exit_code::bad_input;
  }
  s.dir = opt.out_dir;
  if (s.dir.empty()) s.dir = deck.points.front().config.output.dir;
  if (s.dir.empty()) s.dir = default_out_dir();
  const std::string refused = claim_checkpoints(deck, s.dir, opt, s.claim);
  if (!refused.empty()) {
    if (rank == 0) std::fprintf(stderr, "paraxis: error: %s\n", refused.c_str());
    return exit_code::bad_input;
  }
  for (const auto& note : s.claim.notes) std::fprintf(stderr, "paraxis: note: %s\n", note.c_str());
  int dir_ok = 1;
  if (rank == 0) {
    const std::string problem = prepare_output_folder(s.dir, opt.force);
    if (!problem.empty()) {
      std::fprintf(stderr, "paraxis: error: %s\n", problem.c_str());
      dir_ok = 0;
    }
  }
  MPI_Bcast(&dir_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return dir_ok ? exit_code::ok : exit_code::bad_input;
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
  const std::string& dir = s.setup.dir;
  const int rank = s.rank;
  try {
    if (s.world > 1) record_hangs(dir, r, rank);
    // An injected death while a checkpoint or the results are saved leaves this record.
    set_last_words([&dir, &r, rank](const std::string& what, int step) {
      diagnosis::Failure f = dead_rank_record(r, rank, what);
      f.step = step;
      write_failure_record(dir, f);
    });
    // Every communicator the point makes (its grid, the calibration's, --verify's) stages or not
    // by the point's comm.mpi_gpu_aware.
    parallel::set_mpi_gpu_aware(r.point.config.comm.mpi_gpu_aware);
    const PointLineage& lineage = s.setup.claim.points[i];
    run_point(r.point.config,
              PointContext{s.world, rank, s.opt.verify, i, s.deck.points.size(), &s.calibrator, dir,
                           lineage.resume, lineage},
              r);
    parallel::watchdog::set_expiry_handler({});
  } catch (const CheckpointError& ex) {
    // Agreed on every rank (point_checkpoint.hpp): no rank waits for another; the points before
    // are already written.
    parallel::watchdog::set_expiry_handler({});
    if (ex.report) std::fprintf(stderr, "paraxis: error: %s\n", ex.what());
    return ex.exit_code;
  } catch (const std::exception& ex) {
    parallel::watchdog::set_expiry_handler({});
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
  for (std::size_t i = 0; i < deck.points.size(); ++i) {
    PointResult r;
    r.index = static_cast<int>(i);
    r.point = deck.points[i];
    r.world = world;
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
    if (written) return written;
  }
  if (rank == 0)
    std::printf("results in %s/summary.json%s\n", setup.dir.c_str(),
                s.not_ok ? " (some points are not ok: see their status)" : "");
  return s.not_ok ? exit_code::not_ok : exit_code::ok;
}

}  // namespace paraxis::driver
