// The communicator layer on 2 or 3 ranks: every operation against its definition, with exact
// (integer-valued) data, and the logical bytes each call records (nccl-tests' S).
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>
#include <vector>

#include "parallel/communicator.hpp"

using namespace paraxis::parallel;

namespace {
struct World {
  CommLog log;
  std::unique_ptr<Communicator> c = make_communicator("mpi", MPI_COMM_WORLD, Axis::dp, &log);
  int r = c->rank(), n = c->size();
};
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

TEST(communicator, unknown_backend_is_rejected) {
  CommLog log;
  EXPECT_THROW(make_communicator("carrier-pigeon", MPI_COMM_WORLD, Axis::dp, &log),
               std::invalid_argument);
#ifndef PARAXIS_ENABLE_NCCL
  try {
    make_communicator("nccl", MPI_COMM_WORLD, Axis::dp, &log);
    FAIL() << "nccl without NCCL support must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("PARAXIS_ENABLE_NCCL"), std::string::npos);
  }
#endif
}
