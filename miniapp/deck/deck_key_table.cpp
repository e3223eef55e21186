// The deck's key table (deck_key_types.hpp, key_table): every key a deck may set, its type and
// range, and the RunConfig field it sets, one line per key. docs/deck.md documents each one
// (a test checks that every key is there).
#include <climits>
#include <string>
#include <vector>

#include "deck/deck_key_types.hpp"

namespace paraxis::driver::deck_keys {

// The RunConfig field a key sets, as a reference (one table line per key).
// clang-format off
#define PARAXIS_FIELD(member) [](auto& c) -> auto& { return c.member; }
// clang-format on

const std::vector<KeySpec>& key_table() {
  static const std::vector<KeySpec> table = [] {
    constexpr long long kMaxInt = INT_MAX;
    std::vector<KeySpec> t;
    auto add = [&t](KeySpec k) { t.push_back(std::move(k)); };
    add(int_key("model.vocab", 2, kMaxInt, PARAXIS_FIELD(model.vocab)));
    add(int_key("model.seq_len", 1, kMaxInt, PARAXIS_FIELD(model.seq_len)));
    add(int_key("model.hidden", 1, kMaxInt, PARAXIS_FIELD(model.hidden)));
    add(int_key("model.heads", 1, kMaxInt, PARAXIS_FIELD(model.heads)));
    add(int_key("model.layers", 1, kMaxInt, PARAXIS_FIELD(model.layers)));
    add(int_key("model.ffn", 1, kMaxInt, PARAXIS_FIELD(model.ffn)));
    add(int_key("model.moe.experts", 0, kMaxInt, PARAXIS_FIELD(model.moe.experts)));
    add(int_key("model.moe.top_k", 1, kMaxInt, PARAXIS_FIELD(model.moe.top_k)));
    add(int_key("model.moe.every", 1, kMaxInt, PARAXIS_FIELD(model.moe.every)));
    add(real_key("model.moe.capacity_factor", 0, 1e6, PARAXIS_FIELD(model.moe.capacity_factor)));
    add(real_key("model.moe.aux_loss_coef", 0, 1e6, PARAXIS_FIELD(model.moe.aux_loss_coef)));
    add(real_key("model.moe.router_skew", 0, 1e6, PARAXIS_FIELD(model.moe.router_skew)));
    add(enum_key("model.attention", model::attention_names(), PARAXIS_FIELD(model.attention)));
    add(real_key("model.attention_dropout", 0, 0.999999, PARAXIS_FIELD(model.attention_dropout)));
    add(int_key("train.global_batch", 1, kMaxInt, PARAXIS_FIELD(train.global_batch)));
    add(int_key("train.micro_batch", 1, kMaxInt, PARAXIS_FIELD(train.micro_batch)));
    add(int_key("train.steps", 1, kMaxInt, PARAXIS_FIELD(train.steps)));
    add(int_key("train.warmup_steps", 0, kMaxInt, PARAXIS_FIELD(train.warmup_steps)));
    add(real_key("train.lr", 0, 1e3, PARAXIS_FIELD(train.lr)));
    add(real_key("train.beta1", 0, 0.999999, PARAXIS_FIELD(train.beta1)));
    add(real_key("train.beta2", 0, 0.999999, PARAXIS_FIELD(train.beta2)));
    add(real_key("train.adam_eps", 0, 1, PARAXIS_FIELD(train.adam_eps)));
    add(real_key("train.weight_decay", 0, 1e3, PARAXIS_FIELD(train.weight_decay)));
    add(real_key("train.grad_clip", 0, 1e30, PARAXIS_FIELD(train.grad_clip)));
    add(int_key("train.seed", 0, LLONG_MAX, PARAXIS_FIELD(train.seed)));
    add(int_key("train.corpus_branching", 1, kMaxInt, PARAXIS_FIELD(train.corpus_branching)));
    add(enum_key("train.precision", model::precision_names(), PARAXIS_FIELD(train.precision)));
    add(enum_key("train.recompute", model::recompute_names(), PARAXIS_FIELD(train.recompute)));
    add(int_key("train.recompute_layers", 0, kMaxInt, PARAXIS_FIELD(train.recompute_layers)));
    add(int_key("parallel.tp", 1, kMaxInt, PARAXIS_FIELD(parallel.tp)));
    add(int_key("parallel.pp", 1, kMaxInt, PARAXIS_FIELD(parallel.pp)));
    add(int_key("parallel.dp", 1, kMaxInt, PARAXIS_FIELD(parallel.dp)));
    add(int_key("parallel.ep", 1, kMaxInt, PARAXIS_FIELD(parallel.ep)));
    add(int_key("parallel.zero", 0, config::kMaxZeroStage, PARAXIS_FIELD(parallel.zero)));
    add(enum_key("parallel.schedule", config::schedule_names(), PARAXIS_FIELD(parallel.schedule)));
    add(int_key("parallel.virtual_stages", 1, kMaxInt, PARAXIS_FIELD(parallel.virtual_stages)));
    add(int_list_key("parallel.stage_layers", 0, kMaxInt, PARAXIS_FIELD(parallel.stage_layers)));
    add(bool_key("parallel.sequence_parallel", PARAXIS_FIELD(parallel.sequence_parallel)));
    add(enum_key("parallel.order", config::rank_order_names(), PARAXIS_FIELD(parallel.order)));
    add(enum_key("comm.backend", config::comm_backend_names(), PARAXIS_FIELD(comm.backend)));
    add(real_key("comm.bucket_mb", 1e-6, 1e6, PARAXIS_FIELD(comm.bucket_mb)));
    add(bool_key("comm.overlap", PARAXIS_FIELD(comm.overlap)));
    add(real_key("comm.timeout_s", config::kMinTimeoutS, config::kMaxTimeoutS,
                 PARAXIS_FIELD(comm.timeout_s)));
    add(enum_key("comm.mpi_gpu_aware", config::mpi_gpu_aware_names(),
                 PARAXIS_FIELD(comm.mpi_gpu_aware)));
    add(real_key("hardware.peak_flops", 0, 1e30, PARAXIS_FIELD(hardware.peak_flops)));
    add(enum_key("hardware.gemm", gemm_choice_names(), PARAXIS_FIELD(hardware.gemm)));
    add(bool_key("hardware.calibrate", PARAXIS_FIELD(hardware.calibrate)));
    add(bool_key("hardware.calibration_reuse", PARAXIS_FIELD(hardware.calibration_reuse)));
    add(bool_key("hardware.rerun_misses", PARAXIS_FIELD(hardware.rerun_misses)));
    // Nodes and emulated inter-node links (config::LinkEmulation, docs/diagnosis.md).
    add(int_key("hardware.ranks_per_node", 0, kMaxInt, PARAXIS_FIELD(comm.links.ranks_per_node)));
    add(real_key("hardware.emulate.latency_us", 0, 1e9, PARAXIS_FIELD(comm.links.latency_us)));
    add(real_key("hardware.emulate.bandwidth_gbs", 0, 1e9,
                 PARAXIS_FIELD(comm.links.bandwidth_gbs)));
    add(int_or_auto_key("checkpoint.every", 0, kMaxInt, kCheckpointAuto,
                        PARAXIS_FIELD(checkpoint.every)));
    add(string_key("checkpoint.dir", PARAXIS_FIELD(checkpoint.dir)));
    add(int_key("checkpoint.keep", 1, kMaxInt, PARAXIS_FIELD(checkpoint.keep)));
    add(bool_key("checkpoint.async", PARAXIS_FIELD(checkpoint.async)));
    add(real_key("checkpoint.device_mtbf_h", 0, 1e12, PARAXIS_FIELD(checkpoint.device_mtbf_h)));
    add(string_key("output.dir", PARAXIS_FIELD(output.dir)));
    add(bool_key("output.trace", PARAXIS_FIELD(output.trace)));
    // Fault injection, a map keyed by kind (fault.slow_rank and fault.slow_link go beside).
    add(int_key("fault.dead_rank.rank", -1, kMaxInt, PARAXIS_FIELD(fault.dead_rank.rank)));
    add(int_key("fault.dead_rank.step", 0, kMaxInt, PARAXIS_FIELD(fault.dead_rank.step)));
    add(enum_key("fault.dead_rank.at", dead_at_names(), PARAXIS_FIELD(fault.dead_rank.at)));
    add(int_key("fault.hang.rank", -1, kMaxInt, PARAXIS_FIELD(fault.hang.rank)));
    add(int_key("fault.hang.step", 0, kMaxInt, PARAXIS_FIELD(fault.hang.step)));
    add(int_key("fault.slow_rank.rank", -1, kMaxInt, PARAXIS_FIELD(fault.slow_rank.rank)));
    add(real_key("fault.slow_rank.factor", 1, 1e6, PARAXIS_FIELD(fault.slow_rank.factor)));
    add(int_key("fault.slow_rank.from_step", 0, kMaxInt, PARAXIS_FIELD(fault.slow_rank.from_step)));
    add(int_key("fault.slow_rank.to_step", -1, kMaxInt, PARAXIS_FIELD(fault.slow_rank.to_step)));
    add(int_list_key("fault.slow_link.ranks", 0, kMaxInt, PARAXIS_FIELD(comm.links.slow_ranks)));
    add(int_list_key("fault.slow_link.nodes", 0, kMaxInt, PARAXIS_FIELD(comm.links.slow_nodes)));
    add(real_key("fault.slow_link.latency_us", 0, 1e9, PARAXIS_FIELD(comm.links.slow_latency_us)));
    add(real_key("fault.slow_link.bandwidth_factor", 0, 1,
                 PARAXIS_FIELD(comm.links.slow_bandwidth_factor), true));
    add(enum_key("fault.slow_axis.axis", config::slow_axis_names(),
                 PARAXIS_FIELD(comm.links.slow_axis)));
    add(real_key("fault.slow_axis.factor", 1, 1e6, PARAXIS_FIELD(comm.links.slow_axis_factor)));
    return t;
  }();
  return table;
}

#undef PARAXIS_FIELD

}  // namespace paraxis::driver::deck_keys
