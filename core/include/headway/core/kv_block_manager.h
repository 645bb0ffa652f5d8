// The paged KV cache's bookkeeping for one engine: which fixed-size blocks are free, and how many
// owners each used block has. It holds no KV bytes; the model owns the memory the block ids index.
//
// Accounting is exact: free() + (blocks with ref count > 0) == total() after any sequence of calls,
// and a release of a block that is not held is an error, never silently ignored.
// Threading: owned and used by one engine thread. Allocation-free after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace headway::core {

class KvBlockManager {
 public:
  explicit KvBlockManager(uint32_t total_blocks);

  uint32_t total() const { return total_; }
  uint32_t free() const { return static_cast<uint32_t>(free_list_.size()); }
  uint32_t used() const { return total_ - free(); }

  // Appends `count` fresh blocks (ref count 1) to `table`. Returns false and changes nothing when
  // fewer than `count` are free. `table` should have capacity reserved by its owner to stay
  // allocation-free.
  bool allocate(uint32_t count, std::vector<uint32_t>& table);

  // Another owner of an allocated block (shared prefixes, in-flight transfers).
  void add_ref(uint32_t block);

  // Drops one reference on each block of `table` and clears it; blocks nobody holds return to the
  // free list. Throws Error (HW_INTERNAL) on a block that is not allocated.
  void release(std::vector<uint32_t>& table);

  uint32_t ref_count(uint32_t block) const { return ref_counts_.at(block); }

  // Verifies the invariants (for tests and debug checks); on failure says why.
  bool consistent(std::string* why = nullptr) const;

 private:
  uint32_t total_;
  std::vector<uint32_t> free_list_;  // LIFO: recently freed blocks are reused first
  std::vector<uint32_t> ref_counts_;
};

}  // namespace headway::core
