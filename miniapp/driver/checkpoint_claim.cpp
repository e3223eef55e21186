// The run's claim on its checkpoint roots (checkpoint_claim.hpp): lineages, locks and the
// ownership check, made on rank 0 and broadcast.
#include "driver/checkpoint_claim.hpp"

#include <mpi.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "checkpoint/reader.hpp"
#include "checkpoint/root_layout.hpp"
#include "driver/point_checkpoint.hpp"

namespace paraxis::driver {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool saves(const RunConfig& cfg) {
  return cfg.checkpoint.every != 0;
}

// Rank 0: the lineage of a point, from --resume (resolved here once) and --new-lineage.
PointLineage point_lineage(const RunConfig& cfg, const std::string& root, const RunOptions& opt,
                           const std::string& run_id) {
  PointLineage p;
  checkpoint::Lineage parent;
  long parent_step = -1;
  if (!opt.resume.empty()) {
    p.resume = checkpoint::resolve_checkpoint(opt.resume == "latest" ? root : opt.resume);
    const checkpoint::Reader reader(p.resume);  // refuses a damaged index or data file now
    parent = reader.index().lineage;
    parent_step = reader.step();
    std::error_code ec;
    if (fs::equivalent(fs::path(p.resume).parent_path(), root, ec))
      p.protect = fs::path(p.resume).filename().string();
  } else if (!saves(cfg)) {
    return p;  // neither saves nor resumes: no lineage
  }
  p.lineage.run = run_id;
  // A resumed run continues its parent's lineage, unless told to start one (or the parent was
  // written before lineages were recorded).
  const bool continues = parent_step >= 0 && !parent.id.empty() && !opt.new_lineage;
  p.lineage.id = continues ? parent.id : run_id;
  if (parent_step >= 0) {
    p.lineage.parent_run = parent.run;
    p.lineage.parent_step = parent_step;
  }
  return p;
}

std::string ownership_refusal(const std::string& root, const PointLineage& p,
                              const RunOptions& opt) {
  const long resumed =
      p.lineage.parent_step >= 0 && p.lineage.id != p.lineage.run ? p.lineage.parent_step : -1;
  auto foreign =
      checkpoint::foreign_checkpoints(checkpoint::lineage_records(root), {p.lineage.id, resumed});
  // Resumed from a checkpoint of this root written before lineages: that root's other such
  // checkpoints up to its step are its history too (they stay: no lineage prunes them).
  if (!p.protect.empty() && p.lineage.parent_step >= 0 && p.lineage.parent_run.empty())
    foreign.erase(std::remove_if(foreign.begin(), foreign.end(),
                                 [&](const checkpoint::CheckpointRecord& r) {
                                   return r.problem.empty() && r.lineage.id.empty() &&
                                          r.step <= p.lineage.parent_step;
                                 }),
                  foreign.end());
  if (foreign.empty() || opt.new_lineage) return "";
  std::string list;
  bool branch = false;
  for (std::size_t i = 0; i < foreign.size(); ++i) {
    branch = branch || (foreign[i].problem.empty() && foreign[i].lineage.id == p.lineage.id);
    if (i < 3) list += (i ? ", " : "") + checkpoint::describe(foreign[i]);
  }
  if (foreign.size() > 3) list += " (" + std::to_string(foreign.size()) + " in all)";
  std::string s = "checkpoint.dir '" + root + "' holds checkpoints this run (" + p.lineage.run +
                  ") did not write and would not continue: " + list;
  if (branch)
    s += " (its own lineage's after step " + std::to_string(resumed) +
         ", which it resumes from: continuing from there in this folder would fork it)";
  s += ". It refuses to write there: continue that run with --resume " + foreign.back().path +
       ", set another checkpoint.dir, or give --new-lineage to start a new lineage beside "
       "them (a run only ever prunes its own lineage's checkpoints)";
  if (opt.force) s += "; --force removes earlier results in --out, never checkpoints";
  return s;
}

// Rank 0: the whole claim, or the refusal (thrown as std::runtime_error).
void claim_on_rank0(const Deck& deck, const std::string& out_dir, const RunOptions& opt,
                    CheckpointClaim& claim) {
  const std::size_t total = deck.points.size();
  for (std::size_t i = 0; i < total; ++i) {
    const SweepPoint& point = deck.points[i];
    if (!point.skip_reason.empty()) {
      claim.points.emplace_back();
      continue;
    }
    const std::string root = checkpoint_root(point.config, out_dir, i, total);
    claim.points.push_back(point_lineage(point.config, root, opt, claim.run_id));
    if (!saves(point.config)) continue;
    std::string note;
    claim.locks.push_back(std::make_unique<checkpoint::FolderLock>(root, claim.run_id, note));
    if (!note.empty()) claim.notes.push_back("checkpoint.dir '" + root + "': " + note);
    const std::string refusal = ownership_refusal(root, claim.points.back(), opt);
    if (!refusal.empty()) throw std::runtime_error(refusal);
  }
}

json to_json(const PointLineage& p) {
  return {
      {"lineage", checkpoint::to_json(p.lineage)}, {"protect", p.protect}, {"resume", p.resume}};
}

PointLineage point_from_json(const json& j) {
  return PointLineage{checkpoint::lineage_from_json(j.at("lineage")),
                      j.at("protect").get<std::string>(), j.at("resume").get<std::string>()};
}

}  // namespace

json lineage_json(const PointLineage& p) {
  return checkpoint::to_json(p.lineage);
}

std::string claim_checkpoints(const Deck& deck, const std::string& out_dir, const RunOptions& opt,
                              CheckpointClaim& claim) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string message;
  if (rank == 0) {
    json j;
    try {
      claim.run_id = checkpoint::new_run_id();
      claim_on_rank0(deck, out_dir, opt, claim);
      j["run_id"] = claim.run_id;
      j["points"] = json::array();
      for (const auto& p : claim.points) j["points"].push_back(to_json(p));
    } catch (const std::exception& e) {
      claim.locks.clear();  // released: this run will not write
      j = {{"error", e.what()}};
    }
    message = j.dump();
  }
  long long n = static_cast<long long>(message.size());
  MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  message.resize(static_cast<std::size_t>(n));
  MPI_Bcast(message.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD);
  const json j = json::parse(message);
  if (j.contains("error")) return j.at("error").get<std::string>();
  claim.run_id = j.at("run_id").get<std::string>();
  claim.points.clear();
  for (const auto& p : j.at("points")) claim.points.push_back(point_from_json(p));
  return "";
}

}  // namespace paraxis::driver
