// How much memory this host can still give the cpu model, read before the KV cache is allocated:
// the KV cache is zeroed at once (every byte committed), so a kv_cache_gb past what the host has
// would otherwise end with the kernel's out-of-memory killer and no word of which option did it.
//
// Threading: free functions, safe from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace headway::models::cpu {

struct HostMemory {
  uint64_t available_bytes = 0;
  std::string source;  // where the figure comes from, for a message ("MemAvailable in ...")
};

// The least of: MemAvailable (/proc/meminfo: free memory plus what the kernel can reclaim, as
// `free` reports it), and for each memory cgroup level the process is under, from the mount down
// to its own cgroup (/proc/self/cgroup; v2 memory.max, v1 memory.limit_in_bytes), that level's
// limit less its usage without what the kernel can reclaim (file pages: a mapped checkpoint, say;
// on v2 also reclaimable slab). Swap is not counted. Levels and files that cannot be read are
// skipped. nullopt where /proc/meminfo cannot be read (then no check is made). `root`: where /proc
// and /sys are (tests give a directory of their own).
std::optional<HostMemory> host_memory(const std::filesystem::path& root = "/");

}  // namespace headway::models::cpu
