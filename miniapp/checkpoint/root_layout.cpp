// Step folders, `latest`, publishing and pruning (root_layout.hpp).
#include "checkpoint/root_layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "checkpoint/lineage.hpp"
#include "checkpoint/posix_file.hpp"
#include "io/checked_file.hpp"

namespace paraxis::checkpoint {

namespace fs = std::filesystem;

namespace {

// What a killed save leaves: its temporary step folder, or the temporary file of a `latest`
// being rewritten (io::write_file_checked's "<path>.tmp.<pid>.<n>"). Under the root's lock no
// other live run writes here (folder_lock.hpp).
bool is_leftover(const std::string& name) {
  return (name.rfind("step-", 0) == 0 && name.find(".tmp-") != std::string::npos) ||
         name.rfind(std::string(kLatestFile) + ".tmp.", 0) == 0;
}

bool has_index(const fs::path& folder) {
  std::error_code ec;
  return fs::is_regular_file(folder / kIndexFile, ec);
}

std::string read_small_file(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  const auto ns = std::chrono::steady_clock::now().time_since_epoch().count();
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(ns);
}

}  // namespace

std::string step_folder_name(long step) {
  return "step-" + std::to_string(step);
}

std::optional<long> step_of_folder_name(const std::string& name) {
  if (name.rfind("step-", 0) != 0) return {};
  const std::size_t dash = name.find('-', 5);
  const std::string digits = name.substr(5, dash == std::string::npos ? dash : dash - 5);
  if (digits.empty() || digits.size() > 18) return {};
  for (const char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c))) return {};
  if (dash != std::string::npos) {  // a lineage's tag: letters and digits
    const std::string tag = name.substr(dash + 1);
    if (tag.empty() || tag.size() > 16) return {};
    for (const char c : tag)
      if (!std::isalnum(static_cast<unsigned char>(c))) return {};
  }
  return std::stol(digits);
}

std::string temporary_folder_name(long step) {
  return step_folder_name(step) + ".tmp-" + unique_suffix();
}

std::string data_file_name(int rank) {
  return "rank-" + std::to_string(rank) + ".bin";
}

std::vector<StepFolder> complete_checkpoints(const std::string& root) {
  std::vector<StepFolder> found;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const auto step = step_of_folder_name(it->path().filename().string());
    if (step && it->is_directory(ec) && has_index(it->path()))
      found.push_back(StepFolder{*step, it->path().string()});
  }
  if (ec) throw std::runtime_error("checkpoint: cannot list '" + root + "': " + ec.message());
  std::sort(found.begin(), found.end(),
            [](const StepFolder& a, const StepFolder& b) { return a.step < b.step; });
  return found;
}

namespace {

// The folder a lineage's checkpoint of `step` is published as: step-<N>, unless that is another
// lineage's checkpoint (never replaced): then step-<N>-<tag>.
std::string target_name(const std::string& root, long step, const std::string& lineage_id) {
  const std::string plain = step_folder_name(step);
  for (const auto& r : lineage_records(root))
    if (fs::path(r.path).filename() == plain && (!r.problem.empty() || r.lineage.id != lineage_id))
      return plain + "-" + lineage_tag(lineage_id.empty() ? "untracked" : lineage_id);
  return plain;
}

void prune(const std::string& root, const std::string& published, const Retention& retention,
           std::vector<std::string>& warnings) {
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_leftover(name)) continue;
    try {
      posix::remove_tree(it->path().string());
    } catch (const std::exception& e) {
      warnings.push_back(e.what());
    }
  }
  if (ec) warnings.push_back("checkpoint: cannot list '" + root + "': " + ec.message());
  const auto victims = retention_victims(lineage_records(root), retention.lineage_id, published,
                                         retention.keep, retention.protect);
  for (const auto& v : victims) {
    try {
      posix::remove_tree(v);
    } catch (const std::exception& e) {
      warnings.push_back(e.what());
    }
  }
}

}  // namespace

std::string publish(const std::string& root, const std::string& tmp, long step,
                    const Retention& retention, std::vector<std::string>& warnings) {
  const std::string target =
      (fs::path(root) / target_name(root, step, retention.lineage_id)).string();
  std::error_code ec;
  std::string aside;
  if (fs::exists(target, ec)) {
    // Replacing a checkpoint of the same step: moved aside first, so that the name never holds
    // a partial folder, and removed once the new one is in place.
    aside = target + ".tmp-replaced-" + unique_suffix();
    posix::rename_path(target, aside);
  }
  try {
    posix::rename_path(tmp, target);
  } catch (...) {
    // The replaced checkpoint goes back under its name: a failed commit changes nothing.
    if (!aside.empty()) ::rename(aside.c_str(), target.c_str());
    throw;
  }
  posix::sync_folder(root);
  io::write_file_checked((fs::path(root) / kLatestFile).string(),
                         fs::path(target).filename().string() + "\n");
  // Committed. What follows is clean-up: its failures are warnings, not a failed save.
  try {
    prune(root, target, retention, warnings);
  } catch (const std::exception& e) {
    warnings.push_back(e.what());
  }
  return target;
}

std::string resolve_checkpoint(const std::string& given) {
  std::error_code ec;
  fs::path p(given);
  if (!fs::exists(p, ec))
    throw std::runtime_error("checkpoint: '" + given +
                             "' does not exist (expected a "
                             "checkpoint folder step-<N>, a checkpoint root or its 'latest')");
  if (fs::is_directory(p, ec) && has_index(p)) return p.string();
  const auto step = step_of_folder_name(p.filename().string());
  if (fs::is_directory(p, ec) && step)
    throw std::runtime_error("checkpoint: '" + given + "' has no " + kIndexFile +
                             ": an incomplete checkpoint (its save did not finish)");
  fs::path root = p;
  if (!fs::is_directory(p, ec)) {
    if (p.filename() != kLatestFile)
      throw std::runtime_error("checkpoint: '" + given +
                               "' is a file but not a 'latest' "
                               "pointer (expected a checkpoint folder, root or 'latest')");
    root = p.has_parent_path() ? p.parent_path() : fs::path(".");
  }
  std::string why;
  const fs::path latest = root / kLatestFile;
  if (fs::exists(latest, ec)) {
    const std::string name = read_small_file(latest);
    if (step_of_folder_name(name) && has_index(root / name)) return (root / name).string();
    why = "'" + latest.string() + "' names '" + name + "', which " +
          (fs::is_directory(root / name, ec) ? std::string("has no ") + kIndexFile
                                             : std::string("does not exist"));
  } else {
    why = "no '" + latest.string() + "'";
  }
  // The newest complete one, when every checkpoint there is of one lineage: with several, the
  // newest might be another run's (docs/checkpoint.md, "Runs, lineages and the lock").
  const auto complete = lineage_records(root.string());
  std::map<std::string, std::string> newest;  // lineage id -> its newest checkpoint, described
  for (const auto& c : complete)
    if (c.problem.empty()) newest[c.lineage.id] = describe(c);
  if (!complete.empty() && newest.size() <= 1) return complete.back().path;
  if (!complete.empty()) {
    std::string list;
    for (const auto& [id, d] : newest) list += (list.empty() ? "" : ", ") + d;
    throw std::runtime_error("checkpoint: " + why + ", and '" + root.string() +
                             "' holds checkpoints of several runs (the newest of each: " + list +
                             "): give the step folder to resume from");
  }
  throw std::runtime_error("checkpoint: no complete checkpoint under '" + root.string() + "' (" +
                           why + "; no step-<N> folder holds " + kIndexFile + ")");
}

}  // namespace paraxis::checkpoint
