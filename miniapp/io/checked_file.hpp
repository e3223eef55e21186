// Checked, atomic file writes: every file paraxis writes (results, traces, reports, plans)
// goes through here. The content is written to a temporary name in the target's folder,
// flushed, fsync'ed and closed, every step checked, then renamed over the target, and the
// folder fsync'ed. Any failure throws WriteError naming the file and the system's reason,
// removes the temporary file and leaves the previous target untouched, so a reader sees
// either the old complete file or the new complete file, never a truncated one.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

namespace paraxis::io {

struct WriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes `content` to `path` atomically (see above). Throws WriteError. `before_rename`, when
// given, runs once the temporary file is complete and synced, just before the rename (fault
// injection: a rank that dies there must leave the previous file intact).
void write_file_checked(const std::string& path, const std::string& content,
                        const std::function<void()>& before_rename = nullptr);

// The one POSIX write loop of paraxis (checked_file.cpp, the checkpoint's data files): writes
// all `size` bytes to `fd`, retrying short writes and EINTR. Returns 0, or the errno of the
// failure (ENOSPC for a write that wrote nothing); the caller names the file in its message.
int write_all(int fd, const void* data, std::size_t size) noexcept;

// fsync(2) of a folder: 0, or the errno of the failure (open or fsync). EINVAL and EROFS (file
// systems that do not sync folders, e.g. some network mounts) are not failures.
int sync_folder(const std::string& dir) noexcept;

// Throws WriteError unless a file can be created, written and removed in `dir` (which must
// exist): the output folder is probed before any point trains.
void check_writable_dir(const std::string& dir);

}  // namespace paraxis::io
