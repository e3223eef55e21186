// The SIGINT handler (interrupt.hpp). Only async-signal-safe calls inside it: write(2) of a
// line formatted when the handler is installed, then _exit(2). The results already written
// stay as they are (every file is renamed into place whole: docs/results.md, "Guarantees").
#include "driver/interrupt.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "config/exit_codes.hpp"

namespace paraxis::driver {

namespace {

char interrupt_line[128];

void on_interrupt(int) {
  const ssize_t written = ::write(STDERR_FILENO, interrupt_line, std::strlen(interrupt_line));
  (void)written;
  ::_exit(exit_code::interrupted);
}

}  // namespace

void exit_on_interrupt(int rank) {
  std::snprintf(interrupt_line, sizeof interrupt_line,
                "paraxis: rank %d interrupted (SIGINT); exit code %d\n", rank,
                exit_code::interrupted);
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
}

}  // namespace paraxis::driver
