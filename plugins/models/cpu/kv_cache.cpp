#include "kv_cache.h"

#include <cstdio>
#include <headway/sdk/status.hpp>
#include <optional>
#include <string>

#include "host_memory.h"

namespace headway::models::cpu {

void KvCache::init(uint32_t block_count, uint32_t block_size) {
  if (block_size == 0) throw sdk::Error(HW_INVALID_ARGUMENT, "cpu model: block_size must be > 0");
  const uint64_t head = uint64_t{head_dim_} * block_size;
  const uint64_t block = uint64_t{layers_} * 2 * kv_heads_ * head;
  const unsigned __int128 total = static_cast<unsigned __int128>(block) * block_count * 4;
  if (total > (static_cast<unsigned __int128>(1) << 46)) {
    throw sdk::Error(HW_RESOURCE_EXHAUSTED,
                     "cpu model: a KV cache of " + std::to_string(block_count) + " blocks of " +
                         std::to_string(block_size) + " tokens does not fit in memory");
  }
  // Every byte is written at once (zero() below): past what the host has, the kernel's
  // out-of-memory killer would end the process without a word. Engines are built one after
  // another, so each sees what the ones before it took.
  const auto bytes = static_cast<uint64_t>(total);
  if (const std::optional<HostMemory> host = host_memory(); host && bytes > host->available_bytes) {
    char line[900];  // hw_status holds 1,024 bytes; a cgroup path is rarely past 200
    std::snprintf(line, sizeof(line),
                  "cpu model: the KV cache (kv_cache_gb; %u blocks of %u tokens) takes %.2f GB, "
                  "more than this host has available (%.2f GB, %s); lower kv_cache_gb (or the "
                  "engine's kv_blocks), or serve fewer engines on this host",
                  block_count, block_size, bytes / 1e9, host->available_bytes / 1e9,
                  host->source.c_str());
    throw sdk::Error(HW_RESOURCE_EXHAUSTED, line);
  }
  memory_.reserve(static_cast<size_t>(block) * block_count);
  // Zeroed so that transports and debuggers never see stale bytes from another process; the
  // attention never reads a position before writing it.
  memory_.zero();
  block_count_ = block_count;
  block_size_ = block_size;
  head_floats_ = head;
  layer_floats_ = uint64_t{2} * kv_heads_ * head;
  block_floats_ = block;
}

}  // namespace headway::models::cpu
