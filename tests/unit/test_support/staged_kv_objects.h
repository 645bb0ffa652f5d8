// How many staged KV objects (kv_stage_file.h: "/dev/shm/headway-kv-<pid>-...") process `pid`
// still has: the disaggregation tests check that none is left behind. Threading: any.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>

namespace headway::test {

inline size_t staged_kv_objects_of(pid_t pid) {
  const std::string prefix = "headway-kv-" + std::to_string(pid) + "-";
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    count += entry.path().filename().string().rfind(prefix, 0) == 0 ? 1 : 0;
  }
  return count;
}

}  // namespace headway::test
