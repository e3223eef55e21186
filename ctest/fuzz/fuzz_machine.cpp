// libFuzzer target: the machine-description reader of `paraxis plan` (inputs/machines/*.yaml).
// The contract: any text gives a MachineFile or a std::exception naming the key; never a crash,
// an undefined conversion (1e30 nodes into an int), a hang or a leak.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "deck/machine_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto m = paraxis::driver::load_machine_text(text, "fuzz-machine.yaml");
    (void)m;
  } catch (const std::exception&) {
    // Refused, with a message naming the key.
  }
  return 0;
}
