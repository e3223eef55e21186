// Every rank's figures of one sweep point, gathered to rank 0 through the watchdog
// (point_stages.hpp): per-step metrics, trace events, memory.
#include <mpi.h>

#include "driver/point_stages.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::driver {

namespace wd = parallel::watchdog;

namespace {

// Gathers `count` values of `type` from every rank to rank 0 (recv: world * count on rank 0).
void gather(const void* send, void* recv, int count, MPI_Datatype type, const char* what) {
  MPI_Request req;
  MPI_Igather(send, count, type, recv, count, type, 0, MPI_COMM_WORLD, &req);
  wd::wait_all(1, &req, what, "world", MPI_COMM_WORLD);
}

}  // namespace

void gather_steps_and_trace(const RunConfig& cfg, int world, int rank, double t0, PointResult& r) {
  std::vector<double> mine;
  for (const auto& st : r.steps) {
    const auto v = rank_metrics(st);
    mine.insert(mine.end(), v.begin(), v.end());
  }
  std::vector<double> all(mine.size() * static_cast<std::size_t>(world));
  gather(mine.data(), all.data(), static_cast<int>(mine.size()), MPI_DOUBLE, "gather step metrics");
  const std::size_t per_step = rank_metric_names().size();
  if (rank == 0) {
    r.rank_steps.assign(world, std::vector<std::vector<double>>(r.steps.size()));
    for (int k = 0; k < world; ++k)
      for (std::size_t s = 0; s < r.steps.size(); ++s) {
        const double* p = &all[(static_cast<std::size_t>(k) * r.steps.size() + s) * per_step];
        r.rank_steps[k][s].assign(p, p + per_step);
      }
  }
  if (!cfg.output.trace) return;
  const std::string text = trace_events_json(r.steps, rank, t0).dump();
  int len = static_cast<int>(text.size());
  std::vector<int> lens(world), offs(world, 0);
  gather(&len, lens.data(), 1, MPI_INT, "gather trace sizes");
  for (int k = 1; k < world; ++k) offs[k] = offs[k - 1] + lens[k - 1];
  std::vector<char> buf(rank == 0 ? static_cast<std::size_t>(offs[world - 1] + lens[world - 1])
                                  : 0);
  MPI_Request req;
  MPI_Igatherv(text.data(), len, MPI_CHAR, buf.data(), lens.data(), offs.data(), MPI_CHAR, 0,
               MPI_COMM_WORLD, &req);
  wd::wait_all(1, &req, "gather trace events", "world", MPI_COMM_WORLD);
  if (rank == 0)
    for (int k = 0; k < world; ++k)
      for (auto& e : nlohmann::json::parse(buf.begin() + offs[k], buf.begin() + offs[k] + lens[k]))
        r.trace_events.push_back(std::move(e));
}

void gather_memory(const model::MemoryReport& mine, int world, PointResult& r) {
  constexpr int kFields = 8;
  unsigned long long fields[kFields] = {
      mine.params_bytes, mine.grads_bytes,       mine.optimizer_bytes,  mine.activations_peak_bytes,
      mine.peak_bytes,   mine.params_peak_bytes, mine.grads_peak_bytes, mine.optimizer_peak_bytes};
  std::vector<unsigned long long> all(kFields * static_cast<std::size_t>(world));
  gather(fields, all.data(), kFields, MPI_UNSIGNED_LONG_LONG, "gather memory");
  r.memory = mine;
  for (int k = 0; k < world; ++k) {
    const unsigned long long* a = &all[kFields * static_cast<std::size_t>(k)];
    model::MemoryReport m{a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]};
    r.memory_per_rank.push_back(m);
    if (m.peak_bytes > r.memory.peak_bytes) r.memory = m;
  }
}

}  // namespace paraxis::driver
