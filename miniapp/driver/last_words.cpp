// A dying rank's last words (last_words.hpp).
#include "driver/last_words.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "config/exit_codes.hpp"

namespace paraxis::driver {

namespace {

std::function<void(const std::string&, int)>& last_words() {
  static std::function<void(const std::string&, int)> writer;
  return writer;
}

}  // namespace

void set_last_words(std::function<void(const std::string& what, int step)> writer) {
  last_words() = std::move(writer);
}

void die_leaving_record(int rank, const std::string& doing, int step) {
  std::fprintf(stderr, "paraxis: rank %d dies while %s (fault.dead_rank)\n", rank, doing.c_str());
  std::fflush(stderr);
  if (last_words()) last_words()("died while " + doing + " (fault.dead_rank)", step);
  std::raise(SIGKILL);
  std::_Exit(exit_code::rank_failed);
}

}  // namespace paraxis::driver
