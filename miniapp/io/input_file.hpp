// Reading an input file (a deck, a machine description, a checkpoint index) whole, safely: it
// must be a regular file of bounded size. A directory, a FIFO (which would block the read), a
// device such as /dev/zero (which never ends) or a file larger than the limit is refused at
// once, naming the path and why; a system error names the system's reason (strerror).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace paraxis::io {

struct ReadError : std::runtime_error {
  ReadError(const std::string& what, std::string reason, int error)
      : std::runtime_error(what), reason(std::move(reason)), error(error) {}
  std::string reason;  // why, without the path: "it is a directory (expected ...)"
  int error;           // the errno of a system error (ENOENT: the file does not exist); 0 otherwise
};

// The bytes of the regular file `path`, at most max_bytes of them. `role` names the file in
// messages: "cannot read the deck 'x.yaml': is a directory (expected a regular file)".
// Throws ReadError.
std::string read_regular_file(const std::string& path, const std::string& role,
                              std::size_t max_bytes);

// "16 MiB", "512 KiB", "100 bytes": a limit as a message gives it.
std::string bytes_text(std::size_t bytes);

}  // namespace paraxis::io
