// reference_dump: what the PyTorch reference (tools/reference/) compares paraxis against, from
// one deck on one rank in fp64. It writes, under OUT:
//   checkpoints/step-0/   the initial state, by the driver's own checkpoint writer
//                         (driver/point_checkpoint.hpp: index.json + rank-<R>.bin)
//   checkpoints/step-N/   the state after N steps, the same way
//   tokens.i32, targets.i32  every step's global batch [N, global_batch, seq_len] (int32 LE)
//   logits.f64            step 0, first micro-batch: [micro_batch * seq_len, vocab] (f64 LE)
//   gradients.f64         step 0's gradients before clipping, tensor after tensor (f64 LE)
//   dump.json             the manifest: config, shapes, offsets, each step's losses
// docs/model.md, "Checked against PyTorch", describes the comparison.
//
// Usage: reference_dump DECK OUT [--steps N] [--tied-router] [--set key=value]...
// --tied-router: every MoE router (and router bias) starts at 0, so at step 0 every token's router
// probabilities tie (1/experts each): the top-k rule's ties and a capacity overrun follow.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/lineage.hpp"
#include "deck/deck.hpp"
#include "driver/checkpoint_claim.hpp"
#include "driver/point_checkpoint.hpp"
#include "model/gpt_model.hpp"
#include "model/param_layout.hpp"
#include "model/shard_layout.hpp"
#include "model/trainer.hpp"

namespace {

using nlohmann::json;
using paraxis::driver::RunConfig;

struct Args {
  std::string deck, out;
  int steps = 10;
  bool tied_router = false;
  std::vector<std::string> sets;
};

Args parse_args(int argc, char** argv) {
  Args a;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--tied-router") {
      a.tied_router = true;
    } else if ((s == "--steps" || s == "--set") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (s == "--steps")
        a.steps = std::stoi(v);
      else
        a.sets.push_back(v);
    } else {
      rest.push_back(s);
    }
  }
  if (rest.size() != 2 || a.steps < 1)
    throw std::invalid_argument(
        "usage: reference_dump DECK OUT [--steps N >= 1] [--tied-router] [--set key=value]...");
  a.deck = rest[0];
  a.out = rest[1];
  return a;
}

// The deck's one point in fp64 (the reference compares fp64), keeping both checkpoints.
RunConfig load_config(const Args& a) {
  std::vector<std::string> sets = a.sets;
  sets.push_back("train.precision=fp64");
  sets.push_back("checkpoint.keep=2");
  const auto deck = paraxis::driver::load_deck(a.deck, sets, 1);
  if (!deck.errors.empty()) throw std::invalid_argument(deck.errors.front().to_string());
  if (deck.points.size() != 1)
    throw std::invalid_argument(a.deck + ": a deck of one point is expected (no sweep)");
  const RunConfig& cfg = deck.points.front().config;
  if (cfg.parallel.world() != 1)
    throw std::invalid_argument(a.deck + ": one rank is expected (tp = pp = dp = 1)");
  return cfg;
}

bool is_router(const std::string& name) {
  const auto ends = [&](const std::string& tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends(".moe.router") || ends(".moe.router_bias");
}

// The trainer's state through memory, the routers' master copies set to 0 on the way.
class TiedRouterState final : public paraxis::model::StateSink, public paraxis::model::StateSource {
 public:
  void add(const paraxis::model::StatePiece& p, const void* data, std::size_t bytes) override {
    const char* c = static_cast<const char*>(data);
    std::vector<char> v(c, c + bytes);
    if (p.tensor.rfind("master/", 0) == 0 && is_router(p.tensor)) std::fill(v.begin(), v.end(), 0);
    pieces_[key(p)] = std::move(v);
  }
  void read(const paraxis::model::StatePiece& p, void* out, std::size_t bytes) const override {
    const auto& v = pieces_.at(key(p));
    if (v.size() != bytes) throw std::logic_error("TiedRouterState: " + p.tensor + " changed size");
    std::copy(v.begin(), v.end(), static_cast<char*>(out));
  }

 private:
  static std::string key(const paraxis::model::StatePiece& p) {
    std::string k = p.tensor;
    for (auto o : p.offset) k += "," + std::to_string(o);
    return k;
  }
  std::map<std::string, std::vector<char>> pieces_;
};

void tie_routers(paraxis::model::Trainer& trainer) {
  TiedRouterState state;
  trainer.save_state(state);
  trainer.load_state(state, 0);
}

void tie_routers(paraxis::model::GptModel<double>& model) {
  auto& ps = model.params();
  for (int i = 0; i < static_cast<int>(ps.specs().size()); ++i)
    if (is_router(ps.spec(i).name)) Kokkos::deep_copy(ps.w1(i), 0.0);
  Kokkos::fence();
}

void write_raw(const std::string& path, const void* data, std::size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!f) throw std::runtime_error("cannot write " + path);
}

// Every step's global batch, as the trainer samples it (model/trainer.hpp).
json write_batches(const RunConfig& cfg, const paraxis::model::SyntheticCorpus& corpus, int steps,
                   const std::string& out) {
  const int B = cfg.train.global_batch, S = cfg.model.seq_len;
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(steps) * B * S), targets(tokens.size());
  std::vector<int> tok(static_cast<std::size_t>(B) * S), tgt(tok.size());
  for (int t = 0; t < steps; ++t) {
    paraxis::model::sample_micro_batch(corpus, S, static_cast<std::uint64_t>(t) * B, B, tok.data(),
                                       tgt.data());
    std::copy(tok.begin(), tok.end(), tokens.begin() + static_cast<std::ptrdiff_t>(t) * B * S);
    std::copy(tgt.begin(), tgt.end(), targets.begin() + static_cast<std::ptrdiff_t>(t) * B * S);
  }
  write_raw(out + "/tokens.i32", tokens.data(), tokens.size() * sizeof(std::int32_t));
  write_raw(out + "/targets.i32", targets.data(), targets.size() * sizeof(std::int32_t));
  return {{"shape", {steps, B, S}}, {"tokens", "tokens.i32"}, {"targets", "targets.i32"}};
}

// The logits of step 0's first micro-batch, from a model initialised as the trainer's is.
json write_logits(const RunConfig& cfg, const paraxis::model::SyntheticCorpus& corpus,
                  bool tied_router, const std::string& out) {
  using Model = paraxis::model::GptModel<double>;
  const int mb = cfg.train.micro_batch, N = mb * cfg.model.seq_len;
  Model model(cfg.model, mb);
  model.initialize(cfg.train.seed);
  if (tied_router) tie_routers(model);
  Model::Tokens tokens("tokens", N), targets("targets", N);
  auto th = Kokkos::create_mirror_view(tokens);
  auto gh = Kokkos::create_mirror_view(targets);
  paraxis::model::sample_micro_batch(corpus, cfg.model.seq_len, 0, mb, th.data(), gh.data());
  Kokkos::deep_copy(tokens, th);
  Kokkos::deep_copy(targets, gh);
  const auto r = model.forward_chunk(0, 0, tokens, targets);
  const auto logits =
      Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.chunk_logits(0, 0));
  model.discard(0, 0);
  std::vector<double> flat(static_cast<std::size_t>(N) * cfg.model.vocab);
  for (int n = 0; n < N; ++n)
    for (int v = 0; v < cfg.model.vocab; ++v)
      flat[static_cast<std::size_t>(n) * cfg.model.vocab + v] = logits(n, v);
  write_raw(out + "/logits.f64", flat.data(), flat.size() * sizeof(double));
  return {{"file", "logits.f64"}, {"shape", {N, cfg.model.vocab}}, {"ce_sum", r.ce_sum}};
}

// Tensor names, shapes and offsets (elements) in Trainer::parameters() / gradients() order.
json tensor_list(const RunConfig& cfg) {
  json list = json::array();
  std::size_t offset = 0;
  for (const auto& s :
       paraxis::model::parameter_specs(cfg.model, paraxis::model::ShardLayout::whole(cfg.model))) {
    list.push_back(
        {{"name", s.name}, {"shape", paraxis::model::logical_shape(s)}, {"offset", offset}});
    offset += s.size();
  }
  return list;
}

json step_json(const paraxis::model::StepResult& r) {
  return {{"step", r.step},         {"loss", r.loss},           {"lm_loss", r.lm_loss},
          {"aux_loss", r.aux_loss}, {"grad_norm", r.grad_norm}, {"dropped", r.moe.dropped}};
}

// The dump is one run: its checkpoints are one lineage (docs/checkpoint.md, "Runs, lineages and
// the lock"), started by this run.
void save(const RunConfig& cfg, const paraxis::model::Trainer& trainer, const std::string& root,
          int steps) {
  static const std::string run = paraxis::checkpoint::new_run_id();
  paraxis::driver::PointLineage lineage;
  lineage.lineage.id = lineage.lineage.run = run;
  paraxis::driver::CheckpointSave(cfg, trainer, root, lineage, steps, /*async=*/false).finish();
}

void dump(const Args& a) {
  const RunConfig cfg = load_config(a);
  std::filesystem::create_directories(a.out);
  const std::string root = a.out + "/checkpoints";
  std::filesystem::remove_all(root);  // an earlier dump's later steps would outrank step 0 (keep)
  auto trainer = paraxis::model::make_trainer(cfg.model, cfg.train);
  if (a.tied_router) tie_routers(*trainer);
  save(cfg, *trainer, root, 0);
  json manifest = {{"format", "paraxis-reference-dump"},
                   {"version", 1},
                   {"deck", a.deck},
                   {"sets", a.sets},
                   {"tied_router", a.tied_router},
                   {"config", paraxis::driver::config_to_json(cfg)},
                   {"steps", a.steps},
                   {"initial", "checkpoints/step-0"},
                   {"final", "checkpoints/step-" + std::to_string(a.steps)}};
  manifest["batches"] = write_batches(cfg, trainer->corpus(), a.steps, a.out);
  manifest["logits"] = write_logits(cfg, trainer->corpus(), a.tied_router, a.out);
  manifest["tensors"] = tensor_list(cfg);
  json history = json::array();
  for (int t = 0; t < a.steps; ++t) {
    history.push_back(step_json(trainer->step()));
    if (t > 0) continue;
    const std::vector<double> g = trainer->gradients();
    write_raw(a.out + "/gradients.f64", g.data(), g.size() * sizeof(double));
    manifest["gradients"] = "gradients.f64";
  }
  manifest["history"] = history;
  save(cfg, *trainer, root, a.steps);
  std::ofstream(a.out + "/dump.json") << manifest.dump(1) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    try {
      dump(parse_args(argc, argv));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reference_dump: %s\n", e.what());
      rc = 1;
    }
  }
  MPI_Finalize();
  return rc;
}
