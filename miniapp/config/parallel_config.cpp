// Names of the configuration's enums and its derived counts (parallel_config.hpp).
#include "config/parallel_config.hpp"

#include <stdexcept>

namespace paraxis::config {

namespace {

template <class E>
E parse_choice(const std::string& what, const std::vector<std::string>& names,
               const std::string& name) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<E>(i);
  std::string expected;
  for (std::size_t i = 0; i < names.size(); ++i)
    expected += (i ? (i + 1 == names.size() ? " or " : ", ") : "") + names[i];
  throw std::invalid_argument("unknown " + what + " \"" + name + "\" (expected " + expected + ")");
}

}  // namespace

// The orders of these lists are the enums' orders.
const std::vector<std::string>& rank_order_names() {
  static const std::vector<std::string> n{"tp-pp-dp", "tp-dp-pp"};
  return n;
}
const std::vector<std::string>& comm_backend_names() {
  static const std::vector<std::string> n{"mpi", "nccl"};
  return n;
}
const std::vector<std::string>& schedule_names() {
  using schedule::ScheduleKind;
  static const std::vector<std::string> n{
      schedule::to_string(ScheduleKind::gpipe), schedule::to_string(ScheduleKind::one_f_one_b),
      schedule::to_string(ScheduleKind::interleaved), schedule::to_string(ScheduleKind::zb_h1)};
  return n;
}

const char* to_string(RankOrder o) {
  return rank_order_names().at(static_cast<std::size_t>(o)).c_str();
}
const char* to_string(CommBackend b) {
  return comm_backend_names().at(static_cast<std::size_t>(b)).c_str();
}
const std::vector<std::string>& slow_axis_names() {
  static const std::vector<std::string> n{"none", "tp", "pp", "dp", "ep"};
  return n;
}
const char* to_string(SlowAxis a) {
  return slow_axis_names().at(static_cast<std::size_t>(a)).c_str();
}
const std::vector<std::string>& mpi_gpu_aware_names() {
  static const std::vector<std::string> n{"auto", "yes", "no"};
  return n;
}
const char* to_string(MpiGpuAware a) {
  return mpi_gpu_aware_names().at(static_cast<std::size_t>(a)).c_str();
}
RankOrder parse_rank_order(const std::string& name) {
  return parse_choice<RankOrder>("rank order", rank_order_names(), name);
}
CommBackend parse_comm_backend(const std::string& name) {
  return parse_choice<CommBackend>("communication backend", comm_backend_names(), name);
}

std::string zero_stage_error(int zero) {
  if (zero >= 0 && zero <= kMaxZeroStage) return {};
  return "zero = " + std::to_string(zero) + ", expected 0, 1, 2 or 3";
}

void require_zero_stage(int zero) {
  if (const std::string e = zero_stage_error(zero); !e.empty()) throw std::invalid_argument(e);
}

int micro_batches(const model::TrainConfig& t, const ParallelConfig& p) {
  return t.global_batch / (p.dp * t.micro_batch);
}

schedule::PipelineShape pipeline_shape(const model::TrainConfig& t, const ParallelConfig& p) {
  return {p.pp, micro_batches(t, p), p.virtual_stages};
}

}  // namespace paraxis::config
