#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/kv_block_manager.h>

namespace headway::core {

KvBlockManager::KvBlockManager(uint32_t total_blocks)
    : total_(total_blocks), ref_counts_(total_blocks, 0) {
  free_list_.reserve(total_blocks);
  // Pushed in reverse so that block 0 is handed out first: deterministic, easy to read in traces.
  for (uint32_t b = total_blocks; b-- > 0;) free_list_.push_back(b);
}

bool KvBlockManager::allocate(uint32_t count, std::vector<uint32_t>& table) {
  if (count > free_list_.size()) return false;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t block = free_list_.back();
    free_list_.pop_back();
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
  ++ref_counts_[block];
}

void KvBlockManager::release(std::vector<uint32_t>& table) {
  // All or nothing: check the whole table before touching any count.
  for (uint32_t block : table) {
    if (block >= total_ || ref_counts_[block] == 0) {
      throw Error(fmt::format("KV block {} released but not allocated", block), HW_INTERNAL);
    }
  }
  for (uint32_t block : table) {
    if (--ref_counts_[block] == 0) free_list_.push_back(block);
  }
  table.clear();
}

bool KvBlockManager::consistent(std::string* why) const {
  std::vector<uint8_t> seen(total_, 0);
  for (uint32_t block : free_list_) {
    if (block >= total_ || seen[block] || ref_counts_[block] != 0) {
      if (why) *why = fmt::format("block {} is on the free list twice or while held", block);
      return false;
    }
    seen[block] = 1;
  }
  for (uint32_t b = 0; b < total_; ++b) {
    if (!seen[b] && ref_counts_[b] == 0) {
      if (why) *why = fmt::format("block {} is neither free nor held (leaked)", b);
      return false;
    }
  }
  return true;
}

}  // namespace headway::core
