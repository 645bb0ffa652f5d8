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
// Reporting to a KvEventLog (report_to), it also follows each chain in the hashes routers read
// (route_prefix.h) and logs each route piece whose last token a block holds: stored when the block
// is recorded and again when a request takes it from the cache (report_taken: a router that sent
// the request learns it was served from there), removed when it is evicted. A chain's deeper
// blocks are evicted before the ones they follow (KvBlockManager releases a request's last block
// first), so a piece is reported removed when it stops being found.
//
// Ownership: borrows the engine's KvBlockManager, which must outlive it, and becomes its eviction
// listener; borrows the log. Threading: the engine's thread only. Allocation-free after
// construction.
#pragma once

#include <headway/core/kv_block_manager.h>
#include <headway/core/kv_event_log.h>

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

  // A request takes recorded block `block` from the cache: logs the pieces it ends as stored.
  void report_taken(uint32_t block) {
    if (log_ != nullptr) report_pieces(block, HW_KV_EVENT_STORED);
  }

  // Logs to `log` from now on (null: stops) the route pieces the blocks it records and evicts
  // end (see above). Throws Error once a block is recorded: the chains of the blocks recorded
  // before would be unknown.
  void report_to(KvEventLog* log);

  Link link_of(uint32_t block) const { return Link{block, kv_.generation(block)}; }
  uint32_t block_size() const { return block_size_; }
  // Blocks recorded (held or idle).
  uint32_t entries() const { return entries_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  uint64_t hash_of(Link parent, std::span<const int32_t> tokens) const;
  bool holds(uint32_t block, Link parent, std::span<const int32_t> tokens) const;
  void forget(uint32_t block);  // the manager evicted it
  std::span<const int32_t> tokens_of(uint32_t block) const {
    return std::span(tokens_).subspan(size_t{block} * block_size_, block_size_);
  }
  // Continues the route hash chain `chain`, at position `position` of its prompt, over `tokens`,
  // logging each piece it completes as `kind`; returns the chain after them.
  uint64_t follow_route_chain(uint64_t chain, uint32_t position, std::span<const int32_t> tokens,
                              int32_t kind);
  // Logs as `kind` the pieces recorded block `block` ends: none for most blocks (three in four of
  // 16 tokens), and the chain after it, already known, where it ends one at its last token; only a
  // block that ends a piece inside it (a block size that does not divide 64) is hashed again.
  void report_pieces(uint32_t block, int32_t kind);

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
  // Reporting to log_: each recorded block's place in the route hash chain, before and after its
  // tokens, and the position of its first token in the prompt.
  KvEventLog* log_ = nullptr;
  std::vector<uint64_t> route_before_;
  std::vector<uint64_t> route_after_;
  std::vector<uint32_t> first_position_;
};

}  // namespace headway::core
