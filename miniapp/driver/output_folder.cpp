// Output-folder policy (output_folder.hpp). Only files paraxis itself writes are considered
// results: a folder that also holds a batch log or a user's notes is fine, and --force never
// removes anything paraxis did not write.
#include "driver/output_folder.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "io/checked_file.hpp"

namespace paraxis::driver {

namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}
bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

bool is_result_name(const std::string& name, bool is_dir) {
  if (is_dir) return name == "plots";
  return name == "summary.json" || name == "points.csv" || name == "report.md" ||
         name == "report.json" || (starts_with(name, "trace-") && ends_with(name, ".json")) ||
         (starts_with(name, "bench-") && ends_with(name, ".json")) ||
         (starts_with(name, "failure-rank") && ends_with(name, ".json")) ||
         name.find(".tmp.") != std::string::npos || name == ".paraxis-write-probe";
}

}  // namespace

std::vector<std::string> results_in(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_result_name(name, e.is_directory(ec))) found.push_back(e.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string prepare_output_folder(const std::string& dir, bool force) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    return "output folder '" + dir + "' exists and is not a folder";
  fs::create_directories(dir, ec);
  if (ec) return "cannot create output folder '" + dir + "': " + ec.message();
  const auto old = results_in(dir);
  if (!old.empty()) {
    if (!force)
      return "output folder '" + dir + "' already holds results (" +
             fs::path(old.front()).filename().string() +
             (old.size() > 1 ? " and " + std::to_string(old.size() - 1) + " more" : "") +
             "): choose another --out, or give --force to remove them first";
    for (const auto& f : old) {
      fs::remove_all(f, ec);
      if (ec) return "cannot remove earlier result '" + f + "' (--force): " + ec.message();
    }
  }
  try {
    io::check_writable_dir(dir);
  } catch (const io::WriteError& e) {
    return std::string("output folder is not writable: ") + e.what();
  }
  return "";
}

}  // namespace paraxis::driver
