// The collective save (writer.hpp). Each rank streams its shards into its own file as they are
// added; commit gathers only the shard records (small JSON) to rank 0 with MPI_Gatherv and
// broadcasts one outcome, so that the ranks agree: every rank returns or every rank throws.
// Every wait is a non-blocking collective completed by a wait with a deadline.
#include "checkpoint/writer.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <thread>

#include "checkpoint/posix_file.hpp"
#include "checkpoint/root_layout.hpp"
#include "config/exit_codes.hpp"
#include "io/checked_file.hpp"

namespace paraxis::checkpoint {

namespace {
// A monotonic clock that is not an MPI call: add() may run on a thread of its own (an
// asynchronous save), where an MPI library initialised without thread support allows none.
double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

using nlohmann::json;
namespace fs = std::filesystem;

struct Writer::File {
  explicit File(const std::string& path) : out(path) {}
  posix::OutFile out;
};

void default_wait(int n, MPI_Request* requests, const char* what, MPI_Comm comm, double timeout_s) {
  const double start = seconds_now();
  for (;;) {
    int done = 0;
    MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE);
    if (done) return;
    if (seconds_now() - start > timeout_s) {
      int rank = 0;
      MPI_Comm_rank(comm, &rank);
      std::fflush(stdout);
      std::fprintf(stderr,
                   "paraxis checkpoint: rank %d waited %.1f s (the deadline) for %s: another "
                   "rank stopped responding during the save; ending the job (exit code %d)\n",
                   rank, timeout_s, what, exit_code::hang);
      std::fflush(stderr);
      // mpiexec forwards output asynchronously and MPI_Abort tears the job down at once: the
      // message gets a moment to reach the user first, as the watchdog's (parallel/watchdog.cpp).
      // (checkpoint_storage_deadline_np2 once missed this line in a loaded -j2 run.)
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      MPI_Abort(MPI_COMM_WORLD, exit_code::hang);
    }
    // The ranks may share cores: give the core away between polls.
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

namespace {

// Elements of a shard's bytes that are NaN or infinite (floating-point dtypes only).
std::int64_t count_non_finite(const std::string& dtype, const void* data, std::size_t bytes) {
  std::int64_t n = 0;
  if (dtype == "f64") {
    const auto* p = static_cast<const double*>(data);
    for (std::size_t i = 0; i < bytes / sizeof(double); ++i) n += !std::isfinite(p[i]);
  } else if (dtype == "f32") {
    const auto* p = static_cast<const float*>(data);
    for (std::size_t i = 0; i < bytes / sizeof(float); ++i) n += !std::isfinite(p[i]);
  } else if (dtype == "bf16") {  // the upper half of an f32: exponent all ones
    const auto* p = static_cast<const std::uint16_t*>(data);
    for (std::size_t i = 0; i < bytes / 2; ++i) n += (p[i] & 0x7F80u) == 0x7F80u;
  }
  return n;
}

Spread spread_of(const std::vector<double>& v) {
  Spread s;
  if (v.empty()) return s;
  s.min = s.max = v[0];
  for (const double x : v) {
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    s.mean += x / static_cast<double>(v.size());
  }
  return s;
}

json to_json(const Spread& s) {
  return json{{"min", s.min}, {"mean", s.mean}, {"max", s.max}};
}
Spread spread_from(const json& j) {
  return Spread{j.at("min").get<double>(), j.at("mean").get<double>(), j.at("max").get<double>()};
}

}  // namespace

Writer::Writer(MPI_Comm comm, std::string root, long step, json meta, WriterOptions options)
    : root_(std::move(root)), step_(step), meta_(std::move(meta)), options_(std::move(options)) {
  start_s_ = seconds_now();
  owner_ = std::this_thread::get_id();
  if (meta_.is_null()) meta_ = json::object();
  if (step_ < 0 || options_.keep < 1 || !(options_.timeout_s > 0) || !meta_.is_object() ||
      root_.empty())
    throw std::invalid_argument(
        "checkpoint::Writer: root '" + root_ + "', step " + std::to_string(step_) + ", keep " +
        std::to_string(options_.keep) + ", timeout " + std::to_string(options_.timeout_s) +
        " s, meta of type " + meta_.type_name() +
        "; expected a root, step >= 0, keep >= 1, timeout > 0 and a JSON object");
  MPI_Request dup;
  MPI_Comm_idup(comm, &comm_, &dup);
  wait(1, &dup, "checkpoint: duplicating the communicator");
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  std::string made;
  if (rank_ == 0) {
    try {
      std::error_code ec;
      fs::create_directories(root_, ec);
      if (ec)
        throw std::runtime_error("checkpoint: cannot create '" + root_ + "': " + ec.message());
      const std::string tmp = (fs::path(root_) / temporary_folder_name(step_)).string();
      posix::make_folder(tmp);
      made = "ok:" + tmp;
    } catch (const std::exception& e) {
      made = std::string("error:") + e.what();
    }
  }
  made = broadcast_string(made, "checkpoint: creating the folder");
  if (made.rfind("ok:", 0) != 0) {
    MPI_Comm_free(&comm_);
    throw std::runtime_error(made.substr(6));
  }
  tmp_ = made.substr(3);
  const double t0 = seconds_now();
  try {
    file_ = std::make_unique<File>((fs::path(tmp_) / data_file_name(rank_)).string());
  } catch (const std::exception& e) {
    error_ = e.what();
  }
  write_s_ += seconds_now() - t0;
}

Writer::~Writer() {
  if (publisher_.joinable()) publisher_.join();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Writer::wait(int n, MPI_Request* requests, const char* what) {
  if (options_.wait)
    options_.wait(n, requests, what, comm_);
  else
    default_wait(n, requests, what, comm_, options_.timeout_s);
}

std::string Writer::broadcast_string(std::string s, const char* what) {
  long long n = static_cast<long long>(s.size());
  MPI_Request r;
  MPI_Ibcast(&n, 1, MPI_LONG_LONG, 0, comm_, &r);
  wait(1, &r, what);
  s.resize(static_cast<std::size_t>(n));
  MPI_Ibcast(s.data(), static_cast<int>(n), MPI_CHAR, 0, comm_, &r);
  wait(1, &r, what);
  return s;
}

void Writer::add(const Shard& shard, const void* data, std::size_t bytes) {
  if (committed_ || synced_) throw std::logic_error("checkpoint::Writer::add after sync or commit");
  const Shard n = normalized(shard);
  const std::size_t need = static_cast<std::size_t>(n.end - n.begin) * dtype_size(n.tensor.dtype);
  if (bytes != need)
    throw std::invalid_argument("checkpoint: tensor '" + n.tensor.name +
                                "': " + std::to_string(bytes) + " bytes given for a shard of " +
                                std::to_string(n.end - n.begin) + " " + n.tensor.dtype +
                                " elements; expected " + std::to_string(need));
  if (bytes > 0 && data == nullptr)
    throw std::invalid_argument("checkpoint: tensor '" + n.tensor.name + "': no data");
  for (const auto& r : records_)
    if (r.shard.tensor.name == n.tensor.name && !(r.shard.tensor == n.tensor))
      throw std::invalid_argument("checkpoint: tensor '" + n.tensor.name + "' added with shape " +
                                  to_string(r.shard.tensor.shape) + " " + r.shard.tensor.dtype +
                                  " and again with " + to_string(n.tensor.shape) + " " +
                                  n.tensor.dtype);
  const double t0 = seconds_now();
  ShardRecord rec;
  rec.shard = n;
  rec.rank = rank_;
  rec.file = data_file_name(rank_);
  rec.byte_offset = file_ ? file_->out.size() : 0;
  rec.bytes = static_cast<std::int64_t>(bytes);
  rec.checksum = checksum(data, bytes);
  if (options_.refuse_non_finite) {
    const std::int64_t bad = count_non_finite(n.tensor.dtype, data, bytes);
    if (bad > 0 && non_finite_tensor_.empty()) non_finite_tensor_ = n.tensor.name;
    non_finite_ += bad;
  }
  if (error_.empty() && file_) {
    try {
      file_->out.append(data, bytes);
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
  records_.push_back(std::move(rec));
  write_s_ += seconds_now() - t0;
}

void Writer::sync() {
  if (committed_ || synced_)
    throw std::logic_error("checkpoint::Writer::sync after sync or commit");
  synced_ = true;
  synced_off_owner_ = std::this_thread::get_id() != owner_;
  const double t0 = seconds_now();
  if (error_.empty() && file_) {
    try {
      file_->out.sync_and_close();
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
  write_s_ += seconds_now() - t0;
}

// This rank's piece of the commit (its records, error and figures as JSON), once.
void Writer::make_piece(bool publish_on_thread) {
  if (committed_) throw std::logic_error("checkpoint::Writer::commit called twice");
  commit_start_ = seconds_now();
  if (!synced_) sync();
  committed_ = true;
  publish_on_thread_ = publish_on_thread;
  my_bytes_ = file_ ? file_->out.size() : 0;
  json recs = json::array();
  for (const auto& r : records_) recs.push_back(to_json(r));
  piece_ = json{{"rank", rank_},
                {"error", error_},
                {"write_s", write_s_},
                {"bytes", my_bytes_},
                {"non_finite", non_finite_},
                {"non_finite_tensor", non_finite_tensor_},
                {"records", recs}}
               .dump();
  piece_len_ = static_cast<int>(piece_.size());
}

void Writer::begin(bool publish_on_thread) {
  make_piece(publish_on_thread);
  // The pieces (shard records: a few hundred bytes per shard) to rank 0: first their sizes.
  lens_.assign(rank_ == 0 ? static_cast<std::size_t>(size_) : 0, 0);
  displs_.assign(lens_.size(), 0);
  MPI_Igather(&piece_len_, 1, MPI_INT, lens_.data(), 1, MPI_INT, 0, comm_, &request_);
  phase_ = Phase::sizes;
}

void Writer::begin_commit() {
  begin(true);
}

bool Writer::commit_alone() {
  if (size_ != 1 || committed_) return false;
  make_piece(false);  // published right here, on the calling thread
  lens_.assign(1, piece_len_);
  displs_.assign(1, 0);
  all_ = piece_;
  start_publishing();
  phase_ = Phase::done;
  return true;
}

bool Writer::poll() {
  if (phase_ == Phase::none) throw std::logic_error("checkpoint::Writer::poll before begin_commit");
  return advance(false);
}

SaveStats Writer::commit() {
  if (phase_ == Phase::none) begin(false);
  advance(true);
  return stats_from_outcome();
}

// Completes the posted request (block) or tests it; true when it is complete.
bool Writer::next_request(bool block, const char* what) {
  if (block) {
    wait(1, &request_, what);
    return true;
  }
  int done = 0;
  MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
  return done != 0;
}

// Rank 0: the gathered pieces checked and published (rank0_publish), on a thread of its own
// for an asynchronous commit; the outcome in outcome_.
void Writer::start_publishing() {
  auto publish = [this] {
    std::vector<std::string> pieces;
    for (int i = 0; i < size_; ++i)
      pieces.push_back(all_.substr(static_cast<std::size_t>(displs_[static_cast<std::size_t>(i)]),
                                   static_cast<std::size_t>(lens_[static_cast<std::size_t>(i)])));
    json o;
    try {
      o = json::parse(rank0_publish(pieces));
    } catch (const std::exception& e) {  // a bug, but the other ranks must still hear of it
      o = json{{"error", std::string("checkpoint commit failed on rank 0: ") + e.what()}};
    }
    o["commit_s"] = seconds_now() - commit_start_;
    o["total_s"] = seconds_now() - start_s_;
    outcome_ = o.dump();
    published_off_owner_ = std::this_thread::get_id() != owner_;
    publisher_done_ = true;
  };
  if (publish_on_thread_)
    publisher_ = std::thread(publish);
  else
    publish();
}

// The commit's steps from where it is: as far as it can without waiting, or (block) to its end.
// True once the outcome is here.
bool Writer::advance(bool block) {
  while (phase_ != Phase::done) {
    if (phase_ == Phase::sizes) {
      if (!next_request(block, "checkpoint: gathering the shard records' sizes")) return false;
      long long total = 0;
      for (std::size_t i = 0; i < lens_.size(); ++i) {
        displs_[i] = static_cast<int>(total);
        total += lens_[i];
      }
      all_.resize(static_cast<std::size_t>(total));
      MPI_Igatherv(piece_.data(), piece_len_, MPI_CHAR, all_.data(), lens_.data(), displs_.data(),
                   MPI_CHAR, 0, comm_, &request_);
      phase_ = Phase::records;
    } else if (phase_ == Phase::records) {
      if (!next_request(block, "checkpoint: gathering the shard records")) return false;
      if (rank_ == 0) start_publishing();
      phase_ = Phase::publishing;
    } else if (phase_ == Phase::publishing) {
      if (rank_ == 0 && publish_on_thread_ && !block && !publisher_done_) return false;
      if (publisher_.joinable()) publisher_.join();
      outcome_len_ = static_cast<long long>(outcome_.size());
      MPI_Ibcast(&outcome_len_, 1, MPI_LONG_LONG, 0, comm_, &request_);
      phase_ = Phase::outcome_size;
    } else if (phase_ == Phase::outcome_size) {
      if (!next_request(block, "checkpoint: the commit's outcome")) return false;
      outcome_.resize(static_cast<std::size_t>(outcome_len_));
      MPI_Ibcast(outcome_.data(), static_cast<int>(outcome_len_), MPI_CHAR, 0, comm_, &request_);
      phase_ = Phase::outcome;
    } else {
      if (!next_request(block, "checkpoint: the commit's outcome")) return false;
      phase_ = Phase::done;
    }
  }
  return true;
}

SaveStats Writer::stats_from_outcome() const {
  const json o = json::parse(outcome_);
  if (!o.at("error").get<std::string>().empty())
    throw std::runtime_error(o.at("error").get<std::string>());
  SaveStats stats;
  stats.folder = o.at("folder").get<std::string>();
  stats.write_s = write_s_;
  stats.bytes = static_cast<double>(my_bytes_);
  stats.write_s_ranks = spread_from(o.at("write_s"));
  stats.bytes_ranks = spread_from(o.at("bytes"));
  stats.total_bytes = o.at("total_bytes").get<double>();
  stats.aggregate_bytes_per_s =
      stats.write_s_ranks.max > 0 ? stats.total_bytes / stats.write_s_ranks.max : 0.0;
  stats.commit_s = o.at("commit_s").get<double>();
  stats.total_s = o.at("total_s").get<double>();
  stats.warnings = o.at("warnings").get<std::vector<std::string>>();
  stats.not_published = o.at("not_finite").get<std::string>();
  stats.published = stats.not_published.empty();
  return stats;
}

namespace {

// "" when every rank's pieces were finite; else which ranks had how many non-finite elements,
// and in which tensor first (the gathered pieces: Writer::commit).
std::string non_finite_summary(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) {
    const json j = json::parse(p);
    const auto n = j.value("non_finite", std::int64_t{0});
    if (n == 0) continue;
    s += (s.empty() ? "" : "; ") +
         ("rank " + std::to_string(j.at("rank").get<int>()) + ": " + std::to_string(n) +
          " non-finite values, the first in '" + j.value("non_finite_tensor", std::string()) + "'");
  }
  return s;
}

// What the ranks' records say, gathered on rank 0: the first problem ("" if none), each rank's
// write time and bytes, and every tensor with its shards; index.files gets each rank's data file.
struct Gathered {
  std::string error;
  std::vector<double> write_s, bytes;
  std::map<std::string, TensorRecord> tensors;
};

Gathered gather_records(const std::vector<std::string>& pieces, Index& index) {
  Gathered g;
  std::string& error = g.error;
  std::map<std::string, int> first_rank;
  for (const auto& p : pieces) {
    const json j = json::parse(p);
    const int rank = j.at("rank").get<int>();
    g.write_s.push_back(j.at("write_s").get<double>());
    g.bytes.push_back(j.at("bytes").get<double>());
    const std::string e = j.at("error").get<std::string>();
    if (!e.empty())
      error += (error.empty() ? "" : "; ") + ("rank " + std::to_string(rank) + ": " + e);
    index.files.push_back(
        FileRecord{data_file_name(rank), rank, j.at("bytes").get<std::int64_t>()});
    for (const auto& jr : j.at("records")) {
      const ShardRecord rec = shard_record_from_json(jr);
      const auto& info = rec.shard.tensor;
      auto [it, fresh] = g.tensors.emplace(info.name, TensorRecord{info, {}});
      if (fresh) first_rank[info.name] = rank;
      if (!(it->second.info == info) && error.empty())
        error = "checkpoint commit refused: tensor '" + info.name + "': rank " +
                std::to_string(first_rank[info.name]) + " gives shape " +
                to_string(it->second.info.shape) + " " + it->second.info.dtype + ", rank " +
                std::to_string(rank) + " gives " + to_string(info.shape) + " " + info.dtype;
      it->second.shards.push_back(rec);
    }
  }
  return g;
}

}  // namespace

// Rank 0: checks the gathered records, writes index.json and publishes the folder. Returns the
// outcome as JSON: error ("" on success), folder, the spreads over ranks and warnings.
std::string Writer::rank0_publish(const std::vector<std::string>& pieces) {
  Index index;
  index.step = step_;
  index.ranks = size_;
  index.meta = meta_;
  index.lineage = options_.lineage;
  Gathered g = gather_records(pieces, index);
  std::string& error = g.error;
  std::vector<std::string> warnings;
  std::string folder;
  const std::string not_finite = non_finite_summary(pieces);
  if (error.empty()) {
    for (auto& [name, t] : g.tensors) index.tensors.push_back(std::move(t));
    const std::string e = consistency_error(index);
    if (!e.empty()) error = "checkpoint commit refused (nothing was published): " + e;
  }
  if (error.empty() && not_finite.empty()) {
    try {
      // io::write_file_checked syncs index.json and the folder (the data files are synced).
      io::write_file_checked((fs::path(tmp_) / kIndexFile).string(), to_json(index).dump(1) + "\n");
      folder = publish(root_, tmp_, step_,
                       Retention{options_.keep, options_.lineage.id, options_.protect}, warnings);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!error.empty() || !not_finite.empty()) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);  // best effort: the next successful commit removes it otherwise
  }
  double total = 0;
  for (const double b : g.bytes) total += b;
  return json{{"error", error},
              {"not_finite", error.empty() ? not_finite : std::string()},
              {"folder", folder},
              {"warnings", warnings},
              {"write_s", to_json(spread_of(g.write_s))},
              {"bytes", to_json(spread_of(g.bytes))},
              {"total_bytes", total}}
      .dump();
}

}  // namespace paraxis::checkpoint
