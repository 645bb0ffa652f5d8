// POSIX shared-memory objects (/dev/shm) named after the process that made them, and removing
// those whose process has exited: a process that crashes leaves its objects behind (host memory
// nobody frees), and the next one of its kind sweeps them. Header-only; Linux; plugin and host
// side alike (core's staged KV and host_copy's peer links use it).
//
// The owner goes into the name as "<pid namespace>-<pid>-" right after the object kind's prefix.
// The pid alone is not enough: two containers may share /dev/shm but not their pids, and there a
// pid names some other process. An owner is taken for exited only when it is in this process's
// pid namespace and kill(pid, 0) says no such process; anything unknown is kept.
//
// Threading: every function may be called from any thread.
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace headway::sdk {

struct ShmOwner {
  uint64_t pid_namespace = 0;  // inode of /proc/<pid>/ns/pid; 0 when unknown
  int64_t pid = 0;
};

// This process's pid namespace (the inode of /proc/self/ns/pid), 0 when it cannot be read.
inline uint64_t own_pid_namespace() {
  struct stat info {};
  return ::stat("/proc/self/ns/pid", &info) == 0 ? static_cast<uint64_t>(info.st_ino) : 0;
}

// "<pid namespace>-<pid>-" of this process (read afresh: a forked child gets its own).
inline std::string own_shm_owner_tag() {
  return std::to_string(own_pid_namespace()) + "-" + std::to_string(::getpid()) + "-";
}

// The owner a name's text after its prefix begins with ("<namespace>-<pid>-..."); nullopt when
// it does not begin with one.
inline std::optional<ShmOwner> parse_shm_owner(std::string_view text) {
  ShmOwner owner;
  const char* end = text.data() + text.size();
  auto [after_namespace, e1] = std::from_chars(text.data(), end, owner.pid_namespace);
  if (e1 != std::errc() || after_namespace == end || *after_namespace != '-') return std::nullopt;
  auto [after_pid, e2] = std::from_chars(after_namespace + 1, end, owner.pid);
  if (e2 != std::errc() || after_pid == end || *after_pid != '-' || owner.pid <= 0) {
    return std::nullopt;
  }
  return owner;
}

// True only when `owner` is known to have exited: it shares this process's pid namespace and no
// process has its pid. (A pid reused since is taken for alive: the object stays, which is safe.)
inline bool shm_owner_exited(const ShmOwner& owner) {
  if (owner.pid_namespace == 0 || owner.pid <= 0 || owner.pid_namespace != own_pid_namespace()) {
    return false;
  }
  return ::kill(static_cast<pid_t>(owner.pid), 0) != 0 && errno == ESRCH;
}

// Removes every object in /dev/shm called `prefix` (with its leading '/', e.g. "/headway-kv-")
// followed by the tag of an owner that has exited. Returns how many it removed.
inline size_t remove_orphaned_shm_objects(std::string_view prefix) {
  if (prefix.empty() || prefix.front() != '/') return 0;
  const std::string_view file_prefix = prefix.substr(1);
  size_t removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string file = entry.path().filename().string();
    if (file.size() <= file_prefix.size() ||
        file.compare(0, file_prefix.size(), file_prefix) != 0) {
      continue;
    }
    const std::optional<ShmOwner> owner =
        parse_shm_owner(std::string_view(file).substr(file_prefix.size()));
    if (owner && shm_owner_exited(*owner) && ::shm_unlink(("/" + file).c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace headway::sdk
