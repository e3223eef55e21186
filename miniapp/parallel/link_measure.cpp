// Ping-pong measurement of a group's links for fault.slow_axis (link_measure.hpp).
#include "parallel/link_measure.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include "parallel/mpi_check.hpp"
#include "parallel/watchdog.hpp"

namespace paraxis::parallel {

namespace {

constexpr int kTag = 0x5118;
constexpr std::size_t kSmall = 8, kLarge = 1 << 20;
constexpr int kSmallRounds = 8, kLargeRounds = 3;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, MeasuredLink>& registry() {
  static std::map<std::string, MeasuredLink> r;
  return r;
}

}  // namespace

double fastest_half_round_trip(MPI_Comm comm, int me, int a, int b, std::size_t bytes, int rounds,
                               const char* axis, const char* what) {
  if (me != a && me != b) return 0;
  std::vector<char> buf(bytes, 1);
  const int peer = me == a ? b : a;
  double best = 0;
  for (int r = 0; r < rounds; ++r) {
    watchdog::Wait w;
    w.op = what;
    w.axis = axis;
    w.comm = comm;
    w.peer = peer;
    const double t0 = now();
    for (int leg = 0; leg < 2; ++leg) {
      MPI_Request q = MPI_REQUEST_NULL;
      if ((me == a) == (leg == 0))
        check_mpi(MPI_Isend(buf.data(), static_cast<int>(bytes), MPI_BYTE, peer, kTag, comm, &q),
                  "isend (link ping-pong)");
      else
        check_mpi(MPI_Irecv(buf.data(), static_cast<int>(bytes), MPI_BYTE, peer, kTag, comm, &q),
                  "irecv (link ping-pong)");
      watchdog::wait_all(1, &q, w);
    }
    const double half = (now() - t0) / 2;
    if (half > 0 && (best == 0 || half < best)) best = half;
  }
  return best;
}

MeasuredLink measure_group_link(MPI_Comm comm, const char* axis) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  const char* what = "link emulation: slow axis ping-pong";
  const double small = fastest_half_round_trip(comm, me, 0, 1, kSmall, kSmallRounds, axis, what);
  const double large = fastest_half_round_trip(comm, me, 0, 1, kLarge, kLargeRounds, axis, what);
  // The two ends agree on both figures (MAX: the other members hold 0).
  double f[2] = {small, large};
  watchdog::all_reduce(MPI_IN_PLACE, f, 2, MPI_DOUBLE, MPI_MAX, comm,
                       "link emulation: the slow axis's measured link", axis);
  MeasuredLink l;
  l.alpha_s = f[0];
  // The time 1 MiB takes beyond a message's latency; a large message measured no slower than a
  // small one (timer noise) leaves the speed from the whole round trip.
  const double wire = f[1] > f[0] ? f[1] - f[0] : f[1];
  l.bytes_per_s = wire > 0 ? static_cast<double>(kLarge) / wire : 0;
  return l;
}

void note_measured_link(const std::string& axis, const MeasuredLink& link) {
  std::lock_guard<std::mutex> g(registry_mutex());
  registry()[axis] = link;
}

std::map<std::string, MeasuredLink> measured_links() {
  std::lock_guard<std::mutex> g(registry_mutex());
  return registry();
}

void clear_measured_links() {
  std::lock_guard<std::mutex> g(registry_mutex());
  registry().clear();
}

}  // namespace paraxis::parallel
