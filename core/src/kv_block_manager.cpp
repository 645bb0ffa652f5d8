#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/kv_block_manager.h>

namespace headway::core {

KvBlockManager::KvBlockManager(uint32_t total_blocks)
    : total_(total_blocks),
      ref_counts_(total_blocks, 0),
      cached_(total_blocks, 0),
      generations_(total_blocks, 0),
      idle_prev_(total_blocks, kNone),
      idle_next_(total_blocks, kNone) {
  free_list_.reserve(total_blocks);
  // Pushed in reverse so that block 0 is handed out first: deterministic, easy to read in traces.
  for (uint32_t b = total_blocks; b-- > 0;) free_list_.push_back(b);
}

void KvBlockManager::link_idle(uint32_t block) {
  idle_prev_[block] = idle_tail_;
  idle_next_[block] = kNone;
  (idle_tail_ == kNone ? idle_head_ : idle_next_[idle_tail_]) = block;
  idle_tail_ = block;
  ++idle_cached_;
}

void KvBlockManager::unlink_idle(uint32_t block) {
  const uint32_t prev = idle_prev_[block];
  const uint32_t next = idle_next_[block];
  (prev == kNone ? idle_head_ : idle_next_[prev]) = next;
  (next == kNone ? idle_tail_ : idle_prev_[next]) = prev;
  idle_prev_[block] = kNone;
  idle_next_[block] = kNone;
  --idle_cached_;
}

bool KvBlockManager::allocate(uint32_t count, std::vector<uint32_t>& table) {
  if (count > free()) return false;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t block;
    if (!free_list_.empty()) {
      block = free_list_.back();
      free_list_.pop_back();
    } else {
      block = idle_head_;
      unlink_idle(block);
      cached_[block] = 0;
      ++generations_[block];
      ++evictions_;
      if (on_evict_) on_evict_(block);
    }
    ref_counts_[block] = 1;
    table.push_back(block);
  }
  return true;
}

void KvBlockManager::add_ref(uint32_t block) {
  if (block >= total_ || ref_counts_[block] == 0) {
    throw Error(fmt::format("KV block {} is not allocated and cannot be shared", block),
                HW_INTERNAL);
  }
  if (++ref_counts_[block] == 2) ++shared_;
}

void KvBlockManager::release(std::vector<uint32_t>& table) {
  // All or nothing: check the whole table before touching any count.
  for (uint32_t block : table) {
    if (block >= total_ || ref_counts_[block] == 0) {
      throw Error(fmt::format("KV block {} released but not allocated", block), HW_INTERNAL);
    }
  }
  for (uint32_t block : table) {
    const uint32_t owners = --ref_counts_[block];
    if (owners == 1) --shared_;
    if (owners == 0 && !cached_[block]) free_list_.push_back(block);
  }
  // Cached blocks become idle last block first: the deepest blocks of a prefix are evicted first,
  // keeping the shared beginnings reachable longest.
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const uint32_t block = *it;
    const bool linked = idle_head_ == block || idle_prev_[block] != kNone;
    if (ref_counts_[block] == 0 && cached_[block] && !linked) link_idle(block);
  }
  table.clear();
}

void KvBlockManager::keep_cached(uint32_t block) {
  if (block >= total_ || ref_counts_[block] == 0) {
    throw Error(fmt::format("KV block {} is not allocated and cannot be cached", block),
                HW_INTERNAL);
  }
  cached_[block] = 1;
}

void KvBlockManager::take_cached(uint32_t block, std::vector<uint32_t>& table) {
  if (block >= total_ || !cached_[block]) {
    throw Error(fmt::format("KV block {} is not cached and cannot be taken from the cache", block),
                HW_INTERNAL);
  }
  if (ref_counts_[block] == 0) unlink_idle(block);
  if (++ref_counts_[block] == 2) ++shared_;
  table.push_back(block);
}

bool KvBlockManager::consistent(std::string* why) const {
  std::vector<uint8_t> seen(total_, 0);
  for (uint32_t block : free_list_) {
    if (block >= total_ || seen[block] || ref_counts_[block] != 0 || cached_[block]) {
      if (why) {
        *why = fmt::format("block {} is on the free list twice, while held or while cached", block);
      }
      return false;
    }
    seen[block] = 1;
  }
  uint32_t idle = 0;
  uint32_t prev = kNone;
  for (uint32_t block = idle_head_; block != kNone; block = idle_next_[block]) {
    if (block >= total_ || seen[block] || ref_counts_[block] != 0 || !cached_[block] ||
        idle_prev_[block] != prev || ++idle > total_) {
      if (why) *why = fmt::format("block {} is on the idle cached list wrongly", block);
      return false;
    }
    seen[block] = 1;
    prev = block;
  }
  if (prev != idle_tail_ || idle != idle_cached_) {
    if (why) {
      *why = fmt::format("the idle cached list holds {} blocks but counts {}", idle, idle_cached_);
    }
    return false;
  }
  uint32_t shared = 0;
  for (uint32_t b = 0; b < total_; ++b) {
    if (!seen[b] && ref_counts_[b] == 0) {
      if (why) *why = fmt::format("block {} is neither free nor held (leaked)", b);
      return false;
    }
    shared += ref_counts_[b] > 1 ? 1 : 0;
  }
  if (shared != shared_) {
    if (why)
      *why = fmt::format("{} blocks have several owners but {} are counted", shared, shared_);
    return false;
  }
  return true;
}

}  // namespace headway::core
