// The declaration of every results field (results_schema.hpp): one line per field of
// summary.json, report.json and points.csv. docs/results.md's field tables are generated from
// these lines (paraxis-results-schema markdown); the writer's output is checked against them
// (CTest results_schema_run) and the reader checks types and ranges with them. A new field:
// one line here, its computation in the writer (docs/architecture.md, "Adding a result field").
#include <climits>
#include <cmath>

#include "analysis/results_schema.hpp"

namespace paraxis::driver::results_schema {

namespace {

// One line per field: the table stays a table (clang-format would wrap it).
// clang-format off
constexpr double kInf = HUGE_VAL;
constexpr double kMaxInt = INT_MAX;
// Ranges, named once.
constexpr Range kAny{-kInf, kInf, false};
constexpr Range kNonNeg{0, kInf, false};
constexpr Range kPos{0, kInf, true};
constexpr Range kFrac{0, 1, false};
constexpr Range kIndex{0, kMaxInt, false};
constexpr Range kCount1{1, kMaxInt, false};
constexpr Range kBig{0, kInf, false};  // integers up to 2^63 - 1 (bytes, calls)
constexpr Range kNone{0, 0, false};    // not a number: no range

constexpr Kind obj = Kind::object, map = Kind::map, arr = Kind::array, integer = Kind::integer,
               num = Kind::number, str = Kind::string, boolean = Kind::boolean,
               int_or_null = Kind::integer_or_null, num_or_null = Kind::number_or_null,
               str_or_null = Kind::string_or_null, obj_or_null = Kind::object_or_null;
constexpr Presence need = Presence::need, always = Presence::always, when = Presence::when;

// The provenance every program records (driver/provenance_common.hpp): summary.json's
// `provenance`, paraxis-bench-comm's JSON `provenance`, the benchmarks' Google Benchmark context.
// P: the prefix ("provenance." in summary.json). The process's keys:
#define PARAXIS_PROCESS_PROVENANCE(P)                                                            \
  {P "paraxis_version", str, "", kNone, always, "paraxis's version (CMake project version)"},    \
  {P "git_hash", str, "", kNone, always, "the source tree's git commit"},                         \
  {P "command_line", str, "", kNone, always, "the command line, arguments joined by spaces"},    \
  {P "compiler", str, "", kNone, always, "C++ compiler and version"},                            \
  {P "cxx_flags", str, "", kNone, always, "C++ flags of the build"},                             \
  {P "build_type", str, "", kNone, always, "CMake build type"},                                  \
  {P "native_arch", boolean, "", kNone, always, "built with -march=native"},                     \
  {P "kokkos_version", str, "", kNone, always, "Kokkos version"},                                \
  {P "kokkos_devices", str, "", kNone, always, "Kokkos backends compiled in"},                   \
  {P "kokkos_kernels", boolean, "", kNone, always, "built with Kokkos Kernels (vendor GEMM)"},   \
  {P "execution_space", str, "", kNone, always, "Kokkos default execution space"},               \
  {P "threads", integer, "", kIndex, always, "concurrency of the default execution space"},      \
  {P "blas_library", str, "", kNone, always, "the loaded BLAS as it names itself"},              \
  {P "blas_core", str, "", kNone, always, "the kernel set the BLAS chose (OpenBLAS's core)"},    \
  {P "cpu_model", str, "", kNone, always, "CPU model name with family and model numbers"},       \
  {P "cpu_vector_flags", arr, "", kNone, always, "which of avx .. avx512vl the CPU has"},         \
  {P "cpu_vector_flags[]", str, "", kNone, always, "a flag"},                                    \
  {P "cores_per_host", integer, "", kIndex, always, "rank 0's hardware threads"},                \
  {P "date", str, "", kNone, always, "start, UTC, ISO 8601"}
// The MPI job's keys (programs that run under MPI); PRESENCE: always where every writer has them.
#define PARAXIS_MPI_PROVENANCE(P, PRESENCE)                                                      \
  {P "mpi_library", str, "", kNone, PRESENCE, "MPI library: first line, MPICH's device line"},  \
  {P "mpi_version", str, "", kNone, PRESENCE, "MPI standard version (MPI_Get_version)"},        \
  {P "mpi_gpu_aware", str, "", kNone, PRESENCE, "yes, no, unknown or n/a: the library reads device memory"}, \
  {P "mpi_gpu_query", str, "", kNone, PRESENCE, "the call that answered mpi_gpu_aware, or why none could"}, \
  {P "mpi_staging", str, "", kNone, PRESENCE, "on, off or per point: MPI buffers staged through host memory"}, \
  {P "world", integer, "", kIndex, PRESENCE, "MPI ranks"},                                      \
  {P "hosts", arr, "", kNone, PRESENCE, "the ranks' host names, each once, sorted"},            \
  {P "hosts[]", str, "", kNone, always, "a host name"},                                         \
  {P "max_ranks_per_host", integer, "", kIndex, PRESENCE, "the most ranks on one host"}

// A finding (analysis/diagnosis*.cpp; docs/diagnosis.md), in points[].diagnosis[] and
// diagnosis[] (P: the prefix). Its evidence's keys depend on its kind and reference (peers,
// model): each line names the kinds that write it.
#define PARAXIS_FINDING(P)                                                                       \
  {P "kind", str, "", kNone, always, "slow_rank, slow_link, slow_axis, bubble, placement, expert_imbalance, dead_rank or hang"}, \
  {P "axis", str, "", kNone, always, "compute, tp, pp, dp or ep"},                                \
  {P "group", integer, "", {-1, kMaxInt, false}, always, "its group on the axis (compute, dead_rank: the pipeline stage); -1: none or every group"}, \
  {P "ranks", arr, "", kNone, always, "the world ranks it names (bubble, placement: none)"},      \
  {P "ranks[]", integer, "", kIndex, always, "a rank"},                                           \
  {P "from_step", integer, "", {-1, kMaxInt, false}, always, "the first step it shows at (-1: a failure outside a step)"}, \
  {P "cost_s", num_or_null, "s", kNonNeg, always, "what it costs per step (null: dead_rank, hang: the job ended)"}, \
  {P "text", str, "", kNone, always, "one sentence a user reads"},                                \
  {P "advice", str, "", kNone, always, "what to do"},                                             \
  {P "evidence", obj, "", kNone, always, "the figures behind it"},                                \
  {P "evidence.reference", str, "", kNone, always, "what it is measured against: peers, model, topology or failure_record"}, \
  {P "evidence.threshold", num, "", kPos, when, "every kind but placement, dead_rank, hang: the ratio (bubble: the fraction) it crossed"}, \
  {P "evidence.<compute_ratio_to_peers|compute_ratio_to_model>", num, "", kNonNeg, when, "slow_rank (peers, model): its compute over its peers' median, over its calibrated compute"}, \
  {P "evidence.compute_s", num, "s", kNonNeg, when, "slow_rank: its median compute per step over the slowed steps"}, \
  {P "evidence.model_compute_s", num, "s", kNonNeg, when, "slow_rank (model): the calibrated compute per step"}, \
  {P "evidence.<slowed_steps|measured_steps>", integer, "", kIndex, when, "slow_rank: the steps over the threshold, the measured steps"}, \
  {P "evidence.peers", integer, "", kIndex, when, "slow_rank (peers): how many peers"},          \
  {P "evidence.peer_wait_s_per_axis", obj, "", kNone, when, "slow_rank (peers): the other ranks' median wait per step, per axis"}, \
  {P "evidence.peer_wait_s_per_axis.<tp|pp|dp|ep>", num, "s", kNonNeg, when, "an axis with collectives"}, \
  {P "evidence.<wire_ratio_to_other_groups|wire_ratio_to_model|least_group_ratio_to_model>", num, "", kNonNeg, when, "slow_link (peers); slow_link, slow_axis (model): the group's time over the other groups', over the model's; the least group's"}, \
  {P "evidence.group_time_s", num, "s", kNonNeg, when, "slow_link, slow_axis: the group's median time per step, net of waiting"}, \
  {P "evidence.groups", integer, "", kCount1, when, "slow_link, slow_axis: groups on the axis"}, \
  {P "evidence.series", str, "", kNone, when, "slow_link, slow_axis (model): the per-rank series compared (comm.<axis>.time_s; comm.dp.exposed_s with comm.overlap)"}, \
  {P "evidence.nodes", arr, "", kNone, when, "slow_link (peers), with nodes known: the nodes the group spans"}, \
  {P "evidence.nodes[]", integer, "", kIndex, always, "a node"},                                  \
  {P "evidence.<measured_s|model_s>", num, "s", kNonNeg, when, "slow_rank, slow_link (peers, calibrated); slow_link, slow_axis (model: model_s): measured and modelled seconds per step"}, \
  {P "evidence.ratio_to_model", num, "", kNonNeg, when, "slow_rank, slow_link (peers, calibrated): measured_s / model_s"}, \
  {P "evidence.<bubble_fraction|schedule_bubble_fraction>", num, "", kNonNeg, when, "bubble: the measured bubble, the schedule's ideal one"}, \
  {P "evidence.<micro_batches|stages>", integer, "", kCount1, when, "bubble: the pipeline's shape"}, \
  {P "evidence.<tp_groups_spanning_nodes|tp_groups>", integer, "", kIndex, when, "placement: tp groups spanning nodes, tp groups"}, \
  {P "evidence.token_share_to_fair_share", arr, "", kNone, when, "expert_imbalance: per ep rank, its share of the routed tokens over 1/ep"}, \
  {P "evidence.token_share_to_fair_share[]", num, "", kNonNeg, always, "an ep rank's"},          \
  {P "evidence.experts_per_ep_rank", integer, "", kCount1, when, "expert_imbalance: experts per ep rank"}, \
  {P "evidence.other_ranks_ep_wait_s", num, "s", kNonNeg, when, "expert_imbalance: the other ranks' wait per step for the heavy shard"}, \
  {P "evidence.record_of_rank", integer, "", kIndex, when, "dead_rank, hang: the rank whose failure record it reads"}, \
  {P "evidence.what", str, "", kNone, when, "dead_rank: what the rank's record says happened"},  \
  {P "evidence.records", integer, "", kCount1, when, "hang: failure records of the point"},      \
  {P "evidence.<waited_s|timeout_s>", num, "s", kNonNeg, when, "hang: the longest wait, comm.timeout_s"}

const std::vector<Field> kSummary = {
    {"schema", str, "", kNone, need, "\"paraxis.summary/2\": the reader refuses any other"},
    {"deck", str, "", kNone, always, "the deck file as given"},
    {"provenance", obj, "", kNone, always, "what produced the results (driver/provenance_common.hpp)"},
    PARAXIS_PROCESS_PROVENANCE("provenance."),
    PARAXIS_MPI_PROVENANCE("provenance.", always),
    {"provenance.run_id", str, "", kNone, always, "the run's id (the checkpoint lineage's run)"},
    {"provenance.blas_threads", integer, "", {-1, kMaxInt, false}, always, "the BLAS's worker threads (-1: it cannot say)"},
    {"provenance.blas_threads_from", str, "", kNone, always, "who chose blas_threads"},
    {"points", arr, "", kNone, need, "one entry per sweep point, in sweep order"},
    {"points[]", obj, "", kNone, need, "a point (its status says whether the rest is there)"},
    {"points[].index", integer, "", kIndex, need, "the point's index in the sweep"},
    {"points[].config", map, "", kNone, need, "the point's configuration: the deck's keys (docs/deck.md)"},
    {"points[].settings", map, "", kNone, always, "the swept keys and their values at this point"},
    {"points[].grid", obj, "", kNone, need, "the rank grid"},
    {"points[].grid.world", integer, "", kCount1, need, "ranks: tp * pp * dp"},
    {"points[].grid.<tp|pp|dp|ep>", integer, "", kCount1, need, "the axis's degree (config.parallel's)"},
    {"points[].topology", obj, "", kNone, when, "the nodes of the ranks (when the host names are known)"},
    {"points[].topology.nodes", integer, "", kCount1, always, "nodes the ranks sit on"},
    {"points[].topology.ranks_per_node", int_or_null, "", kCount1, always, "hardware.ranks_per_node (null: the hosts)"},
    {"points[].topology.emulated", boolean, "", kNone, always, "nodes emulated (ranks_per_node > 0)"},
    {"points[].topology.node_of", arr, "", kNone, always, "the node of every rank"},
    {"points[].topology.node_of[]", integer, "", kIndex, always, "a rank's node"},
    {"points[].topology.axes", obj, "", kNone, always, "per axis, its groups"},
    {"points[].topology.axes.<tp|pp|dp|ep>", obj, "", kNone, always, "an axis's groups"},
    {"points[].topology.axes.<tp|pp|dp|ep>.groups", integer, "", kCount1, always, "groups of the axis"},
    {"points[].topology.axes.<tp|pp|dp|ep>.groups_spanning_nodes", integer, "", kIndex, always, "groups whose ranks sit on several nodes"},
    {"points[].slow_axis", obj, "", kNone, when, "fault.slow_axis as injected (axis not none)"},
    {"points[].slow_axis.axis", str, "", kNone, need, "the slowed axis: none, tp, pp, dp or ep"},
    {"points[].slow_axis.factor", num, "", {1, 1e6, false}, need, "how many times its link's cost"},
    {"points[].slow_axis.links", obj, "", kNone, need, "per slowed communicator of rank 0, its link"},
    {"points[].slow_axis.links.<axis>", obj, "", kNone, when, "a communicator's measured link"},
    {"points[].slow_axis.links.<axis>.alpha_s", num, "s", kNonNeg, need, "latency"},
    {"points[].slow_axis.links.<axis>.bytes_per_s", num, "B/s", kNonNeg, need, "speed"},
    {"points[].status", str, "", kNone, need, "ok, diverged: why, skipped: why or failed: why"},
    {"points[].steps", arr, "", kNone, always, "every step, warm-up included"},
    {"points[].steps[]", obj, "", kNone, always, "a step"},
    {"points[].steps[].step", integer, "", kIndex, always, "step number from 0"},
    {"points[].steps[].loss", num, "", kAny, always, "training loss (lm_loss + aux_loss)"},
    {"points[].steps[].lm_loss", num, "", kAny, always, "language-model loss"},
    {"points[].steps[].aux_loss", num, "", kAny, always, "MoE load-balancing loss"},
    {"points[].steps[].grad_norm", num, "", kNonNeg, always, "global gradient norm before clipping"},
    {"points[].steps[].time_s", num, "s", kNonNeg, always, "the step's fenced time (rank 0)"},
    {"points[].steps[].measured", boolean, "", kNone, always, "after warmup_steps: counted in the medians"},
    {"points[].steps[].moe", obj, "", kNone, when, "MoE models: expert load of the step"},
    {"points[].steps[].moe.tokens_per_expert_min", integer, "", kBig, always, "fewest tokens an expert got"},
    {"points[].steps[].moe.tokens_per_expert_mean", num, "", kNonNeg, always, "mean tokens per expert"},
    {"points[].steps[].moe.tokens_per_expert_max", integer, "", kBig, always, "most tokens an expert got"},
    {"points[].steps[].moe.load_imbalance", num, "", kNonNeg, always, "max / mean"},
    {"points[].steps[].moe.tokens_dropped", integer, "", kBig, always, "tokens over capacity"},
    {"points[].steps[].moe.tokens_per_expert", arr, "", kNone, always, "per expert"},
    {"points[].steps[].moe.tokens_per_expert[]", integer, "", kBig, always, "an expert's tokens"},
    {"points[].steps[].moe.dropped_per_expert", arr, "", kNone, always, "per expert"},
    {"points[].steps[].moe.dropped_per_expert[]", integer, "", kBig, always, "an expert's dropped tokens"},
    {"points[].time", obj, "", kNone, need, "medians over measured steps (rank 0)"},
    {"points[].time.step_median_s", num, "s", kPos, need, "step time"},
    {"points[].time.<forward_s|backward_s|backward_weight_s|optimizer_s>", num, "s", kNonNeg, always, "the phase's fenced time (backward_weight_s: W of a split backward)"},
    {"points[].time.compute_s", num, "s", kNonNeg, always, "forward + backward + optimizer less blocking communication"},
    {"points[].time.bubble_fraction", num, "", kAny, always, "measured bubble, mean over ranks (0 without pp)"},
    {"points[].time.bubble_fraction_model", num, "", kAny, always, "the schedule replayed with the measured action times"},
    {"points[].time.bubble_fraction_formula", num, "", kAny, always, "the schedule's closed form with the stages' mean times"},
    {"points[].time.bubble_fraction_ideal", num, "", kAny, always, "the textbook formula (equal stages)"},
    {"points[].time.bubble_fraction_per_rank", arr, "", kNone, when, "pp > 1: each rank's measured bubble"},
    {"points[].time.bubble_fraction_per_rank[]", num, "", kAny, always, "a rank's bubble"},
    {"points[].time.comm", obj, "", kNone, need, "per axis, communication per step"},
    {"points[].time.comm.<tp|pp|dp|ep>", obj, "", kNone, need, "an axis's communication (docs/parallel.md)"},
    {"points[].time.comm.<tp|pp|dp|ep>.time_s", num, "s", kNonNeg, always, "time in the axis's calls"},
    {"points[].time.comm.<tp|pp|dp|ep>.exposed_s", num, "s", kNonNeg, always, "of it, not hidden behind compute"},
    {"points[].time.comm.<tp|pp|dp|ep>.bytes", num, "B", kNonNeg, always, "bytes the rank's calls moved (nccl-tests' size)"},
    {"points[].time.comm.<tp|pp|dp|ep>.calls", num, "", kNonNeg, always, "calls"},
    {"points[].time.ranks", obj, "", kNone, when, "across ranks: per metric of rank_metric_names"},
    {"points[].time.ranks.<metric>", obj, "", kNone, always, "a per-rank metric (step_s, comm.<axis>.wait_s, injected_s, ...)"},
    {"points[].time.ranks.<metric>.<min|mean|max>", num, "", kAny, always, "min / mean / max over ranks, median over steps"},
    {"points[].pipeline", obj, "", kNone, when, "pp > 1: the pipeline's figures"},
    {"points[].pipeline.<stages|micro_batches|virtual_stages>", integer, "", kCount1, always, "the pipeline's shape"},
    {"points[].pipeline.schedule", str, "", kNone, always, "gpipe, 1f1b, interleaved or zb-h1"},
    {"points[].pipeline.<forward_action_s_per_stage|backward_action_s_per_stage|backward_weight_action_s_per_stage>", arr, "s", kNone, always, "per stage, the mean time of one action"},
    {"points[].pipeline.<forward_action_s_per_stage|backward_action_s_per_stage|backward_weight_action_s_per_stage>[]", num, "s", kNonNeg, always, "a stage's"},
    {"points[].pipeline.bubble_fraction_model_per_stage", arr, "", kNone, always, "per stage, the replay's bubble"},
    {"points[].pipeline.bubble_fraction_model_per_stage[]", num, "", kAny, always, "a stage's"},
    {"points[].pipeline.peak_live_activations_per_stage", arr, "", kNone, always, "per stage, the most activation sets alive"},
    {"points[].pipeline.peak_live_activations_per_stage[]", integer, "", kIndex, always, "a stage's"},
    {"points[].rank_series", obj, "", kNone, when, "every rank's own value of each step (docs/diagnosis.md)"},
    {"points[].rank_series.steps", arr, "", kNone, need, "the step numbers"},
    {"points[].rank_series.steps[]", integer, "", kIndex, always, "a step number"},
    {"points[].rank_series.<step_s|compute_s|comm.*.time_s|comm.*.wait_s|comm.*.exposed_s>", arr, "s", kNone, always, "one array per rank"},
    {"points[].rank_series.<step_s|compute_s|comm.*.time_s|comm.*.wait_s|comm.*.exposed_s>[]", arr, "s", kNone, always, "one value per step"},
    {"points[].rank_series.<step_s|compute_s|comm.*.time_s|comm.*.wait_s|comm.*.exposed_s>[][]", num, "s", kNonNeg, always, "a rank's value of a step"},
    {"points[].rank_series.bubble_fraction", arr, "", kNone, always, "one array per rank"},
    {"points[].rank_series.bubble_fraction[]", arr, "", kNone, always, "one value per step"},
    {"points[].rank_series.bubble_fraction[][]", num, "", kAny, always, "a rank's bubble of a step"},
    {"points[].calibration", obj, "", kNone, when, "hardware.calibrate: the fitted costs (docs/report.md)"},
    {"points[].calibration.seconds", num, "s", kNonNeg, always, "time the calibration took"},
    {"points[].calibration.comm", obj, "", kNone, need, "per axis and operation, alpha-beta fits"},
    {"points[].calibration.comm.<tp|pp|dp|ep>", obj, "", kNone, when, "an axis with more than one rank"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>", obj, "", kNone, always, "an operation (perfmodel::to_string spelling)"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>.ranks", integer, "", kCount1, need, "the communicator's size"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>.alpha_s", num, "s", kNonNeg, need, "fitted latency"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>.beta_s_per_byte", num, "s/B", kNonNeg, need, "fitted inverse bandwidth"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>.latency_s", num, "s", kAny, always, "the smallest sample's time"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>.beta_eff_s_per_byte", num, "s/B", kAny, always, "the largest sample's time per byte"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>.rms_residual_s", num, "s", kAny, always, "the fit's RMS residual"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>.async_progress", num, "", kFrac, when, "dp all_reduce, reduce_scatter: share of a non-blocking call of the bucket size progressed behind compute"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>.samples", arr, "", kNone, need, "the timed sizes"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>.samples[]", arr, "", kNone, always, "[bytes, seconds]"},
    {"points[].calibration.comm.<tp|pp|dp|ep>.<op>.samples[][]", num, "", kNonNeg, always, "bytes or seconds"},
    {"points[].calibration.compute", obj, "", kNone, need, "the shard's compute, timed"},
    {"points[].calibration.compute.<forward_s_per_chunk|backward_s_per_chunk>", arr, "s", kNone, need, "per model chunk (pp * virtual_stages), the mean action time (samples above twice the median left out)"},
    {"points[].calibration.compute.<forward_s_per_chunk|backward_s_per_chunk>[]", num, "s", kPos, always, "a chunk's time"},
    {"points[].calibration.compute.<forward_mean_s_per_chunk|backward_mean_s_per_chunk>", arr, "s", kNone, always, "per model chunk, the mean time"},
    {"points[].calibration.compute.<forward_mean_s_per_chunk|backward_mean_s_per_chunk>[]", num, "s", kPos, always, "a chunk's time"},
    {"points[].calibration.compute.<backward_weight_s_per_chunk|backward_weight_mean_s_per_chunk>", arr, "s", kNone, always, "per chunk, W of a split backward (0: not split)"},
    {"points[].calibration.compute.<backward_weight_s_per_chunk|backward_weight_mean_s_per_chunk>[]", num, "s", kNonNeg, always, "a chunk's W"},
    {"points[].calibration.compute.optimizer_s", num, "s", kNonNeg, need, "the optimizer step"},
    {"points[].calibration.compute.flops_per_s", num, "FLOP/s", kNonNeg, need, "achieved model FLOP rate"},
    {"points[].calibration.compute.peak_bytes", integer, "B", kBig, always, "memory peak while timing"},
    {"points[].calibration.compute.action_overhead_s_per_chunk", arr, "s", kNone, when, "pp > 1: per model chunk, the engine's seconds per action outside compute and transfer copies (the compute-only step's pipelined span less its actions and copies, over its actions; slowest holder)"},
    {"points[].calibration.compute.action_overhead_s_per_chunk[]", num, "s", kNonNeg, always, "a chunk's"},
    {"points[].calibration.compute.<forward_samples_s_per_chunk|backward_samples_s_per_chunk|backward_weight_samples_s_per_chunk>", arr, "", kNone, when, "pp > 1 (W: a split backward): per model chunk, every timed action's compute, in order (per sample the slowest holder): the bubble's replay draws from them"},
    {"points[].calibration.compute.<forward_samples_s_per_chunk|backward_samples_s_per_chunk|backward_weight_samples_s_per_chunk>[]", arr, "s", kNone, always, "a chunk's samples"},
    {"points[].calibration.compute.<forward_samples_s_per_chunk|backward_samples_s_per_chunk|backward_weight_samples_s_per_chunk>[][]", num, "s", kNonNeg, always, "an action's seconds"},
    {"points[].calibration.<dp_sequence|tp_sequence>", obj, "", kNone, when, "dp > 1 (dp_sequence): the step's data-parallel calls; tp > 1 (tp_sequence): the tensor-parallel calls of one micro-batch of stage 0; timed as the step issues them"},
    {"points[].calibration.<dp_sequence|tp_sequence>.sweep_bytes", integer, "B", kBig, need, "memory the compute stand-in swept before the calls"},
    {"points[].calibration.<dp_sequence|tp_sequence>.sweep_s", num, "s", kNonNeg, need, "the stand-in's duration before a gradient reduction after compute (the first; at ZeRO 2 each micro-batch's; at ZeRO 3 and in tp_sequence one micro-batch's compute, of which each call takes its compute_share)"},
    {"points[].calibration.<dp_sequence|tp_sequence>.later_sweep_s", num, "s", kNonNeg, need, "its duration before an all-gather after compute (the optimizer)"},
    {"points[].calibration.<dp_sequence|tp_sequence>.calls", arr, "", kNone, need, "in issue order"},
    {"points[].calibration.<dp_sequence|tp_sequence>.calls[]", obj, "", kNone, always, "a call"},
    {"points[].calibration.<dp_sequence|tp_sequence>.calls[].op", str, "", kNone, need, "the operation (perfmodel::to_string spelling)"},
    {"points[].calibration.<dp_sequence|tp_sequence>.calls[].bytes", num, "B", kNonNeg, need, "nccl-tests S"},
    {"points[].calibration.<dp_sequence|tp_sequence>.calls[].ranks", integer, "", kCount1, need, "the communicator's size"},
    {"points[].calibration.<dp_sequence|tp_sequence>.calls[].after_compute", boolean, "", kNone, need, "a compute phase comes just before it"},
    {"points[].calibration.<dp_sequence|tp_sequence>.calls[].compute_share", num, "", kNonNeg, need, "with after_compute: 0 a whole phase, else that share of sweep_s (ZeRO 3: the units' compute since the previous call; tp: the pieces' FLOPs since the previous call)"},
    {"points[].calibration.<dp_sequence|tp_sequence>.calls[].seconds", num, "s", kNonNeg, need, "median over repetitions of the last-arriving rank's time"},
    {"points[].recheck", obj, "", kNone, when, "hardware.calibrate: the calibration timed again right after the steps (docs/report.md, Recheck)"},
    {"points[].recheck.seconds", num, "s", kNonNeg, always, "time the recheck took"},
    {"points[].recheck.predicted", obj, "", kNone, always, "the prediction rebuilt from the recheck"},
    {"points[].recheck.predicted.<step_time|compute|tp|ep|dp|bubble>", num, "s", kAny, when, "a time term, predicted (the grid's terms)"},
    {"points[].recheck.retimed", obj, "", kNone, always, "what was timed again"},
    {"points[].recheck.retimed.samples", arr, "", kNone, when, "the calibrated curve samples the point's calls were predicted from"},
    {"points[].recheck.retimed.samples[]", obj, "", kNone, always, "a sample"},
    {"points[].recheck.retimed.samples[].<axis|op>", str, "", kNone, always, "the fit's axis and operation"},
    {"points[].recheck.retimed.samples[].bytes", num, "B", kNonNeg, always, "its nccl-tests S"},
    {"points[].recheck.retimed.samples[].<calibration_s|recheck_s>", num, "s", kNonNeg, always, "its time, calibrated and again"},
    {"points[].recheck.retimed.<dp_sequence|tp_sequence>", arr, "", kNone, when, "the calibration's dp or tp sequence, timed again"},
    {"points[].recheck.retimed.<dp_sequence|tp_sequence>[]", obj, "", kNone, always, "a call"},
    {"points[].recheck.retimed.<dp_sequence|tp_sequence>[].op", str, "", kNone, always, "the operation"},
    {"points[].recheck.retimed.<dp_sequence|tp_sequence>[].bytes", num, "B", kNonNeg, always, "nccl-tests S"},
    {"points[].recheck.retimed.<dp_sequence|tp_sequence>[].<calibration_s|recheck_s>", num, "s", kNonNeg, always, "its time, calibrated and again"},
    {"points[].recheck.retimed.async_progress", arr, "", kNone, when, "with comm.overlap, each dp reduction's overlap premise, timed again"},
    {"points[].recheck.retimed.async_progress[]", obj, "", kNone, always, "a data-parallel reduction"},
    {"points[].recheck.retimed.async_progress[].op", str, "", kNone, always, "the operation"},
    {"points[].recheck.retimed.async_progress[].<calibration|recheck>", num, "", kFrac, always, "its async_progress, calibrated and again"},
    {"points[].recheck.retimed.compute", obj, "", kNone, always, "the compute, timed again (fewer steps)"},
    {"points[].recheck.retimed.compute.<calibration_s|recheck_s>", num, "s", kNonNeg, always, "one micro-batch of every chunk, calibrated and again"},
    {"points[].recheck.retimed.compute.<optimizer_calibration_s|optimizer_recheck_s>", num, "s", kNonNeg, always, "the optimizer step, calibrated and again"},
    {"points[].rerun", obj, "", kNone, when, "hardware.rerun_misses: the point's steps run again after a term missed with nothing in the point showing it the machine's (docs/report.md, Rerun)"},
    {"points[].rerun.seconds", num, "s", kNonNeg, always, "time the rerun took"},
    {"points[].rerun.terms", arr, "", kNone, always, "the time terms that missed so"},
    {"points[].rerun.terms[]", str, "", kNone, always, "a time term's name"},
    {"points[].rerun.measured", obj, "", kNone, always, "what the rerun measured"},
    {"points[].rerun.measured.<step_time|compute|tp|ep|dp|bubble>", num, "s", kAny, when, "a time term, measured again (the grid's terms)"},
    {"points[].calls", obj, "", kNone, always, "per-call accounting of rank 0 (driver/call_accounting.hpp)"},
    {"points[].calls.rank", integer, "", kIndex, need, "the rank (0)"},
    {"points[].calls.steps", integer, "", kIndex, need, "measured steps counted"},
    {"points[].calls.rows", arr, "", kNone, need, "one row per (axis, op, bucket_bytes), sorted"},
    {"points[].calls.rows[]", obj, "", kNone, always, "a row"},
    {"points[].calls.rows[].axis", str, "", kNone, need, "tp, pp, dp, ep or world"},
    {"points[].calls.rows[].op", str, "", kNone, need, "the operation"},
    {"points[].calls.rows[].bucket_bytes", integer, "B", kBig, need, "largest power of two <= the call's size"},
    {"points[].calls.rows[].calls", integer, "", {1, kInf, false}, need, "calls in the row"},
    {"points[].calls.rows[].bytes", num, "B", kNonNeg, need, "sum of the calls' sizes"},
    {"points[].calls.rows[].measured_s", num, "s", kNonNeg, need, "sum of the calls' durations"},
    {"points[].calls.rows[].measured_median_s", num, "s", kNonNeg, need, "median duration of one call"},
    {"points[].calls.rows[].predicted_s", num_or_null, "s", kNonNeg, need, "sum of the calls' predictions (null: no calibration or model)"},
    {"points[].calls.rows[].wait_s", num, "s", kNonNeg, need, "sum of the waits for the group's last rank"},
    {"points[].checkpoints", arr, "", kNone, when, "one entry per checkpoint saved (docs/checkpoint.md)"},
    {"points[].checkpoints[]", obj, "", kNone, always, "a save"},
    {"points[].checkpoints[].step", integer, "", kIndex, need, "steps completed at the save"},
    {"points[].checkpoints[].folder", str, "", kNone, always, "the checkpoint folder"},
    {"points[].checkpoints[].async", boolean, "", kNone, always, "written behind training"},
    {"points[].checkpoints[].<bytes|write_s>", obj, "", kNone, need, "per rank: bytes written, write time"},
    {"points[].checkpoints[].<bytes|write_s>.<min|mean|max>", num, "", kNonNeg, need, "over ranks"},
    {"points[].checkpoints[].<exposed_s|staged_bytes|staging_s|poll_s|join_wait_s|commit_wait_s>", obj, "", kNone, when, "per rank: stalled time; async: staged bytes, staging, polls at step ends, join wait, wait for the commit"},
    {"points[].checkpoints[].<exposed_s|staged_bytes|staging_s|poll_s|join_wait_s|commit_wait_s>.<min|mean|max>", num, "", kNonNeg, need, "over ranks"},
    {"points[].checkpoints[].<async_can_hide|commit_off_training_thread>", boolean, "", kNone, when, "async: a core is free for the writer; every rank committed off its training thread"},
    {"points[].checkpoints[].<total_bytes|total_s|aggregate_bytes_per_s>", num, "", kNonNeg, need, "all ranks: bytes, seconds, bytes per second"},
    {"points[].checkpoints[].baseline", obj, "", kNone, when, "the storage's plain write speed beside it"},
    {"points[].checkpoints[].baseline.write_s", obj, "s", kNone, need, "per rank: the plain write's time"},
    {"points[].checkpoints[].baseline.write_s.<min|mean|max>", num, "s", kNonNeg, need, "over ranks"},
    {"points[].checkpoints[].baseline.read_s", obj, "s", kNone, when, "per rank: the plain read's time"},
    {"points[].checkpoints[].baseline.read_s.<min|mean|max>", num, "s", kNonNeg, need, "over ranks"},
    {"points[].checkpoints[].baseline.<checkpoint_to_baseline_write|write_bytes_per_s>", num, "", kNonNeg, when, "the checkpoint's write time over the baseline's; its speed"},
    {"points[].checkpoints[].baseline.trials", integer, "", kIndex, when, "baseline trials"},
    {"points[].checkpoints[].baseline.write_s_trials", arr, "s", kNone, when, "each trial's write time"},
    {"points[].checkpoints[].baseline.write_s_trials[]", num, "s", kNonNeg, always, "a trial's"},
    {"points[].resumed", obj, "", kNone, when, "--resume: the checkpoint resumed from"},
    {"points[].resumed.folder", str, "", kNone, always, "its folder"},
    {"points[].resumed.step", integer, "", kIndex, need, "its step"},
    {"points[].resumed.<read_s|bytes>", obj, "", kNone, need, "per rank: read time, bytes"},
    {"points[].resumed.<read_s|bytes>.<min|mean|max>", num, "", kNonNeg, need, "over ranks"},
    {"points[].resumed.<storage_s|verify_s>", obj, "s", kNone, always, "per rank: storage time, checksum time"},
    {"points[].resumed.<storage_s|verify_s>.<min|mean|max>", num, "s", kNonNeg, need, "over ranks"},
    {"points[].resumed.read_once", obj, "", kNone, when, "several ranks: each file read once, then exchanged"},
    {"points[].resumed.read_once.<received_bytes|sent_bytes|shared_bytes|placed_bytes|needs_s|read_s|exchange_s>", obj, "", kNone, always, "per rank: bytes by message, through the host's shared memory and read straight into place, and the times"},
    {"points[].resumed.read_once.<received_bytes|sent_bytes|shared_bytes|placed_bytes|needs_s|read_s|exchange_s>.<min|mean|max>", num, "", kNonNeg, always, "over ranks"},
    {"points[].resumed.read_once.assemble_s", obj, "s", kNone, always, "per rank: the trainer's load from what was read"},
    {"points[].resumed.read_once.assemble_s.<min|mean|max>", num, "s", kNonNeg, always, "over ranks"},
    {"points[].resumed.saved_grid", obj, "", kNone, always, "the grid the checkpoint was saved on"},
    {"points[].resumed.saved_grid.world", integer, "", kCount1, always, "its ranks"},
    {"points[].resumed.saved_grid.parallel", map, "", kNone, always, "its parallel.* keys (docs/deck.md)"},
    {"points[].resumed.restart_to_first_step_s", num, "s", kNonNeg, always, "from the resume to the first step's end"},
    {"points[].resumed.changed", map, "", kNone, when, "keys that differ from the checkpoint's (docs/checkpoint.md)"},
    {"points[].checkpoints_refused", arr, "", kNone, when, "saves not committed: the state was not finite"},
    {"points[].checkpoints_refused[]", map, "", kNone, always, "{step, refused}"},
    {"points[].lineage", obj, "", kNone, when, "the lineage its checkpoints record"},
    {"points[].lineage.<id|run>", str, "", kNone, always, "lineage id, run id"},
    {"points[].lineage.parent", obj_or_null, "", kNone, always, "the run and step it came from (null: none)"},
    {"points[].lineage.parent.run", str, "", kNone, always, "parent run"},
    {"points[].lineage.parent.step", integer, "", kIndex, always, "parent step"},
    {"points[].checkpoint_auto", obj, "", kNone, when, "checkpoint.every: auto: the cadence chosen"},
    {"points[].checkpoint_auto.<checkpoint_s|step_s|system_mtbf_s|daly_interval_s>", num, "s", kNonNeg, need, "save cost, step, system MTBF, Daly's interval"},
    {"points[].checkpoint_auto.every", integer, "", kCount1, need, "steps between saves"},
    {"points[].memory", obj, "", kNone, need, "the rank with the largest peak"},
    {"points[].memory.<params_bytes|grads_bytes|optimizer_bytes|activations_peak_bytes|peak_bytes|params_peak_bytes|grads_peak_bytes|optimizer_peak_bytes>", num, "B", kNonNeg, always, "resident between steps (params, grads, optimizer); peaks"},
    {"points[].memory_per_rank", arr, "", kNone, always, "every rank's memory"},
    {"points[].memory_per_rank[]", obj, "", kNone, always, "a rank's"},
    {"points[].memory_per_rank[].<params_bytes|grads_bytes|optimizer_bytes|activations_peak_bytes|peak_bytes|params_peak_bytes|grads_peak_bytes|optimizer_peak_bytes>", num, "B", kNonNeg, always, "as in memory"},
    {"points[].throughput", obj, "", kNone, always, "rates of the median step"},
    {"points[].throughput.tokens_per_s", num, "1/s", kNonNeg, always, "tokens per second"},
    {"points[].throughput.<model_flops_per_s|hardware_flops_per_s>", num, "FLOP/s", kNonNeg, always, "model FLOPs (3 x forward), hardware FLOPs (+ recompute)"},
    {"points[].throughput.<model_flops_per_step|hardware_flops_per_step>", num, "FLOP", kNonNeg, always, "per step"},
    {"points[].throughput.<mfu|hfu>", num_or_null, "", kNonNeg, always, "over hardware.peak_flops x ranks (null if 0)"},
    {"points[].model", obj, "", kNone, always, "the model's size"},
    {"points[].model.parameters", integer, "", kBig, always, "parameters"},
    {"points[].model.forward_flops_per_token", num, "FLOP", kNonNeg, always, "forward FLOPs per token"},
    {"points[].corpus", obj, "", kNone, always, "the synthetic corpus"},
    {"points[].corpus.<entropy_floor|uniform_loss>", num, "", kNonNeg, always, "the lowest reachable loss; ln(vocab)"},
    {"points[].corpus.branching", integer, "", kCount1, always, "train.corpus_branching"},
    {"points[].verify", obj, "", kNone, when, "--verify: against the single-rank run"},
    {"points[].verify.<max_loss_rel_diff|max_param_abs_diff|max_param_abs|loss_tolerance|param_tolerance|replica_divergence>", num, "", kAny, always, "differences and their tolerances"},
    {"points[].verify.routing_flips", integer, "", kBig, always, "tokens routed differently"},
    {"points[].verify.first_flip_step", int_or_null, "", kIndex, always, "first step with a flip (null: none)"},
    {"points[].verify.steps_compared", integer, "", kIndex, always, "steps compared"},
    {"points[].verify.<routing_replayed|passed>", boolean, "", kNone, always, "routing replayed; the verdict"},
    {"points[].verify.reason", str_or_null, "", kNone, always, "why it failed (null: passed)"},
    {"points[].final", obj, "", kNone, always, "the last step"},
    {"points[].final.<loss|lm_loss|lm_loss_above_floor>", num, "", kAny, always, "losses; lm_loss - corpus.entropy_floor"},
};

const std::vector<Field> kReport = {
    {"schema", str, "", kNone, need, "\"paraxis.report/1\""},
    {"sources", arr, "", kNone, always, "the results folders read"},
    {"sources[]", str, "", kNone, always, "a folder"},
    {"target", obj, "", kNone, always, "the accuracy target"},
    {"target.<every_point_pct|mean_pct>", num, "%", kNonNeg, always, "every point within, the mean within"},
    {"machines", arr, "", kNone, always, "one entry per folder"},
    {"machines[]", obj, "", kNone, always, "a folder's provenance"},
    {"machines[].<dir|machine|execution_space|mpi_library|git_hash|date>", str, "", kNone, always, "folder, machine label, and its provenance"},
    {"machines[].world", integer, "", kIndex, always, "ranks"},
    {"points", arr, "", kNone, always, "each ok point against the model (docs/report.md)"},
    {"points[]", obj, "", kNone, always, "a point"},
    {"points[].<dir|machine|label|precision>", str, "", kNone, always, "its folder, machine, label, precision"},
    {"points[].index", integer, "", kIndex, always, "its index in its summary"},
    {"points[].<mfu|hfu>", num_or_null, "", kNonNeg, always, "from summary.json's throughput"},
    {"points[].settings", map, "", kNone, always, "its swept keys"},
    {"points[].grid", map, "", kNone, always, "summary.json's grid"},
    {"points[].topology", map, "", kNone, when, "summary.json's topology"},
    {"points[].<global_batch|micro_batch>", integer, "", kCount1, always, "batch sizes"},
    {"points[].terms", arr, "", kNone, always, "measured against predicted, term by term"},
    {"points[].terms[]", obj, "", kNone, always, "a term"},
    {"points[].terms[].<name|unit>", str, "", kNone, always, "its name and unit"},
    {"points[].terms[].<measured|predicted>", num, "", kAny, always, "measured, predicted"},
    {"points[].terms[].residual_pct", num_or_null, "%", kAny, always, "100 (measured - predicted) / predicted (null: predicted 0)"},
    {"points[].terms[].steps_range_s", arr, "s", kNone, when, "the measured steps' range of the term"},
    {"points[].terms[].steps_range_s[]", num, "s", kAny, always, "low, high"},
    {"points[].terms[].steps_spread_pct", num, "%", kAny, when, "the range's width over the median"},
    {"points[].terms[].within_steps_range", boolean, "", kNone, when, "the prediction lies in the range"},
    {"points[].terms[].repeats", integer, "", kIndex, when, "tp, dp, ep: points of the folder whose term is the same to the model"},
    {"points[].terms[].repeats_ratio_range", arr, "", kNone, when, "measured / predicted over them"},
    {"points[].terms[].repeats_ratio_range[]", num, "", kAny, always, "low, high"},
    {"points[].terms[].within_repeats_range", boolean, "", kNone, when, "1 lies in that range"},
    {"points[].terms[].recheck_predicted", num, "s", kAny, when, "the prediction rebuilt from the point's recheck"},
    {"points[].terms[].recheck_residual_pct", num, "%", kAny, when, "100 (measured - it) / it"},
    {"points[].terms[].recheck_verdict", str, "", kNone, when, "a miss: cal (the machine changed since calibration) or model"},
    {"points[].terms[].rerun_measured", num, "s", kAny, when, "what the point's rerun measured (docs/report.md, Rerun)"},
    {"points[].terms[].rerun_residual_pct", num, "%", kAny, when, "100 (it - predicted) / predicted"},
    {"points[].terms[].rerun_verdict", str, "", kNone, when, "a miss: recurs (the rerun misses the same way) or noise"},
    {"points[].costliest_axis", str, "", kNone, always, "the axis whose communication costs most"},
    {"points[].costliest_axis_s", num, "s", kAny, always, "its seconds"},
    {"points[].term_most_off", str, "", kNone, when, "with a prediction: the term furthest off"},
    {"points[].term_most_off_s", num, "s", kAny, when, "its gap"},
    {"points[].rank_spread", obj, "", kNone, when, "the ranks' step spread"},
    {"points[].rank_spread.<measured_s|calibrated_s|excess_s>", num, "s", kAny, always, "measured, explained by the calibration, excess"},
    {"points[].rank_spread.uneven", boolean, "", kNone, always, "the ranks are uneven"},
    {"points[].pipeline", obj, "", kNone, when, "pp > 1"},
    {"points[].pipeline.<stages|micro_batches|virtual_stages>", integer, "", kCount1, always, "shape"},
    {"points[].pipeline.schedule", str, "", kNone, always, "schedule"},
    {"points[].pipeline.<bubble_measured|bubble_model|bubble_ideal>", num, "", kAny, always, "bubbles"},
    {"points[].pipeline.bubble_predicted", num_or_null, "", kAny, always, "the model's (null: no calibration)"},
    {"points[].measured_step_s", num, "s", kNonNeg, always, "median step"},
    {"points[].predicted_step_s", num_or_null, "s", kAny, always, "the model's (null: no calibration)"},
    {"points[].<rank_measured|rank_predicted>", integer, "", kIndex, when, "rank among the points, measured and predicted"},
    {"points[].calls", obj, "", kNone, when, "summary.json's calls with residuals"},
    {"points[].calls.<rank|steps>", integer, "", kIndex, always, "as in summary.json"},
    {"points[].calls.per_step", obj, "", kNone, always, "per axis"},
    {"points[].calls.per_step.<tp|pp|dp|ep>", obj, "", kNone, when, "an axis with calls"},
    {"points[].calls.per_step.<tp|pp|dp|ep>.<calls_predicted_s|model_s>", num, "s", kAny, always, "the calls' predictions per step; the step model's"},
    {"points[].calls.rows", arr, "", kNone, always, "summary.json's rows"},
    {"points[].calls.rows[]", obj, "", kNone, always, "a row"},
    {"points[].calls.rows[].<axis|op>", str, "", kNone, always, "as in summary.json"},
    {"points[].calls.rows[].<bucket_bytes|calls>", integer, "", kBig, always, "as in summary.json"},
    {"points[].calls.rows[].<bytes|measured_s|measured_median_s|wait_s>", num, "", kNonNeg, always, "as in summary.json"},
    {"points[].calls.rows[].predicted_s", num_or_null, "s", kNonNeg, always, "as in summary.json"},
    {"points[].calls.rows[].residual_pct", num_or_null, "%", kAny, always, "measured against predicted"},
    {"points[].checkpoint", obj_or_null, "", kNone, when, "with checkpoints: the checkpoint table's figures (docs/checkpoint.md; null: the list is empty)"},
    {"points[].checkpoint.saves", integer, "", kCount1, always, "saves"},
    {"points[].checkpoint.bytes_per_rank_max", num, "B", kNonNeg, always, "the median save's bytes, largest rank"},
    {"points[].checkpoint.<write_s_max|checkpoint_s>", num, "s", kNonNeg, always, "the median save's write, slowest rank; the cost C (training's stall)"},
    {"points[].checkpoint.aggregate_bytes_per_s", num, "B/s", kNonNeg, always, "the first save's aggregate rate"},
    {"points[].checkpoint.step_s", num, "s", kNonNeg, always, "median step"},
    {"points[].checkpoint.checkpoint_to_baseline_write", num, "", kNonNeg, when, "with a plain-I/O baseline: its write over the median save's"},
    {"points[].checkpoint.restart_s", num, "s", kNonNeg, when, "resumed: restart to the first step"},
    {"points[].checkpoint.async", obj, "", kNone, when, "asynchronous saves: the stall by part"},
    {"points[].checkpoint.async.<staging_s|join_wait_s>", num, "s", kNonNeg, always, "medians over saves: the staging copy, the wait for a write not done in time"},
    {"points[].checkpoint.async.saves_waiting_for_storage", integer, "", kIndex, always, "saves whose wait for their write exceeded their staging"},
    {"points[].checkpoint.async.longest_write_s", num, "s", kNonNeg, always, "the longest save's write, slowest rank"},
    {"points[].checkpoint.async.can_hide", boolean, "", kNone, always, "a core was free for the writing thread on every save"},
    {"points[].checkpoint.async.step_after_save_ratio", num, "", kNonNeg, when, "the step right after a save over the one before it, median over saves"},
    {"points[].checkpoint.failures_per_device_s", num, "1/s", kNonNeg, always, "failure rate per device (checkpoint.device_mtbf_h, else Llama 3's)"},
    {"points[].checkpoint.<system_mtbf_s|young_interval_s|daly_interval_s>", num, "s", kNonNeg, always, "the job's MTBF; Young's and Daly's intervals"},
    {"points[].checkpoint.<young_interval_steps|daly_interval_steps>", num, "", kNonNeg, when, "with a step time: the intervals in steps"},
    {"points[].checkpoint.<waste_at_daly|waste_at_run_cadence>", num, "", kNonNeg, when, "Daly's expected waste fraction at his interval (always), at the run's cadence (with checkpoint.every)"},
    {"points[].checkpoint.<simulated_waste_at_daly|simulated_waste_at_run_cadence>", obj, "", kNone, when, "the Monte Carlo's, beside each"},
    {"points[].checkpoint.<simulated_waste_at_daly|simulated_waste_at_run_cadence>.waste", num, "", kNonNeg, always, "its waste fraction"},
    {"points[].checkpoint.<simulated_waste_at_daly|simulated_waste_at_run_cadence>.ci95", arr, "", kNone, always, "its 95 % interval"},
    {"points[].checkpoint.<simulated_waste_at_daly|simulated_waste_at_run_cadence>.ci95[]", num, "", kNonNeg, always, "low, high"},
    {"points[].checkpoint.<simulated_waste_at_daly|simulated_waste_at_run_cadence>.trials", integer, "", kCount1, always, "trials"},
    {"points[].diagnosis", arr, "", kNone, when, "the point's findings"},
    {"points[].diagnosis[]", obj, "", kNone, always, "a finding"},
    PARAXIS_FINDING("points[].diagnosis[]."),
    {"calibration", arr, "", kNone, always, "every fitted operation"},
    {"calibration[]", obj, "", kNone, always, "one"},
    {"calibration[].<dir|machine|axis|op>", str, "", kNone, always, "where, which"},
    {"calibration[].ranks", integer, "", kCount1, always, "communicator size"},
    {"calibration[].<alpha_s|beta_s_per_byte|busbw_factor>", num, "", kAny, always, "the fit"},
    {"calibration[].samples", arr, "", kNone, always, "[bytes, seconds]"},
    {"calibration[].samples[]", arr, "", kNone, always, "a sample"},
    {"calibration[].samples[][]", num, "", kNonNeg, always, "bytes or seconds"},
    {"accuracy", obj, "", kNone, always, "the model's accuracy over the points"},
    {"accuracy.<points_predicted|misses_within_steps_range|misses_machine_changed|misses_not_recurring>", integer, "", kIndex, when, "points predicted; misses inside their steps' range; misses the recheck names the machine's; misses the rerun did not repeat"},
    {"accuracy.<max_abs_residual_pct|mean_abs_residual_pct>", num, "%", kNonNeg, when, "residuals"},
    {"accuracy.<every_point_within_target|mean_within_target>", boolean, "", kNone, when, "the verdicts"},
    {"accuracy.misses", arr, "", kNone, when, "points off target"},
    {"accuracy.misses[]", obj, "", kNone, always, "one"},
    {"accuracy.misses[].<label|term_most_off>", str, "", kNone, always, "which, and its worst term"},
    {"accuracy.misses[].residual_pct", num, "%", kAny, always, "its residual"},
    {"accuracy.misses[].uneven_ranks_excess_s", num, "s", kAny, when, "its ranks uneven: their excess spread per step (points[].rank_spread)"},
    {"accuracy.misses[].steps_range_s", arr, "s", kNone, when, "its steps' range"},
    {"accuracy.misses[].steps_range_s[]", num, "s", kAny, always, "low, high"},
    {"accuracy.misses[].within_steps_range", boolean, "", kNone, when, "prediction inside the range"},
    {"accuracy.misses[].<recheck_verdict|recheck_reason>", str, "", kNone, when, "the step time's recheck verdict (cal, model) and its sentence"},
    {"accuracy.misses[].<rerun_verdict|rerun_reason>", str, "", kNone, when, "the step time's rerun verdict (recurs, noise) and its sentence"},
    {"accuracy.uneven_ranks", obj, "", kNone, when, "points whose ranks are uneven"},
    {"accuracy.uneven_ranks.points", integer, "", kIndex, always, "how many"},
    {"accuracy.uneven_ranks.<max_abs_residual_pct|mean_abs_residual_pct>", num, "%", kNonNeg, always, "residuals without them"},
    {"scaling", obj, "", kNone, always, "strong and weak scaling"},
    {"scaling.<strong|weak>", arr, "", kNone, always, "rows"},
    {"scaling.<strong|weak>[]", obj, "", kNone, always, "a row (docs/report.md): the fastest point of one model at one world"},
    {"scaling.<strong|weak>[].<model|label>", str, "", kNone, always, "the model, the point's label"},
    {"scaling.<strong|weak>[].world", integer, "", kCount1, always, "ranks"},
    {"scaling.<strong|weak>[].global_batch", integer, "", kCount1, when, "strong: the global batch"},
    {"scaling.<strong|weak>[].batch_per_replica", integer, "", kCount1, when, "weak: global_batch / dp"},
    {"scaling.<strong|weak>[].step_s", num, "s", kNonNeg, always, "median step"},
    {"scaling.<strong|weak>[].speedup", num, "", kNonNeg, when, "strong: the smallest world's step over this one's"},
    {"scaling.<strong|weak>[].efficiency", num, "", kNonNeg, always, "strong: speedup over the world's ratio; weak: the smallest world's step over this one's"},
    {"machines_side_by_side", arr, "", kNone, always, "one row per configuration run on several machines"},
    {"machines_side_by_side[]", obj, "", kNone, always, "a configuration"},
    {"machines_side_by_side[].configuration", str, "", kNone, always, "label, model, global batch"},
    {"machines_side_by_side[].step_s", obj, "", kNone, always, "its median step per machine: keys are the machine labels (data)"},
    {"machines_side_by_side[].step_s.<machine>", num, "s", kNonNeg, always, "a machine's"},
    {"warnings", arr, "", kNone, always, "warnings (also in report.md)"},
    {"warnings[]", str, "", kNone, always, "one"},
    {"points_not_analysed", arr, "", kNone, always, "points whose status is not ok"},
    {"points_not_analysed[]", obj, "", kNone, always, "a point"},
    {"points_not_analysed[].<dir|status>", str, "", kNone, always, "its folder, its status"},
    {"points_not_analysed[].index", integer, "", kIndex, always, "its index"},
    {"points_not_analysed[].settings", map, "", kNone, always, "its swept keys and values (keys: deck keys, data)"},
    {"diagnosis", arr, "", kNone, always, "findings, most costly first (docs/diagnosis.md)"},
    {"diagnosis[]", obj, "", kNone, always, "a finding: a point's (points[].diagnosis[]) or a failure record's, with its point"},
    {"diagnosis[].<point|dir>", str, "", kNone, always, "the point's label, its folder"},
    {"diagnosis[].index", integer, "", kIndex, always, "the point's index"},
    {"diagnosis[].point_index", integer, "", kIndex, when, "dead_rank, hang: the point's index (as index)"},
    PARAXIS_FINDING("diagnosis[]."),
    {"sensitivity", arr, "", kNone, always, "slow-axis sweeps (docs/sensitivity.md)"},
    {"sensitivity[]", obj, "", kNone, always, "one group of slowed points (a folder and its other settings)"},
    {"sensitivity[].<dir|label>", str, "", kNone, always, "its folder, the baseline's label"},
    {"sensitivity[].settings", map, "", kNone, always, "the swept keys but fault.slow_axis.* (keys: deck keys, data)"},
    {"sensitivity[].baseline_step_s", num, "s", kNonNeg, always, "the median step of its factor-1 points"},
    {"sensitivity[].target_pct", num, "%", kNonNeg, always, "the model's target on the curves"},
    {"sensitivity[].axes", obj, "", kNone, always, "per slowed axis"},
    {"sensitivity[].axes.<tp|pp|dp|ep>", obj, "", kNone, when, "an axis slowed in the group"},
    {"sensitivity[].axes.<tp|pp|dp|ep>.points", arr, "", kNone, always, "its points by factor"},
    {"sensitivity[].axes.<tp|pp|dp|ep>.points[]", obj, "", kNone, always, "a point"},
    {"sensitivity[].axes.<tp|pp|dp|ep>.points[].factor", num, "", {1, kInf, false}, always, "fault.slow_axis.factor"},
    {"sensitivity[].axes.<tp|pp|dp|ep>.points[].measured_step_s", num, "s", kNonNeg, always, "median step"},
    {"sensitivity[].axes.<tp|pp|dp|ep>.points[].predicted_step_s", num_or_null, "s", kAny, always, "baseline + the model's increment (null: no model)"},
    {"sensitivity[].axes.<tp|pp|dp|ep>.points[].error_pct", num_or_null, "%", kAny, always, "100 (predicted - measured) / measured (null: no model)"},
    {"sensitivity[].axes.<tp|pp|dp|ep>.points[].increment_model_s", num, "s", kAny, when, "with a model: its increment over the baseline"},
    {"sensitivity[].axes.<tp|pp|dp|ep>.slope_s_per_factor", num, "s", kAny, always, "least-squares slope of the measured step over the factor"},
    {"sensitivity[].axes.<tp|pp|dp|ep>.model_slope_s_per_factor", num_or_null, "s", kAny, always, "the predicted's (null: a point without a model)"},
    {"sensitivity[].least_tolerant_axis", str, "", kNone, always, "the axis of steepest slope"},
};

// The provenance alone, as the benchmark programs record it (their other output is Google
// Benchmark's, or paraxis-bench-comm's own rows).
const std::vector<Field> kProvenance = {
    PARAXIS_PROCESS_PROVENANCE(""),
    PARAXIS_MPI_PROVENANCE("", when),
    {"load_average_start", str, "", kNone, when, "paraxis-bench-comm: the load average at the start"},
    {"load_average_end", str, "", kNone, when, "paraxis-bench-comm: and at the end"},
};

const std::vector<Field> kPointsCsv = {
    {"index", integer, "", kIndex, need, "the point's index"},
    {"status", str, "", kNone, need, "its status (quoted; ',' as ';')"},
    {"world", integer, "", kCount1, need, "ranks"},
    {"tp", integer, "", kCount1, need, "tensor-parallel degree"},
    {"pp", integer, "", kCount1, need, "pipeline stages"},
    {"dp", integer, "", kCount1, need, "data-parallel degree"},
    {"ep", integer, "", kCount1, need, "expert-parallel degree"},
    {"zero", integer, "", kIndex, need, "ZeRO stage"},
    {"schedule", str, "", kNone, need, "pipeline schedule"},
    {"precision", str, "", kNone, need, "train.precision"},
    {"global_batch", integer, "", kCount1, need, "sequences per step"},
    {"micro_batch", integer, "", kCount1, need, "sequences per micro-batch"},
    {"step_median_s", num, "s", kNonNeg, need, "median step time (0: no measured step)"},
    {"tokens_per_s", num, "1/s", kNonNeg, need, "tokens per second"},
    {"model_flops_per_s", num, "FLOP/s", kNonNeg, need, "model FLOP rate"},
    {"final_loss", num, "", kAny, need, "the last step's loss (0: no step)"},
    {"peak_bytes", num, "B", kNonNeg, need, "memory peak of the largest rank"},
    {"checkpoints", integer, "", kIndex, need, "checkpoints written"},
    {"checkpoint_bytes_per_rank_max", num, "B", kNonNeg, need, "the last one's bytes, slowest rank (0: none)"},
    {"checkpoint_write_s_max", num, "s", kNonNeg, need, "its write time, slowest rank"},
    {"checkpoint_exposed_s_max", num, "s", kNonNeg, need, "its stalled time, slowest rank"},
    {"resumed_step", integer, "", {-1, kMaxInt, false}, need, "the step resumed from (-1: not resumed)"},
    {"restart_s", num, "s", kNonNeg, need, "restart to the first step (0: not resumed)"},
};

// clang-format on

}  // namespace

const std::vector<Field>& fields(File f) {
  switch (f) {
    case File::summary:
      return kSummary;
    case File::report:
      return kReport;
    case File::provenance:
      return kProvenance;
    case File::points_csv:
      break;
  }
  return kPointsCsv;
}

}  // namespace paraxis::driver::results_schema
