// paraxis-results-schema: the results declaration (analysis/results_schema.hpp) as a tool.
//   paraxis-results-schema markdown summary|report|csv   docs/results.md's table of that file
//   paraxis-results-schema check DIR                      DIR's summary.json, points.csv and
//       (when there) report.json against the declaration, strictly: every key declared, every
//       field the writer always writes present, every value of its kind and range
//   paraxis-results-schema check-report REPORT.json   that report.json alone, as strictly (a job
//       a dead or hung rank ended leaves no summary.json to check beside it)
// Exit 0: conforms (or printed); 1: violations (each printed as "file: path: what"); 2: usage.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "analysis/results_schema.hpp"

namespace rs = paraxis::driver::results_schema;

namespace {

bool read(const std::string& path, std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  text = s.str();
  return true;
}

int report(const std::string& file, const std::vector<rs::Violation>& v) {
  for (const auto& x : v) std::printf("%s: %s: %s\n", file.c_str(), x.path.c_str(), x.what.c_str());
  return v.empty() ? 0 : 1;
}

int check_json(const std::string& path, rs::File f, bool required) {
  std::string text;
  if (!read(path, text)) {
    if (!required) return 0;
    std::printf("%s: cannot be read\n", path.c_str());
    return 1;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    std::printf("%s: not valid JSON: %s\n", path.c_str(), e.what());
    return 1;
  }
  return report(path, rs::check(j, f, rs::Mode::strict, 50));
}

int check_dir(const std::string& dir) {
  int bad = check_json(dir + "/summary.json", rs::File::summary, true);
  std::string csv;
  if (!read(dir + "/points.csv", csv)) {
    std::printf("%s/points.csv: cannot be read\n", dir.c_str());
    return 1;
  }
  bad |= report(dir + "/points.csv", rs::check_csv(csv));
  bad |= check_json(dir + "/report.json", rs::File::report, false);
  if (!bad) std::printf("%s: conforms to the results schema\n", dir.c_str());
  return bad ? 1 : 0;
}

// A benchmark program's provenance: paraxis-bench-comm's JSON `provenance` strictly (every key
// declared, the process's keys present), or Google Benchmark JSON's `context` (every key the
// process records present but `date`, which is Google Benchmark's own).
int check_provenance(const std::string& path) {
  std::string text;
  nlohmann::json j;
  try {
    if (!read(path, text)) throw std::runtime_error("cannot be read");
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    std::printf("%s: %s\n", path.c_str(), e.what());
    return 1;
  }
  if (j.contains("provenance"))
    return report(path + ": provenance",
                  rs::check(j["provenance"], rs::File::provenance, rs::Mode::strict, 50));
  std::vector<rs::Violation> v;
  const nlohmann::json ctx = j.value("context", nlohmann::json::object());
  for (const auto& f : rs::fields(rs::File::provenance)) {
    const std::string key = f.path;
    if (f.presence == rs::Presence::always && key != "date" && key.find('[') == std::string::npos &&
        !ctx.contains(key))
      v.push_back({key, "missing"});
  }
  return report(path + ": context", v);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  const std::string arg = argc > 2 ? argv[2] : "";
  if (argc == 3 && cmd == "markdown" && (arg == "summary" || arg == "report" || arg == "csv")) {
    const rs::File f = arg == "summary"  ? rs::File::summary
                       : arg == "report" ? rs::File::report
                                         : rs::File::points_csv;
    std::fputs(rs::markdown(f).c_str(), stdout);
    return 0;
  }
  if (argc == 3 && cmd == "check") return check_dir(arg);
  if (argc == 3 && cmd == "check-report") return check_json(arg, rs::File::report, true);
  if (argc == 3 && cmd == "check-provenance") return check_provenance(arg);
  std::fprintf(stderr,
               "usage: paraxis-results-schema markdown summary|report|csv\n"
               "       paraxis-results-schema check DIR\n"
               "       paraxis-results-schema check-report REPORT.json\n"
               "       paraxis-results-schema check-provenance BENCH.json\n");
  return 2;
}
