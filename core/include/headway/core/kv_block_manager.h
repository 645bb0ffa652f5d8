// The paged KV cache's bookkeeping for one engine: which fixed-size blocks are free, and how many
// owners each used block has. It holds no KV bytes; the model owns the memory the block ids index.
//
// Prefix caching: a block whose KV is worth keeping (keep_cached()) does not return to the free
// list when its last owner releases it: it stays *cached and idle*, still counted as free, until
// allocate() runs out of never-used blocks and evicts the idle block released longest ago. Until
// then, or while requests hold it, take_cached() can hand it to a request with the same prefix.
// Each eviction bumps the block's generation, so that a reference to "block b as it was" can tell
// it is gone.
//
// Accounting is exact: free() + (blocks with ref count > 0) == total() after any sequence of calls,
// and a release of a block that is not held is an error, never silently ignored.
// Threading: owned and used by one engine thread. Allocation-free after construction.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace headway::core {

class KvBlockManager {
 public:
  explicit KvBlockManager(uint32_t total_blocks);

  uint32_t total() const { return total_; }
  // Blocks allocate() can hand out now: never used (or no longer cached), and cached idle ones.
  uint32_t free() const { return static_cast<uint32_t>(free_list_.size()) + idle_cached_; }
  uint32_t used() const { return total_ - free(); }
  // Of free(), the cached idle blocks (their KV is kept until they are evicted).
  uint32_t idle_cached() const { return idle_cached_; }

  // Appends `count` blocks (ref count 1) to `table`: free-list blocks first, then evicted idle
  // cached ones, least recently released first. Returns false and changes nothing when fewer than
  // `count` are free. `table` should have capacity reserved by its owner to stay allocation-free.
  bool allocate(uint32_t count, std::vector<uint32_t>& table);

  // Another owner of an allocated block.
  void add_ref(uint32_t block);

  // Drops one reference on each block of `table` and clears it; blocks nobody holds return to the
  // free list, or become idle cached blocks when kept (the table's last block is then evicted
  // first: a prefix stays reachable longest). Throws Error (HW_INTERNAL) on a block that is not
  // allocated.
  void release(std::vector<uint32_t>& table);

  uint32_t ref_count(uint32_t block) const { return ref_counts_.at(block); }

  // --- Prefix caching ---------------------------------------------------------------------------
  // Keeps the KV of a held block when its last owner releases it. Throws Error when not held.
  void keep_cached(uint32_t block);
  bool is_cached(uint32_t block) const { return cached_.at(block) != 0; }
  // Whether `block` is cached and idle (no owner).
  bool is_idle_cached(uint32_t block) const { return is_cached(block) && ref_counts_[block] == 0; }
  // Gives a cached block one more owner, appending it to `table`: an idle one leaves the eviction
  // order (ref count 1), a held one is shared. Throws Error (HW_INTERNAL) when it is not cached.
  void take_cached(uint32_t block, std::vector<uint32_t>& table);
  // Times `block` was evicted from the cache (its KV overwritten by another use).
  uint32_t generation(uint32_t block) const { return generations_.at(block); }
  // Evictions so far: while it stays the same, so does every block's generation.
  uint64_t evictions() const { return evictions_; }
  // Blocks with more than one owner (ref count > 1).
  uint32_t shared() const { return shared_; }
  // Called with each block allocate() evicts, before it is handed out (the prefix index forgets
  // it). Empty by default.
  void set_eviction_listener(std::function<void(uint32_t block)> listener) {
    on_evict_ = std::move(listener);
  }

  // Verifies the invariants (for tests and debug checks); on failure says why.
  bool consistent(std::string* why = nullptr) const;

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  void link_idle(uint32_t block);  // at the most recently released end
  void unlink_idle(uint32_t block);

  uint32_t total_;
  std::vector<uint32_t> free_list_;  // LIFO: recently freed blocks are reused first
  std::vector<uint32_t> ref_counts_;
  std::vector<uint8_t> cached_;
  std::vector<uint32_t> generations_;
  // Idle cached blocks, a doubly linked list through idle_prev_/idle_next_ from the one released
  // longest ago (idle_head_, evicted first) to the latest (idle_tail_).
  std::vector<uint32_t> idle_prev_;
  std::vector<uint32_t> idle_next_;
  uint32_t idle_head_ = kNone;
  uint32_t idle_tail_ = kNone;
  uint32_t idle_cached_ = 0;
  uint64_t evictions_ = 0;
  uint32_t shared_ = 0;
  std::function<void(uint32_t)> on_evict_;
};

}  // namespace headway::core
