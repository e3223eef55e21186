// The step metrics of the parallel trainer (parallel_trainer_metrics.hpp).
#include "parallel/parallel_trainer_metrics.hpp"

#include <algorithm>
#include <map>

namespace paraxis::parallel {

void StepTally::add(const model::MicroBatchResult& mr, int global_mb, bool head) {
  if (head) ce_sum += mr.ce_sum;
  aux_sum += mr.aux_sum;
  for (const auto& st : mr.moe) {
    for (std::size_t e = 0; e < expert_tokens.size(); ++e) {
      expert_tokens[e] += st.tokens_per_expert[e];
      expert_dropped[e] += st.dropped_per_expert[e];
    }
    if (!st.routing.empty()) {
      routing.push_back(global_mb);
      routing.push_back(st.layer);
      routing.push_back(static_cast<int>(st.routing.size()));
      routing.insert(routing.end(), st.routing.begin(), st.routing.end());
    }
  }
}

void finish_step_metrics(const StepTally& tally, bool counts, const model::ModelConfig& mcfg,
                         const model::TrainConfig& tcfg, bool record_routing, Communicator& metrics,
                         MPI_Comm world, model::StepResult& r) {
  const int total_micro = tcfg.micro_batches_per_step();
  double sums[2] = {counts ? tally.ce_sum : 0.0, counts ? tally.aux_sum : 0.0};
  std::vector<long long> moe = tally.expert_tokens;  // then the dropped, per expert
  moe.insert(moe.end(), tally.expert_dropped.begin(), tally.expert_dropped.end());
  if (!counts) std::fill(moe.begin(), moe.end(), 0);
  metrics.all_reduce(sums, sums, 2, DType::f64);
  metrics.all_reduce(moe.data(), moe.data(), moe.size(), DType::i64);
  if (record_routing && mcfg.moe.experts > 0) {
    // Records of every rank, in single-rank order: micro-batch, then layer.
    const auto all = all_gather_v(counts ? tally.routing : std::vector<int>{}, MPI_INT, world);
    std::map<std::pair<int, int>, std::pair<std::size_t, int>> order;
    for (std::size_t k = 0; k < all.size(); k += 3 + static_cast<std::size_t>(all[k + 2]))
      order[{all[k], all[k + 1]}] = {k + 3, all[k + 2]};
    for (const auto& [key, where] : order)
      r.routing.insert(r.routing.end(), all.begin() + static_cast<std::ptrdiff_t>(where.first),
                       all.begin() + static_cast<std::ptrdiff_t>(where.first + where.second));
  }
  const double ce_scale = 1.0 / (static_cast<double>(tcfg.global_batch) * mcfg.seq_len);
  r.lm_loss = sums[0] * ce_scale;
  r.aux_loss = sums[1] / total_micro;
  r.loss = r.lm_loss + mcfg.moe.aux_loss_coef * r.aux_loss;
  const int E = mcfg.moe.experts;
  if (E > 0) {
    r.moe = model::moe_step_stats(std::vector<long long>(moe.begin(), moe.begin() + E),
                                  std::vector<long long>(moe.begin() + E, moe.end()));
  }
}

}  // namespace paraxis::parallel
