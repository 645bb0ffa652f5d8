// The prefix_aware router, loaded from the built plugin directory and driven through the C ABI by
// core::RouterInstance with the prompt hashes core::route_prefix_hashes makes, as core::Cluster
// drives it. Each expected engine is worked out from the loads and the beginnings written next to
// it: an engine's key is its outstanding tokens less cached_token_weight times the tokens of the
// prompt's beginning it is believed to hold, the smallest key wins, ties round-robin from a cursor
// just past the last pick. The tests set the weight to 1 (kWeightOne), so that each key is plain
// arithmetic, except the one that checks the default, 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/abi.h>
#include <headway/core/error.h>
#include <headway/core/route_prefix.h>

#include <cstdint>
#include <vector>

#include "router_harness.h"

namespace headway::core {
namespace {

using router_test::dead;
using router_test::document;
using router_test::engine;
using router_test::error_of;
using router_test::kPiece;
using router_test::prompt_hashes;
using router_test::RouterHarness;
using router_test::with_load;
using router_test::with_waiting;
using ::testing::HasSubstr;

constexpr const char* kPrefixAware = "headway_router_prefix_aware.so";
constexpr const char* kLeastLoaded = "headway_router_least_loaded.so";
constexpr const char* kWeightOne = "cached_token_weight = 1.0";

uint32_t place(RouterHarness& router, const std::vector<hw_engine_load>& engines,
               const std::vector<uint64_t>& hashes) {
  const hw_route_decision d =
      router.route(static_cast<uint32_t>(hashes.size() * kPiece), engines, 16, hashes);
  EXPECT_EQ(d.prefill_engine, d.decode_engine);
  return d.decode_engine;
}

TEST(PrefixAwareRouter, ReadsPrefixesWhereLeastLoadedDoesNot) {
  const std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  EXPECT_TRUE(RouterHarness(kPrefixAware, "", engines).reads_prefixes());
  // The host hashes prompts only for a router that reads them.
  EXPECT_FALSE(RouterHarness(kLeastLoaded, "", engines).reads_prefixes());
}

TEST(PrefixAwareRouter, ABeginningGoesBackToTheEngineItWasSentTo) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1), engine(2)};
  RouterHarness router(kPrefixAware, kWeightOne, engines);
  const std::vector<int32_t> doc = document(1000, 10);               // 640 tokens
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 12, 1)), 0u);  // all idle: the first
  // Engine 0 is 600 tokens busier, less than the 640 it holds: the same document goes there.
  engines = {with_load(engine(0), 600), engine(1), engine(2)};
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 11, 50000)), 0u);
  // Another document goes to the least loaded (1, then 2 round-robin).
  const std::vector<int32_t> other = document(90000, 10);
  EXPECT_EQ(place(router, engines, prompt_hashes(other, 11, 1)), 1u);
}

TEST(PrefixAwareRouter, ABeginningGoesElsewhereWhenItsEngineIsBusierThanItSaves) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kPrefixAware, kWeightOne, engines);
  const std::vector<int32_t> doc = document(1000, 10);  // 640 tokens
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 0u);
  engines = {with_load(engine(0), 700), engine(1)};  // 700 - 640 > 0
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 11, 7)), 1u);
  // Both hold it now: the less loaded of the two takes it.
  engines = {with_load(engine(0), 700), with_load(engine(1), 650)};
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 12, 9)), 1u);
}

// By default a cached token weighs 2: a request already sent to an engine with the beginning (still
// queued there, so counted whole in its outstanding tokens, 640 + 128 + 16) does not push the next
// request with that beginning to another engine, as it would at 1 (784 - 640 > 0).
TEST(PrefixAwareRouter, ByDefaultARequestQueuedWithTheBeginningKeepsTheNextOneThere) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness by_default(kPrefixAware, "", engines);
  RouterHarness weight_one(kPrefixAware, kWeightOne, engines);
  const std::vector<int32_t> doc = document(1000, 10);  // 640 tokens
  ASSERT_EQ(place(by_default, engines, prompt_hashes(doc, 12, 1)), 0u);
  ASSERT_EQ(place(weight_one, engines, prompt_hashes(doc, 12, 1)), 0u);
  engines = {with_load(engine(0), 784), engine(1)};
  EXPECT_EQ(place(by_default, engines, prompt_hashes(doc, 12, 5000)), 0u);  // 784 - 1280 < 0
  EXPECT_EQ(place(weight_one, engines, prompt_hashes(doc, 12, 5000)), 1u);
}

TEST(PrefixAwareRouter, TheEngineHoldingMoreOfTheBeginningWins) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kPrefixAware, kWeightOne, engines);
  const std::vector<int32_t> turn1 = document(1000, 5);
  const std::vector<uint64_t> first = prompt_hashes(turn1, 5, 1);
  ASSERT_EQ(place(router, engines, first), 0u);
  // The conversation so far (10 pieces, the first 5 those of turn 1) is sent to engine 1 by load.
  std::vector<int32_t> turn2 = document(1000, 10);
  engines = {with_load(engine(0), 5000), engine(1)};
  ASSERT_EQ(place(router, engines, prompt_hashes(turn2, 10, 1)), 1u);
  // Engine 0 holds 320 tokens of turn 3 and engine 1 640: engine 1 even 300 tokens busier.
  engines = {engine(0), with_load(engine(1), 300)};
  EXPECT_EQ(place(router, engines, prompt_hashes(turn2, 14, 77)), 1u);
}

TEST(PrefixAwareRouter, WithoutHashesItIsLeastLoaded) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1), engine(2)};
  RouterHarness router(kPrefixAware, kWeightOne, engines);
  for (uint32_t expected : {0u, 1u, 2u, 0u}) EXPECT_EQ(place(router, engines, {}), expected);
  engines = {with_load(engine(0), 10), with_load(engine(1), 5), with_load(engine(2), 7)};
  EXPECT_EQ(place(router, engines, {}), 1u);
  // A prompt shorter than a piece has no hash: least loaded too.
  std::vector<uint64_t> short_prompt;
  route_prefix_hashes(std::vector<int32_t>(kPiece - 1, 7), short_prompt);
  ASSERT_TRUE(short_prompt.empty());
  EXPECT_EQ(place(router, engines, short_prompt), 1u);
}

TEST(PrefixAwareRouter, WeightZeroIgnoresTheBeginning) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kPrefixAware, "cached_token_weight = 0.0", engines);
  const std::vector<int32_t> doc = document(1000, 10);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 0u);
  engines = {with_load(engine(0), 1), engine(1)};
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 1u);
}

TEST(PrefixAwareRouter, ADownEngineIsForgotten) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kPrefixAware, kWeightOne, engines);
  const std::vector<int32_t> doc = document(1000, 10);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 0u);
  // Seen down once (its cache is gone when it comes back)...
  engines = {dead(engine(0)), engine(1)};
  ASSERT_EQ(place(router, engines, {}), 1u);
  // ...so back up and 100 tokens busier, it no longer draws the document.
  engines = {with_load(engine(0), 100), engine(1)};
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 1u);
}

TEST(PrefixAwareRouter, AFullQueueComesLastEvenWithTheBeginning) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kPrefixAware, kWeightOne, engines);
  router.set_max_waiting({2, 2});
  const std::vector<int32_t> doc = document(1000, 10);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 0u);
  engines = {with_waiting(engine(0), 2), with_load(engine(1), 5000)};
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 1u);
}

// Every queue full: placed on the best all the same, where the host refuses it (429); it computes
// nothing there, so the engine is not believed to hold its beginning afterwards.
TEST(PrefixAwareRouter, ARequestRefusedForAFullQueueIsNotRecorded) {
  std::vector<hw_engine_load> engines = {with_waiting(engine(0), 1),
                                         with_waiting(with_load(engine(1), 100), 1)};
  RouterHarness router(kPrefixAware, kWeightOne, {engine(0), engine(1)});
  router.set_max_waiting({1, 1});
  const std::vector<int32_t> doc = document(1000, 10);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 0u);
  engines = {with_load(engine(0), 300), with_load(engine(1), 200)};  // 300 - 640 < 200 if held
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 1u);
}

TEST(PrefixAwareRouter, PlacesOnlyWhereTheRequestFits) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kPrefixAware, kWeightOne, engines);
  const std::vector<int32_t> doc = document(1000, 10);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 0u);
  router.set_max_model_len({600, 4096});  // 640 + 16 tokens do not fit engine 0
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 1u);
}

// The deepest pieces are forgotten first, as an engine's cache evicts a request's last blocks
// first: with room for 10 pieces, a 10-piece document followed by 5 pieces of another leaves the
// document's first 5 (320 tokens).
TEST(PrefixAwareRouter, KeepsTheMostRecentBeginningsDeepestPiecesForgottenFirst) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kPrefixAware, "tracked_tokens = 640\ncached_token_weight = 1.0", engines);
  const std::vector<int32_t> doc = document(1000, 10);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 0u);
  engines = {engine(0), with_load(engine(1), 100000)};
  ASSERT_EQ(place(router, engines, prompt_hashes(document(500000, 5), 5, 1)), 0u);
  engines = {with_load(engine(0), 300), engine(1)};  // 300 - 320 < 0
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 0u);
  // That placement recorded the whole document again, evicting the other one: 10 pieces held.
  engines = {with_load(engine(0), 630), engine(1)};  // 630 - 640 < 0
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 10, 1)), 0u);
}

// By default an engine is believed to hold at most its KV cache: 1,000 blocks of 16 tokens, 250
// pieces. Of a 300-piece prompt it keeps the first 250 (16,000 tokens).
TEST(PrefixAwareRouter, RemembersNoMoreThanTheEnginesKvCacheHolds) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kPrefixAware, kWeightOne, engines);
  const std::vector<int32_t> doc = document(1000, 300);
  ASSERT_EQ(place(router, engines, prompt_hashes(doc, 300, 1)), 0u);
  engines = {with_load(engine(0), 15900), engine(1)};
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 300, 1)), 0u);
  engines = {with_load(engine(0), 16100), engine(1)};
  EXPECT_EQ(place(router, engines, prompt_hashes(doc, 300, 1)), 1u);
}

TEST(PrefixAwareRouter, RefusesADeploymentWithoutAMixedEngine) {
  const std::vector<hw_engine_load> engines = {engine(0, HW_ENGINE_ROLE_PREFILL),
                                               engine(1, HW_ENGINE_ROLE_DECODE)};
  Error e = error_of([&] { RouterHarness router(kPrefixAware, kWeightOne, engines); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("router 'prefix_aware' places requests on mixed engines"));
  EXPECT_THAT(e.what(), HasSubstr("disaggregated"));
}

TEST(PrefixAwareRouter, NoLiveEngineIsUnavailable) {
  const std::vector<hw_engine_load> engines = {dead(engine(0)), dead(engine(1))};
  RouterHarness router(kPrefixAware, "", {engine(0), engine(1)});
  Error e = error_of([&] { place(router, engines, prompt_hashes(document(1, 2), 2, 1)); });
  EXPECT_EQ(e.code(), HW_UNAVAILABLE);
  EXPECT_THAT(e.what(), HasSubstr("no live mixed-role engine"));
}

}  // namespace
}  // namespace headway::core
