#include <headway/core/error.h>
#include <headway/core/prefix_cache.h>
#include <headway/core/route_prefix.h>

#include <algorithm>
#include <bit>
#include <random>

#include "hash_mix.h"

namespace headway::core {

PrefixCache::PrefixCache(KvBlockManager& kv, uint32_t block_size)
    : kv_(kv),
      block_size_(block_size),
      seed_((static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}()),
      parents_(kv.total()),
      hashes_(kv.total(), 0),
      tokens_(static_cast<size_t>(kv.total()) * block_size, 0) {
  const uint64_t capacity = std::bit_ceil(std::max<uint64_t>(2ull * kv.total(), 16));
  slots_.assign(capacity, kEmpty);
  mask_ = capacity - 1;
  kv_.set_eviction_listener([this](uint32_t block) { forget(block); });
}

uint64_t PrefixCache::hash_of(Link parent, std::span<const int32_t> tokens) const {
  uint64_t h = hash_mix(seed_, (static_cast<uint64_t>(parent.block) << 32) | parent.generation);
  for (int32_t id : tokens) h = hash_mix(h, static_cast<uint32_t>(id));
  return h;
}

bool PrefixCache::holds(uint32_t block, Link parent, std::span<const int32_t> tokens) const {
  return parents_[block] == parent &&
         std::equal(tokens.begin(), tokens.end(),
                    tokens_.begin() + static_cast<ptrdiff_t>(block) * block_size_);
}

uint32_t PrefixCache::find(Link parent, std::span<const int32_t> tokens) const {
  if (tokens.size() != block_size_) return kNoBlock;
  const uint64_t h = hash_of(parent, tokens);
  for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const uint32_t block = slots_[i];
    if (block == kEmpty) return kNoBlock;
    if (hashes_[block] == h && holds(block, parent, tokens)) return block;
  }
}

std::optional<PrefixCache::Link> PrefixCache::insert(Link parent, std::span<const int32_t> tokens,
                                                     uint32_t block) {
  if (tokens.size() != block_size_) {
    throw Error("prefix cache: a block is recorded with a wrong number of tokens", HW_INTERNAL);
  }
  if (parent != kStart &&
      (kv_.generation(parent.block) != parent.generation || !kv_.is_cached(parent.block))) {
    return std::nullopt;
  }
  if (kv_.is_cached(block)) {
    throw Error("prefix cache: a block is recorded twice", HW_INTERNAL);
  }
  const uint64_t h = hash_of(parent, tokens);
  uint64_t i = h & mask_;
  for (; slots_[i] != kEmpty; i = (i + 1) & mask_) {
    const uint32_t other = slots_[i];
    if (hashes_[other] == h && holds(other, parent, tokens)) {
      report_taken(other);  // computed again, and held: as if taken from the cache
      return link_of(other);
    }
  }
  if (log_ != nullptr) {
    const bool first = parent == kStart;
    route_before_[block] = first ? kRoutePrefixChainStart : route_after_[parent.block];
    first_position_[block] = first ? 0 : first_position_[parent.block] + block_size_;
    route_after_[block] = follow_route_chain(route_before_[block], first_position_[block], tokens,
                                             HW_KV_EVENT_STORED);
  }
  slots_[i] = block;
  parents_[block] = parent;
  hashes_[block] = h;
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<ptrdiff_t>(block) * block_size_);
  ++entries_;
  kv_.keep_cached(block);
  return link_of(block);
}

void PrefixCache::report_to(KvEventLog* log) {
  if (log != nullptr && entries_ != 0) {
    throw Error("prefix cache: events are asked for after blocks were recorded", HW_INTERNAL);
  }
  if (log != nullptr && route_before_.empty()) {
    route_before_.assign(kv_.total(), 0);
    route_after_.assign(kv_.total(), 0);
    first_position_.assign(kv_.total(), 0);
  }
  log_ = log;
}

uint64_t PrefixCache::follow_route_chain(uint64_t chain, uint32_t position,
                                         std::span<const int32_t> tokens, int32_t kind) {
  for (const int32_t id : tokens) {
    chain = hash_mix(chain, static_cast<uint32_t>(id));
    if (++position % kRoutePrefixPieceTokens == 0) log_->push(chain, kind);
  }
  return chain;
}

void PrefixCache::report_pieces(uint32_t block, int32_t kind) {
  const uint32_t first = first_position_[block];
  const uint32_t end = first + block_size_;
  if (end / kRoutePrefixPieceTokens == first / kRoutePrefixPieceTokens) return;
  if (end % kRoutePrefixPieceTokens == 0 && block_size_ <= kRoutePrefixPieceTokens) {
    log_->push(route_after_[block], kind);
    return;
  }
  follow_route_chain(route_before_[block], first, tokens_of(block), kind);
}

void PrefixCache::forget(uint32_t block) {
  if (log_ != nullptr) report_pieces(block, HW_KV_EVENT_REMOVED);
  uint64_t i = hashes_[block] & mask_;
  while (slots_[i] != block) {
    if (slots_[i] == kEmpty)
      throw Error("prefix cache: an evicted block was not recorded", HW_INTERNAL);
    i = (i + 1) & mask_;
  }
  // Backward-shift deletion: pull later entries of the probe run into the hole, so lookups never
  // stop early at it and no tombstones pile up.
  for (uint64_t j = (i + 1) & mask_; slots_[j] != kEmpty; j = (j + 1) & mask_) {
    const uint64_t home = hashes_[slots_[j]] & mask_;
    // The entry at j may move to the hole at i unless its home lies cyclically in (i, j].
    const bool home_between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!home_between) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = kEmpty;
  --entries_;
}

}  // namespace headway::core
