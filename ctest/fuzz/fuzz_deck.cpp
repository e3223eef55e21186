// libFuzzer target: the deck loader (YAML, `--set` overrides, sweeps and `auto` expansion,
// validation for a rank count). The contract: for any input it returns errors or throws a
// std::exception; a crash, sanitizer report, other exception, hang or runaway memory is a bug.
//
// Input format (so that a plain deck is a valid seed):
//   <deck YAML>
//   ---overrides---        optional; every line after it is one `--set KEY=VALUE`,
//   world=N                except `world=N`, the rank count to validate for (default 1;
//                          0 skips the world-size checks as `paraxis check` without --ranks)
#include <climits>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "deck/deck.hpp"

namespace {

const std::string kSeparator = "---overrides---";

// The rank count from "world=N": any N in [0, INT_MAX] (`check --ranks` takes any int), or 1
// when N is not such an integer.
int parse_world(const std::string& digits) {
  if (digits.empty() || digits.size() > 10) return 1;
  long long v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 1;
    v = v * 10 + (c - '0');
  }
  return v > INT_MAX ? 1 : static_cast<int>(v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string text = input;
  std::vector<std::string> overrides;
  int world = 1;
  const auto sep = input.find(kSeparator);
  if (sep != std::string::npos) {
    text = input.substr(0, sep);
    std::size_t pos = sep + kSeparator.size();
    while (pos <= input.size()) {
      auto end = input.find('\n', pos);
      if (end == std::string::npos) end = input.size();
      const std::string line = input.substr(pos, end - pos);
      if (line.rfind("world=", 0) == 0)
        world = parse_world(line.substr(6));
      else if (!line.empty())
        overrides.push_back(line);
      pos = end + 1;
    }
  }
  try {
    const auto deck = paraxis::driver::load_deck_text(text, "fuzz.yaml", overrides, world);
    // Touch what a caller reads, so a half-built result is used the way `run` and `check` use it.
    std::size_t n = deck.errors.size();
    for (const auto& e : deck.errors) n += e.to_string().size();
    for (const auto& p : deck.points) n += p.settings.size() + p.skip_reason.size();
    (void)n;
  } catch (const std::exception&) {
    // A documented way to refuse an input.
  }
  return 0;
}
