// The SDK's PrefixTracker and PrefixAffinity (sdk/include/headway/sdk/prefix_affinity.hpp), which
// router plugins compile into themselves: what a tracker keeps within its capacity, that a full
// one keeps the most recent beginnings with their first pieces longest, and what PrefixAffinity
// reads from the engines' loads (KV size, down engines, indices it does not know) and from their
// KV events (ABI 1.9).
#include <gtest/gtest.h>

#include <cstdint>
#include <headway/sdk/prefix_affinity.hpp>
#include <numeric>
#include <span>
#include <type_traits>
#include <vector>

namespace headway::sdk {
namespace {

// A tracker's map points into its list: a copy would share the original's nodes.
static_assert(!std::is_copy_constructible_v<PrefixTracker>);
static_assert(!std::is_copy_assignable_v<PrefixTracker>);
static_assert(std::is_nothrow_move_constructible_v<PrefixTracker>);

// A beginning of `pieces` hashes, distinct for each `first`.
std::vector<uint64_t> beginning(uint64_t first, size_t pieces) {
  std::vector<uint64_t> hashes(pieces);
  std::iota(hashes.begin(), hashes.end(), first);
  return hashes;
}

TEST(PrefixTracker, MatchesThePiecesHeldFromTheFirstUpToTheFirstMissing) {
  PrefixTracker tracker;
  tracker.set_capacity(100);
  tracker.record(beginning(10, 5));
  EXPECT_EQ(tracker.matched(beginning(10, 5)), 5u);
  EXPECT_EQ(tracker.matched(beginning(10, 8)), 5u);
  EXPECT_EQ(tracker.matched(beginning(11, 3)), 3u);  // pieces are whole beginnings: any held one
  EXPECT_EQ(tracker.matched(beginning(50, 3)), 0u);
  EXPECT_EQ(tracker.matched({}), 0u);
  EXPECT_EQ(tracker.size(), 5u);
}

TEST(PrefixTracker, WithoutCapacityItHoldsNothing) {
  PrefixTracker tracker;
  tracker.record(beginning(10, 5));
  EXPECT_EQ(tracker.size(), 0u);
  EXPECT_EQ(tracker.matched(beginning(10, 5)), 0u);
}

// Full, a new beginning takes the room of the least recently sent pieces, and of one prompt the
// deepest pieces go first; a beginning longer than the capacity keeps its first pieces.
TEST(PrefixTracker, FullItKeepsTheMostRecentBeginningsFirstPiecesLongest) {
  PrefixTracker tracker;
  tracker.set_capacity(6);
  tracker.record(beginning(100, 4));
  tracker.record(beginning(200, 2));
  tracker.record(beginning(100, 2));  // sent again: its first two pieces are the most recent
  tracker.record(beginning(300, 3));  // takes the room of 100's pieces 3 and 4, then of 200's 2nd
  EXPECT_EQ(tracker.size(), 6u);
  EXPECT_EQ(tracker.matched(beginning(300, 3)), 3u);
  EXPECT_EQ(tracker.matched(beginning(100, 4)), 2u);
  EXPECT_EQ(tracker.matched(beginning(200, 2)), 1u);
  tracker.record(beginning(400, 10));
  EXPECT_EQ(tracker.size(), 6u);
  EXPECT_EQ(tracker.matched(beginning(400, 10)), 6u);
  EXPECT_EQ(tracker.matched(beginning(300, 1)), 0u);
  tracker.set_capacity(2);  // shrinking drops the least recent
  EXPECT_EQ(tracker.matched(beginning(400, 10)), 2u);
  tracker.clear();
  EXPECT_EQ(tracker.size(), 0u);
  EXPECT_EQ(tracker.matched(beginning(400, 1)), 0u);
}

// A moved tracker is the same tracker: its map's iterators still point into its list.
TEST(PrefixTracker, AMovedTrackerKeepsWorking) {
  std::vector<PrefixTracker> trackers(1);
  trackers[0].set_capacity(3);
  trackers[0].record(beginning(1, 3));
  trackers.resize(64);  // moves the first
  trackers[0].record(beginning(10, 2));
  trackers[0].record(beginning(1, 1));
  EXPECT_EQ(trackers[0].matched(beginning(1, 3)), 1u);
  EXPECT_EQ(trackers[0].matched(beginning(10, 2)), 2u);
}

hw_engine_load load(uint32_t index, uint32_t kv_blocks, bool alive = true) {
  hw_engine_load e{};
  e.engine_index = index;
  e.alive = alive ? 1 : 0;
  e.kv_blocks_total = kv_blocks;
  e.block_size = 16;
  return e;
}

TEST(PrefixAffinity, BoundsEachEngineByItsKvAndForgetsAnEngineSeenDown) {
  PrefixAffinity affinity;
  const std::vector<uint64_t> hashes = beginning(7, 40);
  const RoutePrefix prefix{64, hashes};
  // Engine 0 holds 64 blocks of 16 tokens (16 pieces of 64), engine 1 1,000 (250 pieces).
  std::vector<hw_engine_load> engines = {load(0, 64), load(1, 1000)};
  affinity.observe(prefix, engines);
  EXPECT_EQ(affinity.matched_tokens(engines[0]), 0.0);
  affinity.record(0, prefix);
  affinity.record(1, prefix);
  affinity.observe(prefix, engines);
  EXPECT_EQ(affinity.matched_tokens(engines[0]), 16.0 * 64);
  EXPECT_EQ(affinity.matched_tokens(engines[1]), 40.0 * 64);
  engines[1] = load(1, 1000, false);
  affinity.observe(prefix, engines);
  EXPECT_EQ(affinity.matched_tokens(engines[1]), 0.0);
  engines[1] = load(1, 1000);
  affinity.observe(prefix, engines);
  EXPECT_EQ(affinity.matched_tokens(engines[1]), 0.0);  // back up with its cache gone
  EXPECT_EQ(affinity.matched_tokens(engines[0]), 16.0 * 64);
  // An engine whose KV size is not known yet (0 blocks) holds nothing.
  PrefixAffinity unknown;
  const std::vector<hw_engine_load> not_answered = {load(0, 0)};
  unknown.observe(prefix, not_answered);
  unknown.record(0, prefix);
  unknown.observe(prefix, not_answered);
  EXPECT_EQ(unknown.matched_tokens(not_answered[0]), 0.0);
}

TEST(PrefixAffinity, TrackedTokensBoundsEveryEngineAndUnknownIndicesAreIgnored) {
  PrefixAffinity affinity(/*tracked_tokens=*/640);  // 10 pieces, whatever the KV
  const std::vector<uint64_t> hashes = beginning(7, 40);
  const RoutePrefix prefix{64, hashes};
  const std::vector<hw_engine_load> engines = {load(0, 1000)};
  affinity.observe(prefix, engines);
  affinity.record(0, prefix);
  affinity.record(5, prefix);  // not an engine it was shown: nothing
  affinity.observe(prefix, engines);
  EXPECT_EQ(affinity.matched_tokens(engines[0]), 10.0 * 64);
  EXPECT_EQ(affinity.matched_tokens(load(5, 1000)), 0.0);
  EXPECT_EQ(affinity.tracker(0).capacity(), 10u);
  // A request without hashes (ids unknown) matches nothing and records nothing.
  affinity.observe(RoutePrefix{}, engines);
  EXPECT_EQ(affinity.matched_tokens(engines[0]), 0.0);
}

hw_kv_event event(uint64_t hash, int32_t kind) { return hw_kv_event{hash, kind, 0}; }

TEST(PrefixAffinity, KvEventsAddWhatAnEngineStoredAndTakeAwayWhatItEvicted) {
  PrefixAffinity affinity;
  const std::vector<uint64_t> hashes = beginning(7, 6);
  const RoutePrefix prefix{64, hashes};
  const std::vector<hw_engine_load> engines = {load(0, 1000), load(1, 1000)};
  EXPECT_FALSE(affinity.reports(0));
  affinity.apply(0, {});  // the host's announcement
  EXPECT_TRUE(affinity.reports(0));
  EXPECT_FALSE(affinity.reports(1));
  affinity.observe(prefix, engines);

  // Stored without being routed there (an answer decoded, KV moved in): believed.
  const hw_kv_event stored[] = {event(7, HW_KV_EVENT_STORED), event(8, HW_KV_EVENT_STORED),
                                event(9, HW_KV_EVENT_STORED), event(10, HW_KV_EVENT_STORED)};
  affinity.apply(0, stored);
  affinity.observe(prefix, engines);
  EXPECT_EQ(affinity.matched_tokens(engines[0]), 4.0 * 64);
  EXPECT_EQ(affinity.matched_tokens(engines[1]), 0.0);

  // Routed there: believed at once, and pending: an eviction reported before the engine reports
  // holding the piece again does not take it away (the request sent there computes it again).
  affinity.record(0, prefix);
  const hw_kv_event removed[] = {event(9, HW_KV_EVENT_REMOVED), event(99, HW_KV_EVENT_REMOVED),
                                 event(5, 77)};  // a piece it never held; a later ABI's kind
  affinity.apply(0, removed);
  affinity.observe(prefix, engines);
  EXPECT_EQ(affinity.matched_tokens(engines[0]), 6.0 * 64);
  EXPECT_TRUE(affinity.tracker(0).pending(9));
  // Reported held (the request was served), then evicted: the match ends at the third piece.
  affinity.apply(0, stored);
  EXPECT_FALSE(affinity.tracker(0).pending(9));
  affinity.apply(0, removed);
  affinity.observe(prefix, engines);
  EXPECT_EQ(affinity.matched_tokens(engines[0]), 2.0 * 64);

  const hw_kv_event cleared[] = {event(0, HW_KV_EVENT_ALL_REMOVED)};
  affinity.apply(0, cleared);
  affinity.observe(prefix, engines);
  EXPECT_EQ(affinity.matched_tokens(engines[0]), 0.0);
  EXPECT_TRUE(affinity.reports(0));
}

// An engine process's history comes before the router's first look at its KV size (its tracker's
// capacity is 0 then): kept, and believed once observe() knows the size.
TEST(PrefixAffinity, KvEventsBeforeTheEnginesKvSizeIsKnownAreAppliedOnceItIs) {
  PrefixAffinity affinity;
  const std::vector<uint64_t> hashes = beginning(7, 3);
  const RoutePrefix prefix{64, hashes};
  const hw_kv_event stored[] = {event(7, HW_KV_EVENT_STORED), event(8, HW_KV_EVENT_STORED),
                                event(9, HW_KV_EVENT_STORED), event(9, HW_KV_EVENT_REMOVED)};
  affinity.apply(0, {});
  affinity.apply(0, stored);
  const std::vector<hw_engine_load> not_answered = {load(0, 0)};
  affinity.observe(prefix, not_answered);
  EXPECT_EQ(affinity.matched_tokens(not_answered[0]), 0.0);
  const std::vector<hw_engine_load> answered = {load(0, 1000)};
  affinity.observe(prefix, answered);
  EXPECT_EQ(affinity.matched_tokens(answered[0]), 2.0 * 64);
}

// Stored pieces, as a prompt's are, keep the prompt's first pieces longest in a full tracker: a
// prompt's pieces stored first to last, then another's, in a tracker of 6 pieces.
TEST(PrefixAffinity, AFullTrackerFedByEventsKeepsAPromptsFirstPiecesLongest) {
  PrefixAffinity affinity(/*tracked_tokens=*/6 * 64);
  const std::vector<hw_engine_load> engines = {load(0, 1000)};
  affinity.observe(RoutePrefix{64, {}}, engines);  // as the host gives a prompt without ids
  std::vector<hw_kv_event> events;
  for (uint64_t h = 100; h < 104; ++h) events.push_back(event(h, HW_KV_EVENT_STORED));
  for (uint64_t h = 200; h < 204; ++h) events.push_back(event(h, HW_KV_EVENT_STORED));
  affinity.apply(0, std::span<const hw_kv_event>(events).first(4));
  affinity.apply(0, std::span<const hw_kv_event>(events).subspan(4));
  const std::vector<uint64_t> first = beginning(100, 4), second = beginning(200, 4);
  EXPECT_EQ(affinity.tracker(0).matched(second), 4u);
  EXPECT_EQ(affinity.tracker(0).matched(first), 2u);  // its deepest two went first
}

TEST(PrefixAffinity, KvEventsAreIgnoredWhenNotReadOrWhenNothingIsTracked) {
  const std::vector<uint64_t> hashes = beginning(7, 2);
  const RoutePrefix prefix{64, hashes};
  const std::vector<hw_engine_load> engines = {load(0, 1000)};
  const hw_kv_event stored[] = {event(7, HW_KV_EVENT_STORED), event(8, HW_KV_EVENT_STORED)};
  const hw_kv_event removed[] = {event(7, HW_KV_EVENT_REMOVED)};
  for (const bool reads : {false, true}) {
    SCOPED_TRACE(reads ? "reads events" : "kv_events = false");
    PrefixAffinity affinity(0, 2.0, reads);
    affinity.observe(prefix, engines);
    affinity.apply(0, stored);
    affinity.observe(prefix, engines);
    EXPECT_EQ(affinity.matched_tokens(engines[0]), reads ? 2.0 * 64 : 0.0);
    affinity.record(0, prefix);
    affinity.apply(0, stored);  // served: no longer pending
    affinity.apply(0, removed);
    affinity.observe(prefix, engines);
    EXPECT_EQ(affinity.matched_tokens(engines[0]), reads ? 0.0 : 2.0 * 64);
    EXPECT_EQ(affinity.reports(0), reads);
  }
  PrefixAffinity weightless(0, 0.0);
  weightless.apply(0, stored);
  weightless.observe(prefix, engines);
  EXPECT_EQ(weightless.credit(engines[0]), 0.0);
  EXPECT_FALSE(weightless.reports(0));
}

}  // namespace
}  // namespace headway::sdk
