// Checked POSIX file calls for the checkpoint (posix_file.hpp).
#include "checkpoint/posix_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "io/checked_file.hpp"

namespace paraxis::checkpoint::posix {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error("checkpoint: cannot " + what + " '" + path + "': " + std::strerror(err));
}

}  // namespace

OutFile::OutFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", path_, errno);
}

OutFile::~OutFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutFile::append(const void* data, std::size_t bytes) {
  if (fd_ < 0) throw std::runtime_error("checkpoint: '" + path_ + "' is already closed");
  if (const int err = io::write_all(fd_, data, bytes)) fail("write", path_, err);
  size_ += static_cast<std::int64_t>(bytes);
}

void OutFile::sync_and_close() {
  if (fd_ < 0) throw std::runtime_error("checkpoint: '" + path_ + "' is already closed");
  if (::fsync(fd_) != 0) fail("fsync", path_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close", path_, errno);
}

void read_at(const std::string& path, std::int64_t offset, std::size_t bytes, void* out,
             const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("open " + what + " in", path, errno);
  char* p = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, p + done, bytes - done, offset + static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail("read " + what + " from", path, err);
    }
    if (n == 0) {
      ::close(fd);
      throw std::runtime_error("checkpoint: '" + path + "' ends at byte " +
                               std::to_string(offset + static_cast<std::int64_t>(done)) +
                               " (a truncated file): " + what + " needs bytes [" +
                               std::to_string(offset) + ", " +
                               std::to_string(offset + static_cast<std::int64_t>(bytes)) + ")");
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
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
