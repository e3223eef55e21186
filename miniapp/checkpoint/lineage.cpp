// Run ids, and which checkpoints of a root belong to a run's lineage (lineage.hpp).
#include "checkpoint/lineage.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>

#include "checkpoint/index.hpp"
#include "checkpoint/root_layout.hpp"

namespace paraxis::checkpoint {

namespace fs = std::filesystem;

std::string new_run_id() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char time[32];
  std::strftime(time, sizeof time, "%Y%m%dT%H%M%SZ", &utc);
  std::random_device device;
  char random[16];
  std::snprintf(random, sizeof random, "%08x", static_cast<unsigned>(device()));
  return std::string(time) + "-" + random;
}

std::string lineage_tag(const std::string& id) {
  return id.size() <= 8 ? id : id.substr(id.size() - 8);
}

namespace {

// The lineage an index.json records (only the keys needed: the consistency of the rest is the
// reader's business when the checkpoint is opened). The shard records and `meta` (megabytes at
// scale: a commit reads every index of its root) are lexed but never built.
Lineage lineage_of_index(const fs::path& index) {
  std::ifstream in(index);
  if (!in) throw std::runtime_error("cannot be opened");
  const auto skip_bulk = [](int depth, nlohmann::json::parse_event_t event,
                            nlohmann::json& parsed) {
    return !(depth == 1 && event == nlohmann::json::parse_event_t::key &&
             (parsed == "tensors" || parsed == "meta" || parsed == "files"));
  };
  const nlohmann::json j = nlohmann::json::parse(in, skip_bulk);
  if (!j.is_object() || j.value("format", "") != kFormatName)
    throw std::runtime_error("not a paraxis checkpoint index");
  const int version = j.value("version", 0);
  if (version < 2) return Lineage{};
  if (!j.contains("lineage")) throw std::runtime_error("missing key 'lineage'");
  return lineage_from_json(j.at("lineage"));
}

bool in_history(const CheckpointRecord& r, const RunHistory& run) {
  if (!r.problem.empty() || r.lineage.id != run.lineage_id) return false;
  return run.resumed_step < 0 || r.step <= run.resumed_step;
}

}  // namespace

std::vector<CheckpointRecord> lineage_records(const std::string& root) {
  std::vector<CheckpointRecord> out;
  for (const auto& c : complete_checkpoints(root)) {
    CheckpointRecord r{c.step, c.path, {}, {}};
    try {
      r.lineage = lineage_of_index(fs::path(c.path) / kIndexFile);
    } catch (const std::exception& e) {
      r.problem = (fs::path(c.path) / kIndexFile).string() + ": " + e.what();
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<CheckpointRecord> foreign_checkpoints(const std::vector<CheckpointRecord>& all,
                                                  const RunHistory& run) {
  bool own_here = false;
  for (const auto& r : all) own_here = own_here || in_history(r, run);
  std::vector<CheckpointRecord> out;
  for (const auto& r : all) {
    if (in_history(r, run)) continue;
    const bool branch = r.problem.empty() && r.lineage.id == run.lineage_id;
    if (branch || !own_here) out.push_back(r);
  }
  return out;
}

std::vector<std::string> retention_victims(const std::vector<CheckpointRecord>& all,
                                           const std::string& lineage_id,
                                           const std::string& published, int keep,
                                           const std::string& protect) {
  std::vector<CheckpointRecord> mine;
  long newest = -1;  // the newest step of the lineage (the published one's, normally)
  for (const auto& r : all) {
    if (!r.problem.empty() || r.lineage.id != lineage_id) continue;
    newest = std::max(newest, r.step);
    if (r.path != published) mine.push_back(r);
  }
  std::sort(mine.begin(), mine.end(),
            [](const CheckpointRecord& a, const CheckpointRecord& b) { return a.step < b.step; });
  const std::size_t kept = static_cast<std::size_t>(std::max(keep, 1) - 1);
  std::vector<std::string> victims;
  for (std::size_t i = 0; i + kept < mine.size(); ++i) {
    const bool resumed_from =
        !protect.empty() && fs::path(mine[i].path).filename().string() == protect;
    if (resumed_from && mine[i].step >= newest) continue;  // nothing newer committed yet
    victims.push_back(mine[i].path);
  }
  return victims;
}

std::string describe(const CheckpointRecord& r) {
  const std::string name = fs::path(r.path).filename().string();
  if (!r.problem.empty()) return name + " (its index cannot be read: " + r.problem + ")";
  if (r.lineage.id.empty()) return name + " (no run recorded: written by an older paraxis)";
  std::string s = name + " (run " + r.lineage.run;
  if (r.lineage.id != r.lineage.run) s += ", lineage " + r.lineage.id;
  return s + ")";
}

}  // namespace paraxis::checkpoint
