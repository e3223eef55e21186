// Checkpoints of a point (point_checkpoint.hpp): the trainers' state pieces
// (model/state_pieces.hpp) to and from the checkpoint files (checkpoint/writer.hpp,
// checkpoint/reader.hpp), and the figures of every save and restore.
#include "driver/point_checkpoint.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "checkpoint/posix_file.hpp"
#include "checkpoint/read_once.hpp"
#include "checkpoint/reader.hpp"
#include "checkpoint/root_layout.hpp"
#include "checkpoint/writer.hpp"
#include "config/exit_codes.hpp"
#include "deck/deck.hpp"
#include "driver/last_words.hpp"
#include "driver/resume_keys.hpp"
#include "model/gpt_model.hpp"
#include "parallel/watchdog.hpp"
#include "perfmodel/checkpoint.hpp"

namespace paraxis::driver {

using nlohmann::json;

namespace {

checkpoint::Shard shard_of(const model::StatePiece& p) {
  checkpoint::Shard s;
  s.tensor = {p.tensor, p.shape, p.dtype};
  s.offset = p.offset;
  s.extent = p.extent;
  return s;
}

class WriterSink final : public model::StateSink {
 public:
  explicit WriterSink(checkpoint::Writer& w) : w_(w) {}
  void add(const model::StatePiece& p, const void* data, std::size_t bytes) override {
    w_.add(shard_of(p), data, bytes);
  }

 private:
  checkpoint::Writer& w_;
};

// The second pass of a resume (the only one on one rank): read_later's reads wait for settle(),
// which makes them in file order; a whole saved shard this rank's HostReads thread reads from
// storage anyway (read once, docs/checkpoint.md) goes straight into its place there.
class ReaderSource final : public model::StateSource {
 public:
  ReaderSource(const checkpoint::Reader& r, checkpoint::HostReads* reads) : r_(r), reads_(reads) {}
  void read(const model::StatePiece& p, void* out, std::size_t bytes) const override {
    // It may wait for a shard another rank's thread reads: this rank's runs too, without places
    // (the load may end before settle()).
    unplace();
    r_.read_into(shard_of(p), out, bytes);
  }
  void read_later(const model::StatePiece& p, void* out, std::size_t bytes) const override {
    const checkpoint::Shard region = shard_of(p);
    const long s = r_.whole_shard(region, bytes);
    const bool placed = s >= 0 && reads_ &&
                        reads_->place(static_cast<std::size_t>(s), static_cast<std::byte*>(out));
    later_.push_back(
        {region, out, bytes, s >= 0 ? s : static_cast<long>(r_.shards_of(region)[0]), placed});
  }
  void settle() const override;
  std::size_t unsettled() const { return later_.size(); }

 private:
  struct Later {
    checkpoint::Shard region;
    void* out;
    std::size_t bytes;
    long shard;   // the whole saved shard, else the first it overlaps (its place in the files)
    bool placed;  // read by this rank's HostReads thread
  };
  void unplace() const {
    if (!reads_) return;
    reads_->abandon();
    for (auto& l : later_) l.placed = false;
    reads_->start();
  }
  const checkpoint::Reader& r_;
  checkpoint::HostReads* reads_;
  mutable std::vector<Later> later_;
};

void ReaderSource::settle() const {
  if (reads_) reads_->start();
  std::vector<const Later*> order;
  for (const auto& l : later_)
    if (!l.placed) order.push_back(&l);
  std::stable_sort(order.begin(), order.end(), [&](const Later* a, const Later* b) {
    const auto &x = r_.shard(static_cast<std::size_t>(a->shard)),
               &y = r_.shard(static_cast<std::size_t>(b->shard));
    return std::tie(x.file, x.byte_offset) < std::tie(y.file, y.byte_offset);
  });
  try {
    for (const Later* l : order) r_.read_into(l->region, l->out, l->bytes);
    for (const auto& l : later_)
      if (l.placed) reads_->wait_placed(static_cast<std::size_t>(l.shard));
  } catch (...) {
    if (reads_) reads_->abandon();  // no write into the places once this throws
    later_.clear();
    throw;
  }
  later_.clear();
}

// The first of a resume's two passes over the trainer's pieces (read once, docs/checkpoint.md):
// it records which saved shards this rank's pieces need, and how often, and fills nothing (the
// second pass, with a ReaderSource, sets every element the first one left).
class NeedsSource final : public model::StateSource {
 public:
  explicit NeedsSource(const checkpoint::Reader& r) : r_(r) {}
  void read(const model::StatePiece& p, void*, std::size_t) const override {
    for (const std::size_t s : r_.shards_of(shard_of(p))) needed_.insert(s);
  }
  bool fills() const override { return false; }
  // Sorted, a shard needed more than once named twice (read_once.hpp).
  std::vector<std::size_t> needed() const {
    std::vector<std::size_t> out;
    for (auto it = needed_.begin(); it != needed_.end(); it = needed_.upper_bound(*it)) {
      out.push_back(*it);
      if (needed_.count(*it) > 1) out.push_back(*it);
    }
    return out;
  }

 private:
  const checkpoint::Reader& r_;
  mutable std::multiset<std::size_t> needed_;
};

// {min, mean, max} of x over MPI_COMM_WORLD.
json spread(double x) {
  double lo = x, hi = x, sum = x;
  namespace wd = parallel::watchdog;
  wd::all_reduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD, "checkpoint figures");
  wd::all_reduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, "checkpoint figures");
  wd::all_reduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, "checkpoint figures");
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return {{"min", lo}, {"mean", sum / n}, {"max", hi}};
}

json grid_of(const RunConfig& c) {
  const json all = config_to_json(c);
  return {{"parallel", all.at("parallel")}, {"world", c.parallel.world()}};
}

// Refuses a checkpoint whose configuration this run may not continue (resume_keys.hpp) and
// returns the differences it may: {key: {checkpoint, now, change}}; rank 0 warns of those
// that change what is trained.
json check_compatible(const json& saved, const RunConfig& cfg, const std::string& folder,
                      bool say) {
  json changed = json::object();
  std::vector<ResumeDifference> diffs;
  try {
    diffs = resume_differences(saved, config_to_json(cfg));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("checkpoint " + folder + ": " + e.what());
  }
  for (const auto& d : diffs) {
    if (d.change == ResumeChange::refused)
      throw std::runtime_error("checkpoint " + folder + " was written with " + d.key + " = " +
                               d.checkpoint.dump() + ", this run has " + d.now.dump() +
                               ": it cannot continue from it (" + d.why + ")");
    if (d.change == ResumeChange::warned && say)
      std::fprintf(stderr,
                   "paraxis: warning: resuming %s with %s = %s (it was written with %s): %s\n",
                   folder.c_str(), d.key.c_str(), d.now.dump().c_str(), d.checkpoint.dump().c_str(),
                   d.why.c_str());
    changed[d.key] = {
        {"checkpoint", d.checkpoint}, {"now", d.now}, {"change", to_string(d.change)}};
  }
  return changed;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Every rank learns whether any rank failed (`error`: this rank's message, "" for none); then
// every rank throws, and the lowest rank that has a message of its own prints it.
void agree(const std::string& error, const char* what) {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int reporter = error.empty() ? n : world_rank();
  parallel::watchdog::all_reduce(MPI_IN_PLACE, &reporter, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD,
                                 what);
  if (reporter == n) return;
  throw CheckpointError(
      error.empty() ? "rank " + std::to_string(reporter) + " could not use the checkpoint" : error,
      exit_code::bad_input, reporter == world_rank());
}

// One trial of the filesystem's own speed for this rank's checkpoint bytes: the same number of
// bytes written to a fresh file in the root (posix::OutFile: 8 MiB writes, direct where taken, then
// fsync, as the checkpoint's data file is written), its pages dropped (posix_fadvise DONTNEED, as a
// resume after eviction), read back sequentially, removed. {write_s, read_s} of this rank; `error`
// set on failure.
std::pair<double, double> baseline_trial(const std::string& path, std::size_t total,
                                         std::string& error) {
  constexpr std::size_t kChunk = 8u << 20;
  std::vector<char> buf(kChunk, 'x');
  double write_s = 0, read_s = 0;
  try {
    const double t0 = model::steady_seconds();
    {
      checkpoint::posix::OutFile f(path);
      for (std::size_t at = 0; at < total; at += kChunk)
        f.append(buf.data(), std::min(kChunk, total - at));
      f.sync_and_close();
    }
    write_s = model::steady_seconds() - t0;
    checkpoint::posix::drop_cached(path);
    const double t1 = model::steady_seconds();
    for (std::size_t at = 0; at < total; at += kChunk)
      checkpoint::posix::read_at(path, static_cast<std::int64_t>(at), std::min(kChunk, total - at),
                                 buf.data(), "the baseline file");
    read_s = model::steady_seconds() - t1;
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::remove(path.c_str());
  return {write_s, read_s};
}

}  // namespace

std::string checkpoint_root(const RunConfig& cfg, const std::string& out_dir, std::size_t index,
                            std::size_t total) {
  std::string root = cfg.checkpoint.dir.empty() ? out_dir + "/checkpoints" : cfg.checkpoint.dir;
  if (total > 1) root += "/point-" + std::to_string(index);
  return root;
}

json io_baseline(const std::string& root, const json& save, int trials) {
  const auto total = static_cast<std::size_t>(save.at("bytes").at("max").get<double>());
  std::vector<json> runs;
  std::vector<double> slowest;  // per trial: the slowest rank's write time
  std::string error;
  for (int t = 0; t < trials; ++t) {
    const std::string path =
        root + "/baseline-rank" + std::to_string(world_rank()) + "-" + std::to_string(t) + ".tmp";
    parallel::watchdog::barrier(MPI_COMM_WORLD, "checkpoint baseline");
    const auto [w, r] = baseline_trial(path, total, error);
    runs.push_back({{"write_s", spread(w)}, {"read_s", spread(r)}});
    slowest.push_back(runs.back()["write_s"]["max"].get<double>());
  }
  // The median trial by its slowest write; every trial's figure kept: the disk's own spread.
  std::vector<std::size_t> order(runs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return slowest[a] < slowest[b]; });
  json out = runs[order[order.size() / 2]];
  out["trials"] = trials;
  out["write_s_trials"] = slowest;
  const double all = save.at("total_bytes").get<double>();
  const double base_write = out["write_s"]["max"].get<double>();
  const double ckpt_write = save.at("write_s").at("max").get<double>();
  out["write_bytes_per_s"] = base_write > 0 ? all / base_write : 0.0;
  out["checkpoint_to_baseline_write"] = ckpt_write > 0 ? base_write / ckpt_write : 0.0;
  if (!error.empty()) out["error"] = error;
  return out;
}

// Pieces copied into host memory, for a thread to write while training goes on. The copies go
// into one buffer kept for the process's next saves (a save is committed before the next one
// stages), so that only the first save pays for fresh pages: staging runs at memory-copy speed.
class StagingSink final : public model::StateSink {
 public:
  void add(const model::StatePiece& p, const void* data, std::size_t bytes) override {
    std::vector<char>& arena = buffer();
    if (bytes_ + bytes > arena.size()) arena.resize(std::max(bytes_ + bytes, 2 * arena.size()));
    std::memcpy(arena.data() + bytes_, data, bytes);
    pieces_.push_back({shard_of(p), {bytes_, bytes}});
    bytes_ += bytes;
  }
  const char* at(std::size_t offset) const { return buffer().data() + offset; }
  std::vector<std::pair<checkpoint::Shard, std::pair<std::size_t, std::size_t>>> pieces_;
  std::size_t bytes_ = 0;

 private:
  static std::vector<char>& buffer() {
    static std::vector<char> arena;
    return arena;
  }
};

struct CheckpointSave::Impl {
  RunConfig cfg;
  std::string root;
  int steps = 0;
  bool async = false;
  double begin_s = 0, staged_s = 0;
  std::size_t staged_bytes = 0;
  std::unique_ptr<checkpoint::Writer> writer;
  StagingSink staged;
  std::thread thread;
  std::atomic<bool> written{false};  // the thread wrote and fsynced the file
  std::string thread_error;
  bool begun = false;  // the commit begun (asynchronous: checkpoint::Writer::begin_commit)
  bool commit_on_thread = false;  // one rank, no fault at the commit: the thread commits too
  bool committed_alone = false;   // the thread committed (checkpoint::Writer::commit_alone)
  double poll_s = 0;              // the training thread's time in poll()
  std::string error;              // from the construction (a Writer that could not be opened)
  bool cores_busy = false;        // async: the ranks on this host use all its cores
};

namespace {

// What a failed save leaves in place: the newest complete checkpoint under root, when there is
// one (a failure of the first save keeps nothing, and says so).
std::string what_is_kept(const std::string& root) {
  try {
    const auto complete = checkpoint::complete_checkpoints(root);
    if (!complete.empty()) return "the previous one (" + complete.back().path + ") is kept";
  } catch (const std::exception&) {  // an unlistable root holds nothing to keep
  }
  return "there is no earlier checkpoint to keep";
}

}  // namespace

namespace {

// Collective: whether the ranks on this host use every core it lets this process run on; then an
// asynchronous save's writing thread takes its time from them, which the run says once.
bool every_core_busy() {
  MPI_Comm host = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  int on_host = 1;
  MPI_Comm_size(host, &on_host);
  MPI_Comm_free(&host);
  const int cores = parallel::watchdog::usable_cores();
  static bool said = false;
  if (on_host >= cores && !said && world_rank() == 0)
    std::fprintf(stderr,
                 "paraxis: note: checkpoint.async: the %d rank(s) on this host use all of its %d "
                 "core(s); the writing thread takes its time from them, so an asynchronous save "
                 "cannot hide its cost here\n",
                 on_host, cores);
  said = true;
  return on_host >= cores;
}

}  // namespace

CheckpointSave::CheckpointSave(const RunConfig& cfg, const model::Trainer& trainer,
                               const std::string& root, const PointLineage& lineage, int steps,
                               bool async)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cfg = cfg;
  m.root = root;
  m.steps = steps;
  m.async = async;
  m.begin_s = model::steady_seconds();
  const json meta = {{"config", config_to_json(cfg)}, {"grid", grid_of(cfg)}, {"steps", steps}};
  checkpoint::WriterOptions opt;
  opt.keep = cfg.checkpoint.keep;
  opt.timeout_s = cfg.comm.timeout_s;
  opt.lineage = lineage.lineage;
  opt.protect = lineage.protect;
  // Its waits under the watchdog, like every other wait of the run: they answer the other
  // ranks' questions and expire with its diagnosis.
  opt.wait = [](int n, MPI_Request* requests, const char* what, MPI_Comm comm) {
    parallel::watchdog::wait_all(n, requests, what, "world", comm);
  };
  try {  // the Writer fails on every rank at once (checkpoint/writer.hpp)
    m.writer = std::make_unique<checkpoint::Writer>(MPI_COMM_WORLD, root, steps, meta, opt);
  } catch (const std::runtime_error& e) {
    throw CheckpointError(std::string("checkpoint after step ") + std::to_string(steps) +
                              " not written: " + e.what() + "; " + what_is_kept(root),
                          exit_code::write_failed, world_rank() == 0);
  }
  if (!async) {
    WriterSink sink(*m.writer);
    trainer.save_state(sink);
    return;
  }
  // Asynchronous: the state into host buffers now (training changes it next step), the file
  // written by a thread; the collective commit waits for finish() on the main thread.
  m.cores_busy = every_core_busy();
  // Alone (one rank), the commit needs no agreement: the thread does it after the fsync, unless
  // a fault is to strike between the written data and the commit (begin_commit's hook).
  m.commit_on_thread =
      cfg.checkpoint.async && world_size() == 1 && cfg.fault.dead_rank.at != DeadAt::checkpoint;
  trainer.save_state(m.staged);
  m.staged_bytes = m.staged.bytes_;
  m.staged_s = model::steady_seconds() - m.begin_s;
  m.thread = std::thread([&m] {
    try {
      for (const auto& [shard, range] : m.staged.pieces_)
        m.writer->add(shard, m.staged.at(range.first), range.second);
      m.writer->sync();  // the fsync off the training thread too
      if (m.commit_on_thread) m.committed_alone = m.writer->commit_alone();
    } catch (const std::exception& e) {
      m.thread_error = e.what();
    }
    m.written = true;
  });
}

CheckpointSave::~CheckpointSave() {
  if (impl_ && impl_->thread.joinable()) impl_->thread.join();
}

namespace {

// An asynchronous save whose thread is done: its commit begins (what a caller's bug in a piece,
// checkpoint::Writer::add's invalid_argument, left on this rank is thrown first).
void begin_commit(CheckpointSave::Impl& m) {
  if (m.thread.joinable()) m.thread.join();
  if (!m.thread_error.empty())
    throw std::logic_error("checkpoint after step " + std::to_string(m.steps) + ": " +
                           m.thread_error);
  // fault.dead_rank at: checkpoint: the rank dies with its data written, before the commit
  // (the previous checkpoint and `latest` must survive it).
  const auto& dead = m.cfg.fault.dead_rank;
  if (dead.at == DeadAt::checkpoint && dead.rank == world_rank() && m.steps >= dead.step)
    die_leaving_record(dead.rank, "checkpoint step-" + std::to_string(m.steps) + " is written",
                       m.steps);
  if (m.async && !m.committed_alone) m.writer->begin_commit();
  m.begun = true;
}

// The figures of a committed save (`t0`: finish() began, `joined`: its wait for the thread
// ended); collective over MPI_COMM_WORLD.
json save_figures(const CheckpointSave::Impl& m, const checkpoint::SaveStats& st, double t0,
                  double joined) {
  const double end = model::steady_seconds();
  json out = {
      {"step", m.steps},
      {"folder", st.folder},
      {"async", m.async},
      {"bytes",
       {{"min", st.bytes_ranks.min}, {"mean", st.bytes_ranks.mean}, {"max", st.bytes_ranks.max}}},
      {"total_bytes", st.total_bytes},
      {"write_s",
       {{"min", st.write_s_ranks.min},
        {"mean", st.write_s_ranks.mean},
        {"max", st.write_s_ranks.max}}},
      {"aggregate_bytes_per_s", st.aggregate_bytes_per_s},
      {"total_s", end - m.begin_s}};
  if (!m.async) {
    out["exposed_s"] = spread(end - m.begin_s);
    return out;
  }
  // Training stalled for the staging, the polls and the wait here; the writes, the fsync and
  // the commit's publication ran behind the steps in between.
  out["staged_bytes"] = spread(static_cast<double>(m.staged_bytes));
  out["staging_s"] = spread(m.staged_s);
  out["poll_s"] = spread(m.poll_s);
  out["join_wait_s"] = spread(joined - t0);
  out["commit_wait_s"] = spread(end - joined);
  out["exposed_s"] = spread(m.staged_s + m.poll_s + (end - t0));
  out["async_can_hide"] = !m.cores_busy;
  const bool off =
      m.writer->synced_off_owner() && (world_rank() != 0 || m.writer->published_off_owner());
  out["commit_off_training_thread"] = spread(off ? 1.0 : 0.0)["min"].get<double>() == 1.0;
  return out;
}

}  // namespace

void CheckpointSave::poll() {
  Impl& m = *impl_;
  if (!m.async) return;
  const double t0 = model::steady_seconds();
  if (!m.begun && m.written) begin_commit(m);
  if (m.begun) m.writer->poll();
  m.poll_s += model::steady_seconds() - t0;
}

bool CheckpointSave::committed_everywhere() const {
  const Impl& m = *impl_;
  int done = !m.async || (m.begun && m.writer->poll()) ? 1 : 0;
  parallel::watchdog::all_reduce(MPI_IN_PLACE, &done, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD,
                                 "agree whether the checkpoint is committed");
  return done == 1;
}

json CheckpointSave::finish() {
  Impl& m = *impl_;
  const double t0 = model::steady_seconds();
  if (m.thread.joinable()) m.thread.join();
  const double joined = model::steady_seconds();
  if (!m.begun) begin_commit(m);
  checkpoint::SaveStats st;
  try {
    st = m.writer->commit();
  } catch (const std::runtime_error& e) {
    throw CheckpointError(std::string("checkpoint after step ") + std::to_string(m.steps) +
                              " not written: " + e.what() + "; " + what_is_kept(m.root),
                          exit_code::write_failed, world_rank() == 0);
  }
  if (!st.published)
    return {{"step", m.steps}, {"refused", "its state is not finite (" + st.not_published + ")"}};
  return save_figures(m, st, t0, joined);
}

json auto_cadence(const RunConfig& cfg, const json& save, double step_s, int world) {
  double step = step_s;  // every rank must reach the same cadence
  parallel::watchdog::all_reduce(MPI_IN_PLACE, &step, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                                 "agree on the step time");
  const double c = save.at("exposed_s").at("max").get<double>();
  const double rate = cfg.checkpoint.device_mtbf_h > 0 ? 1.0 / (cfg.checkpoint.device_mtbf_h * 3600)
                                                       : perfmodel::llama3_failures_per_device_s();
  const double mtbf = perfmodel::system_mtbf(rate, world);
  const double daly = perfmodel::daly_interval(c, mtbf);
  const double steps = step > 0 ? std::round(daly / step) : 1.0;
  const int every = static_cast<int>(std::min(std::max(steps, 1.0), 2147483647.0));
  return {{"checkpoint_s", c},
          {"step_s", step},
          {"system_mtbf_s", mtbf},
          {"daly_interval_s", daly},
          {"every", every}};
}

void say_auto_cadence(const json& a, int rank) {
  if (rank != 0) return;
  std::printf(
      "  checkpoint.every auto: C = %.3g s, step %.3g s, MTBF %.3g h: every %d steps (Daly's "
      "interval %.3g s)\n",
      a["checkpoint_s"].get<double>(), a["step_s"].get<double>(),
      a["system_mtbf_s"].get<double>() / 3600, a["every"].get<int>(),
      a["daly_interval_s"].get<double>());
}

namespace {

void wait_world(int n, MPI_Request* q, const char* what, MPI_Comm comm) {
  parallel::watchdog::wait_all(n, q, what, "world", comm);
}

// Read once (docs/checkpoint.md): on several ranks, which saved shards each rank's pieces need
// (a first pass over the trainer's pieces), each read by one rank and given to the others
// (checkpoint/read_once.hpp): `once` holds what the ranks of a host share, if anything, and the
// reads for the host still running. One rank reads everything itself, in the second pass.
// Throws CheckpointError on every rank when a read fails.
json read_shared(const checkpoint::Reader& reader, model::Trainer& trainer,
                 checkpoint::HostShare share, checkpoint::ReadOnce& once) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world == 1) return json();
  std::string error;
  NeedsSource needs(reader);
  const double t0 = model::steady_seconds();
  try {
    trainer.load_state(needs, static_cast<int>(reader.step()));
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree(error, "agree on the checkpoint's pieces");
  const double needs_s = model::steady_seconds() - t0;
  checkpoint::ReadOnce& r = once;
  try {
    r = checkpoint::read_once(MPI_COMM_WORLD, reader, needs.needed(), wait_world, share);
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree(error, "agree on the checkpoint's reads");
  const checkpoint::ReadOnceStats& st = r.stats;
  return {{"received_bytes", spread(static_cast<double>(st.received_bytes))},
          {"sent_bytes", spread(static_cast<double>(st.sent_bytes))},
          {"shared_bytes", spread(static_cast<double>(st.shared_bytes))},
          {"needs_s", spread(needs_s)},
          {"read_s", spread(st.read_s)},
          {"exchange_s", spread(st.exchange_s)}};
}

}  // namespace

json load_pieces(const checkpoint::Reader& reader, model::Trainer& trainer,
                 checkpoint::HostShare share) {
  checkpoint::ReadOnce once;
  json shared = read_shared(reader, trainer, share, once);
  std::string error;
  const double t0 = model::steady_seconds();
  try {
    ReaderSource source(reader, once.reads.get());
    trainer.load_state(source, static_cast<int>(reader.step()));
    if (source.unsettled() > 0)
      throw std::logic_error("checkpoint: the trainer's load left reads unsettled");
  } catch (const std::exception& e) {
    error = e.what();
  }
  reader.forget_kept();  // then the host's shared memory ends, on every rank together
  // The reads for the host: the reading rank's own message before a waiting rank's.
  std::string own = once.reads ? once.reads->finish(reader) : "";
  if (!shared.empty()) own = checkpoint::first_error(MPI_COMM_WORLD, own, wait_world);
  if (!own.empty()) error = own;
  const double placed = once.reads ? static_cast<double>(once.reads->placed_bytes()) : 0.0;
  once.memory.reset();
  agree(error, "agree on the checkpoint's contents");
  if (shared.empty()) return shared;
  shared["assemble_s"] = spread(model::steady_seconds() - t0);
  shared["placed_bytes"] = spread(placed);
  return shared;
}

json load_checkpoint(const RunConfig& cfg, model::Trainer& trainer, const std::string& where,
                     const std::string& root) {
  const double t0 = model::steady_seconds();
  std::string error, folder;
  json out;
  // Every rank resolves and checks the same files; a failure on any rank stops every rank
  // before a step is trained from a partly-read checkpoint.
  std::unique_ptr<checkpoint::Reader> reader;
  try {
    folder = checkpoint::Reader::resolve(where == "latest" ? root : where);
    reader = std::make_unique<checkpoint::Reader>(folder);
    out["changed"] =
        check_compatible(reader->meta().value("config", json()), cfg, folder, world_rank() == 0);
    if (reader->step() >= cfg.train.steps)
      throw std::runtime_error(
          "checkpoint " + folder + " is after step " + std::to_string(reader->step()) +
          " and train.steps = " + std::to_string(cfg.train.steps) + ": nothing is left to train");
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree(error, "agree on the checkpoint");
  const json shared = load_pieces(*reader, trainer);
  const double read_s = model::steady_seconds() - t0;
  out["folder"] = folder;
  out["step"] = reader->step();
  out["read_s"] = spread(read_s);
  out["bytes"] = spread(static_cast<double>(reader->bytes_read()));
  out["storage_s"] = spread(reader->times().storage_s);
  out["verify_s"] = spread(reader->times().verify_s);
  if (!shared.empty()) out["read_once"] = shared;
  out["saved_grid"] = reader->meta().value("grid", json());
  return out;
}

}  // namespace paraxis::driver
