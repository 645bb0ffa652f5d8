// How much memory this host can still give the cpu model, read before the KV cache is allocated:
// the KV cache is zeroed at once (every byte committed), so a kv_cache_gb past what the host has
// would otherwise end with the kernel's out-of-memory killer and no word of which option did it.
//
// Threading: free functions, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace headway::models::cpu {

struct HostMemory {
  uint64_t available_bytes = 0;
  std::string source;  // where the figure comes from, for a message ("MemAvailable in ...")
};

// The smaller of MemAvailable (/proc/meminfo: free memory plus what the kernel can reclaim, as
// `free` reports it) and the memory limit of the process's cgroup (v2 memory.max, v1
// memory.limit_in_bytes) where one is set. nullopt where /proc/meminfo cannot be read (then no
// check is made).
std::optional<HostMemory> host_memory();

}  // namespace headway::models::cpu
