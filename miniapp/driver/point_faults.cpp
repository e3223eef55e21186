// The failure hooks of a point (point_faults.hpp).
#include "driver/point_faults.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "checkpoint/folder_lock.hpp"
#include "driver/last_words.hpp"
#include "io/checked_file.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::driver {

// mpiexec forwards output asynchronously and MPI_Abort tears the job down at once: give the
// message a moment to reach the user's terminal or batch log first.
[[noreturn]] void end_job(int code) {
  checkpoint::release_all_folder_locks();  // no destructor runs past MPI_Abort
  std::fflush(stdout);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void write_failure_record(const std::string& dir, const diagnosis::Failure& f) {
  const std::string path = dir + "/" + diagnosis::failure_file_name(f.rank);
  try {
    io::write_file_checked(path, diagnosis::failure_record_json(f).dump(1) + "\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraxis: error: the failure record was not written: %s\n", e.what());
  }
}

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

namespace {

// The hang record of point `index` from the watchdog's diagnosis: the ranks that did not answer.
diagnosis::Failure hang_record(const parallel::watchdog::Diagnosis& d, int rank, int index,
                               const nlohmann::json& config, const nlohmann::json& settings) {
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
    if (m.arrival == parallel::watchdog::Arrival::not_answering) f.silent.push_back(m.world_rank);
    if (m.arrival != parallel::watchdog::Arrival::arrived) f.not_arrived.push_back(m.world_rank);
  }
  f.what = "watchdog: " + d.op + " on " + d.axis + " waited past comm.timeout_s";
  return f;
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
        const diagnosis::Failure f = hang_record(d, rank, index, config, settings);
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

}  // namespace

void arm_failure_hooks(const std::string& dir, const PointResult& r, int rank, int world) {
  if (world > 1) record_hangs(dir, r, rank);
  // An injected death while a checkpoint or the results are saved leaves this record.
  set_last_words([dir, &r, rank](const std::string& what, int step) {
    diagnosis::Failure f = dead_rank_record(r, rank, what);
    f.step = step;
    write_failure_record(dir, f);
  });
}

void disarm_hang_record() {
  parallel::watchdog::set_expiry_handler({});
}

}  // namespace paraxis::driver
