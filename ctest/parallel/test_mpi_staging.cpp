// Staging of MPI buffers through host memory (parallel/mpi_staging.hpp, comm.mpi_gpu_aware) on
// 2 ranks, forced on the host build: the rule and the library's answer; every operation of the
// communicator, staged, against the same call unstaged, bitwise (reductions in fp32, fp64, bf16
// and int64, in place and not, all_to_all_v with gaps the call must leave alone); a non-blocking
// receive that lands in the caller's buffer only at its completion; staging buffers reused (no
// allocation after the first round); training runs under three layouts that reproduce the
// unstaged run bitwise and do stage. It prints the cost of staging a 1 MiB and a 16 MiB
// all_reduce (not asserted: the machine is shared).
#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "parallel/communicator.hpp"
#include "parallel/mpi_staging.hpp"
#include "training_run.hpp"

using namespace paraxis::parallel;
using paraxis::config::CommBackend;
using paraxis::config::MpiGpuAware;

namespace {

int rank_of_world() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// A communicator made under each setting, then the default restored.
struct Pair {
  CommLog log;
  std::unique_ptr<Communicator> staged, plain;
  Pair() {
    set_mpi_gpu_aware(MpiGpuAware::no);
    staged = make_communicator(CommBackend::mpi, MPI_COMM_WORLD, Axis::dp, &log);
    set_mpi_gpu_aware(MpiGpuAware::yes);
    plain = make_communicator(CommBackend::mpi, MPI_COMM_WORLD, Axis::dp, &log);
    set_mpi_gpu_aware(MpiGpuAware::automatic);
  }
};

template <class T>
std::vector<T> values(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_same_v<T, long long>)
      x = static_cast<long long>(g() % 2000001) - 1000000;
    else
      x = T(u(g));
  }
  return v;
}

// Runs op(comm, send, recv) on both communicators from the same starting buffers (random,
// different on each rank) and expects both buffers to end bitwise the same.
template <class T, class Op>
void expect_same(Pair& p, std::size_t ns, std::size_t nr, unsigned seed, const std::string& what,
                 Op op) {
  const unsigned me = static_cast<unsigned>(rank_of_world());
  std::vector<std::vector<char>> ends;
  for (Communicator* c : {p.staged.get(), p.plain.get()}) {
    Kokkos::View<T*> s("paraxis::test_send", ns), r("paraxis::test_recv", nr);
    auto hs = Kokkos::create_mirror_view(s);
    auto hr = Kokkos::create_mirror_view(r);
    const auto vs = values<T>(ns, seed + 1000 * me), vr = values<T>(nr, seed + 1000 * me + 500);
    for (std::size_t i = 0; i < ns; ++i) hs(i) = vs[i];
    for (std::size_t i = 0; i < nr; ++i) hr(i) = vr[i];
    Kokkos::deep_copy(s, hs);
    Kokkos::deep_copy(r, hr);
    op(*c, s.data(), r.data());
    Kokkos::deep_copy(hs, s);
    Kokkos::deep_copy(hr, r);
    std::vector<char> bytes((ns + nr) * sizeof(T));
    if (ns) std::memcpy(bytes.data(), hs.data(), ns * sizeof(T));
    if (nr) std::memcpy(bytes.data() + ns * sizeof(T), hr.data(), nr * sizeof(T));
    ends.push_back(std::move(bytes));
  }
  EXPECT_TRUE(ends[0] == ends[1]) << what << ": the staged call differs from the unstaged one";
}

// Every reduction, in place and not, for one element type.
template <class T>
void reductions(Pair& p, unsigned seed) {
  constexpr std::size_t n = 1001;
  const auto t = dtype_of<T>();
  const std::size_t P = static_cast<std::size_t>(p.staged->size());
  expect_same<T>(p, n, n, seed + 1, "all_reduce sum",
                 [&](Communicator& c, T* s, T* r) { c.all_reduce(s, r, n, t); });
  expect_same<T>(p, n, n, seed + 2, "all_reduce max",
                 [&](Communicator& c, T* s, T* r) { c.all_reduce(s, r, n, t, ReduceOp::max); });
  expect_same<T>(p, 0, n, seed + 3, "all_reduce in place",
                 [&](Communicator& c, T*, T* r) { c.all_reduce(r, r, n, t); });
  expect_same<T>(p, P * n, n, seed + 4, "reduce_scatter",
                 [&](Communicator& c, T* s, T* r) { c.reduce_scatter(s, r, n, t); });
  expect_same<T>(p, 0, P * n, seed + 5, "reduce_scatter in place",
                 [&](Communicator& c, T*, T* r) { c.reduce_scatter(r, r, n, t); });
  expect_same<T>(p, n, n, seed + 6, "iall_reduce + wait", [&](Communicator& c, T* s, T* r) {
    Request q = c.iall_reduce(s, r, n, t);
    c.wait(q);
  });
  expect_same<T>(p, P * n, n, seed + 7, "ireduce_scatter + test", [&](Communicator& c, T* s, T* r) {
    Request q = c.ireduce_scatter(s, r, n, t);
    while (!c.test(q)) {
    }
  });
}

}  // namespace

TEST(mpi_staging, rule_stages_unless_the_library_reads_device_memory) {
  using S = MpiGpuSupport;
  for (S lib : {S::yes, S::no, S::unknown, S::not_applicable})
    for (bool device : {false, true}) {
      EXPECT_FALSE(staging_for(MpiGpuAware::yes, lib, device));
      EXPECT_TRUE(staging_for(MpiGpuAware::no, lib, device));
      EXPECT_EQ(staging_for(MpiGpuAware::automatic, lib, device), device && lib != S::yes)
          << to_string(lib) << (device ? " device" : " host");
    }
}

TEST(mpi_staging, the_library_is_asked_where_its_header_can_ask) {
  // A host-only build has nothing to ask about, and nothing is staged by default.
  EXPECT_EQ(build_device_kind(), DeviceKind::none);
  EXPECT_EQ(mpi_gpu_support().answer, MpiGpuSupport::not_applicable);
  set_mpi_gpu_aware(MpiGpuAware::automatic);
  EXPECT_FALSE(mpi_staging());
  // MPICH >= 4.0 (Debian's 4.0.2 here) answers the CUDA question, with the call named.
  const MpiGpuQuery q = query_mpi_gpu_support(DeviceKind::cuda);
#if defined(MPIX_GPU_SUPPORT_CUDA)
  EXPECT_NE(q.answer, MpiGpuSupport::unknown) << q.how;
  EXPECT_NE(q.how.find("MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA)"), std::string::npos)
      << q.how;
#else
  EXPECT_FALSE(q.how.empty());
#endif
  if (rank_of_world() == 0)
    std::printf("MPI library on CUDA memory: %s (%s)\n", to_string(q.answer), q.how.c_str());
  set_mpi_gpu_aware(MpiGpuAware::no);
  EXPECT_TRUE(mpi_staging());
  set_mpi_gpu_aware(MpiGpuAware::automatic);
}

TEST(mpi_staging, every_operation_matches_the_unstaged_call_bitwise) {
  Pair p;
  ASSERT_TRUE(p.staged->stages_buffers());
  ASSERT_NE(p.staged->staging_pool(), nullptr);
  EXPECT_FALSE(p.plain->stages_buffers());
  const std::size_t before = p.staged->staging_pool()->staged_bytes();
  reductions<float>(p, 10);
  reductions<double>(p, 20);
  reductions<paraxis::bf16>(p, 30);
  reductions<long long>(p, 40);

  using T = float;
  constexpr std::size_t n = 777;
  const auto t = dtype_of<T>();
  const int me = p.staged->rank(), P = p.staged->size();
  const std::size_t Pn = static_cast<std::size_t>(P) * n;
  expect_same<T>(p, n, Pn, 50, "all_gather",
                 [&](Communicator& c, T* s, T* r) { c.all_gather(s, r, n, t); });
  expect_same<T>(p, 0, Pn, 51, "all_gather in place", [&](Communicator& c, T*, T* r) {
    c.all_gather(r + static_cast<std::size_t>(me) * n, r, n, t);
  });
  // all_to_all_v: uneven blocks with gaps between them on both sides, the received blocks in
  // reverse rank order; the receive's gaps keep what they held.
  std::vector<int> sc(P), sd(P), rc(P), rd(P);
  int so = 0, ro = 0;
  for (int j = 0; j < P; ++j) {
    sc[j] = (me + 1) * (j + 2);
    sd[j] = so;
    so += sc[j] + 3;
  }
  for (int j = P - 1; j >= 0; --j) {
    rc[j] = (j + 1) * (me + 2);
    rd[j] = ro;
    ro += rc[j] + 5;
  }
  expect_same<T>(p, static_cast<std::size_t>(so), static_cast<std::size_t>(ro), 52, "all_to_all_v",
                 [&](Communicator& c, T* s, T* r) {
                   c.all_to_all_v(s, sc.data(), sd.data(), r, rc.data(), rd.data(), t);
                 });
  expect_same<T>(p, 0, n, 53, "broadcast",
                 [&](Communicator& c, T*, T* r) { c.broadcast(r, n, t, P - 1); });
  expect_same<T>(p, n, n, 54, "send/recv", [&](Communicator& c, T* s, T* r) {
    if (me == 0) c.send(s, n, t, 1, 7);
    if (me == 1) c.recv(r, n, t, 0, 7);
  });
  expect_same<T>(p, n, n, 55, "isend/irecv ring", [&](Communicator& c, T* s, T* r) {
    Request rq = c.irecv(r, n, t, (me + P - 1) % P, 9);
    Request sq = c.isend(s, n, t, (me + 1) % P, 9);
    while (!c.test(rq)) {
    }
    c.wait(sq);
  });
  expect_same<double>(p, 0, 1, 56, "barrier",
                      [&](Communicator& c, double*, double*) { c.barrier(); });
  EXPECT_GT(p.staged->staging_pool()->staged_bytes(), before);
}

TEST(mpi_staging, a_staged_receive_lands_at_its_completion) {
  Pair p;
  const int me = p.staged->rank();
  constexpr std::size_t n = 64;
  Kokkos::View<float*> buf("paraxis::test_recv", n);
  auto h = Kokkos::create_mirror_view(buf);
  for (std::size_t i = 0; i < n; ++i) h(i) = me == 0 ? float(i) : -1.0f;
  Kokkos::deep_copy(buf, h);
  Request q;
  if (me == 1) q = p.staged->irecv(buf.data(), n, DType::f32, 0, 3);
  if (me == 0) p.staged->send(buf.data(), n, DType::f32, 1, 3);
  // The message has arrived (the sender's send completed, and the barrier drives progress),
  // but the staged receive holds it in host memory until wait.
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 1) {
    Kokkos::deep_copy(h, buf);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(h(i), -1.0f) << "element " << i;
    p.staged->wait(q);
    Kokkos::deep_copy(h, buf);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(h(i), float(i)) << "element " << i;
  }
}

TEST(mpi_staging, buffers_are_reused_after_the_first_round) {
  Pair p;
  const StagingPool& pool = *p.staged->staging_pool();
  const int me = p.staged->rank(), P = p.staged->size();
  constexpr std::size_t n = 5000;
  Kokkos::View<float*> a("paraxis::a", P * n), b("paraxis::b", P * n);
  Kokkos::deep_copy(a, 1.0f);
  auto round = [&] {
    Communicator& c = *p.staged;
    c.all_reduce(a.data(), b.data(), n, DType::f32);
    c.reduce_scatter(a.data(), b.data(), n / 2, DType::f32);
    c.all_gather(a.data(), b.data(), n / 3, DType::f32);
    Request r1 = c.irecv(b.data(), n, DType::f32, (me + P - 1) % P, 1);
    Request r2 = c.iall_reduce(a.data(), b.data() + n, 100, DType::f32);
    Request s1 = c.isend(a.data(), n, DType::f32, (me + 1) % P, 1);
    c.wait(r2);
    c.wait(s1);
    c.wait(r1);
  };
  round();
  const std::size_t first = pool.allocations();
  EXPECT_GT(first, 0u);
  for (int i = 0; i < 3; ++i) round();
  EXPECT_EQ(pool.allocations(), first) << "staging allocated after the first round";
}

TEST(mpi_staging, cost_on_the_host_of_a_staged_all_reduce) {
  Pair p;
  const int P = p.staged->size();
  for (std::size_t mib : {1, 16}) {
    const std::size_t n = mib * (1u << 20) / sizeof(float);
    Kokkos::View<float*> s("paraxis::s", n), r("paraxis::r", n);
    Kokkos::deep_copy(s, float(p.staged->rank() + 1));
    const int reps = mib == 1 ? 21 : 7;
    double median[2];
    for (int k = 0; k < 2; ++k) {
      Communicator& c = k == 0 ? *p.plain : *p.staged;
      std::vector<double> t;
      for (int i = 0; i < reps; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double b = steady_now();
        c.all_reduce(s.data(), r.data(), n, DType::f32);
        t.push_back(steady_now() - b);
      }
      std::sort(t.begin(), t.end());
      median[k] = t[t.size() / 2];
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), r);
      const float want = float(P * (P + 1) / 2);
      EXPECT_EQ(h(0), want);
      EXPECT_EQ(h(n - 1), want);
    }
    if (p.staged->rank() == 0)
      std::printf("all_reduce %zu MiB fp32 on %d ranks: unstaged %.3f ms, staged %.3f ms (x%.2f)\n",
                  mib, P, median[0] * 1e3, median[1] * 1e3, median[1] / median[0]);
  }
}

// Training under the layouts that use every kind of call (tensor + sequence parallel: all-reduce,
// all-gather, reduce-scatter; pipeline: isend/irecv; data + expert parallel with ZeRO-1 in bf16:
// bf16 reductions, all-to-all-v), staged against unstaged.
TEST(mpi_staging, training_reproduces_the_unstaged_run_bitwise) {
  if (ptest::world_size() != 2) GTEST_SKIP() << "a 2-rank test";
  const std::vector<std::vector<std::string>> layouts{
      {"parallel.tp=2", "parallel.sequence_parallel=true"},
      {"parallel.pp=2"},
      {"parallel.dp=2", "parallel.ep=2", "parallel.zero=1", "train.precision=bf16"}};
  for (auto overrides : layouts) {
    overrides.push_back("train.steps=3");
    std::string name;
    for (const auto& o : overrides) name += o + " ";
    const auto cfg = ptest::tiny(overrides);
    set_mpi_gpu_aware(MpiGpuAware::no);
    const std::size_t b0 = staged_bytes_in_process();
    const auto staged = ptest::run_parallel(cfg);
    const std::size_t b1 = staged_bytes_in_process();
    set_mpi_gpu_aware(MpiGpuAware::yes);
    const auto plain = ptest::run_parallel(cfg);
    const std::size_t b2 = staged_bytes_in_process();
    set_mpi_gpu_aware(MpiGpuAware::automatic);
    EXPECT_GT(b1, b0) << name << ": the staged run staged nothing";
    EXPECT_EQ(b2, b1) << name << ": the unstaged run staged";
    ASSERT_EQ(staged.loss.size(), plain.loss.size());
    EXPECT_EQ(
        0, std::memcmp(staged.loss.data(), plain.loss.data(), staged.loss.size() * sizeof(double)))
        << name << ": losses differ";
    ASSERT_EQ(staged.params.size(), plain.params.size());
    EXPECT_EQ(0, std::memcmp(staged.params.data(), plain.params.data(),
                             staged.params.size() * sizeof(double)))
        << name << ": parameters differ";
  }
}
