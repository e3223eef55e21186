// Whole-model gradient check in fp64: the backward pass of GptModel against central finite
// differences of the loss, for a dense model and an MoE model (dropless, top-2).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/gpt_model.hpp"
#include "model/init_rng.hpp"
#include "model/synthetic_corpus.hpp"

using namespace paraxis::model;

namespace {

using Model = GptModel<double>;

struct Harness {
  ModelConfig cfg;
  int micro_batch = 2;
  std::unique_ptr<Model> model;
  Model::Tokens tokens, targets;
  double ce_scale = 0, aux_scale = 0;

  explicit Harness(const ModelConfig& c) : cfg(c) {
    model = std::make_unique<Model>(cfg, micro_batch);
    model->initialize(99);
    const int N = micro_batch * cfg.seq_len;
    tokens = Model::Tokens("tokens", N);
    targets = Model::Tokens("targets", N);
    auto th = Kokkos::create_mirror_view(tokens);
    auto gh = Kokkos::create_mirror_view(targets);
    SyntheticCorpus corpus(cfg.vocab, 4, 5);
    std::vector<int> seq(cfg.seq_len + 1);
    for (int b = 0; b < micro_batch; ++b) {
      corpus.sample(b, cfg.seq_len, seq.data());
      for (int s = 0; s < cfg.seq_len; ++s) {
        th(b * cfg.seq_len + s) = seq[s];
        gh(b * cfg.seq_len + s) = seq[s + 1];
      }
    }
    Kokkos::deep_copy(tokens, th);
    Kokkos::deep_copy(targets, gh);
    ce_scale = 1.0 / N;
    aux_scale = 0.1;  // a large coefficient so the auxiliary gradient is visible
  }

  double loss() {
    const auto r = model->forward(tokens, targets);
    return ce_scale * r.ce_sum + aux_scale * r.aux_sum;
  }

  void check(int samples_per_tensor) {
    auto& ps = model->params();
    ps.zero_grads();
    model->forward_backward(tokens, targets, ce_scale, aux_scale);
    auto grad = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ps.grad);
    auto param = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ps.param);
    const double eps = 1e-5;
    int checked = 0;
    for (const auto& spec : ps.specs()) {
      const auto key = stream_key(3, spec.name);
      for (int s = 0; s < samples_per_tensor; ++s) {
        const std::size_t i =
            spec.offset + static_cast<std::size_t>(uniform01(key, s) * spec.size());
        const double p0 = param(i);
        param(i) = p0 + eps;
        Kokkos::deep_copy(ps.param, param);
        const double lp = loss();
        param(i) = p0 - eps;
        Kokkos::deep_copy(ps.param, param);
        const double lm = loss();
        param(i) = p0;
        Kokkos::deep_copy(ps.param, param);
        const double fd = (lp - lm) / (2 * eps);
        const double tol = 1e-6 + 1e-4 * std::fabs(fd);
        EXPECT_NEAR(grad(i), fd, tol) << spec.name << " element " << (i - spec.offset);
        ++checked;
      }
    }
    EXPECT_GT(checked, 0);
  }
};

ModelConfig micro_config() {
  ModelConfig c;
  c.vocab = 23;
  c.seq_len = 6;
  c.hidden = 12;
  c.heads = 3;
  c.layers = 2;
  c.ffn = 20;
  return c;
}

}  // namespace

TEST(gradient_check, dense_model_matches_finite_differences_fp64) {
  Harness h(micro_config());
  h.check(4);
}

TEST(gradient_check, moe_model_matches_finite_differences_fp64) {
  ModelConfig c = micro_config();
  c.moe.experts = 4;
  c.moe.top_k = 2;
  c.moe.every = 1;
  c.moe.capacity_factor = 0;
  Harness h(c);
  h.check(4);
}

TEST(gradient_check, moe_with_capacity_matches_finite_differences_fp64) {
  ModelConfig c = micro_config();
  c.moe.experts = 3;
  c.moe.top_k = 1;
  c.moe.every = 2;
  c.moe.capacity_factor = 1.0;  // some tokens are dropped: the residual carries them
  Harness h(c);
  h.check(3);
}
