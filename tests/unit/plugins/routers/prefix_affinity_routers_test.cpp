// The length and disaggregated routers' use of prompt beginnings (the SDK's PrefixAffinity, as
// prefix_aware uses it): within a length pool, and among the prefill engines, a request goes where
// its beginning is believed cached unless that engine is busier than it saves. Loaded from the
// built plugin directory and driven through core::RouterInstance with the hashes
// core::route_prefix_hashes makes. Both routers weigh a cached token 2 by default: a length
// pool's key is outstanding tokens less 2 x the cached tokens, the prefill side's is queued prefill
// tokens less 2 x the cached tokens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/abi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "router_harness.h"

namespace headway::core {
namespace {

using router_test::document;
using router_test::engine;
using router_test::kPiece;
using router_test::prompt_hashes;
using router_test::RouterHarness;
using router_test::with_load;
using router_test::with_waiting;

constexpr const char* kLength = "headway_router_length.so";
constexpr const char* kDisaggregated = "headway_router_disaggregated.so";
constexpr const char* kShortLong = "pools = \"short:0,long:8192\"";

hw_route_decision place(RouterHarness& router, const std::vector<hw_engine_load>& engines,
                        const std::vector<uint64_t>& hashes) {
  return router.route(static_cast<uint32_t>(hashes.size() * kPiece), engines, 16, hashes);
}

// -------------------------------------------------------------------------------------------------
// length
// -------------------------------------------------------------------------------------------------

// Engine 0 in pool "short", 1 and 2 in pool "long".
std::vector<hw_engine_load> one_short_two_long() {
  return {engine(0, HW_ENGINE_ROLE_MIXED, "short"), engine(1, HW_ENGINE_ROLE_MIXED, "long"),
          engine(2, HW_ENGINE_ROLE_MIXED, "long")};
}

TEST(LengthRouterPrefixes, ReadsPrefixes) {
  EXPECT_TRUE(RouterHarness(kLength, kShortLong, one_short_two_long()).reads_prefixes());
}

// A 8,320-token document (130 pieces) cached on long engine 1 keeps drawing its questions while
// engine 1 has fewer than 16,640 (2 x 8,320) more outstanding tokens than engine 2.
TEST(LengthRouterPrefixes, WithinAPoolABeginningGoesBackToTheEngineItWasSentTo) {
  std::vector<hw_engine_load> engines = one_short_two_long();
  RouterHarness router(kLength, kShortLong, engines);
  const std::vector<int32_t> doc = document(1000, 130);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 132, 1)).decode_engine, 1u);
  engines[1] = with_load(engines[1], 16000);
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 133, 50000)).decode_engine, 1u);
  // Another document goes to the least loaded of the pool.
  EXPECT_EQ(place(router, engines, prompt_hashes(document(90000, 130), 131, 1)).decode_engine, 2u);
  // Busier than the document saves: engine 2, which then holds it too.
  engines[1] = with_load(engines[1], 17000);
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 131, 7)).decode_engine, 2u);
}

// The pool is chosen by length first: a long prompt that begins as a short one did goes to the long
// pool, however loaded, not to the short engine that holds its beginning.
TEST(LengthRouterPrefixes, ABeginningNeverTakesARequestOutOfItsPool) {
  std::vector<hw_engine_load> engines = one_short_two_long();
  RouterHarness router(kLength, kShortLong, engines);
  const std::vector<int32_t> doc = document(1000, 100);  // 6,400 tokens: the short pool
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 100, 1)).decode_engine, 0u);
  engines[1] = with_load(engines[1], 100000);
  engines[2] = with_load(engines[2], 90000);
  const hw_route_decision d = place(router, engines, prompt_hashes(doc, 140, 1));
  EXPECT_EQ(d.decode_engine, 2u);
  EXPECT_EQ(d.fallback, 0);
}

TEST(LengthRouterPrefixes, WeightZeroIsTheLeastLoadedOfThePool) {
  std::vector<hw_engine_load> engines = one_short_two_long();
  RouterHarness router(kLength, std::string(kShortLong) + "\ncached_token_weight = 0.0", engines);
  const std::vector<int32_t> doc = document(1000, 130);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 130, 1)).decode_engine, 1u);
  engines[1] = with_load(engines[1], 1);
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 130, 1)).decode_engine, 2u);
}

// A request placed on a full queue is refused there (429) and computes nothing: the engine is not
// believed to hold its beginning afterwards.
TEST(LengthRouterPrefixes, ARequestRefusedForAFullQueueIsNotRecorded) {
  std::vector<hw_engine_load> engines = one_short_two_long();
  RouterHarness router(kLength, kShortLong, engines);
  router.set_max_waiting({0, 1, 1});
  engines[1] = with_waiting(with_load(engines[1], 200), 1);
  engines[2] = with_waiting(with_load(engines[2], 100), 1);
  const std::vector<int32_t> doc = document(1000, 130);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 130, 1)).decode_engine, 2u);
  engines[1] = with_load(one_short_two_long()[1], 200);
  engines[2] = with_load(one_short_two_long()[2], 300);
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 130, 1)).decode_engine, 1u);
}

// A request spilled from its full pool (spill_when_full) is computed where it went: that engine
// holds its beginning afterwards.
TEST(LengthRouterPrefixes, ASpilledRequestIsRecordedWhereItWent) {
  std::vector<hw_engine_load> engines = one_short_two_long();
  RouterHarness router(kLength, std::string(kShortLong) + "\nspill_when_full = true", engines);
  router.set_max_waiting({1, 0, 0});
  engines[0] = with_waiting(engines[0], 1);
  const std::vector<int32_t> doc = document(1000, 10);  // 640 tokens: the short pool's
  const hw_route_decision spilled = place(router, engines, prompt_hashes(doc, 12, 1));
  ASSERT_EQ(spilled.decode_engine, 1u);
  ASSERT_EQ(router.counter("router_spills"), 1.0);
  // Spilled again, the document goes back to engine 1 while it is less than 1,280 tokens busier.
  engines[1] = with_load(engines[1], 1000);
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 12, 2)).decode_engine, 1u);
}

// -------------------------------------------------------------------------------------------------
// disaggregated
// -------------------------------------------------------------------------------------------------

// Prefill engines 0 and 1, decode engines 2 and 3.
std::vector<hw_engine_load> two_prefill_two_decode() {
  return {engine(0, HW_ENGINE_ROLE_PREFILL), engine(1, HW_ENGINE_ROLE_PREFILL),
          engine(2, HW_ENGINE_ROLE_DECODE), engine(3, HW_ENGINE_ROLE_DECODE)};
}

TEST(DisaggregatedRouterPrefixes, ReadsPrefixes) {
  EXPECT_TRUE(RouterHarness(kDisaggregated, "", two_prefill_two_decode()).reads_prefixes());
}

// A 640-token document prefilled on engine 0 keeps drawing its prompts while engine 0 has fewer
// than 1,280 more prompt tokens queued than engine 1; the decode side stays the least loaded.
TEST(DisaggregatedRouterPrefixes, APrefillGoesWhereItsBeginningIsCached) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, "", engines);
  const std::vector<int32_t> doc = document(1000, 10);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 12, 1)).prefill_engine, 0u);
  engines[0] = with_load(engines[0], 1200, 1200);
  engines[2] = with_load(engines[2], 300, 0);
  engines[3] = with_load(engines[3], 200, 0);
  hw_route_decision d = place(router, engines, prompt_hashes(doc, 11, 50000));
  EXPECT_EQ(d.prefill_engine, 0u);
  EXPECT_EQ(d.decode_engine, 3u);
  // Another document: the fewest queued.
  EXPECT_EQ(place(router, engines, prompt_hashes(document(90000, 10), 11, 1)).prefill_engine, 1u);
  // More queued than the document saves: engine 1, which then holds it too.
  engines[0] = with_load(engines[0], 1300, 1300);
  engines[1] = with_load(engines[1], 10, 10);
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 11, 7)).prefill_engine, 1u);
  engines[1] = with_load(engines[1], 1100, 1100);  // both hold it: the fewer queued
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 11, 9)).prefill_engine, 1u);
}

TEST(DisaggregatedRouterPrefixes, WeightZeroPrefillsOnTheFewestQueued) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, "cached_token_weight = 0.0", engines);
  const std::vector<int32_t> doc = document(1000, 10);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)).prefill_engine, 0u);
  engines[0] = with_load(engines[0], 1, 1);
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)).prefill_engine, 1u);
}

TEST(DisaggregatedRouterPrefixes, APrefillRefusedForAFullQueueIsNotRecorded) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, "", engines);
  router.set_max_waiting({1, 1, 0, 0});
  engines[0] = with_waiting(with_load(engines[0], 200, 200), 1);
  engines[1] = with_waiting(with_load(engines[1], 100, 100), 1);
  const std::vector<int32_t> doc = document(1000, 10);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)).prefill_engine, 1u);
  engines[0] = with_load(two_prefill_two_decode()[0], 200, 200);
  engines[1] = with_load(two_prefill_two_decode()[1], 300, 300);
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)).prefill_engine, 0u);
}

// A prefill engine seen down is forgotten, also when the request that sees it is prefilled on its
// decode engine (local_prefill_max_tokens) and picks no prefill engine.
TEST(DisaggregatedRouterPrefixes, APrefillEngineSeenDownIsForgotten) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, "local_prefill_max_tokens = 100", engines);
  const std::vector<int32_t> doc = document(1000, 10);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 12, 1)).prefill_engine, 0u);
  engines[0] = router_test::dead(engines[0]);
  const hw_route_decision local = place(router, engines, prompt_hashes(document(5, 1), 1, 1));
  ASSERT_EQ(local.prefill_engine, local.decode_engine);
  // Back up with its cache gone: 100 queued tokens now outweigh nothing held.
  engines[0] = with_load(two_prefill_two_decode()[0], 100, 100);
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 12, 1)).prefill_engine, 1u);
}

// A prompt prefilled on its decode engine (local_prefill_max_tokens) is on no prefill engine: a
// longer prompt with the same beginning then goes to the fewest queued.
TEST(DisaggregatedRouterPrefixes, ALocalPrefillIsOnNoPrefillEngine) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, "local_prefill_max_tokens = 1000", engines);
  const std::vector<int32_t> doc = document(1000, 10);  // 640 tokens: prefilled locally
  hw_route_decision d = place(router, engines, prompt_hashes(doc, 10, 1));
  ASSERT_EQ(d.prefill_engine, d.decode_engine);
  // 1,280 tokens move; engine 0 holds nothing of them, so the 1 queued token decides.
  engines[0] = with_load(engines[0], 1, 1);
  d = place(router, engines, prompt_hashes(doc, 20, 1));
  EXPECT_EQ(d.prefill_engine, 1u);
}

constexpr const char* kWhereCached =
    "local_prefill_max_tokens = 256\nlocal_prefill_where_cached = true";

// With local_prefill_where_cached, the decode engine a conversation's turn went to is believed to
// hold that turn's prompt (its KV moved there): the next turn, longer than
// local_prefill_max_tokens but with at most that many tokens not held there, is prefilled there,
// even where that engine has more outstanding work than the other, as long as it is less than the
// held tokens are worth (2 outstanding tokens each).
TEST(DisaggregatedRouterPrefixes, AConversationsNextTurnIsPrefilledWhereItsEarlierTurnsAre) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, kWhereCached, engines);
  const std::vector<int32_t> turn1 = document(1000, 20);  // 1,280 tokens: moved
  hw_route_decision d = place(router, engines, prompt_hashes(turn1, 20, 1));
  ASSERT_NE(d.prefill_engine, d.decode_engine);
  const uint32_t held_on = d.decode_engine;
  const uint32_t other = held_on == 2 ? 3 : 2;
  // Turn 2: turn 1's 1,280 tokens and 256 more. Its decode engine is 2,000 tokens busier, less
  // than the 2 x 1,280 the held beginning is worth.
  engines[held_on] = with_load(engines[held_on], 2000, 0);
  d = place(router, engines, prompt_hashes(turn1, 24, 7));
  EXPECT_EQ(d.decode_engine, held_on);
  EXPECT_EQ(d.prefill_engine, held_on);
  EXPECT_EQ(router.counter("router_local_prefills_cached"), 1.0);
  // Another conversation holds nothing anywhere: the least loaded decode engine, KV moved.
  d = place(router, engines, prompt_hashes(document(90000, 20), 20, 1));
  EXPECT_EQ(d.decode_engine, other);
  EXPECT_NE(d.prefill_engine, d.decode_engine);
  // Busier than the beginning is worth: the other decode engine, which holds none of it, so the
  // whole prompt moves from a prefill engine.
  engines[held_on] = with_load(engines[held_on], 3000, 0);
  d = place(router, engines, prompt_hashes(turn1, 24, 9));
  EXPECT_EQ(d.decode_engine, other);
  EXPECT_NE(d.prefill_engine, d.decode_engine);
  EXPECT_EQ(router.counter("router_local_prefills_cached"), 1.0);
}

// A decode engine seen down is forgotten: back up, its cache is gone, so a conversation's next turn
// that it would have held moves instead of being prefilled there.
TEST(DisaggregatedRouterPrefixes, ADecodeEngineSeenDownIsForgotten) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, kWhereCached, engines);
  const std::vector<int32_t> turn1 = document(1000, 20);  // 1,280 tokens: moved
  const uint32_t held_on = place(router, engines, prompt_hashes(turn1, 20, 1)).decode_engine;
  const uint32_t other = held_on == 2 ? 3 : 2;
  engines[held_on] = router_test::dead(engines[held_on]);
  ASSERT_EQ(place(router, engines, prompt_hashes(document(90000, 20), 20, 1)).decode_engine, other);
  engines[held_on] = two_prefill_two_decode()[held_on];
  engines[other] = with_load(engines[other], 1, 0);  // it holds the other document now
  const hw_route_decision d = place(router, engines, prompt_hashes(turn1, 24, 7));
  EXPECT_EQ(d.decode_engine, held_on);  // the least loaded, and it holds nothing of turn 1
  EXPECT_NE(d.prefill_engine, d.decode_engine);
  EXPECT_EQ(router.counter("router_local_prefills_cached"), 0.0);
}

// A prompt with more tokens not held on a decode engine than local_prefill_max_tokens moves
// anyway: its beginning there is worth nothing on the decode side, and the least loaded decode
// engine takes it.
TEST(DisaggregatedRouterPrefixes, APromptThatMovesAnywayGoesToTheLeastLoadedDecodeEngine) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, kWhereCached, engines);
  const std::vector<int32_t> turn1 = document(1000, 20);  // 1,280 tokens: moved
  const uint32_t held_on = place(router, engines, prompt_hashes(turn1, 20, 1)).decode_engine;
  // 2,000 tokens busier, less than the 2 x 1,280 the beginning would be worth; 1,920 tokens,
  // 640 of them not held there.
  engines[held_on] = with_load(engines[held_on], 2000, 0);
  const hw_route_decision d = place(router, engines, prompt_hashes(turn1, 30, 11));
  EXPECT_EQ(d.decode_engine, held_on == 2 ? 3u : 2u);
  EXPECT_NE(d.prefill_engine, d.decode_engine);
}

// Without local_prefill_where_cached (the default) decode engines' beginnings count for nothing: a
// prompt longer than local_prefill_max_tokens moves whatever its decode engine holds, and the least
// loaded decode engine takes it, as before the option.
TEST(DisaggregatedRouterPrefixes, ByDefaultTheThresholdCountsTheWholePrompt) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, "local_prefill_max_tokens = 256", engines);
  const std::vector<int32_t> turn1 = document(1000, 20);
  const uint32_t first_decode = place(router, engines, prompt_hashes(turn1, 20, 1)).decode_engine;
  const uint32_t other = first_decode == 2 ? 3 : 2;
  // The engine that took turn 1 is the less loaded: it takes turn 2 too, which still moves.
  engines[other] = with_load(engines[other], 1, 0);
  hw_route_decision d = place(router, engines, prompt_hashes(turn1, 24, 7));
  EXPECT_EQ(d.decode_engine, first_decode);
  EXPECT_NE(d.prefill_engine, d.decode_engine);
  // The more loaded by one token: the other takes it.
  engines[other] = with_load(engines[other], 0, 0);
  engines[first_decode] = with_load(engines[first_decode], 1, 0);
  d = place(router, engines, prompt_hashes(turn1, 24, 9));
  EXPECT_EQ(d.decode_engine, other);
  EXPECT_EQ(router.counter("router_local_prefills_cached"), 0.0);
}

// A local prefill placed on a decode engine whose queue is full is refused by the host: that engine
// is then not believed to hold the prompt, and the next turn moves.
TEST(DisaggregatedRouterPrefixes, ALocalPrefillRefusedForAFullQueueIsNotRecorded) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, kWhereCached, engines);
  router.set_max_waiting({0, 0, 1, 1});
  engines[2] = with_waiting(engines[2], 1);
  engines[3] = with_waiting(with_load(engines[3], 10, 0), 1);
  const std::vector<int32_t> conversation = document(1000, 4);  // 256 tokens: local
  hw_route_decision d = place(router, engines, prompt_hashes(conversation, 4, 1));
  ASSERT_EQ(d.decode_engine, 2u);
  ASSERT_EQ(d.prefill_engine, 2u);
  engines = two_prefill_two_decode();
  engines[3] = with_load(engines[3], 10, 0);
  // 512 tokens, 256 of them the refused prompt: had engine 2 been believed to hold those, the
  // rest (256) would have stayed local there.
  d = place(router, engines, prompt_hashes(conversation, 8, 7));
  EXPECT_EQ(d.decode_engine, 2u);
  EXPECT_NE(d.prefill_engine, d.decode_engine);
  EXPECT_EQ(router.counter("router_local_prefills_cached"), 0.0);
}

// Every decode queue full: a long prompt that one of them holds still moves (the host takes moved
// KV on a full decode engine, and would refuse it prefilled there), as a long prompt did before
// local_prefill_where_cached, and to the least loaded: the held beginning is worth nothing where
// no engine takes a local prefill.
TEST(DisaggregatedRouterPrefixes, WithEveryDecodeQueueFullAHeldPromptStillMoves) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, kWhereCached, engines);
  const std::vector<int32_t> turn1 = document(1000, 20);
  const uint32_t held_on = place(router, engines, prompt_hashes(turn1, 20, 1)).decode_engine;
  router.set_max_waiting({0, 0, 1, 1});
  engines[2] = with_waiting(engines[2], 1);
  engines[3] = with_waiting(engines[3], 1);
  engines[held_on] = with_load(engines[held_on], 1, 0);
  const hw_route_decision d = place(router, engines, prompt_hashes(turn1, 24, 7));
  EXPECT_EQ(d.decode_engine, held_on == 2 ? 3u : 2u);
  EXPECT_NE(d.prefill_engine, d.decode_engine);
  EXPECT_EQ(router.counter("router_local_prefills_cached"), 0.0);
}

// cached_token_weight = 0 believes nothing, with local_prefill_where_cached too: the threshold
// counts the whole prompt, and the least loaded decode engine takes a prompt that moves.
TEST(DisaggregatedRouterPrefixes, WeightZeroWhereCachedCountsTheWholePrompt) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, std::string(kWhereCached) + "\ncached_token_weight = 0.0",
                       engines);
  const std::vector<int32_t> turn1 = document(1000, 20);
  const uint32_t first_decode = place(router, engines, prompt_hashes(turn1, 20, 1)).decode_engine;
  engines[first_decode] = with_load(engines[first_decode], 1, 0);
  const hw_route_decision d = place(router, engines, prompt_hashes(turn1, 24, 7));
  EXPECT_NE(d.decode_engine, first_decode);
  EXPECT_NE(d.prefill_engine, d.decode_engine);
  EXPECT_EQ(router.counter("router_local_prefills_cached"), 0.0);
}

// With no live prefill engine every prompt is prefilled on its decode engine: the one that holds
// its beginning takes it, however much is left to compute, while it is busier by less than the
// beginning is worth.
TEST(DisaggregatedRouterPrefixes, WithNoPrefillEngineUpAPromptGoesWhereItsBeginningIs) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, kWhereCached, engines);
  const std::vector<int32_t> doc = document(1000, 20);
  const uint32_t held_on = place(router, engines, prompt_hashes(doc, 20, 1)).decode_engine;
  engines[0] = router_test::dead(engines[0]);
  engines[1] = router_test::dead(engines[1]);
  engines[held_on] = with_load(engines[held_on], 2000, 0);
  // 3,200 tokens, 1,920 of them not held: more than 256, yet nowhere else to prefill it.
  const hw_route_decision d = place(router, engines, prompt_hashes(doc, 50, 3));
  EXPECT_EQ(d.decode_engine, held_on);
  EXPECT_EQ(d.prefill_engine, held_on);
  EXPECT_EQ(router.counter("router_fallbacks"), 1.0);
}

// -------------------------------------------------------------------------------------------------
// KV events (ABI 1.9)
// -------------------------------------------------------------------------------------------------

TEST(PrefixRoutersKvEvents, EveryRouterThatTracksBeginningsReadsThem) {
  EXPECT_TRUE(RouterHarness(kLength, kShortLong, one_short_two_long()).reads_kv_events());
  EXPECT_TRUE(RouterHarness(kDisaggregated, "", two_prefill_two_decode()).reads_kv_events());
  EXPECT_TRUE(
      RouterHarness("headway_router_prefix_aware.so", "kv_events = false", {engine(0), engine(1)})
          .reads_kv_events());
  EXPECT_FALSE(RouterHarness("headway_router_least_loaded.so", "", {engine(0), engine(1)})
                   .reads_kv_events());
}

// A document sent to an engine is believed there until the engine reports evicting it after it
// served the requests sent there: its next question then goes to the least loaded engine instead.
// With kv_events = false the router never learns of the eviction.
TEST(PrefixRoutersKvEvents, AnEvictionReportedTakesTheBeginningAway) {
  for (const bool reads : {true, false}) {
    SCOPED_TRACE(reads ? "kv_events = true" : "kv_events = false");
    std::vector<hw_engine_load> engines = {engine(0), engine(1)};
    RouterHarness router("headway_router_prefix_aware.so",
                         reads ? "kv_events = true" : "kv_events = false", engines);
    router.announce_kv_events(0);
    router.announce_kv_events(1);
    const std::vector<int32_t> doc = document(1000, 20);
    const std::vector<uint64_t> first = prompt_hashes(doc, 22, 1);
    const uint32_t held_on = place(router, engines, first).decode_engine;
    const uint32_t other = 1 - held_on;
    engines[held_on] = with_load(engines[held_on], 1000);
    ASSERT_EQ(place(router, engines, prompt_hashes(doc, 22, 50000)).decode_engine, held_on);
    // Evicted before the engine served what was sent there: it computes it again, and the
    // document stays believed there.
    router.kv_events(held_on, HW_KV_EVENT_REMOVED, std::span(first).subspan(6, 1));
    ASSERT_EQ(place(router, engines, prompt_hashes(doc, 22, 60000)).decode_engine, held_on);
    // Served (the engine reports the document held), then its tenth piece evicted: nine pieces
    // (576 tokens, worth 1,152) still outweigh its 1,000 more outstanding tokens.
    router.kv_events(held_on, HW_KV_EVENT_STORED, std::span(first).first(20));
    router.kv_events(held_on, HW_KV_EVENT_REMOVED, std::span(first).subspan(9, 1));
    ASSERT_EQ(place(router, engines, prompt_hashes(doc, 22, 70000)).decode_engine, held_on);
    // And, served again, its seventh: six pieces (768) no longer do.
    router.kv_events(held_on, HW_KV_EVENT_STORED, std::span(first).first(9));
    router.kv_events(held_on, HW_KV_EVENT_REMOVED, std::span(first).subspan(6, 1));
    EXPECT_EQ(place(router, engines, prompt_hashes(doc, 22, 80000)).decode_engine,
              reads ? other : held_on);
  }
}

// With local_prefill_where_cached, a prompt whose KV moves to a decode engine is believed there
// from its routing, pending until the engine reports it stored (its KV arrived): an eviction the
// engine reports meanwhile does not take it away, and a conversation's next turn routed in between
// is prefilled there. Once stored, a reported eviction does. (Believing it only once stored moved
// every such turn, which the simulation found costlier: docs/performance.md, "KV events".)
TEST(PrefixRoutersKvEvents, AMovedPromptIsBelievedOnItsDecodeEngineUntilItsKvIsEvicted) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, kWhereCached, engines);
  for (uint32_t e = 0; e < 4; ++e) router.announce_kv_events(e);
  const std::vector<int32_t> turn1 = document(1000, 20);  // 1,280 tokens: moved
  const std::vector<uint64_t> turn1_hashes = prompt_hashes(turn1, 20, 1);
  hw_route_decision d = place(router, engines, turn1_hashes);
  ASSERT_NE(d.prefill_engine, d.decode_engine);
  const uint32_t held_on = d.decode_engine;
  // An older copy of the same pieces evicted there before turn 1's KV arrived: still believed,
  // and turn 2 (turn 1 and 256 tokens more) is prefilled there.
  router.kv_events(held_on, HW_KV_EVENT_REMOVED, turn1_hashes);
  engines[held_on == 2 ? 3 : 2] = with_load(engines[held_on == 2 ? 3 : 2], 100, 0);
  const std::vector<uint64_t> turn2_hashes = prompt_hashes(turn1, 24, 7);
  d = place(router, engines, turn2_hashes);
  EXPECT_EQ(d.decode_engine, held_on);
  EXPECT_EQ(d.prefill_engine, held_on);
  // Turn 2 computed there (stored), and then turn 1's pieces evicted: turn 3 moves.
  router.kv_events(held_on, HW_KV_EVENT_STORED, turn2_hashes);
  router.kv_events(held_on, HW_KV_EVENT_REMOVED, turn1_hashes);
  d = place(router, engines, prompt_hashes(turn1, 24, 9));
  EXPECT_NE(d.prefill_engine, d.decode_engine);
}

}  // namespace
}  // namespace headway::core
