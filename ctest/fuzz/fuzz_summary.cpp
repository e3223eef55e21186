// libFuzzer target: the summary.json reader behind `paraxis report`. Any byte string is parsed
// as JSON (not JSON: nothing to validate) and validated; the contract is that validation either
// accepts the document or throws a std::exception naming the field, and never crashes (SIGFPE,
// out-of-range access, a nlohmann type_error escaping as something else), hangs or leaks.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>

#include "analysis/summary_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    paraxis::driver::validate_summary(j, "fuzz/summary.json");
  } catch (const std::exception&) {
    // Refused, with a message: the documented outcome for a malformed summary.
  }
  return 0;
}
