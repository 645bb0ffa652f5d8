// The copy the faulty KV transports share: a transfer between host regions done synchronously,
// block by block, with each block checked against its region. Threading: a pure function of its
// arguments (the regions are the caller's).
#pragma once

#include <headway/abi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <headway/sdk/kv_transport.hpp>

namespace headway::faulty {

// Copies the blocks of `t` when both regions are host memory (otherwise nothing: a simulated
// transfer), at most `max_block_bytes` of each (a fault may truncate). False when a block lies
// outside its region; the blocks before it are copied.
inline bool copy_host_blocks(const hw_kv_transfer& t, uint64_t max_block_bytes = UINT64_MAX) {
  if (t.source.kind != HW_MEMORY_HOST || t.destination.kind != HW_MEMORY_HOST) return true;
  const auto* src = static_cast<const unsigned char*>(t.source.base);
  auto* dst = static_cast<unsigned char*>(t.destination.base);
  // block_in_region() checks each side with its own block_bytes; the copy is of the source's.
  if (t.source.block_bytes != t.destination.block_bytes) return false;
  for (uint32_t i = 0; i < t.block_count; ++i) {
    // The SDK's check (no product that can overflow), so that each faulty transport has its own
    // fault only.
    if (!sdk::block_in_region(t.source, t.source_blocks[i]) ||
        !sdk::block_in_region(t.destination, t.destination_blocks[i])) {
      return false;
    }
    const uint64_t from = t.source_blocks[i] * t.source.block_stride;
    const uint64_t to = t.destination_blocks[i] * t.destination.block_stride;
    std::memcpy(dst + to, src + from, std::min(t.source.block_bytes, max_block_bytes));
  }
  return true;
}

}  // namespace headway::faulty
