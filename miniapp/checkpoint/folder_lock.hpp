// The lock a run holds on its checkpoint root for its lifetime (docs/checkpoint.md, "Runs,
// lineages and the lock"), so that two live runs never write one folder: `<root>/lock`, created
// with O_CREAT | O_EXCL (atomic on local file systems and on NFS v3+, Lustre and GPFS, unlike
// flock, which some cluster mounts do not support) and holding its holder's host, pid, run id and
// start time. Nothing renews it: a run killed with SIGKILL leaves it behind. Such a stale lock is
// taken over only when its holder provably is gone: the same host, and no process of that pid
// (kill(pid, 0): ESRCH). A lock of another host is never taken over (paraxis cannot see that
// host's processes): the message names the holder and the file to remove once it is known dead.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

namespace paraxis::checkpoint {

inline constexpr const char* kLockFile = "lock";

struct LockHolder {
  std::string host, run, since;  // since: UTC, ISO 8601
  long pid = 0;
  std::string text() const;  // "run R (pid P on host H, since T)"
};

// The holder a lock file names (throws std::runtime_error naming the file when unreadable).
LockHolder read_lock_holder(const std::string& lock_path);

class FolderLock {
 public:
  // Creates `root` if needed and takes its lock for run `run_id`. Throws std::runtime_error
  // naming the folder, the holder and how to proceed when another live run (or a run on another
  // host) holds it. `note` receives what was done beyond taking it (a stale lock taken over).
  FolderLock(const std::string& root, const std::string& run_id, std::string& note);
  ~FolderLock();  // release()
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  // Removes the lock file if it is still this process's. Idempotent.
  void release();
  const std::string& path() const { return path_; }

 private:
  std::string path_, run_;
};

// Releases every lock this process holds: for the paths that end the job at once (MPI_Abort),
// which run no destructors.
void release_all_folder_locks();

}  // namespace paraxis::checkpoint
