// Internal to the calibration (calibration*.cpp): the two measurements the Calibrator caches.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "driver/calibration.hpp"
#include "parallel/link_emulation.hpp"

namespace paraxis::driver::calibration_detail {

// calibration_comm.cpp. The fits of the collectives paraxis calls on one axis ("tp" | "pp" |
// "dp" | "ep"): every group of the axis measures at once, as in training; rank 0's group speaks
// for the axis (its fits are broadcast over the world, so every rank stores the same).
// Collective over MPI_COMM_WORLD.
// Its communicator applies `links` (the run's emulated links) like the trainer's. The
// all-gathers are timed in place (each rank's block already inside the gathered buffer) when
// `gather_in_place`, else into a separate buffer. On dp, the gradient reductions' asynchronous
// progress (comm.overlap) is measured at `overlap_bytes`, the step's bucket size.
std::vector<CommCalibration> calibrate_axis(const std::string& axis, MPI_Comm comm,
                                            config::CommBackend backend,
                                            const parallel::LinkModel& links, bool gather_in_place,
                                            std::size_t overlap_bytes);
// The calls `seq` of `axis` ("dp": this rank's stage's perfmodel::data_parallel_call_sequence;
// "tp": its tensor_parallel_call_sequence, the all-gathers out of place) timed as the step issues
// them on that axis's communicator `comm`: per call, in order, the
// median over repetitions of the last-arriving rank's seconds, each repetition after the compute
// stand-in `stand_in` describes (its sweep_bytes, sweep_s, later_sweep_s; SequenceCalibration)
// and each call's compute_share; with `one_workspace` (ZeRO 3) every call on one buffer, the
// all-gathers from a shard into it. Collective over `comm`; every group of the axis measures at
// once.
// `reps` repetitions after the warm-up (0: the calibration's 15; the recheck takes fewer).
std::vector<double> time_sequence(const char* axis, MPI_Comm comm, config::CommBackend backend,
                                  const parallel::LinkModel& links,
                                  const perfmodel::CallSequence& seq,
                                  const SequenceCalibration& stand_in, bool one_workspace,
                                  int reps = 0);
// One operation's curve positions (indices into the calibration's sizes, as its samples are
// listed) to time again (driver/point_recheck.hpp).
struct RetimedOp {
  perfmodel::Collective op = perfmodel::Collective::all_reduce;
  std::vector<std::size_t> positions;
};
// The samples of `wanted` timed again by calibrate_axis's own probe (the same sizes, buffers'
// arrangement, passes and repetitions, the slowest rank's time, the median): per entry, per
// position, seconds; rank 0's group's, broadcast over the world. Collective over
// MPI_COMM_WORLD: every rank passes the same `wanted`.
std::vector<std::vector<double>> retime_axis(const std::string& axis, MPI_Comm comm,
                                             config::CommBackend backend,
                                             const parallel::LinkModel& links, bool gather_in_place,
                                             const std::vector<RetimedOp>& wanted);
// comm.overlap's premise (the calibration's async_progress of a data-parallel reduction `op` of
// the overlap bucket's size) timed again on `comm` by the same test; rank 0's group's, broadcast
// over the world. Collective over MPI_COMM_WORLD.
double retime_async_progress(MPI_Comm comm, config::CommBackend backend,
                             const parallel::LinkModel& links, perfmodel::Collective op,
                             std::size_t overlap_bytes);
// calibration.cpp. The links the calibration measures: the run's emulated links without the
// injected faults (slow links, fault.slow_axis), so that a faulty run is compared with a healthy
// calibration (docs/diagnosis.md).
config::LinkEmulation healthy_links(const RunConfig& cfg);
// Those links as the grid's communicators emulate them (healthy_links over the grid's nodes).
parallel::LinkModel healthy_link_model(const RunConfig& cfg, const parallel::ProcessGrid& grid);
// The dp sequence `q` (its calls and stand-in) timed on this rank's data-parallel group with the
// calls of this rank's stage, rank 0's broadcast over the world so that every rank stores the
// same: q.calls' seconds. `reps`: as time_sequence. Collective over MPI_COMM_WORLD.
void time_dp_sequence(const RunConfig& cfg, const parallel::ProcessGrid& grid,
                      SequenceCalibration& q, int reps = 0);
// The same for the tensor-parallel sequence `q` (perfmodel::tensor_parallel_call_sequence) on this
// rank's tensor-parallel group.
void time_tp_sequence(const RunConfig& cfg, const parallel::ProcessGrid& grid,
                      SequenceCalibration& q, int reps = 0);
// The sequence's cache key: the dp communicator's key, then every call of
// `q` (op, bytes, ranks, after_compute, compute_share) and its stand-in (bytes, durations to 10
// us): a point whose step issues other calls (another comm.bucket_mb, ZeRO stage or model) is timed
// anew.
std::string sequence_key(const std::string& dp_key, const SequenceCalibration& q);
// The size of the step's gradient buckets (comm.bucket_mb), within the sweep's 8 KiB-4 MiB.
std::size_t overlap_bytes(double bucket_mb);
// Whether the step's all-gathers on `axis` are in place: the data-parallel parameter gathers of
// ZeRO 1-2 (each rank's updated shard gathered within the full parameters,
// parallel/zero_optimizer.cpp); ZeRO-3 gathers a unit into a workspace and tensor parallelism a
// block into the full activation, out of place.
bool gather_in_place(const std::string& axis, const config::ParallelConfig& p);

// calibration_compute.cpp. What the compute calibration depends on (its cache key): the shard's
// shape and the step's paths (recomputation, ZeRO's overlap and buckets).
std::string compute_key(const RunConfig& c);
// This rank's shard timed by the step the point trains with: the parallel engine with local
// copies for collectives (parallel::make_compute_only_trainer), or with grid == nullptr the
// single-rank trainer (model::make_trainer); with a grid (collective over MPI_COMM_WORLD),
// every chunk's times from the ranks that hold it (slowest and mean), the optimizer's from the
// slowest rank, and the model FLOP rate.
// `timed_steps`: the steps timed after the warm-up step (the recheck times fewer).
ComputeCalibration calibrate_compute(const RunConfig& cfg, const parallel::ProcessGrid* grid,
                                     int timed_steps = 5);

// The spread between the ranks that hold each chunk, as the report reads a point's
// (report_point.cpp, measured_compute_spread): per timed step the slowest holder's seconds in
// the chunk's actions less the holders' mean, the median over the steps, per action. slowest and
// sum: per chunk, per step ([chunk * steps + step]), the holders' max and sum; holders: per
// chunk, how many ranks hold it (fewer than 2: no spread). A rank slowed in one step of the
// calibration (a time slice lost to another job) moves the mean over the steps, not this median;
// ranks persistently uneven (experts loaded unevenly by a skewed router, a replica on a busier
// core) move both.
std::vector<double> median_spread(const std::vector<double>& slowest,
                                  const std::vector<double>& sum,
                                  const std::vector<double>& holders, std::size_t steps,
                                  int actions);

}  // namespace paraxis::driver::calibration_detail
