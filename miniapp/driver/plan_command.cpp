// `paraxis plan MODEL MACHINE`: every configuration of a deck's model on a machine description
// (inputs/machines/*.yaml), those that fit in memory ranked by predicted step time
// (perfmodel/planner.hpp), each rejected one with its reason.
//
// The machine description format and its validation: machine_file.hpp. The whole plan
// (--json) is written atomically (io/checked_file.hpp): a failed write exits 4, naming the file.
#include <mpi.h>

#include <cctype>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "driver/commands.hpp"
#include "driver/deck.hpp"
#include "driver/machine_file.hpp"
#include "io/checked_file.hpp"
#include "perfmodel/checkpoint.hpp"
#include "perfmodel/planner.hpp"

namespace paraxis::driver {

namespace pm = paraxis::perfmodel;

int plan_command(const std::string& model_deck, const std::string& machine_path,
                 const std::vector<std::string>& overrides, int top, const std::string& json_out) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return 0;
  const Deck deck = load_deck(model_deck, overrides, 0);
  if (!deck.errors.empty()) {
    for (const auto& e : deck.errors)
      std::fprintf(stderr, "paraxis: error: %s\n", e.to_string().c_str());
    return 2;
  }
  MachineFile mf;
  try {
    mf = load_machine_file(machine_path);
  } catch (const std::exception& e) {
    // One line per problem (the file names every one).
    std::istringstream lines(e.what());
    for (std::string line; std::getline(lines, line);)
      std::fprintf(stderr, "paraxis: error: %s\n", line.c_str());
    return 2;
  }
  const RunConfig& c = deck.points.front().config;
  pm::PlanRequest req;
  req.model = c.model;
  req.global_batch = c.train.global_batch;
  req.precision = c.train.precision;
  req.bucket_mb = c.comm.bucket_mb;
  req.overlap = c.comm.overlap;
  pm::Plan plan;
  try {
    plan = pm::plan(req, mf.machine);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraxis: error: plan: %s\n", e.what());
    return 2;
  }
  const auto& m = mf.machine;
  std::printf("plan: %s on %s (%d nodes x %d devices, %.4g TFLOP/s peak, %.3g GB each)\n",
              model_deck.c_str(), mf.name.c_str(), m.nodes, m.devices_per_node, m.peak_flops / 1e12,
              m.memory_bytes / 1e9);
  std::printf("%zu configurations fit, %zu rejected\n\n", plan.ranked.size(), plan.rejected.size());
  std::printf("%4s  %-44s %10s %9s %8s %9s %6s  %s\n", "rank", "configuration", "step s", "bubble",
              "tp s", "dp s", "MFU", "peak memory");
  for (std::size_t i = 0; i < plan.ranked.size() && static_cast<int>(i) < top; ++i) {
    const auto& e = plan.ranked[i];
    std::printf("%4zu  %-44s %10.4g %9.3f %8.3g %9.3g %6.3f  %s\n", i + 1,
                pm::describe(e.config).c_str(), e.time.step_time, e.time.bubble_fraction, e.time.tp,
                e.time.dp, e.mfu, pm::format_gb(e.memory.peak).c_str());
  }
  // The reasons, most common first (every rejected configuration is in --json).
  std::map<std::string, int> reasons;
  for (const auto& r : plan.rejected) {
    // The rule without its values: every run of digits becomes "#".
    std::string rule;
    for (char ch : r.reason)
      if (!std::isdigit(static_cast<unsigned char>(ch)))
        rule += ch;
      else if (rule.empty() || rule.back() != '#')
        rule += '#';
    ++reasons[rule];
  }
  if (!reasons.empty()) {
    std::printf("\nrejected, by reason:\n");
    for (const auto& [why, n] : reasons) std::printf("  %6d  %s\n", n, why.c_str());
    std::printf("  e.g. %s: %s\n", pm::describe(plan.rejected.front().config).c_str(),
                plan.rejected.front().reason.c_str());
  }
  // Checkpointing at this scale (Young 1974, Daly 2006).
  try {
    const double devices = m.devices();
    const double rate = mf.mtbf_hours_per_device > 0 ? 1.0 / (mf.mtbf_hours_per_device * 3600)
                                                     : pm::llama3_failures_per_device_s();
    const double mtbf = pm::system_mtbf(rate, devices);
    std::printf("\nsystem MTBF at %d devices: %.1f h%s\n", m.devices(), mtbf / 3600,
                mf.mtbf_hours_per_device > 0 ? "" : " (Llama 3's failure rate)");
    if (mf.checkpoint_s > 0)
      std::printf("checkpoint every %.0f s (Young) / %.0f s (Daly) for a %.0f s checkpoint\n",
                  pm::young_interval(mf.checkpoint_s, mtbf),
                  pm::daly_interval(mf.checkpoint_s, mtbf), mf.checkpoint_s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraxis: error: plan: %s: %s\n", machine_path.c_str(), e.what());
    return 2;
  }
  if (!json_out.empty()) {
    nlohmann::json j{{"model", model_deck},
                     {"machine", mf.name},
                     {"ranked", nlohmann::json::array()},
                     {"rejected", nlohmann::json::array()}};
    for (const auto& e : plan.ranked)
      j["ranked"].push_back({{"configuration", pm::describe(e.config)},
                             {"step_time_s", e.time.step_time},
                             {"terms",
                              {{"compute", e.time.compute},
                               {"bubble", e.time.bubble},
                               {"tp", e.time.tp},
                               {"pp", e.time.pp},
                               {"dp", e.time.dp},
                               {"ep", e.time.ep}}},
                             {"bubble_fraction", e.time.bubble_fraction},
                             {"mfu", e.mfu},
                             {"tokens_per_s", e.tokens_per_s},
                             {"peak_memory_bytes", e.memory.peak}});
    for (const auto& r : plan.rejected)
      j["rejected"].push_back({{"configuration", pm::describe(r.config)}, {"reason", r.reason}});
    try {
      io::write_file_checked(
          json_out, j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n');
    } catch (const io::WriteError& e) {
      std::fprintf(stderr, "paraxis: error: plan: %s\n", e.what());
      return 4;
    }
    std::printf("whole plan: %s\n", json_out.c_str());
  }
  return 0;
}

}  // namespace paraxis::driver
