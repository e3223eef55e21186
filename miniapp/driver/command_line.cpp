// The command line's own errors (command_line.hpp).
#include "driver/command_line.hpp"

#include <cctype>
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "config/exit_codes.hpp"

namespace paraxis::driver {

namespace {

// "run, check, report or plan"
std::string command_names(const CLI::App& app) {
  const auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  std::string s;
  for (std::size_t i = 0; i < subs.size(); ++i)
    s += (i == 0 ? "" : i + 1 == subs.size() ? " or " : ", ") + subs[i]->get_name();
  return s;
}

}  // namespace

CLI::Validator non_blank_path() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        for (char c : value)
          if (!std::isspace(static_cast<unsigned char>(c))) return "";
        return "'" + value + "' is an empty path (an unset shell variable?): give a path";
      },
      "PATH");
}

CLI::Validator positive_count() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        long long v = 0;
        std::size_t used = 0;
        try {
          v = std::stoll(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != value.size() || used == 0 || v < 1 || v > INT_MAX)
          return "'" + value + "' is not a count: expected an integer from 1 to " +
                 std::to_string(INT_MAX);
        return "";
      },
      "COUNT");
}

std::string unknown_command_error(int argc, char** argv, const CLI::App& app) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (!a.empty() && a[0] == '-') continue;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == a) return "";
    return "unknown command '" + a + "': expected " + command_names(app) + " (paraxis --help)";
  }
  return "";
}

int report_parse_error(const CLI::App& app, const CLI::ParseError& e, int rank) {
  if (e.get_exit_code() == 0) return rank == 0 ? app.exit(e) : exit_code::ok;  // --help and its kin
  if (rank == 0) {
    const auto chosen = app.get_subcommands();
    std::string line = e.what();
    if (chosen.empty() && e.get_name() == "RequiredError")
      line = "a command is required: " + command_names(app);
    const std::string help =
        chosen.empty() ? "paraxis --help" : "paraxis " + chosen.front()->get_name() + " --help";
    std::fflush(stdout);
    std::fprintf(stderr, "paraxis: error: %s (%s lists the options)\n", line.c_str(), help.c_str());
  }
  return exit_code::bad_input;
}

}  // namespace paraxis::driver
