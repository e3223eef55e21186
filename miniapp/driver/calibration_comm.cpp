// Calibration of the collectives: a size sweep of every operation paraxis calls on a
// communicator (nccl-tests sizes, the slowest rank's time, the median over repetitions), fitted
// to alpha and beta (perfmodel/collectives.hpp).
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/statistics.hpp"
#include "driver/calibration_detail.hpp"
#include "model/collectives.hpp"
#include "model/trainer.hpp"
#include "parallel/communicator.hpp"
#include "parallel/watchdog.hpp"
#include "perfmodel/collectives.hpp"

namespace paraxis::driver {

namespace {

double now() {
  return model::steady_seconds();
}

// What a step calls on each axis: pp's point-to-point transfers and the gradient norm's
// all-reduce over the stages (8 B), which a step of pp > 1 makes every step.
std::vector<perfmodel::Collective> ops_of(const std::string& axis) {
  using C = perfmodel::Collective;
  if (axis == "tp" || axis == "dp") return {C::all_reduce, C::reduce_scatter, C::all_gather};
  if (axis == "ep") return {C::all_to_all};
  return {C::point_to_point, C::all_reduce};
}

// The sizes measured (nccl-tests S): 8 B (the gradient norm's all-reduce), 64-512 B (a step's
// smallest calls: the loss's all-reduces, the expert counts), then every power of two from
// 1 KiB to 4 MiB, so that the curve a call is predicted from (perfmodel/call_prediction.hpp)
// is measured within a factor 2 of every size a step's calls have.
std::vector<std::size_t> sweep_sizes() {
  std::vector<std::size_t> s{8, 64, 256, 512};
  for (std::size_t S = 1 << 10; S <= (1u << 22); S <<= 1) s.push_back(S);
  return s;
}

// fp32 elements of a call of about S bytes; reduce-scatter / all-gather / all-to-all need a
// multiple of p.
std::size_t elements_for(std::size_t S, int ranks) {
  const auto p = static_cast<std::size_t>(ranks);
  const std::size_t n = std::max<std::size_t>(S / 4, p);
  return (n + p - 1) / p * p;
}

// The sweep runs kPasses times over the sizes, each size's repetitions split between the
// passes, and a size's sample is the median of all of them: 9 consecutive repetitions of one
// size, one window of the calibration, were what decided a sample before, and on the 2-core VM
// the 16 KiB all-reduce's calls fall into two modes (about 7 and 11 us); a window caught in
// the fast one predicted every tensor-parallel call of the run 40 % low
// (docs/perf-log/2026-12-05-dp-bubble-followup.md).
constexpr int kPasses = 3;

// Repetitions of a data-parallel sequence (time_sequence_on), after one warm-up.
constexpr int kSequenceReps = 15;

// Repetitions per pass: small messages are latency-bound and noisy on a shared machine: more.
int reps_per_pass(std::size_t S) {
  return S <= (1u << 16) ? 5 : 2;
}

// The slowest rank's time of `op` with nccl-tests size S (bytes), once per repetition, in the
// buffers' arrangement the step's calls have (MPI implements in-place calls differently: on the
// 2-core VM with MPICH 4.0.2 an in-place all-gather of 64 KiB-1 MiB took 1/4-1/6 of an
// out-of-place one, an in-place all-reduce 7-20 % less; docs/perf-log/2026-12-05-dp-bubble-
// followup.md): every all-reduce in place (the step's activations, gradient buckets and norms
// are reduced where they lie), reduce-scatters out of place, all-gathers in place when
// `gather_in_place` (CommArrangement).
std::vector<double> time_collective(parallel::Communicator& c, MPI_Comm comm, const char* axis,
                                    perfmodel::Collective op, std::size_t S, bool gather_in_place) {
  using C = perfmodel::Collective;
  const int p = c.size();
  const std::size_t n = elements_for(S, p);
  Kokkos::View<float*, Kokkos::DefaultExecutionSpace::memory_space> a("paraxis::calib_a", n),
      b("paraxis::calib_b", n);
  std::vector<int> counts(p, static_cast<int>(n / p)), displs(p);
  for (int k = 0; k < p; ++k) displs[k] = k * static_cast<int>(n / p);
  const int me = c.rank();
  auto once = [&]() {
    switch (op) {
      case C::all_reduce:
        c.all_reduce(b.data(), b.data(), n, model::DType::f32);
        break;
      case C::reduce_scatter:
        c.reduce_scatter(a.data(), b.data(), n / p, model::DType::f32);
        break;
      case C::all_gather:
        c.all_gather(gather_in_place ? b.data() + me * (n / p) : a.data(), b.data(), n / p,
                     model::DType::f32);
        break;
      case C::all_to_all:
        c.all_to_all_v(a.data(), counts.data(), displs.data(), b.data(), counts.data(),
                       displs.data(), model::DType::f32);
        break;
      default:  // ping-pong between ranks 0 and 1 of the group: half the round trip
        if (me == 0) {
          c.send(a.data(), n, model::DType::f32, 1, 91);
          c.recv(b.data(), n, model::DType::f32, 1, 92);
        } else if (me == 1) {
          c.recv(b.data(), n, model::DType::f32, 0, 91);
          c.send(a.data(), n, model::DType::f32, 0, 92);
        }
        break;
    }
  };
  Kokkos::fence();
  once();  // warm-up
  std::vector<double> times;
  for (int rep = 0; rep < reps_per_pass(S); ++rep) {
    parallel::watchdog::barrier(comm, "calibration: barrier before a repetition", axis);
    const double t0 = now();
    once();
    Kokkos::fence();
    double t = now() - t0;
    if (op == C::point_to_point) t *= 0.5;
    parallel::watchdog::all_reduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm,
                                   "calibration: slowest rank's time", axis);
    times.push_back(t);
  }
  return times;
}

// Per size `sizes` lists, (bytes moved, the median over every pass's repetitions).
std::vector<std::pair<double, double>> sweep_of(parallel::Communicator& c, MPI_Comm comm,
                                                const char* axis, perfmodel::Collective op,
                                                bool gather_in_place,
                                                const std::vector<std::size_t>& sizes) {
  std::vector<std::vector<double>> times(sizes.size());
  for (int pass = 0; pass < kPasses; ++pass)
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const auto t = time_collective(c, comm, axis, op, sizes[i], gather_in_place);
      times[i].insert(times[i].end(), t.begin(), t.end());
    }
  std::vector<std::pair<double, double>> out;
  // Each sample records the bytes the call moved (elements_for rounds S up).
  for (std::size_t i = 0; i < sizes.size(); ++i)
    out.push_back({static_cast<double>(4 * elements_for(sizes[i], c.size())), median(times[i])});
  return out;
}

// Per size of sweep_sizes(): the calibration's curve.
std::vector<std::pair<double, double>> sweep(parallel::Communicator& c, MPI_Comm comm,
                                             const char* axis, perfmodel::Collective op,
                                             bool gather_in_place) {
  return sweep_of(c, comm, axis, op, gather_in_place, sweep_sizes());
}

// comm.overlap's premise: a non-blocking gradient reduction progresses while the caller
// computes. The step's own reduction (`op`: the all-reduce at ZeRO 0, the reduce-scatter at 1-3)
// of its own bucket size S: its blocking time (the median of its repetitions), then 5 times:
// post it, compute (spin, no MPI call) for twice that time, wait; the part of the blocking time
// that the post and the wait together no longer take progressed in the background (the slowest
// rank's; the median). About 1 for NCCL or an MPI with a progress thread, 0 for one that
// advances a request only inside MPI calls. The post counts as the step counts it (exposed): on
// the 2-core VM MPICH's post of a 100-256 KiB reduce-scatter does 40-70 % of the work before it
// returns, which a test timing the wait alone took for progress behind compute
// (docs/perf-log/2026-12-05-dp-tp-round3.md).
double async_progress(parallel::Communicator& c, MPI_Comm comm, const char* axis,
                      perfmodel::Collective op, std::size_t S) {
  const auto blocking = time_collective(c, comm, axis, op, S, false);
  const double blocking_s = median(blocking);
  if (blocking_s <= 0) return 1.0;
  const std::size_t n = elements_for(S, c.size());
  Kokkos::View<float*, Kokkos::DefaultExecutionSpace::memory_space> a("paraxis::calib_a", n),
      b("paraxis::calib_b", n);
  Kokkos::fence();
  std::vector<double> fractions;
  for (int rep = 0; rep < 5; ++rep) {
    parallel::watchdog::barrier(comm, "calibration: barrier before an overlap test", axis);
    const double p0 = now();
    parallel::Request r =
        op == perfmodel::Collective::reduce_scatter
            ? c.ireduce_scatter(a.data(), b.data(), n / c.size(), model::DType::f32)
            : c.iall_reduce(b.data(), b.data(), n, model::DType::f32);
    const double posted = now() - p0;  // blocked in the post: exposed, as in the step
    const double until = now() + 2 * blocking_s + 50e-6;
    volatile double sink = 0;
    while (now() < until) sink = sink + 1.0;  // compute that makes no MPI call
    const double w0 = now();
    c.wait(r);
    Kokkos::fence();
    double wait = posted + (now() - w0);
    parallel::watchdog::all_reduce(MPI_IN_PLACE, &wait, 1, MPI_DOUBLE, MPI_MAX, comm,
                                   "calibration: slowest rank's wait", axis);
    fractions.push_back(std::clamp(1.0 - wait / blocking_s, 0.0, 1.0));
  }
  return median(fractions);
}

// The compute stand-in of a sequence's repetition: read-modify-writes one word of every cache
// line of `mem` in turn, round and round, until MPI_Wtime() reaches `deadline` (no MPI call in
// between): what the backward's (or the optimizer's) sweep over the rank's memory does to the
// caches the MPI library's shared-memory path uses (docs/perf-log/2026-12-05-dp-tp-round3.md,
// "Round 3b").
void sweep_memory(std::vector<std::uint64_t>& mem, double deadline) {
  constexpr std::size_t kLine = 64 / sizeof(std::uint64_t);
  std::size_t i = 0;
  do {
    for (int k = 0; k < 256 && !mem.empty(); ++k) {
      mem[i] += 1;
      i += kLine;
      if (i >= mem.size()) i = 0;
    }
  } while (MPI_Wtime() < deadline);
}

// Whether every rank of `comm` shares one node, so that MPI_Wtime is one clock for all of them.
bool one_node(MPI_Comm comm) {
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 0, all = 0;
  MPI_Comm_size(node, &n);
  MPI_Comm_size(comm, &all);
  MPI_Comm_free(&node);
  int same = n == all ? 1 : 0;
  parallel::watchdog::all_reduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, comm,
                                 "calibration: whether the group shares a node", "dp");
  return same == 1;
}

// A repetition's start: a barrier, then the time the ranks leave the compute stand-in, `sweep_s`
// later: rank 0's clock, shared (on one node MPI_Wtime is one clock), so that the ranks reach the
// first call together as the step's ranks leave their backward; else each rank's own.
double sweep_deadline(MPI_Comm comm, double sweep_s, bool shared, const char* axis) {
  double deadline = MPI_Wtime() + sweep_s + 50e-6;
  if (shared)
    parallel::watchdog::broadcast(&deadline, 1, MPI_DOUBLE, 0, comm,
                                  "calibration: a sequence's deadline", axis);
  parallel::watchdog::barrier(comm, "calibration: barrier before a sequence", axis);
  return shared ? deadline : MPI_Wtime() + sweep_s;
}

// One call of a sequence on the n elements at `buf`, as the step issues it: all-reduces in place,
// reduce-scatters into `out`, all-gathers in place (ZeRO 1-2: the flat buffer) or, with
// `from_shard` (ZeRO 3: into the unit's workspace; tensor parallelism: a block of tokens into
// the full activation), from a shard in `out` into `buf`.
void issue(parallel::Communicator& c, const perfmodel::SequenceCall& q, float* buf, float* out,
           std::size_t n, bool from_shard) {
  const auto p = static_cast<std::size_t>(c.size());
  switch (q.op) {
    case perfmodel::Collective::reduce_scatter:
      c.reduce_scatter(buf, out, n / p, model::DType::f32);
      break;
    case perfmodel::Collective::all_gather:
      c.all_gather(from_shard ? out : buf + static_cast<std::size_t>(c.rank()) * (n / p), buf,
                   n / p, model::DType::f32);
      break;
    default:
      c.all_reduce(buf, buf, n, model::DType::f32);
      break;
  }
}

// The compute stand-in's duration before call `q` (SequenceCall::compute_share): none unless
// after_compute; a share of one micro-batch's forward and backward (sweep_s at ZeRO 2-3); else a
// whole phase: sweep_s before a gradient reduction, later_sweep_s (the optimizer) before an
// all-gather.
double stand_in_before(const perfmodel::SequenceCall& q, const SequenceCalibration& s) {
  if (!q.after_compute) return 0;
  if (q.compute_share > 0) return q.compute_share * s.sweep_s;
  return q.op == perfmodel::Collective::all_gather ? s.later_sweep_s : s.sweep_s;
}

// The sequence timed as the step issues it: each repetition a barrier, the compute stand-in
// before every call marked after_compute (stand_in_before; the first on the shared deadline),
// the buffer written first as the backward writes the gradients; then the calls in place on that
// buffer, each at its own offset (the tensor-parallel activations, with `gather_from_shard`; the
// flat gradient buffer's buckets and units, from its start again in each phase after compute:
// ZeRO 2 reduces every micro-batch's gradients in the same buffer, ZeRO 1 all-gathers the
// parameters in place of the reduced gradients) or, with `one_workspace` (ZeRO 3), all on the
// one workspace the step gathers every unit into. The all-gathers from a shard with one_workspace
// or `gather_from_shard` (issue). Per call the median over repetitions of the smallest of the
// ranks' times: the last-arriving rank's, which waits for nobody (the call, not the ranks' skew,
// which is the compute spread's term).
std::vector<double> time_sequence_on(parallel::Communicator& c, MPI_Comm comm, const char* axis,
                                     const perfmodel::CallSequence& seq,
                                     const SequenceCalibration& stand_in, bool one_workspace,
                                     bool gather_from_shard, int reps) {
  std::vector<std::size_t> n, at;
  std::size_t next = 0, total = 0, most = 1;
  for (const auto& q : seq) {
    if (q.after_compute && !gather_from_shard) next = 0;  // the flat buffer's phases
    n.push_back(elements_for(static_cast<std::size_t>(q.bytes), c.size()));
    at.push_back(one_workspace ? 0 : next);
    next += one_workspace ? 0 : n.back();
    total = std::max(total, next);
    most = std::max(most, n.back());
  }
  Kokkos::View<float*, Kokkos::DefaultExecutionSpace::memory_space> buf("paraxis::calib_seq",
                                                                        std::max(total, most)),
      out("paraxis::calib_seq_out", most);
  std::vector<std::uint64_t> mem(stand_in.sweep_bytes / sizeof(std::uint64_t), 1);
  const bool shared = one_node(comm);
  std::vector<std::vector<double>> times(seq.size());
  for (int rep = 0; rep <= reps && !seq.empty(); ++rep) {  // repetition 0: a warm-up
    std::vector<double> t(seq.size());
    const double deadline =
        sweep_deadline(comm, stand_in_before(seq.front(), stand_in), shared, axis);
    Kokkos::deep_copy(buf, 1.0f);  // the gradients, written
    Kokkos::fence();
    for (std::size_t k = 0; k < seq.size(); ++k) {
      if (seq[k].after_compute)
        sweep_memory(mem, k == 0 ? deadline : MPI_Wtime() + stand_in_before(seq[k], stand_in));
      const double t0 = now();
      issue(c, seq[k], buf.data() + at[k], out.data(), n[k], one_workspace || gather_from_shard);
      Kokkos::fence();
      t[k] = now() - t0;
    }
    parallel::watchdog::all_reduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_DOUBLE,
                                   MPI_MIN, comm, "calibration: the last-arriving rank's times",
                                   axis);
    for (std::size_t k = 0; rep > 0 && k < seq.size(); ++k) times[k].push_back(t[k]);
  }
  std::vector<double> med;
  for (auto& v : times) med.push_back(median(std::move(v)));
  return med;
}

std::vector<CommCalibration> measure_axis(const std::string& axis, MPI_Comm comm,
                                          config::CommBackend backend,
                                          const parallel::LinkModel& links, bool gather_in_place,
                                          std::size_t overlap_bytes) {
  // Labelled with its axis (a wait that expires names it); the slow axis, a fault, is not in
  // `links` (calibration.cpp), so the label adds no delay.
  auto c = parallel::make_communicator(backend, comm, parallel::axis_named(axis), nullptr, links);
  std::vector<CommCalibration> out;
  for (auto op : ops_of(axis)) {
    CommCalibration cc;
    cc.axis = axis;
    cc.op = perfmodel::to_string(op);
    cc.ranks = op == perfmodel::Collective::point_to_point ? 2 : c->size();
    cc.samples = sweep(*c, comm, axis.c_str(), op, gather_in_place);
    const auto fit = perfmodel::fit_alpha_beta(op, cc.ranks, cc.samples);
    cc.alpha = fit.alpha;
    cc.beta = fit.beta;
    cc.latency = fit.latency;
    cc.beta_eff = fit.beta_eff;
    cc.rms_residual = fit.rms_residual;
    // What comm.overlap can hide: measured for the data-parallel gradient reductions.
    if (axis == "dp" &&
        (op == perfmodel::Collective::all_reduce || op == perfmodel::Collective::reduce_scatter))
      cc.async_progress = async_progress(*c, comm, axis.c_str(), op, overlap_bytes);
    out.push_back(std::move(cc));
  }
  return out;
}

}  // namespace

namespace calibration_detail {

std::size_t overlap_bytes(double bucket_mb) {
  const double S = bucket_mb * double(1 << 20);
  return static_cast<std::size_t>(std::clamp(S, 8192.0, double(1 << 22)));
}

std::vector<double> time_sequence(const char* axis, MPI_Comm comm, config::CommBackend backend,
                                  const parallel::LinkModel& links,
                                  const perfmodel::CallSequence& seq,
                                  const SequenceCalibration& stand_in, bool one_workspace,
                                  int reps) {
  auto c = parallel::make_communicator(backend, comm, parallel::axis_named(axis), nullptr, links);
  // Tensor parallelism gathers a block of tokens into the full activation, out of place.
  const bool gather_from_shard = std::string(axis) == "tp";
  return time_sequence_on(*c, comm, axis, seq, stand_in, one_workspace, gather_from_shard,
                          reps > 0 ? reps : kSequenceReps);
}

double retime_async_progress(MPI_Comm comm, config::CommBackend backend,
                             const parallel::LinkModel& links, perfmodel::Collective op,
                             std::size_t overlap_bytes) {
  auto c = parallel::make_communicator(backend, comm, parallel::axis_named("dp"), nullptr, links);
  double v = async_progress(*c, comm, "dp", op, overlap_bytes);
  // Rank 0's group speaks for the axis, as in calibrate_axis.
  parallel::watchdog::broadcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD,
                                "recheck: broadcast a re-timed overlap premise");
  return v;
}

std::vector<std::vector<double>> retime_axis(const std::string& axis, MPI_Comm comm,
                                             config::CommBackend backend,
                                             const parallel::LinkModel& links, bool gather_in_place,
                                             const std::vector<RetimedOp>& wanted) {
  auto c = parallel::make_communicator(backend, comm, parallel::axis_named(axis), nullptr, links);
  const auto sizes = sweep_sizes();
  std::vector<std::vector<double>> out;
  for (const auto& w : wanted) {
    std::vector<std::size_t> at;
    for (std::size_t i : w.positions) at.push_back(sizes.at(i));
    std::vector<double> t;
    for (const auto& sample : sweep_of(*c, comm, axis.c_str(), w.op, gather_in_place, at))
      t.push_back(sample.second);
    // Rank 0's group speaks for the axis, as in calibrate_axis.
    if (!t.empty())
      parallel::watchdog::broadcast(t.data(), static_cast<int>(t.size()), MPI_DOUBLE, 0,
                                    MPI_COMM_WORLD, "recheck: broadcast re-timed samples");
    out.push_back(std::move(t));
  }
  return out;
}

bool gather_in_place(const std::string& axis, const config::ParallelConfig& p) {
  const int zero = p.effective_zero();
  return axis == "dp" && (zero == 1 || zero == 2);
}

std::vector<CommCalibration> calibrate_axis(const std::string& axis, MPI_Comm comm,
                                            config::CommBackend backend,
                                            const parallel::LinkModel& links, bool gather_in_place,
                                            std::size_t overlap_bytes) {
  auto fits = measure_axis(axis, comm, backend, links, gather_in_place, overlap_bytes);
  for (auto& f : fits) {
    double v[5] = {f.alpha, f.beta, f.latency, f.beta_eff, f.async_progress};
    parallel::watchdog::broadcast(v, 5, MPI_DOUBLE, 0, MPI_COMM_WORLD,
                                  "calibration: broadcast a fit");
    f.alpha = v[0];
    f.beta = v[1];
    f.latency = v[2];
    f.beta_eff = v[3];
    f.async_progress = v[4];
    for (auto& s : f.samples)
      parallel::watchdog::broadcast(&s.second, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD,
                                    "calibration: broadcast a sample");
    parallel::watchdog::broadcast(&f.rms_residual, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD,
                                  "calibration: broadcast a fit's residual");
  }
  return fits;
}

}  // namespace calibration_detail

}  // namespace paraxis::driver
