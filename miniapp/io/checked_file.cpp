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

void write_all(int fd, const char* data, std::size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", path, errno);
    }
    if (n == 0) fail("write", path, ENOSPC);
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void sync_dir(const std::string& dir, const std::string& path) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("open folder", path, errno);
  // Some filesystems (e.g. some network mounts) do not sync folders: EINVAL is not a failure.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    const int err = errno;
    ::close(fd);
    fail("fsync folder", path, err);
  }
  ::close(fd);
}

}  // namespace

void write_file_checked(const std::string& path, const std::string& content,
                        const std::function<void()>& before_rename) {
  const std::string tmp = temporary_name(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create " + tmp, path, errno);
  try {
    write_all(fd, content.data(), content.size(), path);
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
  sync_dir(parent_of(path), path);
}

void check_writable_dir(const std::string& dir) {
  const std::string probe = (std::filesystem::path(dir) / ".paraxis-write-probe").string();
  write_file_checked(probe, "paraxis output folder probe\n");
  if (::unlink(probe.c_str()) != 0) fail("remove probe", probe, errno);
}

}  // namespace paraxis::io
