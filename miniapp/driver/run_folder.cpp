// The output folder of `paraxis run` (run_folder.hpp).
#include "driver/run_folder.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "config/exit_codes.hpp"
#include "driver/last_words.hpp"
#include "driver/output_folder.hpp"
#include "io/checked_file.hpp"

namespace paraxis::driver {

namespace {

std::string default_out_dir() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[64];
  std::strftime(buf, sizeof(buf), "paraxis-run-%Y%m%d-%H%M%S", std::localtime(&now));
  return buf;
}

}  // namespace

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

}  // namespace paraxis::driver
