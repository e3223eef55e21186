// Opening, checking and reading a checkpoint folder (reader.hpp).
#include "checkpoint/reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

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
  for (const auto& t : index_.tensors)
    if (t.info.name == tensor) return true;
  return false;
}

const TensorInfo& Reader::info(const std::string& tensor) const {
  for (const auto& t : index_.tensors)
    if (t.info.name == tensor) return t.info;
  throw std::runtime_error("checkpoint '" + folder_ + "' has no tensor '" + tensor + "'");
}

std::size_t Reader::bytes() const {
  std::size_t n = 0;
  for (const auto& t : index_.tensors)
    for (const auto& r : t.shards) n += static_cast<std::size_t>(r.bytes);
  return n;
}

void Reader::set_cache_limit(std::size_t bytes) {
  cache_limit_ = bytes;
  while (cache_bytes_ > cache_limit_ && !cache_.empty()) {
    cache_bytes_ -= cache_.back().second.size();
    cache_.pop_back();
  }
}

std::vector<std::byte> Reader::read(const std::string& tensor) const {
  Shard whole;
  whole.tensor = info(tensor);
  return read(whole);
}

std::vector<std::byte> Reader::read(const Shard& region_in) const {
  const TensorInfo& saved = info(region_in.tensor.name);
  if (!(saved == region_in.tensor))
    throw std::runtime_error("checkpoint '" + folder_ + "': tensor '" + saved.name +
                             "' was saved "
                             "with shape " +
                             to_string(saved.shape) + " " + saved.dtype + ", asked for as " +
                             to_string(region_in.tensor.shape) + " " + region_in.tensor.dtype);
  const Shard region = normalized(region_in);
  const std::size_t es = dtype_size(saved.dtype);
  std::vector<std::byte> out(static_cast<std::size_t>(region.end - region.begin) * es);
  const std::vector<Run> want = runs_of(region);
  std::int64_t filled = 0;
  const TensorRecord* record = nullptr;
  for (const auto& t : index_.tensors)
    if (t.info.name == saved.name) record = &t;
  std::vector<std::byte> buf;
  for (const auto& r : record->shards) {
    const std::vector<Piece> pieces = overlap(want, runs_of(r.shard));
    if (pieces.empty()) continue;
    const std::string path = (fs::path(folder_) / r.file).string();
    const std::string what = "tensor '" + saved.name + "' (shard of rank " +
                             std::to_string(r.rank) + ", bytes [" + std::to_string(r.byte_offset) +
                             ", " + std::to_string(r.byte_offset + r.bytes) + "))";
    // The whole shard is read: its checksum covers all of it. A shard verified before comes
    // from the cache.
    const std::string key = r.file + ":" + std::to_string(r.byte_offset);
    auto hit =
        std::find_if(cache_.begin(), cache_.end(), [&](const auto& e) { return e.first == key; });
    const std::vector<std::byte>* data = nullptr;
    if (hit != cache_.end()) {
      cache_.splice(cache_.begin(), cache_, hit);
      data = &cache_.front().second;
    } else {
      buf.resize(static_cast<std::size_t>(r.bytes));
      posix::read_at(path, r.byte_offset, buf.size(), buf.data(), what);
      bytes_read_ += buf.size();
      const std::string sum = checksum(buf.data(), buf.size());
      if (sum != r.checksum)
        throw std::runtime_error("checkpoint: '" + path + "': " + what + ": checksum " + sum +
                                 ", the index records " + r.checksum + " (corrupted data)");
      if (buf.size() <= cache_limit_) {
        cache_bytes_ += buf.size();
        cache_.emplace_front(key, std::move(buf));
        buf = {};
        while (cache_bytes_ > cache_limit_ && cache_.size() > 1) {
          cache_bytes_ -= cache_.back().second.size();
          cache_.pop_back();
        }
        data = &cache_.front().second;
      } else {
        data = &buf;
      }
    }
    for (const auto& p : pieces) {
      std::memcpy(out.data() + p.to_local * es, data->data() + p.from_local * es,
                  static_cast<std::size_t>(p.count) * es);
      filled += p.count;
    }
  }
  // Coverage was checked when the index was opened; this guards the assembly itself.
  if (filled != region.end - region.begin)
    throw std::logic_error("checkpoint: tensor '" + saved.name + "': assembled " +
                           std::to_string(filled) + " of " +
                           std::to_string(region.end - region.begin) + " elements");
  return out;
}

}  // namespace paraxis::checkpoint
