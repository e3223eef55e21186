// `paraxis plan MODEL MACHINE`: every configuration of a deck's model on a machine description
// (inputs/machines/*.yaml), those that fit in memory ranked by predicted step time
// (perfmodel/planner.hpp), each rejected one with its reason.
//
// A machine description (every key required unless a default is given):
//   name: dgx-h100
//   devices_per_node: 8
//   nodes: 128
//   peak_flops: 989.0e12           # dense, per device, in the training precision
//   memory_gb: 80                  # per device
//   achievable_fraction: 0.5       # of peak the kernels reach (default 0.5)
//   intra_node: {latency_us: 3, bandwidth_gbs: 450}    # per rank, one direction
//   inter_node: {latency_us: 6, bandwidth_gbs: 50}
//   mtbf_hours_per_device: 0       # optional: failures for the checkpoint interval (0: Llama 3's)
//   checkpoint_s: 0                # optional: the time to write a checkpoint (0: not shown)
#include <mpi.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "driver/commands.hpp"
#include "driver/deck.hpp"
#include "perfmodel/checkpoint.hpp"
#include "perfmodel/planner.hpp"

namespace paraxis::driver {

namespace pm = paraxis::perfmodel;

namespace {

struct MachineFile {
  std::string name;
  pm::Machine machine;
  double mtbf_hours_per_device = 0, checkpoint_s = 0;
};

// One message per problem, naming the key and the file.
MachineFile load_machine(const std::string& path) {
  YAML::Node n;
  try {
    n = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    throw std::invalid_argument("machine description " + path + ": " + e.what());
  }
  auto need = [&](const char* key) {
    if (!n[key]) throw std::invalid_argument(path + ": missing key '" + key + "'");
    return n[key];
  };
  auto positive = [&](const char* key, const YAML::Node& v) {
    double x = 0;
    try {
      x = v.as<double>();
    } catch (const std::exception&) {
      throw std::invalid_argument(path + ": '" + key + "' must be a number");
    }
    if (!(x > 0))
      throw std::invalid_argument(path + ": '" + key + "' = " + v.Scalar() + ", expected > 0");
    return x;
  };
  auto link = [&](const char* key) {
    const YAML::Node l = need(key);
    pm::LinkCost c;
    c.alpha = positive((std::string(key) + ".latency_us").c_str(), l["latency_us"]) * 1e-6;
    c.beta =
        1.0 / (positive((std::string(key) + ".bandwidth_gbs").c_str(), l["bandwidth_gbs"]) * 1e9);
    return c;
  };
  MachineFile m;
  m.name = n["name"] ? n["name"].as<std::string>() : path;
  m.machine.devices_per_node =
      static_cast<int>(positive("devices_per_node", need("devices_per_node")));
  m.machine.nodes = static_cast<int>(positive("nodes", need("nodes")));
  m.machine.peak_flops = positive("peak_flops", need("peak_flops"));
  m.machine.memory_bytes = positive("memory_gb", need("memory_gb")) * 1e9;
  if (n["achievable_fraction"])
    m.machine.achievable_fraction = positive("achievable_fraction", n["achievable_fraction"]);
  m.machine.intra_node = link("intra_node");
  m.machine.inter_node = link("inter_node");
  if (n["mtbf_hours_per_device"]) m.mtbf_hours_per_device = n["mtbf_hours_per_device"].as<double>();
  if (n["checkpoint_s"]) m.checkpoint_s = n["checkpoint_s"].as<double>();
  return m;
}

}  // namespace

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
    mf = load_machine(machine_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraxis: error: %s\n", e.what());
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
    const auto cut = r.reason.find_first_of("0123456789");
    ++reasons[cut == std::string::npos ? r.reason : r.reason.substr(0, cut)];
  }
  if (!reasons.empty()) {
    std::printf("\nrejected, by reason:\n");
    for (const auto& [why, n] : reasons) std::printf("  %6d  %s...\n", n, why.c_str());
    std::printf("  e.g. %s: %s\n", pm::describe(plan.rejected.front().config).c_str(),
                plan.rejected.front().reason.c_str());
  }
  // Checkpointing at this scale (Young 1974, Daly 2006).
  const double devices = m.devices();
  const double rate = mf.mtbf_hours_per_device > 0 ? 1.0 / (mf.mtbf_hours_per_device * 3600)
                                                   : pm::llama3_failures_per_device_s();
  const double mtbf = pm::system_mtbf(rate, devices);
  std::printf("\nsystem MTBF at %d devices: %.1f h%s\n", m.devices(), mtbf / 3600,
              mf.mtbf_hours_per_device > 0 ? "" : " (Llama 3's failure rate)");
  if (mf.checkpoint_s > 0)
    std::printf("checkpoint every %.0f s (Young) / %.0f s (Daly) for a %.0f s checkpoint\n",
                pm::young_interval(mf.checkpoint_s, mtbf), pm::daly_interval(mf.checkpoint_s, mtbf),
                mf.checkpoint_s);
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
    std::ofstream(json_out) << j.dump(1) << '\n';
    std::printf("whole plan: %s\n", json_out.c_str());
  }
  return 0;
}

}  // namespace paraxis::driver
