// Young's and Daly's optimal checkpoint intervals, and a system MTBF from a per-device rate.
#include "perfmodel/checkpoint.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace paraxis::perfmodel {

namespace {

void check(double C, double M, const char* who) {
  if (!(C >= 0) || !(M > 0) || !std::isfinite(C) || !std::isfinite(M)) {
    std::ostringstream os;
    os << who << ": checkpoint cost " << C << " s, MTBF " << M
       << " s; expected a cost >= 0 and an MTBF > 0";
    throw std::invalid_argument(os.str());
  }
}

}  // namespace

double young_interval(double C, double M) {
  check(C, M, "young_interval");
  return std::sqrt(2.0 * C * M);
}

double daly_interval(double C, double M) {
  check(C, M, "daly_interval");
  if (C >= 2.0 * M) return M;
  const double x = C / (2.0 * M);
  return std::sqrt(2.0 * C * M) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - C;
}

double system_mtbf(double rate, double devices) {
  if (!(rate > 0) || !(devices > 0)) {
    std::ostringstream os;
    os << "system_mtbf: " << rate << " failures per device-second on " << devices
       << " devices; expected both > 0";
    throw std::invalid_argument(os.str());
  }
  return 1.0 / (rate * devices);
}

double llama3_failures_per_device_s() {
  return kLlama3Interruptions / (kLlama3Days * 86400.0 * kLlama3Gpus);
}

}  // namespace paraxis::perfmodel
