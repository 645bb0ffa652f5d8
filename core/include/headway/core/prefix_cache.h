// Automatic prefix caching's index (vLLM's "automatic prefix caching"): which KV block holds the
// KV of which block_size tokens, given everything before them. A request whose prompt starts with
// tokens another request computed before can take those blocks instead of computing them again.
//
// A cached block is named by its content and its place in a chain: its block_size token ids and
// the link to the block before it (kStart for the first). A link is a block *and its generation*
// (KvBlockManager::generation), so when a block is evicted and reused for other tokens, every
// entry that followed it becomes unreachable instead of wrong. Lookups compare the ids exactly:
// the hash only places entries, so a collision costs a probe, never a wrong answer.
//
// Ownership: borrows the engine's KvBlockManager, which must outlive it, and becomes its eviction
// listener. Threading: the engine's thread only. Allocation-free after construction.
#pragma once

#include <headway/core/kv_block_manager.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace headway::core {

// A place in a chain of cached blocks: the block holding the tokens so far, as it was then.
struct PrefixCacheLink {
  uint32_t block = UINT32_MAX;  // UINT32_MAX: before the first token (PrefixCache::kStart)
  uint32_t generation = 0;
  bool operator==(const PrefixCacheLink&) const = default;
};

class PrefixCache {
 public:
  static constexpr uint32_t kNoBlock = UINT32_MAX;
  using Link = PrefixCacheLink;
  static constexpr Link kStart{};

  PrefixCache(KvBlockManager& kv, uint32_t block_size);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The cached block that holds `tokens` (block_size ids) right after `parent`, or kNoBlock. The
  // block may be held by requests or idle (KvBlockManager::is_idle_cached).
  uint32_t find(Link parent, std::span<const int32_t> tokens) const;

  // Records that held block `block` holds `tokens` right after `parent`, and has the manager keep
  // its KV once released. Returns the link to go on from: `block`'s, or that of the block already
  // recorded for the same tokens after the same parent (then `block` stays uncached). nullopt when
  // `parent` has been evicted since: nothing after it can be found again, so nothing is recorded.
  std::optional<Link> insert(Link parent, std::span<const int32_t> tokens, uint32_t block);

  Link link_of(uint32_t block) const { return Link{block, kv_.generation(block)}; }
  uint32_t block_size() const { return block_size_; }
  // Blocks recorded (held or idle).
  uint32_t entries() const { return entries_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  uint64_t hash_of(Link parent, std::span<const int32_t> tokens) const;
  bool holds(uint32_t block, Link parent, std::span<const int32_t> tokens) const;
  void forget(uint32_t block);  // the manager evicted it

  KvBlockManager& kv_;
  uint32_t block_size_;
  uint64_t seed_;  // per process: placements cannot be aimed at from outside
  // Open addressing with linear probing over block ids; at most half full.
  std::vector<uint32_t> slots_;
  uint64_t mask_ = 0;
  // What each recorded block holds.
  std::vector<Link> parents_;
  std::vector<uint64_t> hashes_;
  std::vector<int32_t> tokens_;  // block_size ids per block
  uint32_t entries_ = 0;
};

}  // namespace headway::core
