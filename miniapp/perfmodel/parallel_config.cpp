// Scenarios from a run's sections, element sizes per precision, a readable name.
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

model::TrainConfig Scenario::train() const {
  model::TrainConfig t;
  t.global_batch = global_batch;
  t.micro_batch = micro_batch;
  t.precision = precision;
  t.recompute = recompute;
  t.recompute_layers = recompute_layers;
  return t;
}

Scenario scenario_of(const config::ParallelConfig& p, const config::CommConfig& comm,
                     const model::TrainConfig& t) {
  Scenario s;
  static_cast<config::ParallelConfig&>(s) = p;
  s.global_batch = t.global_batch;
  s.micro_batch = t.micro_batch;
  s.precision = t.precision;
  s.recompute = t.recompute;
  s.recompute_layers = t.recompute_layers;
  s.bucket_mb = comm.bucket_mb;
  s.overlap = comm.overlap;
  return s;
}

std::string describe(const Scenario& c) {
  std::ostringstream os;
  os << "tp=" << c.tp << " pp=" << c.pp << " dp=" << c.dp << " ep=" << c.ep
     << " mb=" << c.micro_batch << " zero=" << c.zero << " " << schedule::to_string(c.schedule);
  if (c.schedule == schedule::ScheduleKind::interleaved) os << " v=" << c.virtual_stages;
  if (c.sp()) os << " sp";
  if (c.recompute != model::Recompute::none) {
    os << " recompute=" << model::to_string(c.recompute);
    if (c.recompute_layers > 0) os << ":" << c.recompute_layers;
  }
  return os.str();
}

}  // namespace paraxis::perfmodel
