// Opening, checking and reading a checkpoint folder (reader.hpp).
#include "checkpoint/reader.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "checkpoint/posix_file.hpp"
#include "checkpoint/root_layout.hpp"

namespace paraxis::checkpoint {

namespace fs = std::filesystem;

namespace {

// The tensors with a shard in `file`, for messages: "a, b, c" (at most 4, then "...").
std::string tensors_in(const Index& index, const std::string& file) {
  std::string s;
  int n = 0;
  for (const auto& t : index.tensors)
    for (const auto& r : t.shards)
      if (r.file == file) {
        if (n++ < 4) s += std::string(s.empty() ? "" : ", ") + "'" + t.info.name + "'";
        break;
      }
  if (n > 4) s += ", ... (" + std::to_string(n) + " tensors)";
  return s.empty() ? "no tensor" : s;
}

}  // namespace

Reader::Reader(std::string folder) : folder_(std::move(folder)) {
  const std::string index_path = (fs::path(folder_) / kIndexFile).string();
  errno = 0;
  std::ifstream in(index_path, std::ios::binary);
  if (!in) {
    // Missing is one thing (a save that did not finish); unreadable (permissions, I/O) is
    // another, said with the system's reason.
    const int err = errno;
    std::error_code ec;
    if (!fs::is_directory(folder_, ec))
      throw std::runtime_error("checkpoint: '" + folder_ + "' is not a folder");
    if (err != ENOENT && err != 0)
      throw std::runtime_error("checkpoint: cannot read '" + index_path +
                               "': " + std::strerror(err));
    throw std::runtime_error("checkpoint: '" + index_path +
                             "' is missing: an incomplete checkpoint (its save did not finish) or "
                             "not a checkpoint folder");
  }
  std::ostringstream content;
  content << in.rdbuf();
  index_ = parse_index(content.str(), index_path);
  const auto named = step_of_folder_name(fs::path(folder_).filename().string());
  if (named && *named != index_.step)
    throw std::runtime_error("checkpoint index '" + index_path + "': step " +
                             std::to_string(index_.step) + " in a folder named for step " +
                             std::to_string(*named));
  for (std::size_t t = 0; t < index_.tensors.size(); ++t) {
    tensor_[index_.tensors[t].info.name] = t;
    first_shard_.push_back(shards_.size());
    for (const auto& r : index_.tensors[t].shards) shards_.push_back(&r);
  }
  for (const auto& f : index_.files) {
    const std::string path = (fs::path(folder_) / f.name).string();
    const std::int64_t size = posix::file_size(path);
    if (size < 0)
      throw std::runtime_error("checkpoint: data file '" + path + "' (rank " +
                               std::to_string(f.rank) + ") is missing; it holds " +
                               tensors_in(index_, f.name));
    if (size < f.bytes)
      throw std::runtime_error("checkpoint: data file '" + path + "' has " + std::to_string(size) +
                               " bytes, the index records " + std::to_string(f.bytes) +
                               " (a truncated file); it holds " + tensors_in(index_, f.name));
  }
}

std::string Reader::resolve(const std::string& given) {
  return resolve_checkpoint(given);
}

std::vector<TensorInfo> Reader::tensors() const {
  std::vector<TensorInfo> v;
  for (const auto& t : index_.tensors) v.push_back(t.info);
  return v;
}

bool Reader::has(const std::string& tensor) const {
  return tensor_.count(tensor) > 0;
}

const TensorRecord& Reader::record(const std::string& tensor) const {
  const auto it = tensor_.find(tensor);
  if (it == tensor_.end())
    throw std::runtime_error("checkpoint '" + folder_ + "' has no tensor '" + tensor + "'");
  return index_.tensors[it->second];
}

const TensorInfo& Reader::info(const std::string& tensor) const {
  return record(tensor).info;
}

std::size_t Reader::bytes() const {
  std::size_t n = 0;
  for (const auto* r : shards_) n += static_cast<std::size_t>(r->bytes);
  return n;
}

void Reader::set_cache_limit(std::size_t bytes) {
  cache_limit_ = bytes;
  while (cache_bytes_ > cache_limit_ && !cache_.empty()) {
    cache_bytes_ -= cache_.back().second.size();
    cache_.pop_back();
  }
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "tensor 'x' (shard of rank R, bytes [a, b))": whose bytes, for messages.
std::string shard_label(const std::string& tensor, const ShardRecord& r) {
  return "tensor '" + tensor + "' (shard of rank " + std::to_string(r.rank) + ", bytes [" +
         std::to_string(r.byte_offset) + ", " + std::to_string(r.byte_offset + r.bytes) + "))";
}

}  // namespace

namespace {

// Shards are read and hashed in chunks of this size: each chunk is hashed while it is still in
// the processor's cache, and the kernel's readahead brings the next meanwhile.
constexpr std::size_t kChunk = std::size_t{4} << 20;

// Waits until another rank of the host has read a shard into the page cache (read_once.hpp); a
// rank that gives no sign for this long (it died, or its storage hangs) is an error, not a hang.
constexpr double kReadyTimeout_s = 600;

void wait_ready(const int* ready, const std::string& path, const std::string& what) {
  const auto t0 = std::chrono::steady_clock::now();
  int v = 0;
  while ((v = __atomic_load_n(ready, __ATOMIC_ACQUIRE)) == 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
        kReadyTimeout_s)
      throw std::runtime_error("checkpoint: '" + path + "': " + what +
                               ": the rank of this host that reads it gave no sign for " +
                               std::to_string(static_cast<int>(kReadyTimeout_s)) + " s");
  }
  if (v != 1)
    throw std::runtime_error("checkpoint: '" + path + "': " + what +
                             ": the rank of this host that reads it could not (its message says "
                             "why)");
}

}  // namespace

const posix::InFile& Reader::file(const std::string& name) const {
  auto& f = files_[name];
  if (!f) f = std::make_unique<posix::InFile>((fs::path(folder_) / name).string());
  return *f;
}

// Shard s read chunk by chunk into `out` (`reuse`: each chunk over the last, else one after the
// other), each chunk hashed as it arrives; returns the checksum of the whole shard.
std::string Reader::read_hashed(std::size_t s, std::byte* out, bool reuse) const {
  const ShardRecord& r = *shards_[s];
  const posix::InFile& f = file(r.file);
  const std::string what = shard_label(r.shard.tensor.name, r);
  const auto h = host_cached_.find(s);
  const bool cache = h != host_cached_.end();
  if (cache && h->second) wait_ready(h->second, f.path(), what);
  const auto bytes = static_cast<std::size_t>(r.bytes);
  Checksum sum;
  for (std::size_t at = 0; at < bytes; at += kChunk) {
    const std::size_t n = std::min(kChunk, bytes - at);
    std::byte* to = reuse ? out : out + at;
    const double t0 = now_s();
    const std::size_t stored =
        f.read(r.byte_offset + static_cast<std::int64_t>(at), n, to, what, cache);
    const double t1 = now_s();
    sum.update(to, n);
    times_.storage_s += t1 - t0;
    times_.verify_s += now_s() - t1;
    bytes_read_ += stored;
    if (cache) {
      cached_bytes_ += n - stored;
      reread_bytes_ += stored;
    }
  }
  return sum.hex();
}

void Reader::check(std::size_t s, const std::string& sum) const {
  const ShardRecord& r = *shards_[s];
  if (sum != r.checksum)
    throw std::runtime_error("checkpoint: '" + file(r.file).path() +
                             "': " + shard_label(r.shard.tensor.name, r) + ": checksum " + sum +
                             ", the index records " + r.checksum + " (corrupted data)");
}

void Reader::read_verified(std::size_t s, std::byte* out) const {
  check(s, read_hashed(s, out, false));
}

void Reader::read_for_host(std::size_t s) const {
  const auto bytes = static_cast<std::size_t>(shards_.at(s)->bytes);
  if (bounce_.size() < std::min(kChunk, bytes)) bounce_.resize(std::min(kChunk, bytes));
  check(s, read_hashed(s, bounce_.data(), true));
}

void Reader::in_host_cache(std::size_t s, const int* ready) const {
  (void)shards_.at(s);  // in range
  host_cached_[s] = ready;
}

void Reader::count(const Reader& other) const {
  bytes_read_ += other.bytes_read_;
  times_.storage_s += other.times_.storage_s;
  times_.verify_s += other.times_.verify_s;
}

bool Reader::host_cache_readable() const {
  for (const auto& f : index_.files)
    if (f.bytes > 0) return file(f.name).cache_reads();
  return true;
}

std::vector<std::size_t> Reader::in_file_order(std::vector<std::size_t> shards) const {
  std::sort(shards.begin(), shards.end(), [&](std::size_t a, std::size_t b) {
    const auto &x = *shards_.at(a), &y = *shards_.at(b);
    return std::tie(x.file, x.byte_offset) < std::tie(y.file, y.byte_offset);
  });
  return shards;
}

std::vector<std::byte> Reader::read_shard(std::size_t s) const {
  std::vector<std::byte> buf(static_cast<std::size_t>(shards_.at(s)->bytes));
  read_verified(s, buf.data());
  return buf;
}

void Reader::read_shard_into(std::size_t s, std::byte* out) const {
  (void)shards_.at(s);  // in range
  read_verified(s, out);
}

void Reader::keep(std::size_t s, std::vector<std::byte> bytes) const {
  if (bytes.size() != static_cast<std::size_t>(shards_.at(s)->bytes))
    throw std::logic_error("checkpoint::Reader::keep: shard " + std::to_string(s) + " has " +
                           std::to_string(shards_[s]->bytes) + " bytes, given " +
                           std::to_string(bytes.size()));
  auto& mine = owned_[s];
  mine = std::move(bytes);
  kept_[s] = mine.data();
}

void Reader::keep_view(std::size_t s, const std::byte* data) const {
  (void)shards_.at(s);  // in range
  owned_.erase(s);
  kept_[s] = data;
}

void Reader::forget_kept() const {
  kept_.clear();
  owned_.clear();
}

const std::byte* Reader::held(std::size_t s) const {
  const auto k = kept_.find(s);
  if (k != kept_.end()) return k->second;
  const auto hit =
      std::find_if(cache_.begin(), cache_.end(), [&](const auto& e) { return e.first == s; });
  if (hit == cache_.end()) return nullptr;
  cache_.splice(cache_.begin(), cache_, hit);
  return cache_.front().second.data();
}

// Shard s's verified bytes: held, else read (into the cache when it fits, else into buf).
const std::byte* Reader::fetch(std::size_t s, std::vector<std::byte>& buf) const {
  if (const auto* h = held(s)) return h;
  buf = read_shard(s);
  if (buf.size() > cache_limit_) return buf.data();
  cache_bytes_ += buf.size();
  cache_.emplace_front(s, std::move(buf));
  buf = {};
  while (cache_bytes_ > cache_limit_ && cache_.size() > 1) {
    cache_bytes_ -= cache_.back().second.size();
    cache_.pop_back();
  }
  return cache_.front().second.data();
}

std::vector<std::size_t> Reader::shards_of(const Shard& region_in) const {
  const TensorRecord& rec = record(region_in.tensor.name);
  const std::vector<Run> want = runs_of(normalized(region_in));
  std::vector<std::size_t> out;
  const std::size_t first = first_shard_[tensor_.at(rec.info.name)];
  for (std::size_t i = 0; i < rec.shards.size(); ++i)
    if (!overlap(want, runs_of(rec.shards[i].shard)).empty()) out.push_back(first + i);
  return out;
}

std::vector<std::byte> Reader::read(const std::string& tensor) const {
  Shard whole;
  whole.tensor = info(tensor);
  return read(whole);
}

std::vector<std::byte> Reader::read(const Shard& region) const {
  const Shard n = normalized(region);
  std::vector<std::byte> out(static_cast<std::size_t>(n.end - n.begin) *
                             dtype_size(n.tensor.dtype));
  read_into(region, out.data(), out.size());
  return out;
}

long Reader::whole_shard(const Shard& region_in, std::size_t bytes) const {
  const TensorRecord& rec = record(region_in.tensor.name);
  const TensorInfo& saved = rec.info;
  if (!(saved == region_in.tensor))
    throw std::runtime_error("checkpoint '" + folder_ + "': tensor '" + saved.name +
                             "' was saved with shape " + to_string(saved.shape) + " " +
                             saved.dtype + ", asked for as " + to_string(region_in.tensor.shape) +
                             " " + region_in.tensor.dtype);
  const Shard region = normalized(region_in);
  if (bytes != static_cast<std::size_t>(region.end - region.begin) * dtype_size(saved.dtype))
    throw std::logic_error("checkpoint: tensor '" + saved.name + "': " + std::to_string(bytes) +
                           " bytes asked for a region of " +
                           std::to_string(region.end - region.begin) + " elements");
  const std::size_t first = first_shard_[tensor_.at(saved.name)];
  for (std::size_t i = 0; i < rec.shards.size(); ++i) {
    const Shard& sh = rec.shards[i].shard;
    if (sh.offset == region.offset && sh.extent == region.extent && sh.begin == region.begin &&
        sh.end == region.end)
      return static_cast<long>(first + i);
  }
  return -1;
}

void Reader::read_into(const Shard& region_in, void* out_v, std::size_t bytes) const {
  auto* out = static_cast<std::byte*>(out_v);
  const long whole = whole_shard(region_in, bytes);
  if (whole >= 0 && !held(static_cast<std::size_t>(whole))) {
    read_verified(static_cast<std::size_t>(whole), out);  // straight into place
    return;
  }
  const TensorRecord& rec = record(region_in.tensor.name);
  const Shard region = normalized(region_in);
  const std::size_t es = dtype_size(rec.info.dtype);
  const std::size_t first = first_shard_[tensor_.at(rec.info.name)];
  const std::vector<Run> want = runs_of(region);
  std::int64_t filled = 0;
  std::vector<std::byte> buf;
  for (std::size_t i = 0; i < rec.shards.size(); ++i) {
    const std::vector<Piece> pieces = overlap(want, runs_of(rec.shards[i].shard));
    if (pieces.empty()) continue;
    // The whole shard is read: its checksum covers all of it.
    const std::byte* data = fetch(first + i, buf);
    for (const auto& p : pieces) {
      std::memcpy(out + p.to_local * es, data + p.from_local * es,
                  static_cast<std::size_t>(p.count) * es);
      filled += p.count;
    }
  }
  // Coverage was checked when the index was opened; this guards the assembly itself.
  if (filled != region.end - region.begin)
    throw std::logic_error("checkpoint: tensor '" + rec.info.name + "': assembled " +
                           std::to_string(filled) + " of " +
                           std::to_string(region.end - region.begin) + " elements");
}

}  // namespace paraxis::checkpoint
