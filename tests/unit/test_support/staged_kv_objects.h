// How many staged KV objects (kv_stage_file.h: "/dev/shm/headway-kv-<pid>-...") or other shared
// memory objects of Headway's process `pid` are still there: the disaggregation tests check that
// none is left behind. Threading: any.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>

namespace headway::test {

// Objects in /dev/shm named "<kind><pid>-...".
inline size_t shm_objects_of(pid_t pid, const std::string& kind) {
  const std::string prefix = kind + std::to_string(pid) + "-";
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    count += entry.path().filename().string().rfind(prefix, 0) == 0 ? 1 : 0;
  }
  return count;
}

inline size_t staged_kv_objects_of(pid_t pid) { return shm_objects_of(pid, "headway-kv-"); }

}  // namespace headway::test
