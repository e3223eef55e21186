// The POSIX file calls the checkpoint needs beyond io::write_file_checked, each checked and
// throwing std::runtime_error with the path and errno's reason: a data file written piece by
// piece (short writes and EINTR handled) and fsync'ed, positioned reads that refuse a short
// file, folder fsync, rename and recursive removal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace paraxis::checkpoint::posix {

// A data file being written: created (truncated) on open, appended to, synced and closed.
// Written with direct I/O (O_DIRECT) where the file system takes it: the appended bytes gather
// in an aligned buffer of its own and go to storage in whole blocks of kDirectChunk, bypassing
// the page cache; the last partial block is written through the page cache, then the file is
// fsync'ed. Where the file system refuses O_DIRECT (at open, or EINVAL on a write), the file
// is written through the page cache as a whole. docs/checkpoint.md, "Writing".
class OutFile {
 public:
  static constexpr std::size_t kDirectAlign = 4096;      // buffer, offsets and lengths
  static constexpr std::size_t kDirectChunk = 8u << 20;  // bytes per direct write
  explicit OutFile(std::string path);                    // throws
  ~OutFile();
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  void append(const void* data, std::size_t bytes);  // throws
  void sync_and_close();                             // fsync(2), close(2); throws
  std::int64_t size() const { return size_; }
  bool direct() const { return direct_; }  // still writing with O_DIRECT

 private:
  void write_block(const char* data, std::size_t bytes);  // O_DIRECT unless refused
  void stop_direct();

  std::string path_;
  int fd_ = -1;
  std::int64_t size_ = 0;
  bool direct_ = false;
  char* buffer_ = nullptr;  // kDirectChunk bytes aligned to kDirectAlign (direct I/O only)
  std::size_t held_ = 0;    // bytes appended and not yet written
};

// Reads `bytes` bytes at `offset` of `path` into `out`; throws naming the file when it cannot
// be opened or ends before offset + bytes (`what` says whose bytes, for the message).
void read_at(const std::string& path, std::int64_t offset, std::size_t bytes, void* out,
             const std::string& what);
// A data file open for reading (closed with the object).
class InFile {
 public:
  explicit InFile(std::string path);  // throws naming the file when it cannot be opened
  ~InFile();
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;
  const std::string& path() const { return path_; }
  // Reads `bytes` bytes at `offset` into `out` (throws naming the file when it ends before
  // offset + bytes; `what` says whose bytes). `cache_first`: takes what the host's page cache
  // holds without any storage access (preadv2 RWF_NOWAIT), then reads the rest from storage.
  // Returns the bytes that came from storage (all of them without `cache_first`).
  std::size_t read(std::int64_t offset, std::size_t bytes, void* out, const std::string& what,
                   bool cache_first = false) const;
  // Whether reads of this file may ask for the page cache only (RWF_NOWAIT): false where the
  // file system refuses the flag (EOPNOTSUPP).
  bool cache_reads() const;

 private:
  std::string path_;
  int fd_ = -1;
};

// Drops the page cache of a file's pages (posix_fadvise DONTNEED; advice: never an error).
void drop_cached(const std::string& path);
// The size of a file, or -1 when it does not exist (other errors throw).
std::int64_t file_size(const std::string& path);

void sync_folder(const std::string& folder);  // EINVAL/EROFS (unsupported) are not errors
void rename_path(const std::string& from, const std::string& to);
void make_folder(const std::string& folder);  // mkdir(2), 0755; it must not exist
void remove_tree(const std::string& path);    // throws naming what could not be removed

}  // namespace paraxis::checkpoint::posix
