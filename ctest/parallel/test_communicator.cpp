// The communicator layer on 2 or 3 ranks: every operation against its definition, with exact
// (integer-valued) data, and the logical bytes each call records (nccl-tests' S). The
// collective tests run on every backend the build has: MPI on host buffers, and NCCL on
// device buffers in CUDA builds with PARAXIS_ENABLE_NCCL (where a GPU exists).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include <Kokkos_Core.hpp>

#include "parallel/communicator.hpp"

using namespace paraxis::parallel;

namespace {
struct World {
  CommLog log;
  std::unique_ptr<Communicator> c =
      make_communicator(paraxis::config::CommBackend::mpi, MPI_COMM_WORLD, Axis::dp, &log);
  int r = c->rank(), n = c->size();
};

// A buffer in the memory a backend works on, with a host mirror for filling and checking.
template <class T>
struct Buffer {
  Buffer(bool device, std::size_t n)
      : dev(device ? DevView("paraxis::test_buf", n) : DevView()), host("paraxis::test_host", n) {}
  using DevView = Kokkos::View<T*, Kokkos::DefaultExecutionSpace::memory_space>;
  DevView dev;
  Kokkos::View<T*, Kokkos::HostSpace> host;
  T* data() { return dev.data() ? dev.data() : host.data(); }
  void to_device() {
    if (dev.data()) Kokkos::deep_copy(dev, host);
    Kokkos::fence();
  }
  void to_host() {
    Kokkos::fence();
    if (dev.data()) Kokkos::deep_copy(host, dev);
  }
};

using paraxis::config::CommBackend;

std::vector<CommBackend> backends() {
  std::vector<CommBackend> b{CommBackend::mpi};
#ifdef PARAXIS_ENABLE_NCCL
  b.push_back(CommBackend::nccl);
#endif
  return b;
}

class collectives : public ::testing::TestWithParam<CommBackend> {
 protected:
  CommLog log;
  std::unique_ptr<Communicator> c = make_communicator(GetParam(), MPI_COMM_WORLD, Axis::dp, &log);
  int r = c->rank(), n = c->size();
  bool device = GetParam() == CommBackend::nccl;
};

TEST_P(collectives, all_reduce_reduce_scatter_all_gather_broadcast) {
  Buffer<float> x(device, 37);
  for (int i = 0; i < 37; ++i) x.host(i) = static_cast<float>(r * 100 + i);
  x.to_device();
  c->all_reduce(x.data(), x.data(), 37, DType::f32);
  x.to_host();
  for (int i = 0; i < 37; ++i) EXPECT_EQ(x.host(i), 100.0f * n * (n - 1) / 2 + n * i);
  const std::size_t block = 5;
  Buffer<double> in(device, block * n), out(device, block), all(device, block * n);
  for (std::size_t i = 0; i < block * n; ++i) in.host(i) = static_cast<double>(i + r);
  for (std::size_t i = 0; i < block; ++i) all.host(r * block + i) = 10.0 * r + i;
  in.to_device();
  all.to_device();
  c->reduce_scatter(in.data(), out.data(), block, DType::f64);
  c->all_gather(all.data() + r * block, all.data(), block, DType::f64);
  out.to_host();
  all.to_host();
  for (std::size_t i = 0; i < block; ++i)
    EXPECT_EQ(out.host(i), n * static_cast<double>(r * block + i) + n * (n - 1) / 2.0);
  for (int p = 0; p < n; ++p)
    for (std::size_t i = 0; i < block; ++i) EXPECT_EQ(all.host(p * block + i), 10.0 * p + i);
  Buffer<int> b(device, 7);
  for (int i = 0; i < 7; ++i) b.host(i) = r == 1 ? 42 : 0;
  b.to_device();
  c->broadcast(b.data(), 7, DType::i32, 1);
  b.to_host();
  for (int i = 0; i < 7; ++i) EXPECT_EQ(b.host(i), 42);
  Buffer<double> q(device, 1000);
  for (int i = 0; i < 1000; ++i) q.host(i) = 1.0 + r;
  q.to_device();
  Request req = c->iall_reduce(q.data(), q.data(), 1000, DType::f64);
  c->wait(req);
  q.to_host();
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(q.host(i), n * (n + 1) / 2.0);
  ASSERT_EQ(log.events().size(), 5u);
  EXPECT_EQ(log.events()[0].bytes, 37u * 4);
  EXPECT_EQ(log.events()[1].bytes, block * n * 8);
  EXPECT_EQ(log.events()[2].bytes, block * n * 8);
  c->barrier();
}

INSTANTIATE_TEST_SUITE_P(backends, collectives, ::testing::ValuesIn(backends()),
                         [](const auto& info) { return std::string(to_string(info.param)); });
}  // namespace

TEST(communicator, all_reduce_sums_and_records_buffer_bytes) {
  World w;
  std::vector<float> x(37);
  for (int i = 0; i < 37; ++i) x[i] = static_cast<float>(w.r * 100 + i);
  w.c->all_reduce(x.data(), x.data(), x.size(), DType::f32);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(x[i], 100.0f * w.n * (w.n - 1) / 2 + w.n * i);
  ASSERT_EQ(w.log.events().size(), 1u);
  EXPECT_EQ(w.log.events()[0].bytes, 37u * 4);
  EXPECT_STREQ(w.log.events()[0].op, "all_reduce");
  double m = w.r;
  w.c->all_reduce(&m, &m, 1, DType::f64, ReduceOp::max);
  EXPECT_EQ(m, w.n - 1);
}

TEST(communicator, reduce_scatter_and_all_gather_are_inverse_shapes) {
  World w;
  const std::size_t block = 5;
  std::vector<double> in(block * w.n), out(block);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i + w.r);
  w.c->reduce_scatter(in.data(), out.data(), block, DType::f64);
  for (std::size_t i = 0; i < block; ++i) {
    const double idx = static_cast<double>(w.r * block + i);
    EXPECT_EQ(out[i], w.n * idx + w.n * (w.n - 1) / 2.0);
  }
  std::vector<double> all(block * w.n, -1);
  for (std::size_t i = 0; i < block; ++i) all[w.r * block + i] = 10.0 * w.r + i;
  w.c->all_gather(all.data() + w.r * block, all.data(), block, DType::f64);  // in place
  for (int p = 0; p < w.n; ++p)
    for (std::size_t i = 0; i < block; ++i) EXPECT_EQ(all[p * block + i], 10.0 * p + i);
  ASSERT_EQ(w.log.events().size(), 2u);
  EXPECT_EQ(w.log.events()[0].bytes, block * w.n * 8);  // reduce-scatter: the whole input
  EXPECT_EQ(w.log.events()[1].bytes, block * w.n * 8);  // all-gather: the whole output
}

TEST(communicator, all_to_all_v_delivers_variable_blocks) {
  World w;
  // Rank r sends (p + 1) elements valued 1000 r + p to rank p.
  std::vector<int> sc(w.n), sd(w.n), rc(w.n), rd(w.n);
  for (int p = 0; p < w.n; ++p) {
    sc[p] = p + 1;
    rc[p] = w.r + 1;
  }
  std::partial_sum(sc.begin(), sc.end() - 1, sd.begin() + 1);
  std::partial_sum(rc.begin(), rc.end() - 1, rd.begin() + 1);
  std::vector<int> send(sd.back() + sc.back()), recv(rd.back() + rc.back(), -1);
  for (int p = 0; p < w.n; ++p)
    for (int k = 0; k < sc[p]; ++k) send[sd[p] + k] = 1000 * w.r + p;
  w.c->all_to_all_v(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(),
                    DType::i32);
  for (int p = 0; p < w.n; ++p)
    for (int k = 0; k < rc[p]; ++k) EXPECT_EQ(recv[rd[p] + k], 1000 * p + w.r);
  EXPECT_EQ(w.log.events().back().bytes, send.size() * 4);
}

TEST(communicator, broadcast_and_point_to_point) {
  World w;
  std::vector<long long> b(7, w.r == 1 ? 42 : 0);
  w.c->broadcast(b.data(), b.size(), DType::i64, 1);
  for (auto v : b) EXPECT_EQ(v, 42);
  // Ring: blocking send/recv ordered by parity, then non-blocking the other way.
  const int next = (w.r + 1) % w.n, prev = (w.r + w.n - 1) % w.n;
  float mine = static_cast<float>(w.r), got = -1;
  Request rr = w.c->irecv(&got, 1, DType::f32, prev, 7);
  Request sr = w.c->isend(&mine, 1, DType::f32, next, 7);
  while (!w.c->test(rr)) {
  }
  w.c->wait(sr);
  EXPECT_EQ(got, static_cast<float>(prev));
  if (w.r == 0) {
    w.c->send(&mine, 1, DType::f32, 1, 9);
  } else if (w.r == 1) {
    w.c->recv(&got, 1, DType::f32, 0, 9);
    EXPECT_EQ(got, 0.0f);
  }
  w.c->barrier();
}

TEST(communicator, nonblocking_all_reduce_and_bf16_sum) {
  World w;
  std::vector<double> x(1000, 1.0 + w.r);
  Request q = w.c->iall_reduce(x.data(), x.data(), x.size(), DType::f64);
  w.c->wait(q);
  for (double v : x) EXPECT_EQ(v, w.n * (w.n + 1) / 2.0);
  const auto& e = w.log.events().back();
  EXPECT_EQ(e.bytes, 8000u);
  EXPECT_LE(e.exposed, e.end - e.begin + 1e-12);
  std::vector<paraxis::bf16> h(11, paraxis::bf16(0.5f * (w.r + 1)));
  w.c->all_reduce(h.data(), h.data(), h.size(), DType::bf16);
  for (auto v : h) EXPECT_EQ(static_cast<float>(v), 0.25f * w.n * (w.n + 1));
}

// The intervals a caller was blocked in: a request started in one phase and waited for in the
// next is blocked in the next (the trainer subtracts from each phase only what lies inside it:
// an overlapped dp all-reduce started in the backward and waited for after it used to be taken
// off the backward's compute whole, which then read low, even negative).
TEST(communicator, blocked_intervals_lie_where_the_caller_waited) {
  World w;
  std::vector<double> x(1000, 1.0);
  if (w.r != 0) std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const double start = paraxis::parallel::steady_now();
  Request q = w.c->iall_reduce(x.data(), x.data(), x.size(), DType::f64);
  const double phase_end = paraxis::parallel::steady_now();
  w.c->wait(q);
  const double done = paraxis::parallel::steady_now();
  const auto& e = w.log.events().back();
  EXPECT_NEAR(w.log.blocked_within(start - 1, done + 1), e.exposed, 1e-9);
  EXPECT_LE(w.log.blocked_within(start, phase_end), phase_end - start + 1e-9);
  if (w.r == 0) {  // waited ~60 ms for the others, after its "phase"
    EXPECT_GT(w.log.blocked_within(phase_end, done), 0.03);
    EXPECT_LT(w.log.blocked_within(start, phase_end), 0.01);
  }
  // A blocking call is blocked from its start to its end.
  const double b0 = paraxis::parallel::steady_now();
  w.c->all_reduce(x.data(), x.data(), x.size(), DType::f64);
  const auto& f = w.log.events().back();
  EXPECT_NEAR(w.log.blocked_within(b0, f.end), f.end - f.begin, 1e-9);
  EXPECT_EQ(w.log.blocked_within(f.end, f.end + 1), 0.0);
  w.log.clear();
  EXPECT_EQ(w.log.blocked_within(0, done + 10), 0.0);
}

// An unknown name is the deck's to refuse (config::parse_comm_backend); a backend this build
// lacks is the communicator's.
TEST(communicator, unknown_backend_is_rejected) {
  CommLog log;
  EXPECT_THROW(paraxis::config::parse_comm_backend("carrier-pigeon"), std::invalid_argument);
#ifndef PARAXIS_ENABLE_NCCL
  try {
    make_communicator(CommBackend::nccl, MPI_COMM_WORLD, Axis::dp, &log);
    FAIL() << "nccl without NCCL support must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("PARAXIS_ENABLE_NCCL"), std::string::npos);
  }
#endif
}
