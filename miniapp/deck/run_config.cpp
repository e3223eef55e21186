// The names of run_config.hpp's enums, in deck order (the deck's key table and the summary
// reader resolve them; everything after the deck works on the enums).
#include "deck/run_config.hpp"

namespace paraxis::driver {

const std::vector<std::string>& gemm_choice_names() {
  static const std::vector<std::string> n{"auto", "portable"};
  return n;
}
const char* to_string(GemmChoice g) {
  return gemm_choice_names().at(static_cast<std::size_t>(g)).c_str();
}
const std::vector<std::string>& dead_at_names() {
  static const std::vector<std::string> n{"step", "save", "checkpoint"};
  return n;
}
const char* to_string(DeadAt a) {
  return dead_at_names().at(static_cast<std::size_t>(a)).c_str();
}

}  // namespace paraxis::driver
