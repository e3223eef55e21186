// Element sizes per precision and a readable name for a configuration.
#include "perfmodel/parallel_config.hpp"

#include <sstream>

namespace paraxis::perfmodel {

ElementBytes element_bytes(model::Precision p) {
  switch (p) {
    case model::Precision::fp64:
      return {8, 8, 8, 8};
    case model::Precision::fp32:
      return {4, 4, 4, 4};
    case model::Precision::bf16:
      return {2, 4, 4, 2};
  }
  return {};
}

bool has_master_copy(model::Precision p) {
  return p == model::Precision::bf16;
}

std::string describe(const ParallelConfig& c) {
  std::ostringstream os;
  os << "tp=" << c.tp << " pp=" << c.pp << " dp=" << c.dp << " ep=" << c.ep
     << " mb=" << c.micro_batch << " zero=" << c.zero << " " << parallel::to_string(c.schedule);
  if (c.schedule == parallel::ScheduleKind::interleaved) os << " v=" << c.virtual_stages;
  if (c.sp()) os << " sp";
  return os.str();
}

}  // namespace paraxis::perfmodel
