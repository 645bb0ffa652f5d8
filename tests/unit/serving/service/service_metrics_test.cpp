// The metrics of LocalGenerationService after real traffic: promtool accepts the text, and the
// counters add up to exactly what was sent and generated.
#include <gtest/gtest.h>
#include <headway/serving/local_generation_service.h>

#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

#include "../../test_support/captured_log.h"
#include "../metrics/promtool_check.h"
#include "router_watch.h"
#include "service_fixture.h"

namespace headway::serving {
namespace {

using test::sum_of;

TEST(ServiceMetrics, CountersMatchTheTrafficAndPromtoolAcceptsTheText) {
  test::TinyCheckpoint checkpoint;
  LocalGenerationService service(test::tiny_deployment(
      checkpoint, "[[engines]]\ncount = 2\npool = \"main\"\nscheduler = \"chunked\"\n"));
  uint64_t prompt_tokens = 0;
  uint64_t generated = 0;
  constexpr int kRequests = 12;
  for (int i = 0; i < kRequests; ++i) {
    GenerateInput input = test::text_request(std::string(5 + i, 'm'), 3 + i % 4);
    input.request_class = i % 3 == 0 ? "long" : "short";
    const test::Collected out = test::collect(*service.submit(input));
    ASSERT_EQ(out.finish, Finish::kLength);
    prompt_tokens += out.usage.prompt_tokens;
    generated += out.usage.completion_tokens;
  }
  GenerateInput aborted = test::text_request("abort me", 1000);
  aborted.request_id = "to-abort";
  auto stream = service.submit(aborted);
  service.abort("to-abort");
  ASSERT_EQ(test::collect(*stream).finish, Finish::kAbort);
  test::wait_idle(service);

  const std::string text = service.metrics_text();
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "finished_reason=\"length\""), kRequests);
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "finished_reason=\"abort\""), 1);
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "request_class=\"long\""), 4);
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "request_class=\"short\""), 8);
  // The aborted request's prompt counts once admitted; its tokens count as generated.
  EXPECT_EQ(sum_of(text, "headway_prompt_tokens_total"), prompt_tokens + 9);  // BOS + 8 bytes
  EXPECT_GE(sum_of(text, "headway_generation_tokens_total"), generated);
  EXPECT_EQ(sum_of(text, "headway_generation_tokens_total", "request_class=\"short\"") +
                sum_of(text, "headway_generation_tokens_total", "request_class=\"long\""),
            generated);
  // One TTFT per request that produced a token; ITL for every later token.
  EXPECT_EQ(sum_of(text, "headway_time_to_first_token_seconds_count", "request_class=\"short\"") +
                sum_of(text, "headway_time_to_first_token_seconds_count", "request_class=\"long\""),
            kRequests);
  EXPECT_EQ(sum_of(text, "headway_inter_token_latency_seconds_count", "request_class=\"short\"") +
                sum_of(text, "headway_inter_token_latency_seconds_count", "request_class=\"long\""),
            generated - kRequests);
  EXPECT_EQ(sum_of(text, "headway_e2e_request_latency_seconds_count"), kRequests + 1);
  // Every decode token of the finished requests was one slot of some step.
  EXPECT_GE(sum_of(text, "headway_iteration_decode_tokens_sum"), generated - kRequests);
  EXPECT_EQ(sum_of(text, "headway_num_requests_running"), 0);
  EXPECT_EQ(sum_of(text, "headway_num_requests_waiting"), 0);
  EXPECT_EQ(sum_of(text, "headway_kv_cache_usage_perc"), 0);
  EXPECT_EQ(sum_of(text, "headway_engine_alive"), 2);
  EXPECT_NE(text.find("engine=\"1\",pool=\"main\""), std::string::npos) << text;

  auto check = headway::test::promtool_check_metrics(text);
  if (!check) GTEST_SKIP() << "promtool is not installed (Debian package 'prometheus')";
  EXPECT_EQ(check->exit_code, 0) << check->output << "\n" << text;
}

// Clients choose request classes; past 16 distinct ones they share the label "other", so the number
// of series stays bounded.
TEST(ServiceMetrics, RequestClassLabelsAreBounded) {
  test::TinyCheckpoint checkpoint;
  LocalGenerationService service(test::tiny_deployment(checkpoint, "[[engines]]\n"));
  for (int i = 0; i < 20; ++i) {
    GenerateInput input = test::text_request("c", 1);
    input.request_class = "class" + std::to_string(i);
    ASSERT_EQ(test::collect(*service.submit(input)).finish, Finish::kLength);
  }
  test::wait_idle(service);
  const std::string text = service.metrics_text();
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "request_class=\"class15\""), 1);
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "request_class=\"class16\""), 0);
  EXPECT_EQ(sum_of(text, "headway_request_success_total", "request_class=\"other\""), 4);
}

// A router that fails (any status but HW_UNAVAILABLE, or an exception) fails the request as the
// server's error, 500, counted as "internal" and logged; its HW_UNAVAILABLE is a refusal (503,
// "unavailable"), not logged. Neither reaches the client as the client's own error (400, 429), and
// the other requests are served. Requests of 3 prompt tokens (BOS + "xy") fail.
TEST(ServiceMetrics, ARoutersFailureIsTheServersErrorNotTheClients) {
  test::TinyCheckpoint checkpoint;
  headway::test::CapturedLog log;
  struct Case {
    int code;
    ErrorCode expected;
    const char* reason;
  };
  for (const Case c : {Case{HW_INVALID_ARGUMENT, ErrorCode::kInternal, "internal"},
                       Case{HW_RESOURCE_EXHAUSTED, ErrorCode::kInternal, "internal"},
                       Case{0, ErrorCode::kInternal, "internal"},
                       Case{HW_UNAVAILABLE, ErrorCode::kUnavailable, "unavailable"}}) {
    SCOPED_TRACE("code " + std::to_string(c.code));
    log.clear();
    LocalGenerationService service(test::tiny_deployment(
        checkpoint, "[[engines]]\n",
        "[router]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
            "/test_failing_router.so\"\noptions = { fail_at = 3, code = " + std::to_string(c.code) +
            " }\n"));
    for (int i = 0; i < 2; ++i) {
      try {
        service.submit(test::text_request("xy", 2));
        ADD_FAILURE() << "the router failed this request";
      } catch (const ServiceError& e) {
        EXPECT_EQ(e.code(), c.expected) << e.what();
        EXPECT_NE(std::string(e.what()).find("router 'test_failing_router'"), std::string::npos)
            << e.what();
      }
    }
    EXPECT_EQ(test::collect(*service.submit(test::text_request("xyz", 2))).finish, Finish::kLength);
    test::wait_idle(service);
    const std::string text = service.metrics_text();
    EXPECT_EQ(sum_of(text, "headway_request_rejected_total", std::string("reason=\"") + c.reason),
              2)
        << text;
    EXPECT_EQ(sum_of(text, "headway_request_rejected_total"), 2) << text;
    // Logged once: the second failure falls within RouterWatch::kLogEvery of the first.
    const std::string logged = log.text();
    const size_t first = logged.find("failed in the router");
    if (c.expected == ErrorCode::kInternal) {
      EXPECT_NE(first, std::string::npos) << logged;
      EXPECT_EQ(logged.find("failed in the router", first + 1), std::string::npos) << logged;
    } else {
      EXPECT_EQ(first, std::string::npos) << logged;
    }
  }
}

// A route() call that blocks holds every admission back: the operator is told, once for two such
// calls within RouterWatch::kLogEvery, and the requests are still served.
TEST(ServiceMetrics, ARouterThatBlocksIsLogged) {
  test::TinyCheckpoint checkpoint;
  headway::test::CapturedLog log;
  {
    static_assert(RouterWatch::kSlowRoute < std::chrono::milliseconds(150));
    LocalGenerationService service(test::tiny_deployment(
        checkpoint, "[[engines]]\n",
        "[router]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
            "/test_failing_router.so\"\noptions = { fail_at = 3, block_ms = 150 }\n"));
    EXPECT_EQ(test::collect(*service.submit(test::text_request("xyz", 2))).finish, Finish::kLength);
    EXPECT_EQ(log.text().find("to route request"), std::string::npos) << log.text();
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(test::collect(*service.submit(test::text_request("xy", 2))).finish,
                Finish::kLength);
    }
    test::wait_idle(service);
  }
  const std::string logged = log.text();
  const size_t first = logged.find("router 'test_failing_router' took ");
  EXPECT_NE(first, std::string::npos) << logged;
  EXPECT_NE(logged.find("route() must not block"), std::string::npos) << logged;
  EXPECT_EQ(logged.find("router 'test_failing_router' took ", first + 1), std::string::npos)
      << logged;
}

// What the engine's prefix cache stores and evicts reaches a router that reads KV events (ABI 1.9)
// when serving: each driver publishes its engine's events after a step, and the service hands them
// to the router before the next request is placed (tests/plugins/test_kv_events_router.cpp counts
// them). A prompt of 200 bytes is 201 tokens with BOS: three whole pieces of 64.
TEST(ServiceMetrics, KvEventsReachTheRouterBeforeTheNextRequest) {
  test::TinyCheckpoint checkpoint;
  std::string text;
  {
    LocalGenerationService service(test::tiny_deployment(checkpoint, "[[engines]]\n",
                                                         "[router]\nplugin = \"" +
                                                             std::string(HEADWAY_TEST_PLUGIN_DIR) +
                                                             "/test_kv_events_router.so\"\n"));
    const std::string document(200, 'd');
    for (const std::string& prompt : {document, document, std::string("other")}) {
      ASSERT_EQ(test::collect(*service.submit(test::text_request(prompt, 1))).finish,
                Finish::kLength);
      test::wait_idle(service);
    }
    text = service.metrics_text();
  }
  const auto counter = [&](const std::string& metric) {
    return sum_of(text, "headway_plugin_total",
                  "plugin=\"test_kv_events_router\",metric=\"" + metric + "\"");
  };
  EXPECT_EQ(counter("kv_events_announced"), 1) << text;
  // The first request stored the three pieces; the second took them from the cache (reported
  // held again); the third's events are not read (no request after it).
  EXPECT_EQ(counter("kv_pieces_stored"), 6);
  EXPECT_EQ(counter("kv_stored_routed"), 6);
  EXPECT_EQ(counter("kv_pieces_removed"), 0);
  // Believed held when the second came, by the events alone: its three pieces (192 tokens).
  EXPECT_EQ(sum_of(text, "headway_plugin_total", "metric=\"believed_tokens_"), 192);
}

// An engine process ([server] role = "engine") keeps its engine's KV events for the router process
// (ClusterInfo's kv_events_from): numbered, read by number, none consumed. Only with one engine
// that caches prefixes: a process of two, or with the cache off, keeps none.
TEST(ServiceMetrics, AnEngineProcessKeepsItsEnginesKvEventsForItsRouterProcess) {
  test::TinyCheckpoint checkpoint;
  const std::string engine_role = "[server]\nrole = \"engine\"\n";
  {
    LocalGenerationService service(test::tiny_deployment(checkpoint, "[[engines]]\n", engine_role));
    const std::optional<KvEventsSince> before = service.kv_events_since(0);
    ASSERT_TRUE(before.has_value());
    EXPECT_TRUE(before->events.empty());
    ASSERT_EQ(test::collect(*service.submit(test::text_request(std::string(200, 'd'), 1))).finish,
              Finish::kLength);
    test::wait_idle(service);
    const std::optional<KvEventsSince> after = service.kv_events_since(0);
    ASSERT_TRUE(after.has_value());
    ASSERT_EQ(after->events.size(), 3u);  // 201 tokens with BOS: three pieces stored
    for (const hw_kv_event& e : after->events) EXPECT_EQ(e.kind, HW_KV_EVENT_STORED);
    EXPECT_EQ(after->next, 3u);
    EXPECT_FALSE(after->lost);
    EXPECT_EQ(service.kv_events_since(0)->events.size(), 3u);  // read again: still there
    EXPECT_TRUE(service.kv_events_since(3)->events.empty());
    EXPECT_TRUE(service.kv_events_since(7)->lost);  // a number of another incarnation
  }
  for (const std::string engines : {std::string("[[engines]]\nprefix_caching = false\n"),
                                    std::string("[[engines]]\ncount = 2\n")}) {
    SCOPED_TRACE(engines);
    LocalGenerationService service(test::tiny_deployment(checkpoint, engines, engine_role));
    EXPECT_FALSE(service.kv_events_since(0).has_value());
  }
  // Not an engine process: none kept.
  LocalGenerationService all(test::tiny_deployment(checkpoint, "[[engines]]\n"));
  EXPECT_FALSE(all.kv_events_since(0).has_value());
}

// From helper-202's review: in an engine process, a router plugin that failed on its engines' KV
// events made the router process's poll (ClusterInfo, which reads the feed) fail, and the router
// process took the engine process for down. The feed is read all the same, the failure is logged,
// and since the router may have missed what the failed call said, its next events for the engine
// begin with ALL_REMOVED.
TEST(ServiceMetrics, ARouterFailingOnKvEventsNeitherFailsTheFeedNorKeepsBeliefsItMissed) {
  test::TinyCheckpoint checkpoint;
  headway::test::CapturedLog log;
  std::string text;
  {
    LocalGenerationService service(test::tiny_deployment(
        checkpoint, "[[engines]]\n",
        "[server]\nrole = \"engine\"\n[router]\nplugin = \"" +
            std::string(HEADWAY_TEST_PLUGIN_DIR) +
            "/test_kv_events_router.so\"\noptions = { fail_first_events = true }\n"));
    const std::string document(200, 'd');
    ASSERT_EQ(test::collect(*service.submit(test::text_request(document, 1))).finish,
              Finish::kLength);
    test::wait_idle(service);
    // The router fails on the three pieces stored; the reader still gets them.
    const std::optional<KvEventsSince> first = service.kv_events_since(0);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->events.size(), 3u);
    ASSERT_EQ(test::collect(*service.submit(test::text_request(document, 1))).finish,
              Finish::kLength);
    test::wait_idle(service);
    EXPECT_EQ(service.kv_events_since(3)->events.size(), 3u);  // taken from the cache
    text = service.metrics_text();
  }
  const auto counter = [&](const std::string& metric) {
    return sum_of(text, "headway_plugin_total",
                  "plugin=\"test_kv_events_router\",metric=\"" + metric + "\"");
  };
  EXPECT_EQ(counter("kv_pieces_stored"), 3) << text;  // the second request's only
  EXPECT_EQ(counter("kv_all_removed"), 1) << text;    // before them
  EXPECT_NE(log.text().find("the router failed on its engines' KV events: router "
                            "'test_kv_events_router' kv_events() for engine 0 failed"),
            std::string::npos)
      << log.text();
}

// A plugin's counters and gauges (host services) reach /metrics under its instance's labels: what
// it counted in create() too, a counter's negative increments never (a counter only goes up), at
// most 64 names an instance and only UTF-8 ones, each refusal reason warned about once.
TEST(ServiceMetrics, APluginsCountersAndGaugesAreExported) {
  test::TinyCheckpoint checkpoint;
  headway::test::CapturedLog log;
  std::string text;
  {
    LocalGenerationService service(test::tiny_deployment(
        checkpoint, "[[engines]]\n",
        "[router]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
            "/test_metrics_router.so\"\noptions = { distinct_names = true }\n"));
    constexpr int kRequests = 70;
    for (int i = 1; i <= kRequests; ++i) {  // prompts of i + 1 tokens (BOS): 70 lengths
      ASSERT_EQ(test::collect(*service.submit(test::text_request(std::string(i, 'p'), 1))).finish,
                Finish::kLength);
    }
    test::wait_idle(service);
    text = service.metrics_text();
  }
  const std::string instance =
      "engine=\"\",pool=\"\",kind=\"router\",plugin=\"test_metrics_router\"";
  EXPECT_EQ(sum_of(text, "headway_plugin_total", instance + ",metric=\"created\""), 1) << text;
  EXPECT_EQ(sum_of(text, "headway_plugin_total", instance + ",metric=\"routes\""), 70);
  EXPECT_EQ(sum_of(text, "headway_plugin_value", instance + ",metric=\"last_prompt_tokens\""), 71);
  // Exported at 0: it only ever went down.
  EXPECT_NE(text.find(instance + ",metric=\"shrinking\"} 0\n"), std::string::npos) << text;
  // created, routes, last_prompt_tokens and shrinking, then the first 60 prompt lengths (2-61).
  EXPECT_EQ(sum_of(text, "headway_plugin_total", "metric=\"prompt_tokens_"), 60);
  EXPECT_EQ(sum_of(text, "headway_plugin_total", "metric=\"prompt_tokens_61\""), 1);
  EXPECT_EQ(text.find("prompt_tokens_62"), std::string::npos) << text;
  EXPECT_EQ(text.find("not UTF-8"), std::string::npos) << text;
  const std::string logged = log.text();
  for (const char* reason : {"(it is not valid UTF-8)", "(the instance has 64 exported names"}) {
    const size_t first = logged.find(reason);
    EXPECT_NE(first, std::string::npos) << reason << "\n" << logged;
    EXPECT_EQ(logged.find(reason, first + 1), std::string::npos) << reason << "\n" << logged;
  }
  EXPECT_NE(logged.find("router plugin 'test_metrics_router': metric 'prompt_tokens_62' is kept "
                        "but not exported to /metrics"),
            std::string::npos)
      << logged;

  auto check = headway::test::promtool_check_metrics(text);
  if (!check) GTEST_SKIP() << "promtool is not installed (Debian package 'prometheus')";
  EXPECT_EQ(check->exit_code, 0) << check->output << "\n" << text;
}

// An engine's scheduler and model each export under the engine's labels and their own kind: here
// the test scheduler's count of its steps that only preempted, on engine 1 of pool "main".
TEST(ServiceMetrics, AnEnginesSchedulerExportsUnderTheEnginesLabels) {
  test::TinyCheckpoint checkpoint;
  LocalGenerationService service(
      test::tiny_deployment(checkpoint, "[[engines]]\ncount = 2\npool = \"main\"\nscheduler = \"" +
                                            std::string(HEADWAY_TEST_PLUGIN_DIR) +
                                            "/test_preempt_only_scheduler.so\"\n"));
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(test::collect(*service.submit(test::text_request("preempt me", 4))).finish,
              Finish::kLength);
  }
  test::wait_idle(service);
  const std::string text = service.metrics_text();
  const std::string labels =
      "kind=\"scheduler\",plugin=\"test_preempt_only\",metric=\"preempt_only_steps\"";
  EXPECT_GT(sum_of(text, "headway_plugin_total", "engine=\"0\",pool=\"main\"," + labels), 0)
      << text;
  EXPECT_GT(sum_of(text, "headway_plugin_total", "engine=\"1\",pool=\"main\"," + labels), 0)
      << text;
}

}  // namespace
}  // namespace headway::serving
