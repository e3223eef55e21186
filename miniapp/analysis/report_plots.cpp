// Plotting for `paraxis report` without a shell (report_plots.hpp).
#include "analysis/report_plots.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#ifndef PARAXIS_TOOLS_DIR
#define PARAXIS_TOOLS_DIR ""
#endif

extern char** environ;

namespace paraxis::driver {

namespace {

struct Exit {
  bool started = false;
  int status = 0;   // the exit code, or 128 + signal
  std::string why;  // when not started
};

// Runs argv[0] (searched in PATH) with these arguments; stdout (and stderr with quiet) go to
// /dev/null. Waits for it.
Exit run_program(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  if (quiet) posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  Exit e;
  if (rc != 0) {
    e.why = std::strerror(rc);
    return e;
  }
  int status = 0;
  pid_t w = 0;
  while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (w < 0) {
    e.why = std::string("waitpid: ") + std::strerror(errno);
    return e;
  }
  e.started = true;
  e.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return e;
}

std::string find_python() {
  std::vector<std::string> candidates;
  if (const char* e = std::getenv("PARAXIS_PYTHON"))
    candidates.push_back(e);
  else
    candidates = {"python3", "/usr/bin/python3"};
  for (const auto& py : candidates) {
    const Exit e = run_program({py, "-c", "import matplotlib"}, true);
    if (e.started && e.status == 0) return py;
  }
  return "";
}

std::string find_plot_script() {
  if (const char* e = std::getenv("PARAXIS_PLOT_SCRIPT")) return e;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) candidates.push_back(exe.parent_path() / "../share/paraxis/tools/plot_report.py");
  candidates.push_back(fs::path(PARAXIS_TOOLS_DIR) / "plot_report.py");
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return c.string();
  return "";
}

}  // namespace

PlotOutcome make_plots(const std::string& report_json, const std::string& plots_dir) {
  PlotOutcome out;
  const std::string python = find_python();
  if (python.empty()) {
    out.kind = PlotOutcome::skipped;
    out.note = "plots skipped: no python3 with matplotlib (set PARAXIS_PYTHON)";
    return out;
  }
  const std::string script = find_plot_script();
  if (script.empty()) {
    out.kind = PlotOutcome::skipped;
    out.note = "plots skipped: tools/plot_report.py not found (set PARAXIS_PLOT_SCRIPT)";
    return out;
  }
  const Exit e = run_program({python, script, report_json, plots_dir}, false);
  if (!e.started || e.status != 0) {
    out.kind = PlotOutcome::failed;
    out.note = "plots failed: " + python + " " + script +
               (e.started ? " exited with status " + std::to_string(e.status)
                          : " could not start: " + e.why);
  }
  return out;
}

}  // namespace paraxis::driver
