// The checkpoint root's lock file (folder_lock.hpp).
#include "checkpoint/folder_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace paraxis::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::mutex held_mutex;
std::set<std::pair<std::string, std::string>>& held() {  // (path, run) this process holds
  static std::set<std::pair<std::string, std::string>> h;
  return h;
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

// Creates the lock file exclusively; false when it exists. Throws on another error.
bool create_exclusively(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    throw std::runtime_error("checkpoint: cannot create the lock '" + path +
                             "': " + std::strerror(errno));
  }
  const ssize_t n = ::write(fd, content.data(), content.size());
  const bool ok = n == static_cast<ssize_t>(content.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    throw std::runtime_error("checkpoint: cannot write the lock '" + path +
                             "': " + std::strerror(err));
  }
  return true;
}

// The holder provably gone: this host, and no process of its pid, or this very process holding
// no lock there (its pid reused by this run: under a job's own pid namespace, likely).
bool holder_is_dead(const std::string& path, const LockHolder& h) {
  if (h.host != this_host() || h.pid <= 0) return false;
  if (h.pid == static_cast<long>(::getpid())) {
    std::lock_guard<std::mutex> g(held_mutex);
    for (const auto& [p, run] : held())
      if (p == path) return false;
    return true;
  }
  return ::kill(static_cast<pid_t>(h.pid), 0) != 0 && errno == ESRCH;
}

bool same_holder(const LockHolder& a, const LockHolder& b) {
  return a.host == b.host && a.pid == b.pid && a.run == b.run && a.since == b.since;
}

// Moves a stale lock aside and checks that what moved is the stale holder's (another run may
// have taken it over meanwhile: then it goes back). True when the stale lock is gone.
bool remove_stale(const std::string& path, const LockHolder& stale) {
  const std::string aside = path + ".stale-" + std::to_string(::getpid());
  if (::rename(path.c_str(), aside.c_str()) != 0) return errno == ENOENT;
  LockHolder moved;
  try {
    moved = read_lock_holder(aside);
  } catch (const std::exception&) {
  }
  if (!same_holder(moved, stale)) {
    // Someone else's fresh lock: put it back (link fails if yet another one exists).
    if (::link(aside.c_str(), path.c_str()) != 0) {
      // Yet another lock is there now: that one stands.
    }
    ::unlink(aside.c_str());
    return false;
  }
  ::unlink(aside.c_str());
  return true;
}

std::string refusal(const std::string& root, const std::string& path, const LockHolder& h) {
  const bool here = h.host == this_host();
  return "checkpoint folder '" + root + "' is locked by " + h.text() +
         ": another run is writing checkpoints there. Wait for it to end, or set another "
         "checkpoint.dir" +
         (here ? std::string(" (a lock is taken over only once its process is gone)")
               : std::string("; if that run is dead (paraxis cannot see processes of host ") +
                     h.host + "), remove '" + path + "'");
}

}  // namespace

std::string LockHolder::text() const {
  return "run " + run + " (pid " + std::to_string(pid) + " on host " + host + ", since " + since +
         ")";
}

LockHolder read_lock_holder(const std::string& lock_path) {
  std::ifstream in(lock_path);
  if (!in) throw std::runtime_error("checkpoint: cannot read the lock '" + lock_path + "'");
  std::stringstream text;
  text << in.rdbuf();
  try {
    const json j = json::parse(text.str());
    return LockHolder{j.at("host").get<std::string>(), j.at("run").get<std::string>(),
                      j.at("since").get<std::string>(), j.at("pid").get<long>()};
  } catch (const std::exception& e) {
    throw std::runtime_error("checkpoint: the lock '" + lock_path +
                             "' is not a paraxis lock (host, pid, run, since): " + e.what());
  }
}

FolderLock::FolderLock(const std::string& root, const std::string& run_id, std::string& note)
    : path_((fs::path(root) / kLockFile).string()), run_(run_id) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw std::runtime_error("checkpoint: cannot create '" + root + "': " + ec.message());
  const LockHolder me{this_host(), run_id, utc_now(), static_cast<long>(::getpid())};
  const std::string content =
      json{{"host", me.host}, {"pid", me.pid}, {"run", me.run}, {"since", me.since}}.dump() + "\n";
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (create_exclusively(path_, content)) {
      std::lock_guard<std::mutex> g(held_mutex);
      held().insert({path_, run_});
      return;
    }
    LockHolder h;
    try {
      h = read_lock_holder(path_);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string(e.what()) + "; remove it if no run uses '" + root + "'");
    }
    if (attempt > 0 || !holder_is_dead(path_, h)) throw std::runtime_error(refusal(root, path_, h));
    if (!remove_stale(path_, h)) {  // another run took it over first: name that one
      try {
        h = read_lock_holder(path_);
      } catch (const std::exception&) {
      }
      throw std::runtime_error(refusal(root, path_, h));
    }
    note = "took over the stale lock of " + h.text() + ": no such process on this host";
  }
}

FolderLock::~FolderLock() {
  release();
}

void FolderLock::release() {
  {
    std::lock_guard<std::mutex> g(held_mutex);
    if (held().erase({path_, run_}) == 0) return;
  }
  try {
    const LockHolder h = read_lock_holder(path_);
    if (h.pid == static_cast<long>(::getpid()) && h.run == run_) ::unlink(path_.c_str());
  } catch (const std::exception&) {
    // Gone or replaced: not ours to remove.
  }
}

void release_all_folder_locks() {
  std::set<std::pair<std::string, std::string>> all;
  {
    std::lock_guard<std::mutex> g(held_mutex);
    all.swap(held());
  }
  for (const auto& [path, run] : all) {
    try {
      const LockHolder h = read_lock_holder(path);
      if (h.pid == static_cast<long>(::getpid()) && h.run == run) ::unlink(path.c_str());
    } catch (const std::exception&) {
    }
  }
}

}  // namespace paraxis::checkpoint
