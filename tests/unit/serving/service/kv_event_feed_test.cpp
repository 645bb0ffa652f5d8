// KvEventFeed: an engine process's KV events, numbered, read by any number of router processes
// from the number each read last; readers that fell behind its capacity, or that read another
// incarnation's numbers, are told some are lost.
#include "kv_event_feed.h"

#include <gtest/gtest.h>

#include <vector>

namespace headway::serving {
namespace {

std::vector<hw_kv_event> stored(uint64_t first, uint64_t count) {
  std::vector<hw_kv_event> events;
  for (uint64_t h = first; h < first + count; ++h) {
    events.push_back(hw_kv_event{h, HW_KV_EVENT_STORED, 0});
  }
  return events;
}

std::vector<uint64_t> hashes(const KvEventsSince& read) {
  std::vector<uint64_t> out;
  for (const hw_kv_event& e : read.events) out.push_back(e.piece_hash);
  return out;
}

TEST(KvEventFeed, EachReaderGetsWhatCameAfterTheNumberItAsksFrom) {
  KvEventFeed feed(8);
  KvEventsSince first = feed.since(0);
  EXPECT_TRUE(first.events.empty());
  EXPECT_EQ(first.next, 0u);
  EXPECT_FALSE(first.lost);
  feed.append(stored(100, 3));
  const KvEventsSince a = feed.since(0);
  EXPECT_EQ(hashes(a), (std::vector<uint64_t>{100, 101, 102}));
  EXPECT_EQ(a.next, 3u);
  feed.append(stored(200, 2));
  // One reader goes on from where it was; another reads everything again: none consumes them.
  EXPECT_EQ(hashes(feed.since(a.next)), (std::vector<uint64_t>{200, 201}));
  EXPECT_EQ(feed.since(0).events.size(), 5u);
  EXPECT_TRUE(feed.since(5).events.empty());
}

TEST(KvEventFeed, AReaderThatFellBehindOrReadsAnotherIncarnationIsToldSomeAreLost) {
  KvEventFeed feed(4);
  feed.append(stored(1, 6));  // 0..5; the first two are gone
  const KvEventsSince behind = feed.since(1);
  EXPECT_TRUE(behind.lost);
  EXPECT_EQ(hashes(behind), (std::vector<uint64_t>{3, 4, 5, 6}));
  EXPECT_EQ(behind.next, 6u);
  EXPECT_FALSE(feed.since(2).lost);
  // A number past the last: the reader read a process at this address that has since restarted.
  const KvEventsSince restarted = feed.since(40);
  EXPECT_TRUE(restarted.lost);
  EXPECT_EQ(restarted.events.size(), 4u);
}

}  // namespace
}  // namespace headway::serving
