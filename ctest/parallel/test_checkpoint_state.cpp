// Checkpoints of the training state (issue 16; model/state_pieces.hpp, the trainers'
// save_state / load_state), through an in-memory store (state_store.hpp):
//   - the saved pieces cover every logical tensor exactly once, whatever the layout;
//   - same layout: a run saved after k steps and resumed is bitwise the uninterrupted run (loss
//     per step and final parameters);
//   - another layout (or one rank): the loaded global tensors are bitwise the saved ones, and
//     training continues matching the single-rank run resumed from the same checkpoint within
//     the correctness contract's tolerances.
// Runs on 1, 2 and 4 ranks (each test takes the layouts that fit the world size).
#include <gtest/gtest.h>
#include <mpi.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/reader.hpp"
#include "checkpoint/writer.hpp"
#include "driver/point_checkpoint.hpp"

#include "state_store.hpp"
#include "training_run.hpp"

namespace {

using namespace paraxis;
using ptest::StateStore;

// A trainer of `c` with its process grid (which must outlive it).
struct Run {
  std::unique_ptr<parallel::ProcessGrid> grid;
  std::unique_ptr<model::Trainer> trainer;
  model::Trainer* operator->() const { return trainer.get(); }
  model::Trainer& operator*() const { return *trainer; }
};

Run make(const driver::RunConfig& c) {
  Run r;
  if (c.parallel.world() == 1 && ptest::world_size() == 1) {
    r.trainer = model::make_trainer(c.model, c.train);
    return r;
  }
  r.grid = std::make_unique<parallel::ProcessGrid>(MPI_COMM_WORLD, c.parallel);
  r.trainer = parallel::make_parallel_trainer(c.model, c.train, c.parallel, c.comm, *r.grid);
  return r;
}

std::vector<double> losses(model::Trainer& t, int steps) {
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) out.push_back(t.step().loss);
  return out;
}

StateStore save(const model::Trainer& t) {  // every rank's pieces, on every rank
  StateStore s;
  t.save_state(s);
  s.share(MPI_COMM_WORLD);
  return s;
}

void expect_same_tensors(const StateStore& a, const StateStore& b, const std::string& what) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size()) << what;
  for (const auto& [name, t] : a.tensors()) {
    const auto it = b.tensors().find(name);
    ASSERT_NE(it, b.tensors().end()) << what << ": " << name << " missing";
    EXPECT_EQ(t.shape, it->second.shape) << what << ": " << name;
    EXPECT_EQ(t.values, it->second.values) << what << ": " << name << " differs";
  }
}

// Same layout: save after k = 2 steps, resume in a new trainer through `transfer(saved, resumed)`
// (which saves the first and loads the second), continue n = 2 steps: bitwise the uninterrupted
// run, losses and final parameters.
template <class Transfer>
void expect_resume(const std::vector<std::string>& set, const std::string& what,
                   Transfer transfer) {
  const auto c = ptest::tiny(set);
  const int k = 2, n = 2;
  auto whole = make(c);
  const auto uninterrupted = losses(*whole, k + n);
  const auto final_params = whole->parameters();
  auto first = make(c);
  losses(*first, k);
  auto resumed = make(c);
  transfer(*first, *resumed, k);
  EXPECT_EQ(resumed->steps_done(), k) << what;
  const auto rest = losses(*resumed, n);
  EXPECT_EQ(rest, std::vector<double>(uninterrupted.begin() + k, uninterrupted.end())) << what;
  EXPECT_EQ(resumed->parameters(), final_params) << what;
}

// Through the in-memory store.
void expect_bitwise_resume(const std::vector<std::string>& set, const std::string& what) {
  expect_resume(set, what, [&](const model::Trainer& saved, model::Trainer& resumed, int k) {
    const StateStore store = save(saved);
    EXPECT_EQ(store.coverage_problem(), "") << what;
    resumed.load_state(store, k);
  });
}

// Layout a saves after k steps; layout b (same world size) loads: its global tensors are the
// saved ones; it continues n steps like a single-rank trainer resumed from the same store.
void expect_reshard(const std::vector<std::string>& a_set, const std::vector<std::string>& b_set,
                    const std::string& what) {
  const auto a = ptest::tiny(a_set), b = ptest::tiny(b_set);
  const int k = 2, n = 2;
  auto saver = make(a);
  losses(*saver, k);
  const StateStore store = save(*saver);
  EXPECT_EQ(store.coverage_problem(), "") << what;
  auto loader = make(b);
  loader->load_state(store, k);
  expect_same_tensors(store, save(*loader), what + " (loaded against saved)");
  ptest::TrainedRun par, ref;
  par.precision = ref.precision = b.train.precision;
  for (int s = 0; s < n; ++s) par.loss.push_back(loader->step().loss);
  par.params = loader->parameters();
  par.replica_divergence = loader->replica_divergence();
  auto single_cfg = ptest::tiny(b_set);
  single_cfg.parallel = config::ParallelConfig{};
  auto single = model::make_trainer(single_cfg.model, single_cfg.train);
  single->load_state(store, k);
  for (int s = 0; s < n; ++s) ref.loss.push_back(single->step().loss);
  ref.params = single->parameters();
  ptest::expect_matches(par, ref, what);
}

const std::vector<std::string> kBase = {"train.steps=4", "train.precision=fp64",
                                        "train.micro_batch=2", "model.layers=4"};

std::vector<std::string> with(std::vector<std::string> extra,
                              const std::vector<std::string>& base = kBase) {
  extra.insert(extra.begin(), base.begin(), base.end());
  return extra;
}

}  // namespace

TEST(checkpoint_state, logical_boxes_cover_a_flat_range_without_padding) {
  model::TensorSpec s;
  s.name = "w";
  s.rows = 3;
  s.cols = 4;
  s.offset = 100;
  s.logical_rows = 5;  // the shard is rows 3..5 of 5: its last row is padding
  s.logical_cols = 8;
  s.row_offset = 3;
  s.col_offset = 4;
  // Elements 1..10 of the shard: row 0 cols 1-3, row 1 whole, row 2 cols 0-1 (padding).
  const auto boxes = model::logical_boxes(s, 101, 111);
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_EQ(boxes[0].row0, 3);
  EXPECT_EQ(boxes[0].col0, 5);
  EXPECT_EQ(boxes[0].cols, 3);
  EXPECT_EQ(boxes[0].flat, 101u);
  EXPECT_EQ(boxes[1].row0, 4);
  EXPECT_EQ(boxes[1].rows, 1);
  EXPECT_EQ(boxes[1].cols, 4);
  EXPECT_EQ(boxes[1].flat, 104u);
  EXPECT_THROW(model::logical_boxes(s, 99, 101), std::invalid_argument);
  EXPECT_EQ(model::logical_shape(s), (std::vector<std::int64_t>{5, 8}));
}

namespace {

// A source that fills read_later's pieces only in settle() (each element its piece's number
// plus 1), as read once's second pass does.
class LaterSource final : public model::StateSource {
 public:
  void read(const model::StatePiece&, void*, std::size_t) const override {
    ADD_FAILURE() << "a piece read at once";
  }
  void read_later(const model::StatePiece&, void* out, std::size_t bytes) const override {
    later_.push_back({static_cast<double*>(out), bytes / sizeof(double)});
  }
  void settle() const override {
    for (std::size_t i = 0; i < later_.size(); ++i)
      std::fill(later_[i].first, later_[i].first + later_[i].second, double(i + 1));
    later_.clear();
  }

 private:
  mutable std::vector<std::pair<double*, std::size_t>> later_;
};

}  // namespace

// model::PieceReads: pieces contiguous in the buffer are read in place, the others scattered
// after settle(); zero_rest then sets exactly what no piece covered to 0, whatever the buffer
// held before (a load no longer zeroes the whole buffer first).
TEST(checkpoint_state, piece_reads_fill_in_place_scatter_and_zero_the_rest) {
  model::TensorSpec s;
  s.name = "w";
  s.rows = 3;
  s.cols = 4;
  s.offset = 2;  // two elements of padding before it, two after (a buffer of 16)
  s.logical_rows = 3;
  s.logical_cols = 4;
  std::vector<double> buf(16, 7.0);  // stale values, not zeros
  const LaterSource source;
  model::PieceReads<double> reads(source, "f64");
  model::LogicalBox row0 = model::logical_boxes(s, 2, 14)[0], block = row0;
  row0.rows = 1;   // row 0: contiguous, read in place
  block.row0 = 1;  // rows 1-2, cols 1-2: 4 apart in the buffer, scattered
  block.rows = 2;
  block.col0 = 1;
  block.cols = 2;
  block.flat = 7;
  ASSERT_TRUE(model::contiguous(row0));
  ASSERT_FALSE(model::contiguous(block));
  reads.load("master", s, row0, buf.data(), row0);
  reads.load("master", s, block, buf.data(), block);
  EXPECT_EQ(buf[2], 7.0) << "filled before settle()";
  reads.settle();
  reads.zero_rest(buf.data(), buf.size());
  const std::vector<double> want = {0, 0, 1, 1, 1, 1, 0, 2, 2, 0, 0, 2, 2, 0, 0, 0};
  EXPECT_EQ(buf, want);
}

TEST(checkpoint_state, same_layout_resumes_bitwise) {
  const int w = ptest::world_size();
  if (w == 1) {
    for (const char* prec : {"fp64", "fp32", "bf16"})
      expect_bitwise_resume(with({std::string("train.precision=") + prec}),
                            std::string("one rank ") + prec);
    return;
  }
  if (w == 2) {
    for (const char* z : {"0", "1", "2", "3"})
      expect_bitwise_resume(with({"parallel.dp=2", std::string("parallel.zero=") + z}),
                            std::string("dp2 zero") + z);
    expect_bitwise_resume(with({"parallel.dp=2", "parallel.zero=3", "train.precision=bf16"}),
                          "dp2 zero3 bf16");
    expect_bitwise_resume(with({"parallel.tp=2"}), "tp2");
    expect_bitwise_resume(with({"parallel.pp=2"}), "pp2");
    expect_bitwise_resume(with({"parallel.dp=2", "parallel.ep=2"}), "dp2 ep2");
  }
  if (w == 4) {
    expect_bitwise_resume(with({"parallel.tp=2", "parallel.pp=2"}), "tp2 pp2");
    expect_bitwise_resume(with({"parallel.dp=4", "parallel.ep=2", "parallel.zero=1"}),
                          "dp4 ep2 zero1");
  }
}

TEST(checkpoint_state, another_layout_loads_the_same_tensors_and_continues) {
  const int w = ptest::world_size();
  if (w != 2 && w != 4)
    GTEST_SKIP() << "another layout needs 2 or 4 ranks (a resume on one rank from a sharded save "
                    "is checked on those: expect_reshard continues against the single-rank run)";
  if (w == 2) {
    expect_reshard(with({"parallel.dp=2", "parallel.zero=3"}), with({"parallel.tp=2"}),
                   "dp2 zero3 -> tp2");
    expect_reshard(with({"parallel.tp=2"}), with({"parallel.pp=2"}), "tp2 -> pp2");
    expect_reshard(with({"parallel.pp=2", "parallel.virtual_stages=2", "train.micro_batch=2",
                         "parallel.schedule=interleaved"}),
                   with({"parallel.pp=2"}), "pp2 interleaved -> 1f1b");
  }
  if (w == 4) {
    expect_reshard(
        with({"parallel.tp=2", "parallel.dp=2", "parallel.zero=1"}),
        with({"parallel.pp=2", "parallel.dp=2", "parallel.zero=2", "train.micro_batch=2"}),
        "tp2 dp2 zero1 -> pp2 dp2 zero2");
    expect_reshard(with({"parallel.dp=2", "parallel.ep=2", "parallel.tp=2"}),
                   with({"parallel.dp=4", "parallel.ep=4"}), "tp2 dp2 ep2 -> dp4 ep4");
  }
}

namespace {

class FileSink final : public model::StateSink {  // pieces into a checkpoint::Writer
 public:
  explicit FileSink(checkpoint::Writer& w) : w_(w) {}
  void add(const model::StatePiece& p, const void* data, std::size_t bytes) override {
    w_.add(checkpoint::Shard{{p.tensor, p.shape, p.dtype}, p.offset, p.extent}, data, bytes);
  }

 private:
  checkpoint::Writer& w_;
};

// The layouts of the full matrix (checkpoint_matrix below) for this world size.
std::vector<std::pair<std::string, std::vector<std::string>>> matrix_layouts(int w);

// Same layout, through the checkpoint files and the read-once rule (driver::load_pieces): the
// resumed run is bitwise the uninterrupted one, and the ranks together read every saved byte
// from storage exactly once; `share`: how the ranks of the host share what they read (the page
// cache, the shared-memory window, or nothing: every shard travels in messages, as between hosts).
// A fresh checkpoint root in the temporary folder, the same on every rank.
std::filesystem::path test_root() {
  long id = ::getpid();
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  return std::filesystem::temp_directory_path() / ("paraxis-read-once-" + std::to_string(id));
}

// Collective: `t`'s state saved as step k under `root`; returns the step folder.
std::string save_files(const model::Trainer& t, const std::filesystem::path& root, int k) {
  checkpoint::Writer w(MPI_COMM_WORLD, root.string(), k, nlohmann::json::object());
  FileSink sink(w);
  t.save_state(sink);
  return w.commit().folder;
}

// `check` sees load_pieces' figures (read_once.hpp's, per rank {min, mean, max}) and the reader.
void expect_read_once_resume(
    const std::vector<std::string>& set, const std::string& what, checkpoint::HostShare share,
    const std::function<void(const nlohmann::json&, const checkpoint::Reader&)>& check = {}) {
  expect_resume(set, what, [&](const model::Trainer& saved, model::Trainer& resumed, int k) {
    const auto root = test_root();
    const std::string folder = save_files(saved, root, k);
    {
      const checkpoint::Reader reader(folder);
      const auto got = driver::load_pieces(reader, resumed, share);
      // Every rank of this test is on one host: through its memory nothing travels in a message;
      // without sharing, nothing goes through shared memory.
      const char* none = share != checkpoint::HostShare::none ? "received_bytes" : "shared_bytes";
      EXPECT_EQ(got.at(none).at("max").get<double>(), 0.0) << what << ": " << got.dump();
      // A page the kernel could not hand over from its cache at once (RWF_NOWAIT: e.g. one being
      // migrated while a loaded machine holds the migrating task up) is read from storage again,
      // counted apart (reread_bytes): the rule is about the reads the plan makes.
      unsigned long long read[2] = {reader.bytes_read(), reader.reread_bytes()};
      MPI_Allreduce(MPI_IN_PLACE, read, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      EXPECT_EQ(read[0] - read[1], reader.bytes())
          << what << ": bytes read from storage by all ranks together (" << read[1]
          << " of them read again)";
      if (check) check(got, reader);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (ptest::world_rank() == 0) std::filesystem::remove_all(root);
  });
}

}  // namespace

// The read-once rule on every layout of the matrix (label checkpoint: 2 and 4 ranks, fp64),
// through the host's page cache (where the file system allows it, else the window); every other
// layout also through messages only, the rest also through the shared-memory window.
TEST(checkpoint_read_once, every_layout_resumes_bitwise_through_files) {
  const int w = ptest::world_size();
  if (w != 2 && w != 4) GTEST_SKIP() << "the matrix has layouts for 2 and 4 ranks";
  const auto layouts = matrix_layouts(w);
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    using checkpoint::HostShare;
    expect_read_once_resume(with(layouts[i].second), layouts[i].first + " (host memory)",
                            HostShare::memory);
    if (i % 2 == 1)
      expect_read_once_resume(with(layouts[i].second), layouts[i].first + " (messages)",
                              HostShare::none);
    else
      expect_read_once_resume(with(layouts[i].second), layouts[i].first + " (window)",
                              HostShare::window);
  }
}

// ZeRO-0 on 2 ranks (each needs every saved shard), through the host's page cache: each rank's
// reading thread reads its shards straight into their places in the trainer's buffers (none
// copied or verified twice on that rank), bitwise; and a shard corrupted on storage is still
// refused on every rank, naming the file and the tensor.
TEST(checkpoint_read_once, own_shards_land_in_place_and_are_verified) {
  if (ptest::world_size() != 2) GTEST_SKIP() << "2 ranks";
  const auto set = with({"parallel.dp=2"});
  expect_read_once_resume(set, "dp2 zero0 in place", checkpoint::HostShare::memory,
                          [](const nlohmann::json& got, const checkpoint::Reader& reader) {
                            if (!reader.host_cache_readable())
                              return;  // the window instead: nothing in place
                            const double shared = got.at("shared_bytes").at("min").get<double>();
                            EXPECT_GT(shared, 0.0) << got.dump();
                            EXPECT_EQ(got.at("placed_bytes").at("min").get<double>(), shared)
                                << got.dump();
                            EXPECT_EQ(got.at("placed_bytes").at("max").get<double>(),
                                      got.at("shared_bytes").at("max").get<double>())
                                << got.dump();
                          });
  const auto c = ptest::tiny(set);
  auto saved = make(c);
  losses(*saved, 1);
  const auto root = test_root();
  const std::string folder = save_files(*saved, root, 1);
  std::string file;
  {
    const checkpoint::Reader reader(folder);
    const auto& r = reader.shard(reader.shard_count() / 2);  // a shard with other shards around
    file = (std::filesystem::path(folder) / r.file).string();
    if (ptest::world_rank() == 0) {  // one byte changed in its middle
      std::FILE* f = std::fopen(file.c_str(), "r+b");
      ASSERT_NE(f, nullptr);
      std::fseek(f, static_cast<long>(r.byte_offset + r.bytes / 2), SEEK_SET);
      const int b = std::fgetc(f);
      std::fseek(f, static_cast<long>(r.byte_offset + r.bytes / 2), SEEK_SET);
      std::fputc(b ^ 0x5a, f);
      std::fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    auto resumed = make(c);
    try {
      driver::load_pieces(reader, *resumed, checkpoint::HostShare::memory);
      ADD_FAILURE() << "a corrupted shard was loaded";
    } catch (const driver::CheckpointError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(file), std::string::npos) << m;
      EXPECT_NE(m.find("corrupted data"), std::string::npos) << m;
      EXPECT_NE(m.find(r.shard.tensor.name), std::string::npos) << m;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (ptest::world_rank() == 0) std::filesystem::remove_all(root);
}

// The full matrix (label slow): every layout of the world size resumed bitwise in fp64 and bf16,
// and each resharded to the next one of the list (every axis, ZeRO stage and schedule changes
// somewhere in the ring).
TEST(checkpoint_matrix, every_layout_resumes_and_reshards) {
  const int w = ptest::world_size();
  if (w != 2 && w != 4) GTEST_SKIP() << "the matrix has layouts for 2 and 4 ranks";
  const auto layouts = matrix_layouts(w);
  for (const char* prec : {"fp64", "bf16"}) {
    const std::vector<std::string> base = {"train.steps=4", std::string("train.precision=") + prec,
                                           "train.micro_batch=2", "model.layers=4"};
    for (std::size_t i = 0; i < layouts.size(); ++i) {
      const auto& [name, set] = layouts[i];
      const auto& [next_name, next_set] = layouts[(i + 1) % layouts.size()];
      expect_bitwise_resume(with(set, base), name + " " + prec);
      expect_reshard(with(set, base), with(next_set, base), name + " -> " + next_name + " " + prec);
    }
  }
}

namespace {

std::vector<std::pair<std::string, std::vector<std::string>>> matrix_layouts(int w) {
  std::vector<std::pair<std::string, std::vector<std::string>>> layouts;
  if (w == 2)
    layouts = {{"dp2 zero0", {"parallel.dp=2"}},
               {"dp2 zero1", {"parallel.dp=2", "parallel.zero=1"}},
               {"dp2 zero2", {"parallel.dp=2", "parallel.zero=2"}},
               {"dp2 zero3", {"parallel.dp=2", "parallel.zero=3"}},
               {"tp2", {"parallel.tp=2"}},
               {"tp2 sp", {"parallel.tp=2", "parallel.sequence_parallel=true"}},
               {"pp2 1f1b", {"parallel.pp=2"}},
               {"pp2 interleaved",
                {"parallel.pp=2", "parallel.virtual_stages=2", "parallel.schedule=interleaved"}},
               {"pp2 zb-h1", {"parallel.pp=2", "parallel.schedule=zb-h1"}},
               {"dp2 ep2", {"parallel.dp=2", "parallel.ep=2"}},
               {"dp2 ep2 zero3", {"parallel.dp=2", "parallel.ep=2", "parallel.zero=3"}}};
  if (w == 4)
    layouts = {{"tp2 dp2 zero1", {"parallel.tp=2", "parallel.dp=2", "parallel.zero=1"}},
               {"pp2 dp2 zero2", {"parallel.pp=2", "parallel.dp=2", "parallel.zero=2"}},
               {"tp2 pp2", {"parallel.tp=2", "parallel.pp=2"}},
               {"dp4 ep2 zero3", {"parallel.dp=4", "parallel.ep=2", "parallel.zero=3"}},
               {"dp4 ep4", {"parallel.dp=4", "parallel.ep=4"}},
               {"tp2 dp2 ep2", {"parallel.tp=2", "parallel.dp=2", "parallel.ep=2"}}};
  return layouts;
}

}  // namespace
