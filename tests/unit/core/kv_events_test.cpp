// KV events (ABI 1.9) from an engine's prefix cache to the router, in a simulation: the host
// announces each engine that reports, hands the router what the cache stored and evicted before
// each route, in the hashes the router is given, and a router that keeps them knows exactly what
// the cache holds (tests/plugins/test_kv_events_router.cpp counts and keeps them).
#include <gtest/gtest.h>
#include <headway/core/deployment_config.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/request_record.h>
#include <headway/core/simulator.h>
#include <headway/core/workload.h>

#include <map>
#include <string>

#include "../test_support/built_plugins.h"

namespace headway::core {
namespace {

DeploymentConfig one_engine(uint32_t kv_blocks, bool prefix_caching = true) {
  return parse_deployment(
      "[model]\nplugin = \"sim\"\noptions = { gpu = \"h100\", model = \"llama-3.1-8b\" }\n"
      "[[engines]]\nmax_model_len = 1024\nkv_blocks = " +
          std::to_string(kv_blocks) + "\nprefix_caching = " + (prefix_caching ? "true" : "false") +
          "\nscheduler = { plugin = \"chunked\" }\n"
          "[[engines]]\nmax_model_len = 1024\nkv_blocks = 4096\nscheduler = { plugin = \"chunked\" "
          "}\n"
          "[router]\nplugin = \"" HEADWAY_TEST_PLUGIN_DIR "/test_kv_events_router.so\"\n",
      "kv_events.toml", test::built_plugins());
}

// Requests far apart (one at a time on the engine), each a shared document of 512 tokens (one of
// `documents`) and 100 tokens of its own, 16 out.
Workload spaced_questions(uint32_t count, uint32_t documents) {
  return parse_workload("seed = 3\ncount = " + std::to_string(count) +
                            "\n[arrival]\nprocess = \"poisson\"\nrate = 0.05\n"
                            "[[classes]]\nname = \"q\"\nshare = 1\n"
                            "shared_prefix = { tokens = 512, count = " +
                            std::to_string(documents) +
                            " }\nprompt = { dist = \"fixed\", value = 100 }\n"
                            "output = { dist = \"fixed\", value = 16 }\n",
                        "questions.toml");
}

std::map<std::string, double> router_counters(const SimulationResult& result) {
  std::map<std::string, double> counters;
  for (const PluginMetricReading& m : result.plugin_metrics) {
    if (m.instance.rfind("router", 0) == 0) counters[m.metric] = m.value;
  }
  return counters;
}

// Engine 0 stores the first request's nine pieces (612 prompt tokens: 9 whole pieces of 64); the
// second takes the document's eight from the cache (reported stored again: the engine holds them)
// and stores its ninth (ids 512 to 575, its own). The last request's events are never read (no
// route after it).
TEST(KvEvents, TheRouterIsToldEachPieceStoredInTheHashesItWasGiven) {
  const SimulationResult result = simulate(one_engine(4096), spaced_questions(3, 1));
  const std::map<std::string, double> c = router_counters(result);
  EXPECT_EQ(c.at("kv_events_announced"), 2.0);  // both engines cache prefixes
  EXPECT_EQ(c.at("kv_pieces_stored"), 9.0 + 8.0 + 1.0);
  EXPECT_EQ(c.at("kv_stored_routed"), c.at("kv_pieces_stored"));
  EXPECT_EQ(c.count("kv_pieces_removed"), 0u);
  EXPECT_EQ(c.at("kv_events_engine_1"), 0.0);  // nothing was sent there
}

// With room for about two requests' KV, documents evict one another. Before each request the
// router's beginning on engine 0, by the events alone, is what the engine then finds cached, to
// the whole piece: the events are exact.
TEST(KvEvents, BeliefsFromEventsAreWhatTheCacheHoldsAcrossEvictions) {
  const Workload questions = spaced_questions(24, 3);
  const SimulationResult result = simulate(one_engine(96), questions);
  const std::map<std::string, double> c = router_counters(result);
  EXPECT_GT(c.at("kv_pieces_removed"), 0.0);
  uint32_t with_cache = 0;
  for (const RequestRecord& r : result.records) {
    ASSERT_TRUE(r.finished) << "request " << r.id;
    const double found_pieces = static_cast<double>(r.cached_tokens / 64 * 64);
    EXPECT_EQ(c.at("believed_tokens_" + std::to_string(r.id)), found_pieces) << "request " << r.id;
    if (r.cached_tokens > 0) ++with_cache;
  }
  EXPECT_GT(with_cache, 0u);
  EXPECT_LT(with_cache, questions.requests.size());  // evictions made some find nothing
}

// An engine without prefix caching keeps no events and is not announced.
TEST(KvEvents, AnEngineWithoutPrefixCachingReportsNothing) {
  const SimulationResult result = simulate(one_engine(4096, false), spaced_questions(3, 1));
  const std::map<std::string, double> c = router_counters(result);
  EXPECT_EQ(c.at("kv_events_announced"), 1.0);  // engine 1 only
  EXPECT_EQ(c.count("kv_pieces_stored"), 0u);
  EXPECT_EQ(c.count("kv_events_engine_0"), 0u);
}

}  // namespace
}  // namespace headway::core
