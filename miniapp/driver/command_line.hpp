// The command line's own errors (docs/results.md, "Exit status"): every mistake CLI11 finds
// (an unknown option or command, a missing argument, a value out of range, an empty path) is
// bad input, one line naming the option, exit code 2 on every rank; never CLI11's own codes.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace paraxis::driver {

// A CLI11 validator for options that name a file or folder: an empty or whitespace-only value
// (an unset shell variable in a batch script, `--resume "$CKPT"`) is an error, never ignored.
CLI::Validator non_blank_path();

// A CLI11 validator for counts: an integer in [1, INT_MAX] (the message gives the range).
CLI::Validator positive_count();

// Before CLI11 parses: the first argument that is not an option must name one of app's
// commands. Returns "" when it does (or when there is none: CLI11 then says what is missing),
// else one line naming the argument and the commands.
std::string unknown_command_error(int argc, char** argv, const CLI::App& app);

// The exit code of a parse error, after printing it on rank 0: --help and its kin print their
// page and return 0; every other error prints one line ("paraxis: error: ...") and returns
// exit_code::bad_input.
int report_parse_error(const CLI::App& app, const CLI::ParseError& e, int rank);

}  // namespace paraxis::driver
