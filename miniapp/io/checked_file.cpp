// Checked, atomic file writes (checked_file.hpp), with POSIX calls so that every error has
// its errno: write(2) short counts and EINTR handled, fsync(2) of the file and its folder.
#include "io/checked_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace paraxis::io {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw WriteError("cannot write '" + path + "': " + what + ": " + std::strerror(err));
}

std::string parent_of(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

// A temporary name beside the target, unique within the process and across processes.
std::string temporary_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

}  // namespace

int write_all(int fd, const void* data, std::size_t size) noexcept {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return ENOSPC;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

int sync_folder(const std::string& dir) noexcept {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) err = errno;
  ::close(fd);
  return err;
}

void write_file_checked(const std::string& path, const std::string& content,
                        const std::function<void()>& before_rename) {
  const std::string tmp = temporary_name(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create " + tmp, path, errno);
  try {
    if (const int err = write_all(fd, content.data(), content.size())) fail("write", path, err);
    if (::fsync(fd) != 0) fail("fsync", path, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("close", path, err);
  }
  if (before_rename) {
    try {
      before_rename();
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("rename " + tmp, path, err);
  }
  if (const int err = sync_folder(parent_of(path))) fail("fsync folder", path, err);
}

void check_writable_dir(const std::string& dir) {
  const std::string probe = (std::filesystem::path(dir) / ".paraxis-write-probe").string();
  write_file_checked(probe, "paraxis output folder probe\n");
  if (::unlink(probe.c_str()) != 0) fail("remove probe", probe, errno);
}

}  // namespace paraxis::io
