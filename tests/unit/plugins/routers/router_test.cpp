// The router plugins (single, least_loaded, length, disaggregated), loaded from the built plugin
// directory through core::PluginRegistry and driven through the C ABI by core::RouterInstance,
// exactly as core::Cluster drives them; and RouterInstance's own check of placements against the
// engines' roles, with a deliberately faulty router. The hw_engine_load arrays are built by hand,
// so every expected choice below is worked out from the loads written next to it.
//
// Tie-breaking, which several expectations rely on: a router scans the engines from a rotating
// cursor that moves just past each engine it picks (sdk::pick_least_loaded), and keeps the first
// engine with the smallest key in scan order.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../../test_support/captured_log.h"
#include "router_harness.h"

namespace headway::core {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using router_test::dead;
using router_test::engine;
using router_test::error_of;
using router_test::RouterHarness;
using router_test::with_free_blocks;
using router_test::with_load;
using router_test::with_waiting;

constexpr const char* kSingle = "headway_router_single.so";
constexpr const char* kLeastLoaded = "headway_router_least_loaded.so";
constexpr const char* kLength = "headway_router_length.so";
constexpr const char* kDisaggregated = "headway_router_disaggregated.so";

// -------------------------------------------------------------------------------------------------
// single
// -------------------------------------------------------------------------------------------------

TEST(SingleRouter, SendsEveryRequestToTheOnlyEngine) {
  std::vector<hw_engine_load> engines = {with_load(engine(0), 123456)};
  RouterHarness router(kSingle, "", engines);
  for (uint32_t prompt : {1u, 8192u, 1u << 20}) {
    hw_route_decision d = router.route(prompt, engines);
    EXPECT_EQ(d.prefill_engine, 0u);
    EXPECT_EQ(d.decode_engine, 0u);
    EXPECT_EQ(d.fallback, 0);
  }
}

TEST(SingleRouter, RefusesMoreThanOneEngineAtCreate) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  Error e = error_of([&] { RouterHarness router(kSingle, "", engines); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("exactly one engine"));
  EXPECT_THAT(e.what(), HasSubstr("has 2"));
  EXPECT_THAT(e.what(), HasSubstr("least_loaded"));       // says what to use instead
  EXPECT_THAT(e.what(), HasSubstr("test.toml: router"));  // the host names the place
  // For prefill and decode engines, the router that serves them (least_loaded and length refuse
  // them: helper-184 followed the old advice twice to no avail).
  e = error_of([&] {
    RouterHarness router(kSingle, "",
                         {engine(0, HW_ENGINE_ROLE_PREFILL), engine(1, HW_ENGINE_ROLE_DECODE)});
  });
  EXPECT_THAT(e.what(), HasSubstr("use disaggregated for prefill and decode engines"));
  EXPECT_THAT(e.what(), Not(HasSubstr("least_loaded")));
  // A mixed engine beside a decode engine: least_loaded serves it, disaggregated would not
  // (helper-185); decode engines alone: disaggregated with local prefills.
  e = error_of([&] {
    RouterHarness router(kSingle, "", {engine(0), engine(1, HW_ENGINE_ROLE_DECODE)});
  });
  EXPECT_THAT(e.what(), HasSubstr("use least_loaded, which leaves the decode engines idle"));
  e = error_of([&] {
    RouterHarness router(kSingle, "",
                         {engine(0, HW_ENGINE_ROLE_DECODE), engine(1, HW_ENGINE_ROLE_DECODE)});
  });
  EXPECT_THAT(e.what(), HasSubstr("use disaggregated with local_prefill_max_tokens > 0"));
}

// A prefill engine alone would decode what it should hand on, a decode engine alone prefill every
// request: one engine under a role that says otherwise, refused before serving.
TEST(SingleRouter, RefusesAPrefillOrDecodeEngineAtCreate) {
  for (int32_t role : {HW_ENGINE_ROLE_PREFILL, HW_ENGINE_ROLE_DECODE}) {
    Error e = error_of([&] { RouterHarness router(kSingle, "", {engine(0, role)}); });
    EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("serves one mixed engine"));
    EXPECT_THAT(e.what(), HasSubstr(role == HW_ENGINE_ROLE_PREFILL ? "role = \"prefill\""
                                                                   : "role = \"decode\""));
    EXPECT_THAT(e.what(), HasSubstr("'disaggregated'"));
  }
}

TEST(SingleRouter, ADeadEngineIsUnavailable) {
  std::vector<hw_engine_load> engines = {engine(0)};
  RouterHarness router(kSingle, "", engines);
  engines[0] = dead(engines[0]);
  Error e = error_of([&] { router.route(10, engines); });
  EXPECT_EQ(e.code(), HW_UNAVAILABLE);
  EXPECT_THAT(e.what(), HasSubstr("down"));
  // Back up: served again.
  engines[0].alive = 1;
  EXPECT_EQ(router.route_to_one(10, engines), 0u);
}

// -------------------------------------------------------------------------------------------------
// least_loaded
// -------------------------------------------------------------------------------------------------

TEST(LeastLoadedRouter, PicksTheEngineWithFewestOutstandingTokens) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1), engine(2)};
  RouterHarness router(kLeastLoaded, "", engines);

  // Outstanding 500 / 100 / 300: engine 1, whatever the prompt's length.
  engines = {with_load(engine(0), 500), with_load(engine(1), 100), with_load(engine(2), 300)};
  EXPECT_EQ(router.route_to_one(10, engines), 1u);
  EXPECT_EQ(router.route_to_one(100000, engines), 1u);
  // 50 / 100 / 300: engine 0.
  engines[0] = with_load(engine(0), 50);
  EXPECT_EQ(router.route_to_one(10, engines), 0u);
  // Outstanding tokens, not queued prefill tokens, are the measure: engine 2 has the most prompt
  // tokens queued (9000 of its 9001) but engine 0 the most outstanding work overall.
  engines = {with_load(engine(0), 20000, 0), with_load(engine(1), 10000, 0),
             with_load(engine(2), 9001, 9000)};
  EXPECT_EQ(router.route_to_one(10, engines), 2u);
  hw_route_decision d = router.route(10, engines);
  EXPECT_EQ(d.fallback, 0);
}

TEST(LeastLoadedRouter, TiesGoRoundRobin) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1), engine(2)};
  RouterHarness router(kLeastLoaded, "", engines);
  // An idle cluster (the loads do not change between calls): 0, 1, 2, 0, 1, 2.
  std::vector<uint32_t> picks;
  for (int i = 0; i < 6; ++i) picks.push_back(router.route_to_one(1, engines));
  EXPECT_EQ(picks, (std::vector<uint32_t>{0, 1, 2, 0, 1, 2}));

  // A tie between 0 and 1 (10 tokens each), engine 2 busier (50). The cursor is at 0 again after
  // the six picks above. Scan 0,1,2 -> 0 (cursor 1); scan 1,2,0 -> 1 (cursor 2); scan 2,0,1 -> 0
  // (2 is busier, 0 comes before 1); ... the tied engines alternate and 2 is never chosen.
  engines = {with_load(engine(0), 10), with_load(engine(1), 10), with_load(engine(2), 50)};
  picks.clear();
  for (int i = 0; i < 4; ++i) picks.push_back(router.route_to_one(1, engines));
  EXPECT_EQ(picks, (std::vector<uint32_t>{0, 1, 0, 1}));
}

TEST(LeastLoadedRouter, SkipsDeadEnginesAndPrefillOrDecodeRoles) {
  std::vector<hw_engine_load> engines = {engine(0, HW_ENGINE_ROLE_PREFILL),
                                         engine(1, HW_ENGINE_ROLE_DECODE), engine(2), engine(3)};
  RouterHarness router(kLeastLoaded, "", engines);
  // The idle engines are a prefill engine, a decode engine and a dead mixed one: only engine 3,
  // the busiest, may take requests.
  engines = {engine(0, HW_ENGINE_ROLE_PREFILL), engine(1, HW_ENGINE_ROLE_DECODE), dead(engine(2)),
             with_load(engine(3), 100000)};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(router.route_to_one(1, engines), 3u);
  // Engine 2 back: it is the less loaded of the two mixed engines.
  engines[2].alive = 1;
  EXPECT_EQ(router.route_to_one(1, engines), 2u);
}

TEST(LeastLoadedRouter, AnEngineWithAFullQueueComesLast) {
  // Engine 0 has the fewest outstanding tokens but 4 requests waiting, its bound; engine 1 has
  // far more work (one long answer) and an empty queue.
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kLeastLoaded, "", engines);
  ASSERT_TRUE(router.reads_engine_limits());
  engines = {with_waiting(with_load(engine(0), 40), 4), with_load(engine(1), 4000)};
  // Told at create that every queue is unbounded (what RouterInstance says when not given the
  // bounds), it goes by load alone.
  EXPECT_EQ(router.route_to_one(10, engines), 0u);
  router.set_max_waiting({4, 4});
  EXPECT_EQ(router.route_to_one(10, engines), 1u);
  // One place left on engine 0: the less loaded again.
  engines[0].waiting = 3;
  EXPECT_EQ(router.route_to_one(10, engines), 0u);
  // Both full: the less loaded, where the host answers 429.
  engines[0].waiting = 4;
  engines[1].waiting = 9;
  EXPECT_EQ(router.route_to_one(10, engines), 0u);
  // 0 is unbounded.
  router.set_max_waiting({0, 4});
  engines[0].waiting = 1000;
  engines[1].waiting = 0;
  EXPECT_EQ(router.route_to_one(10, engines), 0u);
}

TEST(LeastLoadedRouter, PlacesARequestOnlyWhereItsLengthFits) {
  // Engine 0 holds 2,048 tokens and is idle; engine 1 holds 32,768 and is busy.
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kLeastLoaded, "", engines);
  ASSERT_TRUE(router.reads_model_lengths());
  engines = {engine(0), with_load(engine(1), 50000)};
  // Not told the lengths (0: not known), it goes by load alone.
  EXPECT_EQ(router.route_to_one(4000, engines), 0u);
  router.set_max_model_len({2048, 32768});
  // 1,920 + 128 = 2,048 fits engine 0 exactly; one token more does not.
  EXPECT_EQ(router.route_to_one(1920, engines), 0u);
  EXPECT_EQ(router.route_to_one(1921, engines), 1u);
  EXPECT_EQ(router.route(100, engines, /*max_output_tokens=*/1949).decode_engine, 1u);
  // Only engine 0 alive: a request it cannot hold is refused as unavailable, naming its length.
  engines[1] = dead(engines[1]);
  Error e = error_of([&] { router.route(4000, engines); });
  EXPECT_EQ(e.code(), HW_UNAVAILABLE);
  EXPECT_THAT(e.what(), HasSubstr("4128 tokens"));
  EXPECT_EQ(router.route_to_one(100, engines), 0u);
}

TEST(LeastLoadedRouter, NoLiveMixedEngineIsUnavailable) {
  std::vector<hw_engine_load> engines = {engine(0), engine(1)};
  RouterHarness router(kLeastLoaded, "", engines);
  engines = {dead(engine(0)), dead(engine(1))};
  Error e = error_of([&] { router.route(10, engines); });
  EXPECT_EQ(e.code(), HW_UNAVAILABLE);
  EXPECT_THAT(e.what(), HasSubstr("least_loaded"));

  // A live decode engine does not count: with its mixed engine down, nothing can take a request.
  std::vector<hw_engine_load> beside = {engine(0), engine(1, HW_ENGINE_ROLE_DECODE)};
  RouterHarness beside_router(kLeastLoaded, "", beside);
  beside[0] = dead(beside[0]);
  EXPECT_EQ(error_of([&] { beside_router.route(10, beside); }).code(), HW_UNAVAILABLE);
}

// It places whole requests on mixed engines: a deployment of prefill and decode engines alone
// would refuse every request, so it is refused at create, pointing to the router that serves it.
TEST(LeastLoadedRouter, RefusesADeploymentWithoutAMixedEngine) {
  std::vector<hw_engine_load> roles = {engine(0, HW_ENGINE_ROLE_PREFILL),
                                       engine(1, HW_ENGINE_ROLE_DECODE)};
  Error e = error_of([&] { RouterHarness router(kLeastLoaded, "", roles); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("places requests on mixed engines"));
  EXPECT_THAT(e.what(), HasSubstr("'disaggregated'"));
  EXPECT_THAT(e.what(), Not(HasSubstr("local_prefill_max_tokens")));
  // Decode engines alone: disaggregated serves them only if they prefill prompts themselves.
  e = error_of([&] { RouterHarness router(kLeastLoaded, "", {engine(0, HW_ENGINE_ROLE_DECODE)}); });
  EXPECT_THAT(e.what(), HasSubstr("with local_prefill_max_tokens > 0: there is no prefill engine"));
}

// Mixed engines beside decode engines load (they did before roles were checked), but the decode
// engines take no requests, which the router says once at create.
TEST(LeastLoadedRouter, SaysAtCreateWhichEnginesItLeavesIdle) {
  test::CapturedLog log;
  std::vector<hw_engine_load> engines = {engine(0), engine(1, HW_ENGINE_ROLE_DECODE), engine(2),
                                         engine(3, HW_ENGINE_ROLE_DECODE)};
  RouterHarness router(kLeastLoaded, "", engines);
  EXPECT_THAT(log.text(), HasSubstr("engine(s) 1, 3 (prefill or decode) will take none"));
  for (int i = 0; i < 4; ++i) EXPECT_NE(router.route_to_one(10, engines) % 2, 1u);
  // Mixed engines only: nothing to say.
  log.clear();
  RouterHarness mixed(kLeastLoaded, "", {engine(0), engine(1)});
  EXPECT_EQ(log.text().find("will take none"), std::string::npos) << log.text();
}

// A command that builds one deployment again and again (simulate's capacity probes and seeds)
// says what a router's create() logs once while a RepeatedCreateLinesAtDebug lives; another
// deployment's line is still said, and without one every create() says its own.
TEST(LeastLoadedRouter, ItsCreateWarningIsSaidOnceWhileRepeatsAreKeptAtDebug) {
  test::CapturedLog log;
  const auto said = [&] {
    const std::string text = log.text();
    size_t count = 0;
    for (size_t at = text.find("will take none"); at != std::string::npos;
         at = text.find("will take none", at + 1)) {
      ++count;
    }
    return count;
  };
  const std::vector<hw_engine_load> engines = {engine(0), engine(1, HW_ENGINE_ROLE_DECODE)};
  {
    RouterHarness first(kLeastLoaded, "", engines);
    RouterHarness again(kLeastLoaded, "", engines);
  }
  EXPECT_EQ(said(), 2u);
  log.clear();
  {
    const RepeatedCreateLinesAtDebug said_once;
    RouterHarness first(kLeastLoaded, "", engines);
    RouterHarness again(kLeastLoaded, "", engines);
    RouterHarness other(
        kLeastLoaded, "",
        {engine(0), engine(1, HW_ENGINE_ROLE_DECODE), engine(2, HW_ENGINE_ROLE_DECODE)});
  }
  EXPECT_EQ(said(), 2u) << log.text();
  EXPECT_THAT(log.text(), HasSubstr("engine(s) 1, 2 (prefill or decode)"));
}

TEST(LeastLoadedRouter, RefusesADeploymentWithoutEngines) {
  Error e = error_of([&] { RouterHarness router(kLeastLoaded, "", {}); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("no engines"));
}

// -------------------------------------------------------------------------------------------------
// length
// -------------------------------------------------------------------------------------------------

// Engines 0 and 1 in pool "short", 2 and 3 in pool "long".
std::vector<hw_engine_load> short_long_engines() {
  return {engine(0, HW_ENGINE_ROLE_MIXED, "short"), engine(1, HW_ENGINE_ROLE_MIXED, "short"),
          engine(2, HW_ENGINE_ROLE_MIXED, "long"), engine(3, HW_ENGINE_ROLE_MIXED, "long")};
}

constexpr const char* kShortLong = "pools = \"short:0,long:8192\"";

TEST(LengthRouter, DefaultPoolsAreShortBelow8192AndLongFrom8192) {
  std::vector<hw_engine_load> engines = short_long_engines();
  RouterHarness router(kLength, "", engines);  // the default pools option
  // Make the pools distinguishable by load only within: both short engines busier than the long
  // ones, so a short prompt landing on a short engine is the pool's doing.
  engines = short_long_engines();
  engines[0] = with_load(engines[0], 1000);
  engines[1] = with_load(engines[1], 1000);
  EXPECT_LT(router.route_to_one(8191, engines), 2u);
  EXPECT_GE(router.route_to_one(8192, engines), 2u);
}

TEST(LengthRouter, PicksThePoolByPromptLengthAtAndAroundTheBoundary) {
  std::vector<hw_engine_load> engines = short_long_engines();
  RouterHarness router(kLength, kShortLong, engines);
  // Every short engine far busier than every long one, and the other way round below: the pool,
  // not the load, decides.
  engines[0] = with_load(engines[0], 50000);
  engines[1] = with_load(engines[1], 50000);
  for (uint32_t prompt : {0u, 1u, 100u, 8190u, 8191u}) {
    EXPECT_LT(router.route_to_one(prompt, engines), 2u) << "prompt " << prompt;
  }
  engines = short_long_engines();
  engines[2] = with_load(engines[2], 50000);
  engines[3] = with_load(engines[3], 50000);
  for (uint32_t prompt : {8192u, 8193u, 100000u, 1u << 30}) {
    EXPECT_GE(router.route_to_one(prompt, engines), 2u) << "prompt " << prompt;
  }
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
}

TEST(LengthRouter, ThreePoolsSplitAtEachBoundary) {
  std::vector<hw_engine_load> engines = {engine(0, HW_ENGINE_ROLE_MIXED, "a"),
                                         engine(1, HW_ENGINE_ROLE_MIXED, "b"),
                                         engine(2, HW_ENGINE_ROLE_MIXED, "c")};
  RouterHarness router(kLength, "pools = \"a:0, b:100, c:1000\"", engines);
  // a: [0, 100), b: [100, 1000), c: [1000, ...).
  const std::vector<std::pair<uint32_t, uint32_t>> cases = {
      {1, 0}, {99, 0}, {100, 1}, {101, 1}, {999, 1}, {1000, 2}, {1001, 2}, {50000, 2}};
  for (auto [prompt, expected] : cases) {
    EXPECT_EQ(router.route_to_one(prompt, engines), expected) << "prompt " << prompt;
  }
}

TEST(LengthRouter, LeastLoadedWithinThePool) {
  std::vector<hw_engine_load> engines = short_long_engines();
  RouterHarness router(kLength, kShortLong, engines);
  // Short pool 500 / 100, long pool idle: a short prompt goes to engine 1, the less loaded short
  // engine, not to an idle long one.
  engines[0] = with_load(engines[0], 500);
  engines[1] = with_load(engines[1], 100);
  EXPECT_EQ(router.route_to_one(100, engines), 1u);
  EXPECT_EQ(router.route_to_one(100, engines), 1u);
  // Long pool 900 / 800: engine 3.
  engines[2] = with_load(engines[2], 900);
  engines[3] = with_load(engines[3], 800);
  EXPECT_EQ(router.route_to_one(20000, engines), 3u);
  // A dead engine of the pool is skipped: engine 1 down, engine 0 takes the short prompts
  // (without a fallback: the pool still has a live engine).
  engines[1] = dead(engines[1]);
  hw_route_decision d = router.route(100, engines);
  EXPECT_EQ(d.prefill_engine, 0u);
  EXPECT_EQ(d.decode_engine, 0u);
  EXPECT_EQ(d.fallback, 0);
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
}

// From helper-210's review: one round-robin cursor for all pools wrapped to engine 0 after a pick
// in the last pool, so with a long request between two short ones every tie among the short
// engines went to engine 0 (74 against 35 requests in its run). Each pool takes turns on its own.
TEST(LengthRouter, EqualEnginesOfAPoolTakeTurnsWhateverThePoolsBetween) {
  const std::vector<hw_engine_load> engines = {engine(0, HW_ENGINE_ROLE_MIXED, "short"),
                                               engine(1, HW_ENGINE_ROLE_MIXED, "short"),
                                               engine(2, HW_ENGINE_ROLE_MIXED, "long")};
  RouterHarness router(kLength, kShortLong, engines);
  std::vector<uint32_t> shorts;
  for (int i = 0; i < 4; ++i) {
    shorts.push_back(router.route_to_one(100, engines));
    EXPECT_EQ(router.route_to_one(20000, engines), 2u);
  }
  EXPECT_EQ(shorts, (std::vector<uint32_t>{0, 1, 0, 1}));
}

TEST(LengthRouter, ADownPoolFallsBackToTheNextPoolAndCountsIt) {
  std::vector<hw_engine_load> engines = short_long_engines();
  RouterHarness router(kLength, kShortLong, engines);

  // The short pool is down: a short prompt goes to the long pool (least loaded there: engine 3),
  // marked as a fallback and counted.
  engines[0] = dead(engines[0]);
  engines[1] = dead(engines[1]);
  engines[2] = with_load(engines[2], 700);
  engines[3] = with_load(engines[3], 300);
  hw_route_decision d = router.route(100, engines);
  EXPECT_EQ(d.prefill_engine, 3u);
  EXPECT_EQ(d.decode_engine, 3u);
  EXPECT_EQ(d.fallback, 1);
  EXPECT_EQ(router.counter("router_fallbacks"), 1.0);
  // A long prompt is at home there: no fallback, no count.
  d = router.route(10000, engines);
  EXPECT_EQ(d.fallback, 0);
  EXPECT_EQ(router.counter("router_fallbacks"), 1.0);
  d = router.route(8191, engines);
  EXPECT_EQ(d.fallback, 1);
  EXPECT_EQ(router.counter("router_fallbacks"), 2.0);

  // The long pool down instead: a long prompt wraps round to the short pool.
  engines = short_long_engines();
  engines[2] = dead(engines[2]);
  engines[3] = dead(engines[3]);
  engines[1] = with_load(engines[1], 10);
  engines[0] = with_load(engines[0], 20);
  d = router.route(8192, engines);
  EXPECT_EQ(d.prefill_engine, 1u);
  EXPECT_EQ(d.fallback, 1);
  EXPECT_EQ(router.counter("router_fallbacks"), 3.0);
}

TEST(LengthRouter, WithinAPoolAnEngineWithAFullQueueComesLast) {
  std::vector<hw_engine_load> engines = short_long_engines();
  RouterHarness router(kLength, kShortLong, engines);
  router.set_max_waiting({2, 2, 2, 2});
  // Short engine 0 is the less loaded but full: engine 1 takes the short prompt.
  engines[0] = with_waiting(with_load(engines[0], 10), 2);
  engines[1] = with_load(engines[1], 900);
  hw_route_decision d = router.route(100, engines);
  EXPECT_EQ(d.decode_engine, 1u);
  EXPECT_EQ(d.fallback, 0);
  // The whole short pool full, the long pool idle: refused where it belongs (engine 0, the less
  // loaded, whose host answers 429), not sent among the long prompts.
  engines[1].waiting = 2;
  d = router.route(100, engines);
  EXPECT_EQ(d.decode_engine, 0u);
  EXPECT_EQ(d.fallback, 0);
  EXPECT_EQ(router.counter("router_spills"), 0.0);
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
}

TEST(LengthRouter, SpillWhenFullSendsAFullPoolsRequestToAnotherPoolWithRoom) {
  std::vector<hw_engine_load> engines = short_long_engines();
  RouterHarness router(kLength, std::string(kShortLong) + "\nspill_when_full = true", engines);
  router.set_max_waiting({2, 2, 2, 2});
  engines[0] = with_waiting(engines[0], 2);
  engines[1] = with_waiting(engines[1], 2);
  engines[2] = with_load(engines[2], 700);
  engines[3] = with_load(engines[3], 300);
  // The short pool full: the long pool's less loaded engine, flagged and counted as a spill.
  hw_route_decision d = router.route(100, engines);
  EXPECT_EQ(d.decode_engine, 3u);
  EXPECT_EQ(d.fallback, 1);
  EXPECT_EQ(router.counter("router_spills"), 1.0);
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
  // A long prompt at home is no spill.
  d = router.route(10000, engines);
  EXPECT_EQ(d.fallback, 0);
  EXPECT_EQ(router.counter("router_spills"), 1.0);
  // Every queue full: back to its own pool (429 there), not a spill.
  engines[2].waiting = 2;
  engines[3].waiting = 2;
  d = router.route(100, engines);
  EXPECT_EQ(d.fallback, 0);
  EXPECT_LE(d.decode_engine, 1u);
  EXPECT_EQ(router.counter("router_spills"), 1.0);
  // The long pool full and the short one with room: a long prompt spills to the short pool (the
  // order wraps round, as for a pool that is down).
  engines[0].waiting = 0;
  d = router.route(10000, engines);
  EXPECT_EQ(d.decode_engine, 0u);
  EXPECT_EQ(d.fallback, 1);
  EXPECT_EQ(router.counter("router_spills"), 2.0);
}

TEST(LengthRouter, FallbackTriesTheLongerPoolsFirstThenTheShorterOnes) {
  std::vector<hw_engine_load> engines = {engine(0, HW_ENGINE_ROLE_MIXED, "a"),
                                         engine(1, HW_ENGINE_ROLE_MIXED, "b"),
                                         engine(2, HW_ENGINE_ROLE_MIXED, "c")};
  RouterHarness router(kLength, "pools = \"a:0,b:100,c:1000\"", engines);
  // Pool b down; a is idle and c busy: a b-prompt still goes to c, the next pool.
  engines = {engine(0, HW_ENGINE_ROLE_MIXED, "a"), dead(engine(1, HW_ENGINE_ROLE_MIXED, "b")),
             with_load(engine(2, HW_ENGINE_ROLE_MIXED, "c"), 100000)};
  hw_route_decision d = router.route(500, engines);
  EXPECT_EQ(d.decode_engine, 2u);
  EXPECT_EQ(d.fallback, 1);
  // b and c down: a b-prompt goes round to a.
  engines[2] = dead(engines[2]);
  d = router.route(500, engines);
  EXPECT_EQ(d.decode_engine, 0u);
  EXPECT_EQ(d.fallback, 1);
  EXPECT_EQ(router.counter("router_fallbacks"), 2.0);
}

TEST(LengthRouter, ARequestItsPoolCannotHoldGoesToTheNextPoolThatCan) {
  // Short engines hold 8,192 tokens, long ones 131,072.
  std::vector<hw_engine_load> engines = short_long_engines();
  RouterHarness router(kLength, kShortLong, engines);
  ASSERT_TRUE(router.reads_model_lengths());
  router.set_max_model_len({8192, 8192, 131072, 131072});
  engines[3] = with_load(engines[3], 500);
  // A short prompt that asks for more output than the short pool holds: the long pool's least
  // loaded engine, counted as a move, not a fallback.
  hw_route_decision d = router.route(4000, engines, /*max_output_tokens=*/4193);
  EXPECT_EQ(d.decode_engine, 2u);
  EXPECT_EQ(d.fallback, 0);
  EXPECT_EQ(router.counter("router_moves_to_fit"), 1.0);
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
  // One that fits stays home.
  d = router.route(4000, engines, /*max_output_tokens=*/4192);
  EXPECT_LE(d.decode_engine, 1u);
  EXPECT_EQ(router.counter("router_moves_to_fit"), 1.0);
  // Within a pool, an engine that cannot hold it is passed over.
  router.set_max_model_len({8192, 16384, 131072, 131072});
  engines[0] = with_load(engines[0], 0);
  engines[1] = with_load(engines[1], 900);
  d = router.route(4000, engines, /*max_output_tokens=*/8000);
  EXPECT_EQ(d.decode_engine, 1u);
  EXPECT_EQ(d.fallback, 0);
  EXPECT_EQ(router.counter("router_moves_to_fit"), 1.0);
  // The long pool down: a request only it holds is refused as unavailable, not sent where it
  // does not fit; one the short pool holds falls back there as before.
  engines[2] = dead(engines[2]);
  engines[3] = dead(engines[3]);
  Error e = error_of([&] { router.route(20000, engines); });
  EXPECT_EQ(e.code(), HW_UNAVAILABLE);
  EXPECT_THAT(e.what(), HasSubstr("no live engine"));
  d = router.route(10000, engines);
  EXPECT_EQ(d.decode_engine, 1u);
  EXPECT_EQ(d.fallback, 1);
  EXPECT_EQ(router.counter("router_fallbacks"), 1.0);
  // Longer than every engine holds: unavailable, saying so.
  engines = short_long_engines();
  e = error_of([&] { router.route(131000, engines, /*max_output_tokens=*/73); });
  EXPECT_EQ(e.code(), HW_UNAVAILABLE);
  EXPECT_THAT(e.what(), HasSubstr("131073 tokens"));
}

TEST(LengthRouter, EveryEngineDownIsUnavailable) {
  std::vector<hw_engine_load> engines = short_long_engines();
  RouterHarness router(kLength, kShortLong, engines);
  for (hw_engine_load& e : engines) e = dead(e);
  for (uint32_t prompt : {1u, 10000u}) {
    Error e = error_of([&] { router.route(prompt, engines); });
    EXPECT_EQ(e.code(), HW_UNAVAILABLE);
    EXPECT_THAT(e.what(), HasSubstr("no live engine"));
  }
  // Nothing was placed, so nothing fell back.
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
}

TEST(LengthRouter, RefusesBadPoolsWithMessages) {
  struct Case {
    std::string pools;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"long:8192,short:0", "ascending order"},
      {"short:0,long:0", "ascending order"},
      {"short:0,mid:9000,long:8192", "ascending order"},
      {"short:0,long:16384,long:20000", "pool 'long' is named twice"},
      {"short0,long:8192", "'short0' is not name:min_prompt_tokens"},
      {"short:0,long8192", "'long8192' is not name:min_prompt_tokens"},
      {"short:0,:8192", "':8192' is not name:min_prompt_tokens"},
      {"short:0,long:", "'long:' is not name:min_prompt_tokens"},
      {"short:0,long:8k", "'long:8k' is not name:min_prompt_tokens"},
      {"short:0,", "'' is not name:min_prompt_tokens"},
      {"", "is not name:min_prompt_tokens"},
      {"short:100,long:8192", "the first pool must start at 0"},
      {"long:8192", "the first pool must start at 0"},
  };
  for (const Case& c : cases) {
    Error e = error_of([&] {
      RouterHarness router(kLength, "pools = \"" + c.pools + "\"", short_long_engines());
    });
    EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT) << c.pools;
    EXPECT_THAT(e.what(), HasSubstr(c.message)) << c.pools;
    EXPECT_THAT(e.what(), HasSubstr("router 'length'")) << c.pools;
  }
}

// Regression: std::strtoull accepts a sign and wrapped "-5" to 2^64 - 5; minimums must be digits.
TEST(LengthRouter, RefusesANegativeMinimum) {
  Error e = error_of(
      [&] { RouterHarness router(kLength, "pools = \"short:0,long:-5\"", short_long_engines()); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("'long:-5' is not name:min_prompt_tokens"));
}

TEST(LengthRouter, RefusesAPoolWithoutEnginesAndAnEngineInAnUnlistedPool) {
  // A pool naming no engine.
  Error e = error_of([&] {
    RouterHarness router(kLength, "pools = \"short:0,long:8192,huge:100000\"",
                         short_long_engines());
  });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("pool 'huge' has no engine"));

  // An engine in a pool the option does not list.
  std::vector<hw_engine_load> engines = short_long_engines();
  engines.push_back(engine(4, HW_ENGINE_ROLE_MIXED, "medium"));
  e = error_of([&] { RouterHarness router(kLength, kShortLong, engines); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("does not list: 4 (pool 'medium')"));
  // Every such engine is named, not only the first.
  engines.push_back(engine(5, HW_ENGINE_ROLE_MIXED, "tiny"));
  e = error_of([&] { RouterHarness router(kLength, kShortLong, engines); });
  EXPECT_THAT(e.what(), HasSubstr("does not list: 4 (pool 'medium'), 5 (pool 'tiny')"));

  // Engines without a pool at all (pool = ""), e.g. a deployment that forgot to set them.
  std::vector<hw_engine_load> unpooled = {engine(0), engine(1)};
  e = error_of([&] { RouterHarness router(kLength, kShortLong, unpooled); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("has no engine"));
}

// Engines all in pool "short" and no `pools` option: the 'long' it misses is the default's, which
// the operator never wrote, so the refusal says where it comes from (the operator's walkthrough).
TEST(LengthRouter, APoolWithoutEnginesFromTheDefaultPoolsSaysSo) {
  const std::vector<hw_engine_load> all_short = {engine(0, HW_ENGINE_ROLE_MIXED, "short"),
                                                 engine(1, HW_ENGINE_ROLE_MIXED, "short")};
  Error e = error_of([&] { RouterHarness router(kLength, "", all_short); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("pool 'long' has no engine (set pool = \"long\" on an "
                                  "[[engines]] table, or the router's pools option: 'long' is one "
                                  "of its default pools \"short:0,long:8192\")"));
  // Pools the operator wrote are not called the default's.
  e = error_of([&] { RouterHarness router(kLength, "pools = \"short:0,huge:9000\"", all_short); });
  EXPECT_THAT(e.what(), HasSubstr("pool 'huge' has no engine (set pool = \"huge\" on an "
                                  "[[engines]] table)"));
}

// Its pools are of mixed engines: a prefill engine in one would decode the requests it should hand
// on (it placed them whole, blind to roles, before 2026-12-06).
TEST(LengthRouter, RefusesAPrefillOrDecodeEngineInAPool) {
  for (int32_t role : {HW_ENGINE_ROLE_PREFILL, HW_ENGINE_ROLE_DECODE}) {
    std::vector<hw_engine_load> engines = short_long_engines();
    engines[2].role = role;
    Error e = error_of([&] { RouterHarness router(kLength, kShortLong, engines); });
    EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr(role == HW_ENGINE_ROLE_PREFILL ? "mixed: 2 (prefill)"
                                                                   : "mixed: 2 (decode)"));
    EXPECT_THAT(e.what(), HasSubstr("pools are of mixed engines"));
  }
  // Every engine of a wrong role is named at once, so that one edit of the file fixes them all.
  std::vector<hw_engine_load> engines = short_long_engines();
  engines[0].role = HW_ENGINE_ROLE_DECODE;
  engines[2].role = HW_ENGINE_ROLE_PREFILL;
  Error e = error_of([&] { RouterHarness router(kLength, kShortLong, engines); });
  EXPECT_THAT(e.what(), HasSubstr("mixed: 0 (decode), 2 (prefill);"));
}

TEST(LengthRouter, APoolWhoseEnginesAllServeOneLengthClassServesIt) {
  // Two pools, and every prompt of the workload is short: the long pool never receives anything,
  // the short pool spreads the requests round-robin while its engines are equally loaded.
  std::vector<hw_engine_load> engines = short_long_engines();
  RouterHarness router(kLength, kShortLong, engines);
  std::vector<uint32_t> picks;
  for (int i = 0; i < 4; ++i) picks.push_back(router.route_to_one(500, engines));
  EXPECT_EQ(picks, (std::vector<uint32_t>{0, 1, 0, 1}));
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
}

// -------------------------------------------------------------------------------------------------
// disaggregated
// -------------------------------------------------------------------------------------------------

// Engines 0 and 1 prefill, 2 and 3 decode.
std::vector<hw_engine_load> pd_engines() {
  return {engine(0, HW_ENGINE_ROLE_PREFILL), engine(1, HW_ENGINE_ROLE_PREFILL),
          engine(2, HW_ENGINE_ROLE_DECODE), engine(3, HW_ENGINE_ROLE_DECODE)};
}

// Prefill engines 0 and 1, decode engines 2 and 3.
std::vector<hw_engine_load> two_prefill_two_decode() {
  return {engine(0, HW_ENGINE_ROLE_PREFILL), engine(1, HW_ENGINE_ROLE_PREFILL),
          engine(2, HW_ENGINE_ROLE_DECODE), engine(3, HW_ENGINE_ROLE_DECODE)};
}

TEST(DisaggregatedRouter, PrefillOnFewestQueuedPrefillTokensDecodeOnLeastOutstanding) {
  std::vector<hw_engine_load> engines = pd_engines();
  RouterHarness router(kDisaggregated, "", engines);  // local_prefill_max_tokens = 0: always move
  // Prefill engines: 0 has 5000 prompt tokens queued (little else), 1 has 1000 queued but a lot of
  // decoding left: the prefill side looks at queued prefill tokens, so engine 1.
  engines[0] = with_load(engines[0], 5100, 5000);
  engines[1] = with_load(engines[1], 9000, 1000);
  // Decode engines: outstanding 300 vs 200 (equal queued prefill): engine 3.
  engines[2] = with_load(engines[2], 300, 0);
  engines[3] = with_load(engines[3], 200, 0);
  hw_route_decision d = router.route(1000, engines);
  EXPECT_EQ(d.prefill_engine, 1u);
  EXPECT_EQ(d.decode_engine, 3u);
  EXPECT_EQ(d.fallback, 0);
  // Even a 1-token prompt moves when local_prefill_max_tokens is 0.
  d = router.route(1, engines);
  EXPECT_EQ(d.prefill_engine, 1u);
  EXPECT_EQ(d.decode_engine, 3u);
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
}

TEST(DisaggregatedRouter, MixedEnginesAreNeverChosen) {
  std::vector<hw_engine_load> engines = pd_engines();
  engines.push_back(engine(4));  // an idle mixed engine
  RouterHarness router(kDisaggregated, "", engines);
  engines[0] = with_load(engines[0], 100);
  engines[1] = with_load(engines[1], 100);
  engines[2] = with_load(engines[2], 100);
  engines[3] = with_load(engines[3], 100);
  for (int i = 0; i < 4; ++i) {
    hw_route_decision d = router.route(1000, engines);
    EXPECT_LT(d.prefill_engine, 2u);
    EXPECT_GE(d.decode_engine, 2u);
    EXPECT_LT(d.decode_engine, 4u);
  }
}

TEST(DisaggregatedRouter, TiesGoRoundRobinOnBothSides) {
  std::vector<hw_engine_load> engines = pd_engines();
  RouterHarness router(kDisaggregated, "", engines);
  std::vector<uint32_t> prefill, decode;
  for (int i = 0; i < 4; ++i) {
    hw_route_decision d = router.route(100, engines);
    prefill.push_back(d.prefill_engine);
    decode.push_back(d.decode_engine);
  }
  EXPECT_EQ(prefill, (std::vector<uint32_t>{0, 1, 0, 1}));
  EXPECT_EQ(decode, (std::vector<uint32_t>{2, 3, 2, 3}));
}

TEST(DisaggregatedRouter, DecodeGoesWhereThePromptsKvFits) {
  std::vector<hw_engine_load> engines = pd_engines();
  RouterHarness router(kDisaggregated, "", engines);
  // A 1000-token prompt needs 63 blocks of 16 (1008 tokens) for its KV and first token. Engine 3 is
  // less loaded but has 62 blocks free (992 tokens): the decode engine is 2, which has room.
  engines[2] = with_free_blocks(with_load(engines[2], 5000, 0), 63);
  engines[3] = with_free_blocks(with_load(engines[3], 100, 0), 62);
  hw_route_decision d = router.route(1000, engines);
  EXPECT_EQ(d.decode_engine, 2u);
  EXPECT_NE(d.prefill_engine, d.decode_engine);
  EXPECT_EQ(d.fallback, 0);
  // One block more on engine 3 and it has room; being less loaded, it wins.
  engines[3] = with_free_blocks(engines[3], 63);
  EXPECT_EQ(router.route(1000, engines).decode_engine, 3u);
  // A short prompt fits on both: the less loaded, 3.
  engines[3] = with_free_blocks(engines[3], 62);
  EXPECT_EQ(router.route(100, engines).decode_engine, 3u);
}

TEST(DisaggregatedRouter, WithoutKvRoomAnywhereStillPicksTheLeastLoadedDecodeEngine) {
  // Backpressure is the cluster's business (the transfer waits for room); the router must not
  // refuse the request.
  std::vector<hw_engine_load> engines = pd_engines();
  RouterHarness router(kDisaggregated, "", engines);
  engines[2] = with_free_blocks(with_load(engines[2], 700, 0), 0);
  engines[3] = with_free_blocks(with_load(engines[3], 600, 0), 10);
  hw_route_decision d = router.route(4000, engines);  // needs 251 blocks
  EXPECT_EQ(d.decode_engine, 3u);
  EXPECT_LT(d.prefill_engine, 2u);
  EXPECT_EQ(d.fallback, 0);
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
}

TEST(DisaggregatedRouter, ConditionalThresholdPrefillsShortPromptsOnTheDecodeEngine) {
  std::vector<hw_engine_load> engines = pd_engines();
  RouterHarness router(kDisaggregated, "local_prefill_max_tokens = 512", engines);
  engines[2] = with_load(engines[2], 300, 0);
  engines[3] = with_load(engines[3], 200, 0);
  // At the threshold (and below): local, on the least loaded decode engine.
  for (uint32_t prompt : {1u, 511u, 512u}) {
    hw_route_decision d = router.route(prompt, engines);
    EXPECT_EQ(d.prefill_engine, 3u) << "prompt " << prompt;
    EXPECT_EQ(d.decode_engine, 3u) << "prompt " << prompt;
    EXPECT_EQ(d.fallback, 0) << "prompt " << prompt;
  }
  // One token above: moved from a prefill engine.
  for (uint32_t prompt : {513u, 100000u}) {
    hw_route_decision d = router.route(prompt, engines);
    EXPECT_LT(d.prefill_engine, 2u) << "prompt " << prompt;
    EXPECT_EQ(d.decode_engine, 3u) << "prompt " << prompt;
    EXPECT_EQ(d.fallback, 0) << "prompt " << prompt;
  }
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
}

TEST(DisaggregatedRouter, NoLivePrefillEnginePrefillsLocallyAsAFallback) {
  std::vector<hw_engine_load> engines = pd_engines();
  RouterHarness router(kDisaggregated, "local_prefill_max_tokens = 512", engines);
  engines[0] = dead(engines[0]);
  engines[1] = dead(engines[1]);
  engines[2] = with_load(engines[2], 100, 0);
  engines[3] = with_load(engines[3], 200, 0);
  hw_route_decision d = router.route(4000, engines);
  EXPECT_EQ(d.prefill_engine, 2u);
  EXPECT_EQ(d.decode_engine, 2u);
  EXPECT_EQ(d.fallback, 1);
  EXPECT_EQ(router.counter("router_fallbacks"), 1.0);
  // A prompt under the threshold is local anyway: not a fallback.
  d = router.route(100, engines);
  EXPECT_EQ(d.prefill_engine, d.decode_engine);
  EXPECT_EQ(d.fallback, 0);
  EXPECT_EQ(router.counter("router_fallbacks"), 1.0);
}

TEST(DisaggregatedRouter, FullQueuesComeLastOnBothSides) {
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, "local_prefill_max_tokens = 64", engines);
  router.set_max_waiting({3, 3, 3, 3});
  // The less loaded engine of each role is full.
  engines[0] = with_waiting(with_load(engines[0], 10), 3);
  engines[1] = with_load(engines[1], 5000);
  engines[2] = with_waiting(with_load(engines[2], 10), 3);
  engines[3] = with_load(engines[3], 5000);
  hw_route_decision d = router.route(1000, engines);
  EXPECT_EQ(d.prefill_engine, 1u);
  EXPECT_EQ(d.decode_engine, 3u);
  // A short prompt prefilled on its decode engine: the one with room.
  d = router.route(10, engines);
  EXPECT_EQ(d.prefill_engine, 3u);
  EXPECT_EQ(d.decode_engine, 3u);
  // Room in the queue before room for the KV: engine 3 has no free block but a queue with room.
  engines[3] = with_free_blocks(engines[3], 0);
  EXPECT_EQ(router.route(1000, engines).decode_engine, 3u);
  // Every prefill engine full: the less loaded prefill engine (the host answers 429), not a
  // local prefill on a decode engine, which is for prefill engines that are down.
  engines[1].waiting = 3;
  d = router.route(1000, engines);
  EXPECT_EQ(d.prefill_engine, 0u);
  EXPECT_EQ(d.fallback, 0);
  EXPECT_EQ(router.counter("router_fallbacks"), 0.0);
}

TEST(DisaggregatedRouter, BothEnginesHoldTheWholeRequest) {
  // Prefill engines 0 and 1, decode engines 2 and 3; engine 0 and engine 2 hold 4,096 tokens,
  // engines 1 and 3 hold 65,536, and the short ones are the less loaded.
  std::vector<hw_engine_load> engines = two_prefill_two_decode();
  RouterHarness router(kDisaggregated, "", engines);
  router.set_max_model_len({4096, 65536, 4096, 65536});
  engines[1] = with_load(engines[1], 9000);
  engines[3] = with_load(engines[3], 9000);
  // Fits both short engines.
  hw_route_decision d = router.route(3000, engines, /*max_output_tokens=*/1000);
  EXPECT_EQ(d.prefill_engine, 0u);
  EXPECT_EQ(d.decode_engine, 2u);
  // The prompt alone fits engine 0, but an engine admits a request, prefill-only or not, only
  // when all of it fits: both long engines.
  d = router.route(4095, engines, /*max_output_tokens=*/1000);
  EXPECT_EQ(d.prefill_engine, 1u);
  EXPECT_EQ(d.decode_engine, 3u);
  EXPECT_EQ(d.fallback, 0);
  // Engine 1 down: no prefill engine holds it, so it is prefilled on its decode engine.
  engines[1] = dead(engines[1]);
  d = router.route(4095, engines, /*max_output_tokens=*/1000);
  EXPECT_EQ(d.prefill_engine, 3u);
  EXPECT_EQ(d.decode_engine, 3u);
  EXPECT_EQ(d.fallback, 1);
  // Engine 3 down too: nothing holds the request on the decode side.
  engines[3] = dead(engines[3]);
  Error e = error_of([&] { router.route(4096, engines, 1000); });
  EXPECT_EQ(e.code(), HW_UNAVAILABLE);
  EXPECT_THAT(e.what(), HasSubstr("no live decode engine holds a request of 5096 tokens"));
}

TEST(DisaggregatedRouter, NoLiveDecodeEngineIsUnavailable) {
  std::vector<hw_engine_load> engines = pd_engines();
  RouterHarness router(kDisaggregated, "", engines);
  engines[2] = dead(engines[2]);
  engines[3] = dead(engines[3]);
  Error e = error_of([&] { router.route(1000, engines); });
  EXPECT_EQ(e.code(), HW_UNAVAILABLE);
  EXPECT_THAT(e.what(), HasSubstr("decode"));
}

TEST(DisaggregatedRouter, RefusesDeploymentsWithoutTheRolesItNeeds) {
  // No decode engine.
  std::vector<hw_engine_load> no_decode = {engine(0, HW_ENGINE_ROLE_PREFILL), engine(1)};
  Error e = error_of([&] { RouterHarness router(kDisaggregated, "", no_decode); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("role = \"decode\""));
  // Mixed engines only.
  e = error_of([&] { RouterHarness router(kDisaggregated, "", {engine(0), engine(1)}); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);

  // No prefill engine while every prompt must move.
  std::vector<hw_engine_load> decode_only = {engine(0, HW_ENGINE_ROLE_DECODE)};
  e = error_of([&] { RouterHarness router(kDisaggregated, "", decode_only); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("role = \"prefill\", or local_prefill_max_tokens > 0"));
  // ... but with a local threshold a decode-only deployment is accepted: prompts up to it are
  // local, longer ones fall back to local prefill.
  RouterHarness local(kDisaggregated, "local_prefill_max_tokens = 1000", decode_only);
  hw_route_decision d = local.route(1000, decode_only);
  EXPECT_EQ(d.prefill_engine, 0u);
  EXPECT_EQ(d.fallback, 0);
  d = local.route(1001, decode_only);
  EXPECT_EQ(d.prefill_engine, 0u);
  EXPECT_EQ(d.fallback, 1);
}

// Mixed engines beside prefill and decode engines take nothing from it, which it says once at
// create (helper-184: following the lone prefill engine's advice on two mixed engines and a
// prefill engine gave a deployment whose mixed engines ran no step, without a word).
TEST(DisaggregatedRouter, SaysAtCreateWhichMixedEnginesItLeavesIdle) {
  test::CapturedLog log;
  std::vector<hw_engine_load> engines = {engine(0), engine(1), engine(2, HW_ENGINE_ROLE_PREFILL),
                                         engine(3, HW_ENGINE_ROLE_DECODE)};
  RouterHarness router(kDisaggregated, "", engines);
  EXPECT_THAT(log.text(), HasSubstr("engine(s) 0, 1 (mixed) will take none"));
  const hw_route_decision d = router.route(10, engines);
  EXPECT_EQ(d.prefill_engine, 2u);
  EXPECT_EQ(d.decode_engine, 3u);
  log.clear();
  RouterHarness paired(kDisaggregated, "",
                       {engine(0, HW_ENGINE_ROLE_PREFILL), engine(1, HW_ENGINE_ROLE_DECODE)});
  EXPECT_EQ(log.text().find("will take none"), std::string::npos) << log.text();
}

TEST(DisaggregatedRouter, RefusesANegativeThreshold) {
  Error e = error_of(
      [&] { RouterHarness router(kDisaggregated, "local_prefill_max_tokens = -1", pd_engines()); });
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(e.what(), HasSubstr("local_prefill_max_tokens"));
}

// -------------------------------------------------------------------------------------------------
// The host's check of every router's placements (RouterInstance::route)
// -------------------------------------------------------------------------------------------------

// The role-blind faulty router places a request of even id whole on the least loaded live engine,
// and prefills one of odd id there and decodes it on the next live engine. The host lets through
// what the roles allow and fails the rest as the router's error (HW_INTERNAL: HTTP 500), naming
// the engines, their roles and the rule.
TEST(RouterInstance, RefusesAPlacementAgainstTheEnginesRoles) {
  const std::string blind = std::string(HEADWAY_FAULTY_PLUGIN_DIR) + "/faulty_role_blind_router.so";
  // Engine 0 (prefill) the least loaded, engine 1 decode.
  std::vector<hw_engine_load> engines = {engine(0, HW_ENGINE_ROLE_PREFILL),
                                         engine(1, HW_ENGINE_ROLE_DECODE)};
  RouterHarness router(blind, "", engines);
  engines[1] = with_load(engines[1], 100);
  // Request 1: prefilled on 0, decoded on 1, as a disaggregated router would.
  hw_route_decision split = router.route(10, engines);
  EXPECT_EQ(split.prefill_engine, 0u);
  EXPECT_EQ(split.decode_engine, 1u);
  // Request 2: whole on the prefill engine.
  try {
    router.route(10, engines);
    ADD_FAILURE() << "a prefill engine was let decode request 2";
  } catch (const RolePlacementError& e) {
    EXPECT_EQ(e.code(), HW_INTERNAL);
    EXPECT_EQ(e.decision().prefill_engine, 0u);
    EXPECT_EQ(e.decision().decode_engine, 0u);
    EXPECT_THAT(e.what(), HasSubstr("placed request 2 on engine0 for both prefill and decode, but "
                                    "its role is \"prefill\""));
    EXPECT_THAT(e.what(), HasSubstr("router.honours_roles"));
  }
  // Engine 1 (decode) the least loaded: request 3 (odd) prefilled on it and decoded on the prefill
  // engine; request 4 whole on the decode engine, which may prefill it itself.
  engines[0] = with_load(engines[0], 1000);
  Error backwards = error_of([&] { router.route(10, engines); });
  EXPECT_EQ(backwards.code(), HW_INTERNAL);
  EXPECT_THAT(backwards.what(),
              HasSubstr("placed request 3 on engine1 (role \"decode\") for prefill and engine0 "
                        "(role \"prefill\") for decode"));
  EXPECT_EQ(router.route_to_one(10, engines), 1u);

  // Two mixed engines: request 1 split between them (KV a mixed engine's step never hands over),
  // request 2 whole on one, which is what they are for.
  std::vector<hw_engine_load> mixed = {engine(0), with_load(engine(1), 100)};
  RouterHarness mixed_router(blind, "", mixed);
  Error between_mixed = error_of([&] { mixed_router.route(10, mixed); });
  EXPECT_EQ(between_mixed.code(), HW_INTERNAL);
  EXPECT_THAT(between_mixed.what(),
              HasSubstr("engine0 (role \"mixed\") for prefill and engine1 (role \"mixed\") for "
                        "decode"));
  EXPECT_EQ(mixed_router.route_to_one(10, mixed), 0u);

  // A placement against both the roles and the engine's max_model_len fails for its length: the
  // conformance suite judges a RolePlacementError as a placement by its roles alone, and
  // router.holds_request_lengths must still see this one (helper-183).
  std::vector<hw_engine_load> both = {engine(0, HW_ENGINE_ROLE_PREFILL),
                                      with_load(engine(1, HW_ENGINE_ROLE_DECODE), 100)};
  RouterHarness both_router(blind, "", both);
  ASSERT_TRUE(both_router.reads_model_lengths());
  both_router.set_max_model_len({1024, 32768});
  EXPECT_EQ(both_router.route(10, both).decode_engine, 1u);  // request 1: split, fits both
  try {
    both_router.route(2000, both);  // request 2: whole on the prefill engine, which holds 1,024
    ADD_FAILURE() << "request 2 was placed";
  } catch (const RolePlacementError& e) {
    ADD_FAILURE() << "judged by its roles only: " << e.what();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), HW_INTERNAL);
    EXPECT_THAT(e.what(), HasSubstr("on engine0, whose max_model_len 1024 cannot hold it"));
  }
}

}  // namespace
}  // namespace headway::core
