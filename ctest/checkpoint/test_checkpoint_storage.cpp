// The checkpoint storage layer on 1 and 3 ranks (checkpoint/writer.hpp, reader.hpp): a round
// trip of column boxes, flat ranges (a ZeRO partition of tensor-parallel halves) and a scalar
// written by one rank, bytes and checksums identical; coverage refused at commit; a truncated,
// corrupted or missing file and a missing index refused naming the file and tensor; a failed
// write (RLIMIT_FSIZE, as a full disk) failing every rank's commit and leaving the previous
// checkpoint and `latest`; keep pruning; `latest` resolution; the data file's direct-I/O
// writer. docs/checkpoint.md.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/posix_file.hpp"
#include "checkpoint/reader.hpp"
#include "checkpoint/writer.hpp"

using namespace paraxis::checkpoint;
namespace fs = std::filesystem;

namespace {

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int ranks() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
void barrier() {
  MPI_Barrier(MPI_COMM_WORLD);
}

// A fresh root per test, the same on every rank.
std::string root_for(const std::string& name) {
  const std::string root = ::testing::TempDir() + name;
  if (rank() == 0) fs::remove_all(root);
  barrier();
  return root;
}

WriterOptions options(int keep = 2) {
  WriterOptions o;
  o.keep = keep;
  o.timeout_s = 60;  // a broken test ends in a minute, not ten
  return o;
}

const TensorInfo kW{"layer.0.w", {4, 9}, "f64"};  // split by columns
const TensorInfo kM{"adam.m", {5, 6}, "f32"};     // split by flat ranges (ZeRO)
const TensorInfo kZ{"layer.0.z", {6, 4}, "f32"};  // two row halves, each split by flat ranges
const TensorInfo kStep{"step", {}, "i64"};        // replicated, written by the last rank

// The reference global tensors: element i of tensor t is a value no other tensor has.
std::vector<double> ref_w(double salt = 0) {
  std::vector<double> v(36);
  for (int i = 0; i < 36; ++i) v[i] = 1000 + i + 0.25 + salt;
  return v;
}
std::vector<float> ref_f(int n, float base) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = base + static_cast<float>(i) * 0.5f;
  return v;
}

std::int64_t lo(std::int64_t n, int r, int p) {
  return n * r / p;
}

// Adds this rank's shards of the four tensors (the layout of every test).
void add_all(Writer& w, double salt = 0) {
  const int r = rank(), p = ranks();
  const auto W = ref_w(salt);
  const std::int64_t c0 = lo(9, r, p), c1 = lo(9, r + 1, p);
  std::vector<double> cols;
  for (int i = 0; i < 4; ++i)
    for (std::int64_t j = c0; j < c1; ++j) cols.push_back(W[i * 9 + j]);
  w.add(Shard{kW, {0, c0}, {4, c1 - c0}}, cols.data(), cols.size() * sizeof(double));
  const auto M = ref_f(30, 2.0f);
  const std::int64_t m0 = lo(30, r, p), m1 = lo(30, r + 1, p);
  w.add(Shard{kM, {}, {}, m0, m1}, M.data() + m0, (m1 - m0) * sizeof(float));
  const auto Z = ref_f(24, -7.0f);
  for (int half = 0; half < 2; ++half) {
    const std::int64_t z0 = lo(12, r, p), z1 = lo(12, r + 1, p);
    w.add(Shard{kZ, {3 * half, 0}, {3, 4}, z0, z1}, Z.data() + 12 * half + z0,
          (z1 - z0) * sizeof(float));
  }
  if (r == p - 1) {
    const std::int64_t step = 7;
    w.add(Shard{kStep, {}, {}}, &step, sizeof step);
  }
}

template <class T>
std::vector<std::byte> as_bytes(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

SaveStats save(const std::string& root, long step, int keep = 2, double salt = 0) {
  Writer w(MPI_COMM_WORLD, root, step, {{"deck", "tiny.yaml"}, {"rng", {1, 2, 3}}}, options(keep));
  add_all(w, salt);
  return w.commit();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST(checkpoint_storage, round_trip_bytes_and_checksums_identical) {
  const std::string root = root_for("round_trip");
  const SaveStats stats = save(root, 7);
  const std::string folder = root + "/step-7";
  EXPECT_EQ(stats.folder, folder);
  // 36 f64 + 30 f32 + 24 f32 + 1 i64 over the ranks.
  EXPECT_EQ(stats.total_bytes, 36 * 8 + 30 * 4 + 24 * 4 + 8);
  EXPECT_LE(stats.bytes_ranks.min, stats.bytes);
  EXPECT_LE(stats.bytes, stats.bytes_ranks.max);
  EXPECT_NEAR(stats.bytes_ranks.mean * ranks(), stats.total_bytes, 1e-9);
  EXPECT_EQ(slurp(root + "/latest"), "step-7");

  const Reader reader(Reader::resolve(root));
  EXPECT_EQ(reader.folder(), folder);
  EXPECT_EQ(reader.step(), 7);
  EXPECT_EQ(reader.ranks(), ranks());
  EXPECT_EQ(reader.meta().at("deck"), "tiny.yaml");
  EXPECT_EQ(reader.meta().at("rng"), nlohmann::json({1, 2, 3}));
  EXPECT_EQ(reader.bytes(), static_cast<std::size_t>(stats.total_bytes));
  std::vector<std::string> names;
  for (const auto& t : reader.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"adam.m", "layer.0.w", "layer.0.z", "step"}));

  const auto w = reader.read(kW.name);
  EXPECT_EQ(w, as_bytes(ref_w()));
  EXPECT_EQ(checksum(w.data(), w.size()), checksum(ref_w().data(), 36 * sizeof(double)));
  EXPECT_EQ(reader.read(kM.name), as_bytes(ref_f(30, 2.0f)));
  EXPECT_EQ(reader.read(kZ.name), as_bytes(ref_f(24, -7.0f)));
  const std::int64_t seven = 7;
  EXPECT_EQ(reader.read(kStep.name), as_bytes(std::vector<std::int64_t>{seven}));

  // The index records, for this rank's shards, the checksum of the bytes this rank passed.
  const int r = rank(), p = ranks();
  const auto M = ref_f(30, 2.0f);
  for (const auto& t : reader.index().tensors)
    for (const auto& s : t.shards)
      if (s.rank == r && t.info.name == kM.name) {
        EXPECT_EQ(s.checksum, checksum(M.data() + lo(30, r, p), s.bytes));
      }

  // A region in another layout: rows 1..2 of the weight, elements [2, 12) of that box.
  const auto region = reader.read(Shard{kW, {1, 0}, {2, 9}, 2, 12});
  const auto W = ref_w();
  std::vector<double> expect(W.begin() + 9 + 2, W.begin() + 9 + 12);
  EXPECT_EQ(region, as_bytes(expect));
  // A column the saving layout split across ranks (on 3 ranks: columns 2-3 straddle 0 and 1).
  std::vector<double> col;
  for (int i = 0; i < 4; ++i)
    for (int j = 2; j < 4; ++j) col.push_back(ref_w()[i * 9 + j]);
  EXPECT_EQ(reader.read(Shard{kW, {0, 2}, {4, 2}}), as_bytes(col));
  barrier();
}

// A saved shard that several regions cut is read and verified once (the verified-shard cache),
// and every time without the cache.
TEST(checkpoint_storage, a_shard_cut_by_several_regions_is_read_once) {
  const std::string root = root_for("cache");
  save(root, 3);
  const Reader cached(Reader::resolve(root));
  const auto W = ref_w();
  for (std::int64_t row = 0; row < 4; ++row) {
    const auto got = cached.read(Shard{kW, {row, 0}, {1, 9}});
    EXPECT_EQ(got, as_bytes(std::vector<double>(W.begin() + 9 * row, W.begin() + 9 * row + 9)));
  }
  const std::size_t once = cached.bytes_read();
  EXPECT_EQ(once, 36 * sizeof(double));  // every shard of the weight, once
  Reader uncached(Reader::resolve(root));
  uncached.set_cache_limit(0);
  for (std::int64_t row = 0; row < 4; ++row) uncached.read(Shard{kW, {row, 0}, {1, 9}});
  EXPECT_EQ(uncached.bytes_read(), 4 * once);
  barrier();
}

// Read once through the host's page cache (checkpoint/read_once.hpp): what one Reader read for
// the host (read_for_host) another Reader of the folder reads from the page cache, bitwise, and
// from storage only what has left the cache (counted as such: dropped here on purpose); the
// bytes are verified again, so a file changed after the first read is refused.
TEST(checkpoint_storage, a_shard_read_for_the_host_comes_from_the_page_cache_verified) {
  const std::string root = root_for("host-cache");
  save(root, 3);
  const std::string folder = Reader::resolve(root);
  const Reader first(folder);
  if (!first.host_cache_readable()) GTEST_SKIP() << "reads from the page cache only: unsupported";
  for (std::size_t s = 0; s < first.shard_count(); ++s) first.read_for_host(s);
  EXPECT_EQ(first.bytes_read(), first.bytes());
  for (const bool dropped : {false, true}) {
    if (dropped)
      for (int r = 0; r < ranks(); ++r)
        paraxis::checkpoint::posix::drop_cached(folder + "/rank-" + std::to_string(r) + ".bin");
    const Reader second(folder);
    for (std::size_t s = 0; s < second.shard_count(); ++s) second.in_host_cache(s);
    EXPECT_EQ(second.read(kW.name), as_bytes(ref_w())) << "dropped " << dropped;
    EXPECT_EQ(second.cached_bytes() + second.reread_bytes(), 36 * sizeof(double));
    EXPECT_EQ(second.bytes_read(), second.reread_bytes()) << "storage only for what left";
  }
  barrier();
  std::size_t w = 0;  // a shard of the weight
  while (first.shard(w).shard.tensor.name != kW.name) ++w;
  const std::string file = folder + "/" + first.shard(w).file;
  if (rank() == 0) {  // a byte changed through the page cache, after the first read
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(first.shard(w).byte_offset + 3);
    f.put('\x5a');
  }
  barrier();
  const Reader third(folder);
  third.in_host_cache(w);
  const std::string e = error_of([&] { third.read_shard(w); });
  EXPECT_TRUE(contains(e, file) && contains(e, "'layer.0.w'") && contains(e, "checksum")) << e;
  barrier();
}

// The data file's writer (posix::OutFile): whatever the pieces' sizes (empty, unaligned, across
// the direct-I/O buffer's end, several buffers at once), the file holds exactly the bytes
// appended, in order; on a file system that takes O_DIRECT (this test's own folder is probed)
// every whole block went to storage directly, and tmpfs (/dev/shm) is written all the same.
TEST(checkpoint_storage, a_data_file_holds_every_byte_appended_direct_or_not) {
  using posix::OutFile;
  const std::size_t chunk = OutFile::kDirectChunk;
  const std::vector<std::size_t> sizes = {
      1, 4095, 4097, 0, chunk - 4099, chunk + 5, 17, 3 * chunk + 4096, 4096, 12345};
  std::vector<char> all;
  for (std::size_t k = 0; k < sizes.size(); ++k)
    for (std::size_t i = 0; i < sizes[k]; ++i)
      all.push_back(static_cast<char>((i * 131 + k * 7 + (i >> 12)) & 0xff));
  std::vector<std::string> folders = {::testing::TempDir()};
  if (fs::is_directory("/dev/shm")) folders.push_back("/dev/shm/");
  for (const std::string& folder : folders) {
    const std::string path = folder + "outfile-" + std::to_string(rank()) + ".bin";
    const int probe = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    const bool direct_taken = probe >= 0;
    if (probe >= 0) ::close(probe);
    {
      OutFile f(path);
      std::size_t at = 0;
      for (const std::size_t n : sizes) f.append(all.data() + at, n), at += n;
      EXPECT_EQ(f.size(), static_cast<std::int64_t>(all.size()));
      EXPECT_EQ(f.direct(), direct_taken) << path;
      f.sync_and_close();
    }
    std::ifstream in(path, std::ios::binary);
    const std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(back.size(), all.size()) << path;
    EXPECT_TRUE(back == std::string(all.begin(), all.end())) << path;
    fs::remove(path);
  }
}

TEST(checkpoint_storage, coverage_gap_and_overlap_refused_on_every_rank) {
  const std::string root = root_for("coverage");
  save(root, 1);
  const int r = rank(), p = ranks();
  {  // A gap: the last column of the weight is written by no rank.
    Writer w(MPI_COMM_WORLD, root, 2, {}, options());
    const std::int64_t c0 = lo(9, r, p), c1 = std::min<std::int64_t>(lo(9, r + 1, p), 8);
    std::vector<double> cols(4 * (c1 - c0), 1.0);
    w.add(Shard{kW, {0, c0}, {4, c1 - c0}}, cols.data(), cols.size() * sizeof(double));
    const std::string e = error_of([&] { w.commit(); });
    EXPECT_TRUE(contains(e, "'layer.0.w'") && contains(e, "gap") && contains(e, "[8, 9)")) << e;
  }
  {  // An overlap: the last rank also writes the first column (rank 0's).
    Writer w(MPI_COMM_WORLD, root, 2, {}, options());
    const std::int64_t c0 = lo(9, r, p), c1 = lo(9, r + 1, p);
    std::vector<double> cols(4 * (c1 - c0), 1.0);
    w.add(Shard{kW, {0, c0}, {4, c1 - c0}}, cols.data(), cols.size() * sizeof(double));
    if (r == p - 1) w.add(Shard{kW, {0, 0}, {4, 1}}, cols.data(), 4 * sizeof(double));
    const std::string e = error_of([&] { w.commit(); });
    EXPECT_TRUE(contains(e, "'layer.0.w'") && contains(e, "written twice")) << e;
  }
  // Nothing was published: step-1 is still the latest and complete, no step-2, no leftovers.
  EXPECT_EQ(slurp(root + "/latest"), "step-1");
  EXPECT_FALSE(fs::exists(root + "/step-2"));
  EXPECT_EQ(Reader(Reader::resolve(root)).step(), 1);
  barrier();
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(root)) entries += e.path().filename() != "" ? 1 : 0;
  EXPECT_EQ(entries, 2u) << "expected step-1 and latest only";
  barrier();
}

TEST(checkpoint_storage, bad_arguments_are_refused_by_add) {
  const std::string root = root_for("bad_arguments");
  // Refused before any collective: every rank's constructor throws alike.
  EXPECT_THROW(Writer(MPI_COMM_WORLD, root, -1, {}, options()), std::invalid_argument);
  EXPECT_THROW(Writer(MPI_COMM_WORLD, root, 1, nlohmann::json::array(), options()),
               std::invalid_argument);
  Writer w(MPI_COMM_WORLD, root, 0, {}, options());
  const std::vector<double> v(36, 0.0);
  const std::string size = error_of([&] { w.add(Shard{kW, {}, {}}, v.data(), 8); });
  EXPECT_TRUE(contains(size, "'layer.0.w'") && contains(size, "expected 288")) << size;
  const std::string box = error_of([&] { w.add(Shard{kW, {0, 5}, {4, 5}}, v.data(), 160); });
  EXPECT_TRUE(contains(box, "'layer.0.w'") && contains(box, "leaves the shape")) << box;
  add_all(w);
  // The same tensor again with another dtype: a caller's bug, named.
  const std::string dtype = error_of([&] {
    w.add(Shard{TensorInfo{kW.name, {4, 9}, "f32"}, {}, {}}, v.data(), 144);
  });
  EXPECT_TRUE(contains(dtype, "added with shape [4, 9] f64")) << dtype;
  // The refused calls left nothing behind: the proper shards commit.
  EXPECT_EQ(w.commit().total_bytes, 36 * 8 + 30 * 4 + 24 * 4 + 8);
  barrier();
}

// Every kind of damage is refused naming the file and the tensor. Rank 0 damages and reads
// (reading is per rank); the others wait.
TEST(checkpoint_storage, damaged_checkpoints_are_refused_naming_file_and_tensor) {
  const int p = ranks();
  const std::string last = "rank-" + std::to_string(p - 1) + ".bin";
  const auto fresh = [&](const std::string& name) {
    const std::string root = root_for(name);
    save(root, 3);
    return root + "/step-3";
  };
  const std::string truncated = fresh("truncated"), corrupted = fresh("corrupted"),
                    missing = fresh("missing"), no_index = fresh("no_index");
  if (rank() == 0) {
    // Truncated: the last rank's file (it holds the scalar) one byte short.
    const auto path = truncated + "/" + last;
    fs::resize_file(path, fs::file_size(path) - 1);
    const std::string e = error_of([&] { Reader r(truncated); });
    EXPECT_TRUE(contains(e, path) && contains(e, "truncated") && contains(e, "'step'")) << e;

    // Corrupted: one byte of rank 0's first shard (the weight's columns) flipped. The index
    // opens; reading the weight is refused, reading a tensor whose shards are intact is not.
    const Reader r(corrupted);
    std::int64_t at = -1;
    for (const auto& t : r.index().tensors)
      for (const auto& s : t.shards)
        if (s.rank == 0 && t.info.name == kW.name) at = s.byte_offset + 5;
    ASSERT_GE(at, 0);
    {
      std::fstream f(corrupted + "/rank-0.bin", std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(at);
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x10);
      f.seekp(at);
      f.write(&c, 1);
    }
    const std::string e2 = error_of([&] { r.read(kW.name); });
    EXPECT_TRUE(contains(e2, corrupted + "/rank-0.bin") && contains(e2, "'layer.0.w'") &&
                contains(e2, "checksum") && contains(e2, "corrupted"))
        << e2;
    EXPECT_EQ(r.read(kZ.name), as_bytes(ref_f(24, -7.0f)));

    // Missing: rank 0's file removed.
    fs::remove(missing + "/rank-0.bin");
    const std::string e3 = error_of([&] { Reader r3(missing); });
    EXPECT_TRUE(contains(e3, missing + "/rank-0.bin") && contains(e3, "missing") &&
                contains(e3, "'layer.0.w'"))
        << e3;

    // Missing index: an incomplete checkpoint, for the reader and for resolve.
    fs::remove(no_index + "/index.json");
    const std::string e4 = error_of([&] { Reader r4(no_index); });
    EXPECT_TRUE(contains(e4, no_index + "/index.json") && contains(e4, "missing")) << e4;
    const std::string e5 = error_of([&] { Reader::resolve(no_index); });
    EXPECT_TRUE(contains(e5, "no index.json") && contains(e5, "incomplete")) << e5;
  }
  barrier();
}

// A write that fails on one rank (the file-size limit, as a full disk), then the index that
// rank 0 cannot write, each fail every rank's commit with the file and the reason, and leave
// step-1 and `latest` as they were.
TEST(checkpoint_storage, failed_write_on_one_rank_keeps_previous_checkpoint) {
  const std::string root = root_for("failed_write");
  save(root, 1);
  const int p = ranks();
  std::string e;
  {
    Writer w(MPI_COMM_WORLD, root, 2, {}, options());
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    if (rank() == p - 1) {
      std::signal(SIGXFSZ, SIG_IGN);
      rlimit small = old;
      small.rlim_cur = 64;  // fewer bytes than the rank's shards
      ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    }
    add_all(w, 1.0);  // written at the latest by the commit's sync (posix::OutFile)
    e = error_of([&] { w.commit(); });
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  }
  const std::string file = "rank-" + std::to_string(p - 1) + ".bin";
  EXPECT_TRUE(contains(e, file) && contains(e, "File too large") &&
              contains(e, "rank " + std::to_string(p - 1)))
      << e;
  EXPECT_EQ(slurp(root + "/latest"), "step-1");
  EXPECT_FALSE(fs::exists(root + "/step-2"));
  const Reader r(Reader::resolve(root));
  EXPECT_EQ(r.step(), 1);
  EXPECT_EQ(r.read(kW.name), as_bytes(ref_w()));
  barrier();
  // The index itself cannot be written (rank 0, while publishing): refused on every rank too.
  {
    Writer w(MPI_COMM_WORLD, root, 2, {}, options());
    add_all(w, 1.0);
    w.sync();  // the data file written in full before the limit
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    if (rank() == 0) {
      std::signal(SIGXFSZ, SIG_IGN);
      rlimit small = old;
      small.rlim_cur = 64;  // index.json is larger
      ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    }
    e = error_of([&] { w.commit(); });
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  }
  EXPECT_TRUE(contains(e, "index.json") && contains(e, "File too large")) << e;
  EXPECT_EQ(slurp(root + "/latest"), "step-1");
  EXPECT_FALSE(fs::exists(root + "/step-2"));
  EXPECT_EQ(Reader(Reader::resolve(root)).step(), 1);
  barrier();
  // The next commit succeeds and leaves no temporary folder behind.
  save(root, 2);
  barrier();
  std::vector<std::string> entries;
  for (const auto& d : fs::directory_iterator(root)) entries.push_back(d.path().filename());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"latest", "step-1", "step-2"}));
  barrier();
}

TEST(checkpoint_storage, keep_prunes_oldest_and_replacing_a_step_is_atomic) {
  const std::string root = root_for("keep");
  save(root, 1);
  save(root, 2);
  if (rank() == 0) {  // a crashed save, and one killed while it rewrote `latest`
    fs::create_directories(root + "/step-9.tmp-leftover");
    std::ofstream(root + "/latest.tmp.12345.0") << "step-9\n";
  }
  barrier();
  save(root, 3);
  std::vector<std::string> entries;
  for (const auto& d : fs::directory_iterator(root)) entries.push_back(d.path().filename());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"latest", "step-2", "step-3"}));
  barrier();
  // The same step again (a resumed run saving where it restarted): the new content replaces it.
  save(root, 3, 1, 0.5);
  EXPECT_EQ(Reader(root + "/step-3").read(kW.name), as_bytes(ref_w(0.5)));
  entries.clear();
  for (const auto& d : fs::directory_iterator(root)) entries.push_back(d.path().filename());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"latest", "step-3"}));  // keep = 1
  barrier();
}

// A state that is not finite on one rank only (the last: a NaN in its f64 piece; then a bf16
// infinity) is published by no rank: every rank's commit says so naming that rank, and `latest`
// and the previous checkpoint stay (issue 29).
TEST(checkpoint_storage, non_finite_state_on_one_rank_is_not_published) {
  const std::string root = root_for("non_finite");
  save(root, 1);
  const int last = ranks() - 1;
  for (const char* dtype : {"f64", "bf16"}) {
    Writer w(MPI_COMM_WORLD, root, 2, {}, options(2));
    add_all(w);
    if (rank() == last) {
      if (std::string(dtype) == "f64") {
        const double bad[2] = {1.0, std::nan("")};
        w.add(Shard{{"bad", {2}, "f64"}, {}, {}}, bad, sizeof bad);
      } else {
        const std::uint16_t bad[3] = {0x3F80, 0x7F80, 0x0000};  // 1, +inf, 0
        w.add(Shard{{"bad", {3}, "bf16"}, {}, {}}, bad, sizeof bad);
      }
    }
    const SaveStats st = w.commit();
    EXPECT_FALSE(st.published) << dtype;
    EXPECT_TRUE(contains(st.not_published, "rank " + std::to_string(last) + ": 1 non-finite"))
        << st.not_published;
    EXPECT_TRUE(contains(st.not_published, "'bad'")) << st.not_published;
    barrier();
    EXPECT_EQ(slurp(root + "/latest"), "step-1");
    EXPECT_FALSE(fs::exists(root + "/step-2"));
    barrier();
  }
  EXPECT_TRUE(save(root, 2).published);  // finite again: published
}

// `latest` names a removed or incomplete folder: the newest complete checkpoint is chosen.
TEST(checkpoint_storage, resolve_latest_picks_newest_complete) {
  const std::string root = root_for("resolve");
  EXPECT_TRUE(contains(error_of([&] { Reader::resolve(root + "/none"); }), "does not exist"));
  save(root, 4, 3);
  save(root, 5, 3);
  save(root, 6, 3);
  if (rank() == 0) {
    EXPECT_EQ(Reader::resolve(root), root + "/step-6");
    EXPECT_EQ(Reader::resolve(root + "/latest"), root + "/step-6");
    EXPECT_EQ(Reader::resolve(root + "/step-5"), root + "/step-5");
    fs::remove_all(root + "/step-6");  // latest names a removed folder
    EXPECT_EQ(Reader::resolve(root), root + "/step-5");
    fs::remove(root + "/step-5/index.json");  // and the newest left is incomplete
    { std::ofstream(root + "/latest") << "step-5\n"; }
    EXPECT_EQ(Reader::resolve(root), root + "/step-4");
    EXPECT_EQ(Reader(Reader::resolve(root)).step(), 4);
    fs::remove(root + "/step-4/index.json");
    const std::string e = error_of([&] { Reader::resolve(root); });
    EXPECT_TRUE(contains(e, "no complete checkpoint") && contains(e, "step-5")) << e;
  }
  barrier();
}

// Every wait of a save goes through WriterOptions::wait when given (the driver routes them
// through the watchdog): the constructor's and commit's collectives, each named.
TEST(checkpoint_storage, every_wait_goes_through_the_wait_hook) {
  const std::string root = root_for("wait_hook");
  std::vector<std::string> waits;
  WriterOptions o = options();
  o.wait = [&](int n, MPI_Request* requests, const char* what, MPI_Comm) {
    waits.push_back(what);
    MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
  };
  Writer w(MPI_COMM_WORLD, root, 1, {}, o);
  const std::size_t in_constructor = waits.size();
  add_all(w);
  EXPECT_EQ(waits.size(), in_constructor) << "add waits for no one";
  w.commit();
  // Constructor: duplicate the communicator, broadcast the folder (length, name); commit:
  // gather the records (sizes, records), broadcast the outcome (length, text).
  EXPECT_EQ(in_constructor, 3u);
  EXPECT_EQ(waits.size(), 7u);
  for (const auto& what : waits) EXPECT_TRUE(contains(what, "checkpoint")) << what;
  barrier();
}

// A Writer alone on its communicator (1 rank) commits on another thread with no MPI call (an
// asynchronous save's writing thread, docs/checkpoint.md); commit() then only returns the
// outcome. With more ranks commit_alone does nothing and commit() agrees as before.
TEST(checkpoint_storage, a_writer_alone_commits_on_another_thread_without_mpi) {
  const std::string root = root_for("alone");
  std::size_t waits = 0;
  WriterOptions o = options();
  o.wait = [&](int n, MPI_Request* requests, const char*, MPI_Comm) {
    ++waits;
    MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
  };
  Writer w(MPI_COMM_WORLD, root, 1, {}, o);
  add_all(w);
  const std::size_t in_constructor = waits;
  bool alone = false;
  std::thread t([&] {
    w.sync();
    alone = w.commit_alone();
  });
  t.join();
  EXPECT_EQ(alone, ranks() == 1);
  if (alone) {
    EXPECT_EQ(slurp(root + "/latest"), "step-1") << "published by the thread";
  }
  const SaveStats st = w.commit();
  EXPECT_EQ(fs::path(st.folder).filename(), "step-1");
  EXPECT_EQ(waits - in_constructor, alone ? 0u : 4u);
  EXPECT_EQ(w.published_off_owner(), alone);
  EXPECT_EQ(Reader(root + "/step-1").read(kW.name), as_bytes(ref_w()));
  barrier();
}

// A rank that never commits: the others' waits end at the deadline with a message naming the
// rank and the operation, and the job ends with exit code 5 (registered to run alone, on 2
// ranks, with the expected output as its pass criterion: checkpoint_storage_deadline_np2).
TEST(checkpoint_deadline, a_rank_that_never_commits_ends_the_job) {
  const std::string root = root_for("deadline");
  WriterOptions o = options();
  o.timeout_s = 3;
  // The default wait, with the 3 s deadline only from the commit on: the constructor's own waits
  // (duplicating the communicator, the folder's name) have 600 s, so that a rank a busy machine
  // holds up there cannot end the job in another wait than the one this test is about (with a
  // 1 s, then a 3 s deadline on every wait, loaded -j2 suites did).
  bool armed = false;
  o.wait = [&armed](int n, MPI_Request* q, const char* what, MPI_Comm comm) {
    default_wait(n, q, what, comm, armed ? 3.0 : 600.0);
  };
  Writer w(MPI_COMM_WORLD, root, 1, {}, o);
  armed = true;
  if (rank() == 0) {
    w.commit();
    ADD_FAILURE() << "commit returned without rank 1";
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // ended by MPI_Abort long before
  }
}
