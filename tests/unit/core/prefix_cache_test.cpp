// core::PrefixCache: exact lookups of (chain link, token ids) to cached KV blocks, duplicates,
// links that go stale when a block is evicted, and a random sequence against a plain map.
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/kv_block_manager.h>
#include <headway/core/prefix_cache.h>

#include <map>
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

}  // namespace
}  // namespace headway::core
