// Checked POSIX file calls for the checkpoint (posix_file.hpp).
#include "checkpoint/posix_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "io/checked_file.hpp"

namespace paraxis::checkpoint::posix {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error("checkpoint: cannot " + what + " '" + path + "': " + std::strerror(err));
}

}  // namespace

OutFile::OutFile(std::string path) : path_(std::move(path)) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  fd_ = ::open(path_.c_str(), kFlags | O_DIRECT, 0644);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL) fd_ = ::open(path_.c_str(), kFlags, 0644);  // e.g. old tmpfs
  if (fd_ < 0) fail("create", path_, errno);
  if (direct_) {
    buffer_ = static_cast<char*>(std::aligned_alloc(kDirectAlign, kDirectChunk));
    if (!buffer_) stop_direct();
  }
}

OutFile::~OutFile() {
  if (fd_ >= 0) ::close(fd_);
  std::free(buffer_);
}

// Through the page cache from here on (the file's offset is where the direct writes ended).
void OutFile::stop_direct() {
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0) fail("write", path_, errno);
  direct_ = false;
}

void OutFile::write_block(const char* data, std::size_t bytes) {
  if (direct_) {
    ssize_t n = 0;
    do n = ::write(fd_, data, bytes);
    while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(bytes)) return;
    if (n < 0 && errno != EINVAL) fail("write", path_, errno);
    // Refused (EINVAL: an alignment this file system does not take; nothing written) or short
    // (a full disk): the rest through the page cache, which says what stopped it.
    stop_direct();
    if (n > 0) data += n, bytes -= static_cast<std::size_t>(n);
  }
  if (const int err = io::write_all(fd_, data, bytes)) fail("write", path_, err);
}

void OutFile::append(const void* data, std::size_t bytes) {
  if (fd_ < 0) throw std::runtime_error("checkpoint: '" + path_ + "' is already closed");
  size_ += static_cast<std::int64_t>(bytes);
  const char* p = static_cast<const char*>(data);
  while (bytes > 0 && direct_) {
    const std::size_t n = std::min(bytes, kDirectChunk - held_);
    std::memcpy(buffer_ + held_, p, n);
    held_ += n, p += n, bytes -= n;
    if (held_ == kDirectChunk) write_block(buffer_, kDirectChunk), held_ = 0;
  }
  if (bytes > 0) write_block(p, bytes);
}

void OutFile::sync_and_close() {
  if (fd_ < 0) throw std::runtime_error("checkpoint: '" + path_ + "' is already closed");
  const std::size_t whole = direct_ ? held_ / kDirectAlign * kDirectAlign : 0;
  if (whole > 0) write_block(buffer_, whole);
  if (held_ > whole) {  // the last partial block, through the page cache
    if (direct_) stop_direct();
    write_block(buffer_ + whole, held_ - whole);
  }
  held_ = 0;
  if (::fsync(fd_) != 0) fail("fsync", path_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close", path_, errno);
}

InFile::InFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("open", path_, errno);
  // The reads of a resume go through the file in order: a larger readahead window.
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

InFile::~InFile() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// Tries of a read from the page cache only that finds a page locked, before it is read from
// storage (about 10 ms in all).
constexpr int kBusyTries = 200;

// One pread(2) or, `cached` only, preadv2(2) with RWF_NOWAIT: -1 with errno as they set it.
ssize_t read_once_at(int fd, char* p, std::size_t n, off_t at, bool cached) {
  if (!cached) return ::pread(fd, p, n, at);
  iovec v{p, n};
  return ::preadv2(fd, &v, 1, at, RWF_NOWAIT);
}

}  // namespace

std::size_t InFile::read(std::int64_t offset, std::size_t bytes, void* out, const std::string& what,
                         bool cache_first) const {
  char* p = static_cast<char*>(out);
  std::size_t done = 0, stored = 0;
  bool cached = cache_first;
  int busy = 0;  // EAGAIN in a row
  while (done < bytes) {
    const ssize_t n =
        read_once_at(fd_, p + done, bytes - done, offset + static_cast<off_t>(done), cached);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && cached && errno == EAGAIN && ++busy < kBusyTries) {
      // Cached but briefly locked (a page another thread reads too, e.g. the file's last, only
      // partly up to date): try again before counting it as gone from the cache.
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    if (n < 0 && cached && (errno == EAGAIN || errno == EOPNOTSUPP)) {
      cached = false;  // the rest is not (all) in the page cache: from storage
      continue;
    }
    busy = 0;
    if (n < 0) fail("read " + what + " from", path_, errno);
    if (n == 0 && cached) {  // at the end of what is cached, or of the file: ask storage
      cached = false;
      continue;
    }
    if (n == 0)
      throw std::runtime_error("checkpoint: '" + path_ + "' ends at byte " +
                               std::to_string(offset + static_cast<std::int64_t>(done)) +
                               " (a truncated file): " + what + " needs bytes [" +
                               std::to_string(offset) + ", " +
                               std::to_string(offset + static_cast<std::int64_t>(bytes)) + ")");
    done += static_cast<std::size_t>(n);
    if (!cached) stored += static_cast<std::size_t>(n);
  }
  return stored;
}

bool InFile::cache_reads() const {
  char c;
  iovec v{&c, 1};
  return ::preadv2(fd_, &v, 1, 0, RWF_NOWAIT) >= 0 || errno != EOPNOTSUPP;
}

void read_at(const std::string& path, std::int64_t offset, std::size_t bytes, void* out,
             const std::string& what) {
  InFile(path).read(offset, bytes, out, what);
}

void drop_cached(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

std::int64_t file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return -1;
    fail("stat", path, errno);
  }
  return static_cast<std::int64_t>(st.st_size);
}

void sync_folder(const std::string& folder) {
  if (const int err = io::sync_folder(folder)) fail("fsync folder", folder, err);
}

void rename_path(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail("rename to '" + to + "'", from, errno);
}

void make_folder(const std::string& folder) {
  if (::mkdir(folder.c_str(), 0755) != 0) fail("create folder", folder, errno);
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw std::runtime_error("checkpoint: cannot remove '" + path + "': " + ec.message());
}

}  // namespace paraxis::checkpoint::posix
