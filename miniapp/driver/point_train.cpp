// The training steps of one sweep point (point_stages.hpp): each step checked for divergence,
// the deck's faults injected (fault.slow_rank acts inside the parallel trainer), rank 0
// printing one line per step (written at most once a second: output_pacer.hpp).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <thread>

#include "analysis/statistics.hpp"
#include "driver/output_pacer.hpp"
#include "driver/point_run.hpp"
#include "driver/point_stages.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::driver {

namespace wd = parallel::watchdog;

std::string divergence_of(const model::StepResult& s) {
  auto bad = [&](const char* what, double v) {
    return std::string(what) + " is " +
           (std::isnan(v) ? "nan"
            : v > 0       ? "inf"
                          : "-inf") +
           " at step " + std::to_string(s.step + 1);
  };
  if (!std::isfinite(s.loss)) return bad("loss", s.loss);
  if (!std::isfinite(s.grad_norm)) return bad("gradient norm", s.grad_norm);
  return "";
}

namespace {

// fault.hang: this rank stops responding (no progress, no answers to the watchdog's queries)
// until the job is ended around it.
[[noreturn]] void hang_forever(int rank, int step) {
  std::fflush(stdout);
  std::fprintf(stderr, "paraxis: rank %d stops responding before step %d (fault.hang)\n", rank,
               step + 1);
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

void print_step(const RunConfig& cfg, const model::StepResult& st, int s) {
  const double tokens = static_cast<double>(cfg.train.global_batch) * cfg.model.seq_len;
  std::printf("  step %4d/%d  loss %.6f  lm %.6f", s + 1, cfg.train.steps, st.loss, st.lm_loss);
  if (cfg.model.moe.experts > 0)
    std::printf("  aux %.4f  imbalance %.2f", st.aux_loss, st.moe.imbalance);
  for (const char* axis : {"tp", "pp", "dp", "ep"}) {
    const auto it = st.comm.find(axis);
    if (it != st.comm.end() && it->second.calls > 0)
      std::printf("  %s %.3f MB %.4f s", axis, it->second.bytes / 1e6, it->second.time_s);
  }
  if (cfg.parallel.pp > 1) std::printf("  bubble %.3f", st.bubble_fraction);
  std::printf("  %.4f s  %.0f tokens/s%s\n", st.time_s, tokens / st.time_s,
              is_measured_step(s, cfg.train.warmup_steps) ? "" : "  (warm-up)");
}

}  // namespace

std::string train_steps(const RunConfig& cfg, int rank, model::Trainer& trainer,
                        std::vector<model::StepResult>& steps,
                        const std::function<void(int)>& after_step, bool print_steps) {
  std::string diverged;
  std::set<std::string> noted;
  OutputPacer pacer(stdout, 1.0);  // output_pacer.hpp
  const auto& fault = cfg.fault;
  for (int s = trainer.steps_done(); s < cfg.train.steps && diverged.empty(); ++s) {
    if (fault.dead_rank.rank == rank && fault.dead_rank.at == DeadAt::step &&
        fault.dead_rank.step == s)
      throw std::runtime_error("injected fault before step " + std::to_string(s + 1) +
                               " (fault.dead_rank)");
    if (fault.hang.rank == rank && fault.hang.step == s) hang_forever(rank, s);
    wd::set_step(s);
    steps.push_back(trainer.step());
    wd::set_step(-1);
    const auto& st = steps.back();
    if (rank == 0 && print_steps) print_step(cfg, st, s);
    // What the step could not measure (e.g. a wait time left unattributed): once per run and
    // rank, on every rank that has it (the group concerned may not include rank 0).
    for (const auto& note : st.notes)
      if (noted.insert(note).second)
        std::fprintf(stderr, "paraxis: rank %d, step %d: %s\n", rank, s + 1, note.c_str());
    // Loss and gradient norm are global values, the results of all-reductions and the same
    // on every rank, so every rank reaches the same verdict without another collective.
    diverged = divergence_of(st);
    if (diverged.empty() && after_step) after_step(s + 1);
    pacer.step_done();
  }
  return diverged;
}

}  // namespace paraxis::driver
