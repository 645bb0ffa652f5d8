#include "host_memory.h"

#include <fstream>
#include <sstream>

namespace headway::models::cpu {
namespace {

// A cgroup's memory limit in bytes; nullopt when the file is absent or says there is none ("max",
// or v1's near-2^63 "unlimited").
std::optional<uint64_t> cgroup_limit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    const uint64_t limit = std::stoull(text);
    if (limit >= (uint64_t{1} << 62)) return std::nullopt;
    return limit;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<HostMemory> host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  std::optional<HostMemory> memory;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") {
      memory = HostMemory{kib * 1024, "MemAvailable in /proc/meminfo"};
      break;
    }
  }
  if (!memory) return std::nullopt;
  // A container's limit is below the host's memory: the cgroup's own figure decides there. Its
  // usage is not subtracted: it counts page cache (the mapped checkpoint) the kernel can reclaim.
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const std::optional<uint64_t> limit = cgroup_limit(path);
    if (limit && *limit < memory->available_bytes) {
      memory = HostMemory{*limit, std::string("the memory limit in ") + path};
    }
  }
  return memory;
}

}  // namespace headway::models::cpu
