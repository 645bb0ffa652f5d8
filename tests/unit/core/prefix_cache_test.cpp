// core::PrefixCache: exact lookups of (chain link, token ids) to cached KV blocks, duplicates,
// links that go stale when a block is evicted, a random sequence against a plain map, and the KV
// events it logs in the routers' hashes.
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/kv_block_manager.h>
#include <headway/core/prefix_cache.h>
#include <headway/core/route_prefix.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

namespace headway::core {
namespace {

using Link = PrefixCache::Link;
constexpr uint32_t kBlockSize = 4;

std::vector<int32_t> ids(std::initializer_list<int32_t> values) { return values; }

TEST(PrefixCache, FindsARecordedBlockOnlyByItsExactTokensAndParent) {
  KvBlockManager kv(8);
  PrefixCache cache(kv, kBlockSize);
  std::vector<uint32_t> table;
  ASSERT_TRUE(kv.allocate(2, table));
  const std::vector<int32_t> first = ids({1, 2, 3, 4}), second = ids({5, 6, 7, 8});
  EXPECT_EQ(cache.find(PrefixCache::kStart, first), PrefixCache::kNoBlock);

  const std::optional<Link> a = cache.insert(PrefixCache::kStart, first, table[0]);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (Link{table[0], 0}));
  EXPECT_TRUE(kv.is_cached(table[0]));
  const std::optional<Link> b = cache.insert(*a, second, table[1]);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(cache.entries(), 2u);

  EXPECT_EQ(cache.find(PrefixCache::kStart, first), table[0]);
  EXPECT_EQ(cache.find(*a, second), table[1]);
  // The same tokens elsewhere in a chain, or other tokens, are other content.
  EXPECT_EQ(cache.find(PrefixCache::kStart, second), PrefixCache::kNoBlock);
  EXPECT_EQ(cache.find(*a, ids({5, 6, 7, 9})), PrefixCache::kNoBlock);
  EXPECT_EQ(cache.find(*a, first), PrefixCache::kNoBlock);
  EXPECT_EQ(cache.find(Link{table[0], 1}, second), PrefixCache::kNoBlock);
  EXPECT_EQ(cache.find(PrefixCache::kStart, ids({1, 2, 3})), PrefixCache::kNoBlock);
}

TEST(PrefixCache, ADuplicateStaysUncachedAndTheChainGoesOnFromTheFirstCopy) {
  KvBlockManager kv(4);
  PrefixCache cache(kv, kBlockSize);
  std::vector<uint32_t> one, two;
  ASSERT_TRUE(kv.allocate(1, one));
  ASSERT_TRUE(kv.allocate(1, two));
  const std::vector<int32_t> tokens = ids({9, 9, 9, 9});
  const Link first = *cache.insert(PrefixCache::kStart, tokens, one[0]);
  const std::optional<Link> again = cache.insert(PrefixCache::kStart, tokens, two[0]);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, first);
  EXPECT_FALSE(kv.is_cached(two[0]));
  EXPECT_EQ(cache.entries(), 1u);
  // Recording a cached block again is a broken caller, not a duplicate.
  EXPECT_THROW(cache.insert(PrefixCache::kStart, ids({1, 1, 1, 1}), one[0]), Error);
}

TEST(PrefixCache, AnEvictedBlockIsForgottenAndWhatFollowedItCannotBeFoundOrExtended) {
  KvBlockManager kv(2);
  PrefixCache cache(kv, kBlockSize);
  std::vector<uint32_t> table;
  ASSERT_TRUE(kv.allocate(2, table));
  const std::vector<int32_t> first = ids({1, 2, 3, 4}), second = ids({5, 6, 7, 8});
  const Link a = *cache.insert(PrefixCache::kStart, first, table[0]);
  const Link b = *cache.insert(a, second, table[1]);
  kv.release(table);  // both idle; block 1 (the deeper one) is evicted first

  std::vector<uint32_t> other;
  ASSERT_TRUE(kv.allocate(1, other));
  EXPECT_EQ(other[0], b.block);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.find(a, second), PrefixCache::kNoBlock);
  EXPECT_EQ(cache.find(PrefixCache::kStart, first), a.block);

  ASSERT_TRUE(kv.allocate(1, other));  // evicts the first block too
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_EQ(cache.find(PrefixCache::kStart, first), PrefixCache::kNoBlock);
  // Block 0 now holds other tokens: nothing may be recorded after the old content.
  EXPECT_FALSE(cache.insert(a, second, other[0]).has_value());
  EXPECT_FALSE(kv.is_cached(other[0]));
  const Link fresh = *cache.insert(PrefixCache::kStart, first, other[1]);
  EXPECT_EQ(fresh.generation, 1u);
  EXPECT_EQ(cache.find(PrefixCache::kStart, first), other[1]);
}

// Many chains over a tiny vocabulary (so that placements crowd and deletions shift entries),
// recorded, released, reused and evicted at random; every lookup must agree with a std::map of
// what is recorded.
TEST(PrefixCache, RandomRecordsAndEvictionsAgreeWithAPlainMap) {
  for (uint32_t seed : {5u, 17u, 123u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
    const uint32_t total = 64;
    KvBlockManager kv(total);
    PrefixCache cache(kv, kBlockSize);
    using Key = std::tuple<uint32_t, uint32_t, std::vector<int32_t>>;
    std::map<Key, uint32_t> reference;
    std::vector<Key> key_of(total);
    std::vector<uint8_t> recorded(total, 0);
    // The cache forgets first (it listens to the manager); the reference follows after each call.
    auto sync_evictions = [&] {
      for (uint32_t b = 0; b < total; ++b) {
        if (recorded[b] && !kv.is_cached(b)) {
          reference.erase(key_of[b]);
          recorded[b] = 0;
        }
      }
    };
    auto random_tokens = [&] {
      std::vector<int32_t> t(kBlockSize);
      for (int32_t& id : t) id = static_cast<int32_t>(pick(2));
      return t;
    };
    std::vector<std::vector<uint32_t>> requests;
    std::vector<Link> chains;
    const Link kLost{PrefixCache::kNoBlock, 7};

    for (int step = 0; step < 20000; ++step) {
      const size_t op = pick(8);
      if (op <= 3) {  // a request computes one more block and records it
        if (requests.empty() || pick(4) == 0) {
          requests.emplace_back();
          chains.push_back(PrefixCache::kStart);
        }
        const size_t r = pick(requests.size());
        if (chains[r] == kLost || !kv.allocate(1, requests[r])) continue;
        sync_evictions();
        const uint32_t block = requests[r].back();
        const std::vector<int32_t> tokens = random_tokens();
        const Link parent = chains[r];
        const std::optional<Link> next = cache.insert(parent, tokens, block);
        const bool parent_alive =
            parent == PrefixCache::kStart || (kv.generation(parent.block) == parent.generation);
        ASSERT_EQ(next.has_value(), parent_alive);
        if (!next) {
          chains[r] = kLost;  // nothing more of it is recorded
          continue;
        }
        const Key key{parent.block, parent.generation, tokens};
        auto it = reference.find(key);
        if (it == reference.end()) {
          reference.emplace(key, block);
          key_of[block] = key;
          recorded[block] = 1;
          ASSERT_EQ(*next, cache.link_of(block));
        } else {
          ASSERT_EQ(next->block, it->second) << "a duplicate continues from the first copy";
          ASSERT_FALSE(kv.is_cached(block));
        }
        chains[r] = *next;
      } else if (op <= 5 && !requests.empty()) {  // a request ends
        const size_t r = pick(requests.size());
        kv.release(requests[r]);
        requests.erase(requests.begin() + static_cast<std::ptrdiff_t>(r));
        chains.erase(chains.begin() + static_cast<std::ptrdiff_t>(r));
      } else {  // look up a recorded key, or a random one
        if (!reference.empty() && pick(2) == 0) {
          auto it = reference.begin();
          std::advance(it, static_cast<std::ptrdiff_t>(pick(reference.size())));
          const auto& [block, generation, tokens] = it->first;
          ASSERT_EQ(cache.find(Link{block, generation}, tokens), it->second);
        } else {
          const uint32_t block =
              pick(3) == 0 ? PrefixCache::kNoBlock : static_cast<uint32_t>(pick(total));
          const Link parent{block, block == PrefixCache::kNoBlock ? 0 : kv.generation(block)};
          const std::vector<int32_t> tokens = random_tokens();
          auto it = reference.find(Key{parent.block, parent.generation, tokens});
          ASSERT_EQ(cache.find(parent, tokens),
                    it == reference.end() ? PrefixCache::kNoBlock : it->second);
        }
      }
      ASSERT_EQ(cache.entries(), reference.size());
    }
    EXPECT_GT(reference.size(), 8u);
  }
}

namespace events {

std::vector<hw_kv_event> taken(KvEventLog& log) {
  std::vector<hw_kv_event> out;
  log.move_into(out);
  return out;
}

// Records `tokens` block by block after kStart into blocks allocated from `kv`; returns them.
std::vector<uint32_t> record_chain(KvBlockManager& kv, PrefixCache& cache,
                                   const std::vector<int32_t>& tokens, uint32_t block_size) {
  std::vector<uint32_t> table;
  EXPECT_TRUE(kv.allocate(static_cast<uint32_t>(tokens.size() / block_size), table));
  Link chain = PrefixCache::kStart;
  for (size_t b = 0; b < table.size(); ++b) {
    chain = *cache.insert(chain, std::span(tokens).subspan(b * block_size, block_size), table[b]);
  }
  return table;
}

// A cache of `blocks` blocks of `block_size` reporting to a log, and a prompt of `tokens` ids
// counting up from `first` with its route hashes.
struct Reporting {
  Reporting(uint32_t blocks, uint32_t block_size, size_t tokens, int32_t first)
      : kv(blocks), cache(kv, block_size), log(64), prompt(tokens) {
    cache.report_to(&log);
    std::iota(prompt.begin(), prompt.end(), first);
    route_prefix_hashes(prompt, hashes);
  }
  KvBlockManager kv;
  PrefixCache cache;
  KvEventLog log;
  std::vector<int32_t> prompt;
  std::vector<uint64_t> hashes;
};

// Blocks of 16 ids, so a route piece (64) ends every fourth block.
TEST(PrefixCacheEvents, EachPieceStoredOrTakenIsLoggedInTheHashOfTheRoutersByItsLastBlock) {
  constexpr uint32_t kBlock = 16;
  Reporting r(16, kBlock, 200, 1000);
  KvBlockManager& kv = r.kv;
  PrefixCache& cache = r.cache;
  KvEventLog& log = r.log;
  const std::vector<int32_t>& prompt = r.prompt;
  const std::vector<uint64_t>& hashes = r.hashes;
  ASSERT_EQ(hashes.size(), 3u);

  // 12 whole blocks (192 ids): pieces 0, 1 and 2, each logged when its fourth block is recorded.
  const std::vector<int32_t> whole(prompt.begin(), prompt.begin() + 192);
  const std::vector<uint32_t> table = record_chain(kv, cache, whole, kBlock);
  const std::vector<hw_kv_event> stored = taken(log);
  ASSERT_EQ(stored.size(), 3u);
  for (size_t p = 0; p < 3; ++p) {
    EXPECT_EQ(stored[p].kind, HW_KV_EVENT_STORED);
    EXPECT_EQ(stored[p].piece_hash, hashes[p]) << "piece " << p;
  }

  // The same tokens recorded again (another request computing them) stay one entry, which the
  // engine holds: piece 0 is logged stored again, as for a request that takes it from the cache.
  std::vector<uint32_t> again;
  ASSERT_TRUE(kv.allocate(4, again));
  Link chain = PrefixCache::kStart;
  for (uint32_t b = 0; b < 4; ++b) {
    chain = *cache.insert(chain, std::span(whole).subspan(size_t{b} * kBlock, kBlock), again[b]);
  }
  std::vector<hw_kv_event> restored = taken(log);
  ASSERT_EQ(restored.size(), 1u);
  EXPECT_EQ(restored[0].kind, HW_KV_EVENT_STORED);
  EXPECT_EQ(restored[0].piece_hash, hashes[0]);
  kv.release(again);

  // Taken from the cache: blocks 4 to 7 end piece 1 (block 7); blocks 8 to 10 end none.
  for (uint32_t b = 4; b < 11; ++b) cache.report_taken(table[b]);
  restored = taken(log);
  ASSERT_EQ(restored.size(), 1u);
  EXPECT_EQ(restored[0].kind, HW_KV_EVENT_STORED);
  EXPECT_EQ(restored[0].piece_hash, hashes[1]);
}

TEST(PrefixCacheEvents, AnEvictedBlockLogsThePieceItEndsAsRemoved) {
  Reporting r(8, 16, 128, 7);
  std::vector<uint32_t> table = record_chain(r.kv, r.cache, r.prompt, 16);
  ASSERT_EQ(taken(r.log).size(), 2u);
  r.kv.release(table);  // idle; the deepest block goes first

  // Evicting blocks 7, 6, 5, 4: piece 1 goes with block 7, the block holding its last id. Blocks 6
  // to 4 end no piece: nothing more is logged.
  std::vector<uint32_t> other;
  ASSERT_TRUE(r.kv.allocate(4, other));
  std::vector<hw_kv_event> removed = taken(r.log);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].kind, HW_KV_EVENT_REMOVED);
  EXPECT_EQ(removed[0].piece_hash, r.hashes[1]);
  // Then block 3, which ends piece 0.
  ASSERT_TRUE(r.kv.allocate(1, other));
  removed = taken(r.log);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].piece_hash, r.hashes[0]);
}

// Blocks of 48 end pieces inside them (ids 64 and 128 in blocks 1 and 2); blocks of 128 end two
// each. Stored and evicted, each piece is logged once, in order, in the routers' hash.
TEST(PrefixCacheEvents, BlocksThatDoNotDivideAPieceLogEveryPieceEndTheyHold) {
  for (const uint32_t block : {48u, 128u}) {
    SCOPED_TRACE("blocks of " + std::to_string(block));
    Reporting r(8, block, 384, 3);
    const size_t tokens = size_t{384} / block * block;  // whole blocks: 384 of either size
    std::vector<uint32_t> table = record_chain(
        r.kv, r.cache, std::vector<int32_t>(r.prompt.begin(), r.prompt.begin() + tokens), block);
    const std::vector<hw_kv_event> stored = taken(r.log);
    ASSERT_EQ(stored.size(), tokens / 64);
    for (size_t p = 0; p < stored.size(); ++p) {
      EXPECT_EQ(stored[p].kind, HW_KV_EVENT_STORED);
      EXPECT_EQ(stored[p].piece_hash, r.hashes[p]) << "piece " << p;
    }
    r.kv.release(table);
    std::vector<uint32_t> other;
    ASSERT_TRUE(r.kv.allocate(r.kv.total(), other));  // evicts every block, deepest first
    const std::vector<hw_kv_event> removed = taken(r.log);
    ASSERT_EQ(removed.size(), tokens / 64);
    std::vector<uint64_t> removed_hashes;
    for (const hw_kv_event& e : removed) {
      EXPECT_EQ(e.kind, HW_KV_EVENT_REMOVED);
      removed_hashes.push_back(e.piece_hash);
    }
    std::sort(removed_hashes.begin(), removed_hashes.end());
    std::vector<uint64_t> expected(r.hashes.begin(), r.hashes.begin() + removed.size());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(removed_hashes, expected);
  }
}

TEST(PrefixCacheEvents, EventsAskedForAfterBlocksWereRecordedAreRefused) {
  KvBlockManager kv(4);
  PrefixCache cache(kv, kBlockSize);
  std::vector<uint32_t> table;
  ASSERT_TRUE(kv.allocate(1, table));
  cache.insert(PrefixCache::kStart, ids({1, 2, 3, 4}), table[0]);
  KvEventLog log(8);
  EXPECT_THROW(cache.report_to(&log), Error);
}

TEST(KvEventLog, AFullLogDropsItsEventsForOneThatForgetsEverything) {
  KvEventLog log(4);
  for (uint64_t h = 1; h <= 4; ++h) log.push(h, HW_KV_EVENT_STORED);
  EXPECT_EQ(log.overflows(), 0u);
  log.push(9, HW_KV_EVENT_REMOVED);  // no room: the four are dropped
  std::vector<hw_kv_event> out;
  log.move_into(out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, HW_KV_EVENT_ALL_REMOVED);
  EXPECT_EQ(out[1].kind, HW_KV_EVENT_REMOVED);
  EXPECT_EQ(out[1].piece_hash, 9u);
  EXPECT_EQ(log.overflows(), 1u);
  EXPECT_TRUE(log.empty());

  // Appended events keep their order; an ALL_REMOVED among them drops what came before it.
  log.push(1, HW_KV_EVENT_STORED);
  const hw_kv_event more[] = {
      {2, HW_KV_EVENT_STORED, 0}, {0, HW_KV_EVENT_ALL_REMOVED, 0}, {3, HW_KV_EVENT_STORED, 0}};
  log.append(more);
  out.clear();
  log.move_into(out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, HW_KV_EVENT_ALL_REMOVED);
  EXPECT_EQ(out[1].piece_hash, 3u);
}

}  // namespace events

}  // namespace
}  // namespace headway::core
