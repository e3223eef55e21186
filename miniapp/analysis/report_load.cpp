// `paraxis report`, the loading (report_parts.hpp): every folder's summary.json validated first
// (summary_reader.hpp); the machine of each folder, the calibrated collectives, its ok points
// analysed and the others listed, never analysed.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "analysis/point_status.hpp"
#include "analysis/report_parts.hpp"
#include "analysis/summary_reader.hpp"
#include "config/exit_codes.hpp"
#include "deck/deck.hpp"
#include "perfmodel/collectives.hpp"

namespace paraxis::driver::report {

using nlohmann::json;
namespace pm = paraxis::perfmodel;

namespace {

// The failure records of a folder (failure-rank<R>.json: a rank that died or whose watchdog
// expired, diagnosis.hpp) as findings in in.failures. Returns how many, or -1 after printing
// the error (a record that is not JSON or lacks a field).
int load_failures(const std::string& dir, Loaded& in) {
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("failure-rank", 0) == 0 && e.path().extension() == ".json")
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::map<int, std::vector<json>> by_point;  // a job ends in one point, but be general
  std::string current;
  try {
    for (const auto& file : files) {
      current = file;
      std::ifstream is(file);
      const json record = json::parse(is);
      by_point[record.at("point_index").get<int>()].push_back(record);
    }
    for (const auto& [index, records] : by_point) {
      current = dir + "/failure-rank*.json of point " + std::to_string(index);
      json f = diagnosis::failure_finding(records);
      f["point"] = point_label(config_from_json(records.front().at("config")));
      f["dir"] = dir;
      f["index"] = index;
      // The point ended the job before summary.json could list it: listed from its record.
      in.not_analysed.push_back(
          {{"dir", dir},
           {"index", index},
           {"settings", records.front().value("settings", json::object())},
           {"status", PointStatus::failed(f.at("kind").get<std::string>() + ": " +
                                          f.at("text").get<std::string>())
                          .text()}});
      in.failures.push_back(f);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraxis: error: report: %s: %s\n", current.c_str(), e.what());
    return -1;
  }
  return static_cast<int>(files.size());
}

// The same folder twice would pair every point with itself as "another machine": false after
// printing the error.
bool folders_distinct(const std::vector<std::string>& dirs) {
  std::map<std::string, std::string> canonical;
  for (const auto& dir : dirs) {
    std::error_code ec;
    const std::string key = std::filesystem::weakly_canonical(dir, ec).string();
    const auto [it, fresh] = canonical.emplace(ec ? dir : key, dir);
    if (!fresh) {
      std::fprintf(stderr,
                   "paraxis: error: report: folder '%s' is given twice (as '%s' and '%s')\n",
                   it->first.c_str(), it->second.c_str(), dir.c_str());
      return false;
    }
  }
  return true;
}

// The folder's machine (its hosts, else the folder) from its provenance, its row of the
// Machines table, and the warnings its provenance calls for.
std::string add_machine(const std::string& dir, const json& prov,
                        const ProvenanceWarning& provenance_warning, Loaded& in) {
  std::string hosts;
  for (const auto& h : prov.value("hosts", json::array()))
    hosts += (hosts.empty() ? "" : ",") + h.get<std::string>();
  const std::string machine = hosts.empty() ? dir : hosts;
  const int ranks_per_host = prov.value("max_ranks_per_host", 0);
  const int cores = prov.value("cores_per_host", 0);
  if (cores > 0 && ranks_per_host > cores)
    in.warnings.push_back("`" + dir + "`: " + std::to_string(ranks_per_host) +
                          " ranks on a host with " + std::to_string(cores) +
                          " cores: ranks time-share cores, which no model "
                          "here describes; predictions assume a core per rank");
  // A BLAS on generic kernels: measured compute and its calibration several times too slow.
  if (provenance_warning)
    if (const auto w = provenance_warning(prov)) in.warnings.push_back("`" + dir + "`: " + *w);
  in.machines.push_back({{"dir", dir},
                         {"machine", machine},
                         {"world", prov.value("world", 0)},
                         {"execution_space", prov.value("execution_space", "")},
                         {"mpi_library", prov.value("mpi_library", "")},
                         {"git_hash", prov.value("git_hash", "")},
                         {"date", prov.value("date", "")}});
  return machine;
}

// The calibrated collectives of point p, one row per (axis, operation, ranks) not yet seen in
// this folder.
void add_calibration_rows(const json& p, const std::string& dir, const std::string& machine,
                          std::set<std::string>& seen_fits, Loaded& in) {
  if (!p.contains("calibration")) return;
  for (const auto& [axis, ops] : p.at("calibration").at("comm").items())
    for (const auto& [op, f] : ops.items()) {
      const int ranks = f.at("ranks");
      if (!seen_fits.insert(axis + op + std::to_string(ranks)).second) continue;
      in.calibration.push_back({{"machine", machine},
                                {"dir", dir},
                                {"axis", axis},
                                {"op", op},
                                {"ranks", ranks},
                                {"alpha_s", f.at("alpha_s")},
                                {"beta_s_per_byte", f.at("beta_s_per_byte")},
                                {"busbw_factor", pm::busbw_factor(collective_named(op), ranks)},
                                {"samples", f.at("samples")}});
    }
}

// One folder: its failure records, its validated summary.json, every ok point analysed.
// Returns 0 or exit 2 after printing the error.
int load_folder(const std::string& dir, const ProvenanceWarning& provenance_warning, Loaded& in) {
  const std::string file = dir + "/summary.json";
  std::error_code ec;
  const int records = load_failures(dir, in);
  if (records < 0) return exit_code::bad_input;
  if (!std::filesystem::is_regular_file(file, ec)) {
    if (records > 0) return exit_code::ok;  // the job ended in its first point: only the records
    std::fprintf(stderr, "paraxis: error: report: no summary.json in '%s'\n", dir.c_str());
    return exit_code::bad_input;
  }
  json s;
  try {
    s = read_summary(file);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paraxis: error: report: %s\n", e.what());
    return exit_code::bad_input;
  }
  const auto& prov = s.value("provenance", json::object());
  const std::string machine = add_machine(dir, prov, provenance_warning, in);
  std::set<std::string> seen_fits;
  for (const auto& p : s.at("points")) {
    const std::string status = p.at("status");   // validated by read_summary
    if (!parse_point_status(status)->is_ok()) {  // diverged, failed, skipped: figures mean nothing
      in.not_analysed.push_back({{"dir", dir},
                                 {"index", p.at("index")},
                                 {"settings", p.value("settings", json::object())},
                                 {"status", status}});
      continue;
    }
    try {
      in.all.push_back(analyse(p, dir, machine, diagnosis::host_of(prov)));
      add_calibration_rows(p, dir, machine, seen_fits, in);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "paraxis: error: report: %s: point %d: %s\n", file.c_str(),
                   p.at("index").get<int>(), e.what());
      return exit_code::bad_input;
    }
  }
  return exit_code::ok;
}

}  // namespace

int load_folders(const std::vector<std::string>& dirs, Loaded& in,
                 const ProvenanceWarning& provenance_warning) {
  if (!folders_distinct(dirs)) return exit_code::bad_input;
  for (const auto& dir : dirs)
    if (const int rc = load_folder(dir, provenance_warning, in); rc != exit_code::ok) return rc;
  return exit_code::ok;
}

}  // namespace paraxis::driver::report
