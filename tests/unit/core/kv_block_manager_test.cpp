#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/kv_block_manager.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace headway::core {
namespace {

using ::testing::HasSubstr;

// Checks the manager against an independent model of the reference counts.
void expect_matches(const KvBlockManager& kv, const std::vector<uint32_t>& model_refs) {
  uint32_t held = 0;
  for (uint32_t b = 0; b < kv.total(); ++b) {
    ASSERT_EQ(kv.ref_count(b), model_refs[b]) << "block " << b;
    held += model_refs[b] > 0 ? 1 : 0;
  }
  ASSERT_EQ(kv.free() + held, kv.total());
  ASSERT_EQ(kv.used(), held);
  std::string why;
  ASSERT_TRUE(kv.consistent(&why)) << why;
}

TEST(KvBlockManager, StartsAllFreeAndConsistent) {
  KvBlockManager kv(10);
  EXPECT_EQ(kv.total(), 10u);
  EXPECT_EQ(kv.free(), 10u);
  EXPECT_EQ(kv.used(), 0u);
  EXPECT_TRUE(kv.consistent());
  for (uint32_t b = 0; b < 10; ++b) EXPECT_EQ(kv.ref_count(b), 0u);
}

TEST(KvBlockManager, HandsOutBlocksDeterministicallyAndReusesRecentlyFreedFirst) {
  KvBlockManager kv(6);
  std::vector<uint32_t> a, b;
  ASSERT_TRUE(kv.allocate(3, a));
  EXPECT_EQ(a, (std::vector<uint32_t>{0, 1, 2}));
  ASSERT_TRUE(kv.allocate(2, b));
  EXPECT_EQ(b, (std::vector<uint32_t>{3, 4}));
  kv.release(a);
  EXPECT_TRUE(a.empty());
  // LIFO free list: 2 was released last, so it comes back first.
  std::vector<uint32_t> c;
  ASSERT_TRUE(kv.allocate(4, c));
  EXPECT_EQ(c, (std::vector<uint32_t>{2, 1, 0, 5}));

  // Two managers fed the same calls hand out the same blocks.
  KvBlockManager x(6), y(6);
  std::vector<uint32_t> tx, ty;
  x.allocate(4, tx);
  y.allocate(4, ty);
  x.release(tx);
  y.release(ty);
  x.allocate(5, tx);
  y.allocate(5, ty);
  EXPECT_EQ(tx, ty);
}

TEST(KvBlockManager, AllocateAppendsToExistingTable) {
  KvBlockManager kv(4);
  std::vector<uint32_t> table;
  ASSERT_TRUE(kv.allocate(1, table));
  ASSERT_TRUE(kv.allocate(2, table));
  EXPECT_EQ(table, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(kv.free(), 1u);
}

TEST(KvBlockManager, FailedAllocateChangesNothing) {
  KvBlockManager kv(5);
  std::vector<uint32_t> held;
  ASSERT_TRUE(kv.allocate(3, held));
  std::vector<uint32_t> table{99};  // pre-existing content must survive
  EXPECT_FALSE(kv.allocate(3, table));
  EXPECT_EQ(table, (std::vector<uint32_t>{99}));
  EXPECT_EQ(kv.free(), 2u);
  EXPECT_EQ(kv.ref_count(3), 0u);
  EXPECT_EQ(kv.ref_count(4), 0u);
  EXPECT_TRUE(kv.consistent());
  // The failure left the free list intact: the next allocation gets what it would have got.
  std::vector<uint32_t> next;
  ASSERT_TRUE(kv.allocate(2, next));
  EXPECT_EQ(next, (std::vector<uint32_t>{3, 4}));
  EXPECT_FALSE(kv.allocate(1, next));
  EXPECT_EQ(next.size(), 2u);
}

TEST(KvBlockManager, AllocateZeroSucceedsAndChangesNothing) {
  KvBlockManager kv(2);
  std::vector<uint32_t> table;
  EXPECT_TRUE(kv.allocate(0, table));
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(kv.free(), 2u);
}

TEST(KvBlockManager, ReleasingAnUnallocatedBlockThrowsInternal) {
  KvBlockManager kv(4);
  std::vector<uint32_t> never{2};
  try {
    kv.release(never);
    FAIL() << "release of a free block did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), HW_INTERNAL);
    EXPECT_THAT(e.what(), HasSubstr("KV block 2"));
    EXPECT_THAT(e.what(), HasSubstr("not allocated"));
  }
  EXPECT_EQ(kv.free(), 4u);
  EXPECT_TRUE(kv.consistent());
}

TEST(KvBlockManager, ReleasingABlockOutOfRangeThrowsInternal) {
  KvBlockManager kv(4);
  std::vector<uint32_t> bogus{4};
  try {
    kv.release(bogus);
    FAIL() << "release of block 4 of 4 did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), HW_INTERNAL);
    EXPECT_THAT(e.what(), HasSubstr("KV block 4"));
  }
  EXPECT_TRUE(kv.consistent());
}

TEST(KvBlockManager, DoubleReleaseThrowsInternal) {
  KvBlockManager kv(3);
  std::vector<uint32_t> table;
  ASSERT_TRUE(kv.allocate(2, table));
  std::vector<uint32_t> copy = table;
  kv.release(table);
  try {
    kv.release(copy);
    FAIL() << "double release did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), HW_INTERNAL);
  }
  EXPECT_EQ(kv.free(), 3u);
  EXPECT_TRUE(kv.consistent());
}

TEST(KvBlockManager, AddRefOfUnallocatedBlockThrowsInternal) {
  KvBlockManager kv(3);
  for (uint32_t block : {0u, 3u, 100u}) {
    try {
      kv.add_ref(block);
      FAIL() << "add_ref(" << block << ") did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), HW_INTERNAL);
      EXPECT_THAT(e.what(), HasSubstr("KV block " + std::to_string(block)));
    }
  }
  EXPECT_TRUE(kv.consistent());
}

TEST(KvBlockManager, SharedBlockReturnsToFreeListOnlyWithItsLastOwner) {
  KvBlockManager kv(4);
  std::vector<uint32_t> owner;
  ASSERT_TRUE(kv.allocate(2, owner));
  kv.add_ref(owner[0]);
  kv.add_ref(owner[0]);
  std::vector<uint32_t> sharer1{owner[0]}, sharer2{owner[0]};
  EXPECT_EQ(kv.ref_count(owner[0]), 3u);
  EXPECT_EQ(kv.shared(), 1u);
  kv.release(owner);
  EXPECT_EQ(kv.free(), 3u);  // block 1 free, block 0 still shared
  EXPECT_EQ(kv.ref_count(0), 2u);
  EXPECT_EQ(kv.shared(), 1u);
  kv.release(sharer1);
  EXPECT_EQ(kv.free(), 3u);
  EXPECT_EQ(kv.shared(), 0u);  // one owner left
  kv.release(sharer2);
  EXPECT_EQ(kv.free(), 4u);
  EXPECT_TRUE(kv.consistent());
}

TEST(KvBlockManager, ConsistentReportsNoProblemWithWhyUntouched) {
  KvBlockManager kv(8);
  std::vector<uint32_t> t;
  kv.allocate(5, t);
  std::string why = "untouched";
  EXPECT_TRUE(kv.consistent(&why));
  EXPECT_EQ(why, "untouched");
}

TEST(KvBlockManager, ZeroBlocks) {
  KvBlockManager kv(0);
  std::vector<uint32_t> t;
  EXPECT_TRUE(kv.allocate(0, t));
  EXPECT_FALSE(kv.allocate(1, t));
  EXPECT_TRUE(kv.consistent());
}

// --- Prefix caching: blocks kept after their last owner ------------------------------------------

TEST(KvBlockManager, ACachedBlockStaysIdleAndFreeAfterItsLastOwnerAndCanBeReused) {
  KvBlockManager kv(4);
  std::vector<uint32_t> owner;
  ASSERT_TRUE(kv.allocate(2, owner));  // blocks 0, 1
  kv.keep_cached(0);
  EXPECT_TRUE(kv.is_cached(0));
  EXPECT_FALSE(kv.is_idle_cached(0));  // still held
  kv.release(owner);
  EXPECT_EQ(kv.free(), 4u);  // idle cached blocks count as free
  EXPECT_EQ(kv.idle_cached(), 1u);
  EXPECT_TRUE(kv.is_idle_cached(0));
  EXPECT_FALSE(kv.is_cached(1));
  std::string why;
  ASSERT_TRUE(kv.consistent(&why)) << why;

  std::vector<uint32_t> reuser{7};
  kv.take_cached(0, reuser);
  EXPECT_EQ(reuser, (std::vector<uint32_t>{7, 0}));
  reuser.erase(reuser.begin());
  EXPECT_EQ(kv.ref_count(0), 1u);
  EXPECT_EQ(kv.idle_cached(), 0u);
  EXPECT_EQ(kv.free(), 3u);
  EXPECT_TRUE(kv.is_cached(0));  // it stays cached: idle again once released
  EXPECT_EQ(kv.generation(0), 0u);
  kv.release(reuser);
  EXPECT_TRUE(kv.is_idle_cached(0));
  ASSERT_TRUE(kv.consistent(&why)) << why;
}

TEST(KvBlockManager, TakingAHeldCachedBlockSharesItUntilItsLastOwnerReleasesIt) {
  KvBlockManager kv(3);
  std::vector<uint32_t> first;
  ASSERT_TRUE(kv.allocate(1, first));
  kv.keep_cached(first[0]);
  std::vector<uint32_t> second;
  EXPECT_EQ(kv.shared(), 0u);
  kv.take_cached(first[0], second);
  EXPECT_EQ(second, first);
  EXPECT_EQ(kv.ref_count(first[0]), 2u);
  EXPECT_EQ(kv.shared(), 1u);
  EXPECT_EQ(kv.free(), 2u);
  kv.release(first);
  EXPECT_EQ(kv.ref_count(second[0]), 1u);
  EXPECT_EQ(kv.shared(), 0u);
  EXPECT_EQ(kv.idle_cached(), 0u);
  kv.release(second);
  EXPECT_EQ(kv.idle_cached(), 1u);
  EXPECT_EQ(kv.free(), 3u);
  std::string why;
  EXPECT_TRUE(kv.consistent(&why)) << why;
}

TEST(KvBlockManager, NeverUsedBlocksGoFirstThenIdleCachedOnesLeastRecentlyReleasedFirst) {
  KvBlockManager kv(6);
  std::vector<uint32_t> a, b;
  ASSERT_TRUE(kv.allocate(3, a));  // 0 1 2
  ASSERT_TRUE(kv.allocate(2, b));  // 3 4
  for (uint32_t block : {0u, 1u, 2u, 3u, 4u}) kv.keep_cached(block);
  std::vector<uint32_t> evicted;
  kv.set_eviction_listener([&](uint32_t block) {
    EXPECT_FALSE(kv.is_cached(block)) << "the listener sees the block already uncached";
    evicted.push_back(block);
  });
  kv.release(a);  // idle in the order 2, 1, 0: a table's last block is evicted first
  kv.release(b);  // then 4, 3
  EXPECT_EQ(kv.free(), 6u);
  EXPECT_EQ(kv.idle_cached(), 5u);

  std::vector<uint32_t> c;
  ASSERT_TRUE(kv.allocate(1, c));
  EXPECT_EQ(c, (std::vector<uint32_t>{5}));  // the never-used block, no eviction
  EXPECT_TRUE(evicted.empty());
  ASSERT_TRUE(kv.allocate(3, c));
  EXPECT_EQ(c, (std::vector<uint32_t>{5, 2, 1, 0}));
  EXPECT_EQ(evicted, (std::vector<uint32_t>{2, 1, 0}));
  for (uint32_t block : {0u, 1u, 2u}) {
    EXPECT_EQ(kv.generation(block), 1u) << block;
    EXPECT_FALSE(kv.is_cached(block)) << block;
  }
  EXPECT_EQ(kv.generation(3), 0u);
  EXPECT_TRUE(kv.is_idle_cached(3));
  std::string why;
  ASSERT_TRUE(kv.consistent(&why)) << why;

  // Taking an idle block takes it out of the eviction order.
  std::vector<uint32_t> d;
  kv.take_cached(3, d);
  ASSERT_TRUE(kv.allocate(1, d));
  EXPECT_EQ(d, (std::vector<uint32_t>{3, 4}));
  EXPECT_FALSE(kv.allocate(1, d));
  ASSERT_TRUE(kv.consistent(&why)) << why;
}

TEST(KvBlockManager, UncachedBlocksOfATableStillReturnToTheFreeListInTheirOldOrder) {
  KvBlockManager kv(4);
  std::vector<uint32_t> a;
  ASSERT_TRUE(kv.allocate(4, a));
  kv.keep_cached(1);
  kv.release(a);
  std::vector<uint32_t> b;
  ASSERT_TRUE(kv.allocate(3, b));
  EXPECT_EQ(b, (std::vector<uint32_t>{3, 2, 0}));  // LIFO, block 1 kept
  EXPECT_TRUE(kv.is_idle_cached(1));
}

TEST(KvBlockManager, MisusedCacheCallsThrowInternalAndChangeNothing) {
  KvBlockManager kv(3);
  std::vector<uint32_t> held;
  ASSERT_TRUE(kv.allocate(1, held));  // block 0
  std::vector<uint32_t> table;
  for (uint32_t block : {0u, 1u, 3u}) {  // held, free and never cached, out of range
    try {
      kv.take_cached(block, table);
      FAIL() << "take_cached(" << block << ") did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), HW_INTERNAL);
      EXPECT_THAT(e.what(), HasSubstr("KV block " + std::to_string(block)));
    }
  }
  for (uint32_t block : {1u, 3u}) {
    try {
      kv.keep_cached(block);
      FAIL() << "keep_cached(" << block << ") did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), HW_INTERNAL);
    }
  }
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(kv.free(), 2u);
  EXPECT_TRUE(kv.consistent());
}

// Long random sequences of what an engine does: requests grow their tables block by block, share
// blocks, finish (release all), are aborted or preempted in any order, and give back parts of their
// tables. After every call the manager must agree with an independent model of the ref counts.
TEST(KvBlockManager, RandomSequencesKeepExactAccounting) {
  for (uint32_t seed : {1u, 7u, 42u, 2024u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    const uint32_t total = 64;
    KvBlockManager kv(total);
    std::vector<uint32_t> model(total, 0);
    std::vector<std::vector<uint32_t>> tables;
    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
    uint32_t failed_allocations = 0;

    for (int step = 0; step < 20000; ++step) {
      int op = static_cast<int>(pick(10));
      if (op <= 3) {  // allocate into a new or an existing table, sometimes more than is free
        uint32_t count = static_cast<uint32_t>(pick(12));
        bool fresh = tables.empty() || pick(3) == 0;
        if (fresh) tables.emplace_back();
        std::vector<uint32_t>& table = fresh ? tables.back() : tables[pick(tables.size())];
        const std::vector<uint32_t> before = table;
        const uint32_t free_before = kv.free();
        bool ok = kv.allocate(count, table);
        ASSERT_EQ(ok, count <= free_before);
        if (ok) {
          ASSERT_EQ(table.size(), before.size() + count);
          ASSERT_TRUE(std::equal(before.begin(), before.end(), table.begin()));
          for (size_t i = before.size(); i < table.size(); ++i) {
            ASSERT_LT(table[i], total);
            ASSERT_EQ(model[table[i]], 0u) << "handed out a held block";
            model[table[i]] = 1;
          }
        } else {
          ++failed_allocations;
          ASSERT_EQ(table, before);
          ASSERT_EQ(kv.free(), free_before);
        }
      } else if (op == 4 && !tables.empty()) {  // share a block into a new owner
        std::vector<uint32_t>& from = tables[pick(tables.size())];
        if (from.empty()) continue;
        uint32_t block = from[pick(from.size())];
        kv.add_ref(block);
        ++model[block];
        tables.push_back({block});
      } else if (op <= 6 && !tables.empty()) {  // finish or abort a random request
        size_t i = pick(tables.size());
        for (uint32_t b : tables[i]) --model[b];
        kv.release(tables[i]);
        ASSERT_TRUE(tables[i].empty());
        tables.erase(tables.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (op <= 8 && !tables.empty()) {  // give back a random subset of one table
        std::vector<uint32_t>& table = tables[pick(tables.size())];
        std::vector<uint32_t> keep, drop;
        for (uint32_t b : table) (pick(2) == 0 ? drop : keep).push_back(b);
        for (uint32_t b : drop) --model[b];
        kv.release(drop);
        table = keep;
      } else if (!tables.empty()) {  // preempt several requests at once, in shuffled order
        std::shuffle(tables.begin(), tables.end(), rng);
        size_t n = pick(std::min<size_t>(tables.size(), 4)) + 1;
        for (size_t k = 0; k < n; ++k) {
          for (uint32_t b : tables.back()) --model[b];
          kv.release(tables.back());
          tables.pop_back();
        }
      }
      if (step % 97 == 0) expect_matches(kv, model);
      ASSERT_LE(kv.free(), total);
    }
    expect_matches(kv, model);
    EXPECT_GT(failed_allocations, 0u) << "the sequence never exhausted the pool";

    // No leak: everything released means everything free.
    std::shuffle(tables.begin(), tables.end(), rng);
    for (auto& t : tables) kv.release(t);
    EXPECT_EQ(kv.free(), total);
    EXPECT_EQ(kv.used(), 0u);
    std::string why;
    EXPECT_TRUE(kv.consistent(&why)) << why;
  }
}

// The same with prefix caching: blocks are kept, become idle, are reused, and are evicted by
// allocations; an independent model of refs, cached flags and generations must agree throughout.
TEST(KvBlockManager, RandomSequencesWithCachedBlocksKeepExactAccounting) {
  for (uint32_t seed : {3u, 11u, 99u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    const uint32_t total = 48;
    KvBlockManager kv(total);
    std::vector<uint32_t> refs(total, 0), generations(total, 0);
    std::vector<uint8_t> cached(total, 0);
    std::vector<std::vector<uint32_t>> tables;
    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
    uint32_t evictions = 0;
    kv.set_eviction_listener([&](uint32_t block) {
      ASSERT_TRUE(cached[block] && refs[block] == 0)
          << "evicted block " << block << " was not idle";
      cached[block] = 0;
      ++generations[block];
      ++evictions;
    });
    auto expect_model = [&] {
      uint32_t held = 0, idle = 0;
      for (uint32_t b = 0; b < total; ++b) {
        ASSERT_EQ(kv.ref_count(b), refs[b]) << "block " << b;
        ASSERT_EQ(kv.is_cached(b), cached[b] != 0) << "block " << b;
        ASSERT_EQ(kv.generation(b), generations[b]) << "block " << b;
        held += refs[b] > 0 ? 1 : 0;
        idle += cached[b] && refs[b] == 0 ? 1 : 0;
      }
      ASSERT_EQ(kv.used(), held);
      ASSERT_EQ(kv.idle_cached(), idle);
      std::string why;
      ASSERT_TRUE(kv.consistent(&why)) << why;
    };

    for (int step = 0; step < 20000; ++step) {
      const int op = static_cast<int>(pick(10));
      if (op <= 3) {  // allocate, evicting idle cached blocks when the free list runs out
        const uint32_t count = static_cast<uint32_t>(pick(10));
        if (tables.empty() || pick(3) == 0) tables.emplace_back();
        std::vector<uint32_t>& table = tables[pick(tables.size())];
        const size_t before = table.size();
        const uint32_t free_before = kv.free();
        ASSERT_EQ(kv.allocate(count, table), count <= free_before);
        for (size_t i = before; i < table.size(); ++i) {
          ASSERT_EQ(refs[table[i]], 0u) << "handed out a held block";
          ASSERT_FALSE(cached[table[i]]) << "handed out a block still cached";
          refs[table[i]] = 1;
        }
      } else if (op <= 5 && !tables.empty()) {  // keep a held block's KV
        const std::vector<uint32_t>& table = tables[pick(tables.size())];
        if (table.empty()) continue;
        const uint32_t block = table[pick(table.size())];
        if (!cached[block]) {
          kv.keep_cached(block);
          cached[block] = 1;
        }
      } else if (op <= 7 && !tables.empty()) {  // finish, abort or preempt a request
        const size_t i = pick(tables.size());
        for (uint32_t b : tables[i]) --refs[b];
        kv.release(tables[i]);
        tables.erase(tables.begin() + static_cast<std::ptrdiff_t>(i));
      } else {  // a new request takes a cached block, idle or shared with its holders
        std::vector<uint32_t> candidates;
        for (uint32_t b = 0; b < total; ++b) {
          if (cached[b]) candidates.push_back(b);
        }
        if (candidates.empty()) continue;
        const uint32_t block = candidates[pick(candidates.size())];
        tables.emplace_back();
        kv.take_cached(block, tables.back());
        ++refs[block];
      }
      if (step % 89 == 0) expect_model();
    }
    expect_model();
    EXPECT_GT(evictions, 0u) << "the sequence never evicted";
    for (auto& t : tables) {
      for (uint32_t b : t) --refs[b];
      kv.release(t);
    }
    EXPECT_EQ(kv.free(), total);
    expect_model();
  }
}

}  // namespace
}  // namespace headway::core
