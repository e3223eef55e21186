// Reading an input file safely (input_file.hpp): opened without blocking (a FIFO would block
// open(2) and read(2)), checked with fstat(2) before a byte is read, read with a bound.
#include "io/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace paraxis::io {

namespace {

[[noreturn]] void refuse(const std::string& role, const std::string& path, const std::string& why,
                         int err = 0) {
  throw ReadError("cannot read the " + role + " '" + path + "': " + why, why, err);
}

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string bytes_text(std::size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::string read_regular_file(const std::string& path, const std::string& role,
                              std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    refuse(role, path, std::strerror(err), err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    refuse(role, path, std::strerror(err), err);
  }
  const std::string limit = "expected a regular file of at most " + bytes_text(max_bytes);
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse(role, path, "it is " + kind_of(st.st_mode) + " (" + limit + ")");
  }
  if (static_cast<unsigned long long>(st.st_size) > max_bytes) {
    ::close(fd);
    refuse(role, path, std::to_string(st.st_size) + " bytes (" + limit + ")");
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      refuse(role, path, std::string("read: ") + std::strerror(err), err);
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      refuse(role, path, "larger than " + bytes_text(max_bytes) + " (" + limit + ")");
    }
  }
  ::close(fd);
  return text;
}

}  // namespace paraxis::io
