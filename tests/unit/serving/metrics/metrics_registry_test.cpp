// The registry's exposition text (checked line by line and by promtool), its refusals, and
// lock-free recording from several threads.
#include <gtest/gtest.h>
#include <headway/serving/metrics_registry.h>
#include <headway/serving/metrics_serving.h>

#include <stdexcept>
#include <thread>
#include <vector>

#include "promtool_check.h"

namespace headway::serving {
namespace {

TEST(MetricsRegistry, RendersCountersGaugesAndHistogramsInTextFormat004) {
  MetricsRegistry registry;
  CounterFamily& requests = registry.counter("demo_requests_total", "Requests seen.", {"code"});
  GaugeFamily& depth = registry.gauge("demo_queue_depth", "Queue depth.");
  HistogramFamily& latency =
      registry.histogram("demo_latency_seconds", "Latency.", {"path"}, {0.1, 1.0});
  requests.with({"200"}).add(3);
  requests.with({"500"}).add();
  depth.with({}).set(7);
  Histogram& h = latency.with({"/v1"});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.5);
  h.observe(4.0);

  EXPECT_EQ(registry.render(),
            "# HELP demo_requests_total Requests seen.\n"
            "# TYPE demo_requests_total counter\n"
            "demo_requests_total{code=\"200\"} 3\n"
            "demo_requests_total{code=\"500\"} 1\n"
            "# HELP demo_queue_depth Queue depth.\n"
            "# TYPE demo_queue_depth gauge\n"
            "demo_queue_depth 7\n"
            "# HELP demo_latency_seconds Latency.\n"
            "# TYPE demo_latency_seconds histogram\n"
            "demo_latency_seconds_bucket{path=\"/v1\",le=\"0.1\"} 1\n"
            "demo_latency_seconds_bucket{path=\"/v1\",le=\"1\"} 3\n"
            "demo_latency_seconds_bucket{path=\"/v1\",le=\"+Inf\"} 4\n"
            "demo_latency_seconds_sum{path=\"/v1\"} 5.05\n"
            "demo_latency_seconds_count{path=\"/v1\"} 4\n");
}

TEST(MetricsRegistry, SameLabelValuesGiveTheSameSeries) {
  MetricsRegistry registry;
  CounterFamily& c = registry.counter("x_total", "x", {"a"});
  EXPECT_EQ(&c.with({"1"}), &c.with({"1"}));
  EXPECT_NE(&c.with({"1"}), &c.with({"2"}));
}

// What `headway serve`'s stats line reads: a family summed over its series.
TEST(MetricsRegistry, TotalsSumEverySeries) {
  MetricsRegistry registry;
  CounterFamily& tokens = registry.counter("tokens_total", "Tokens.", {"engine"});
  EXPECT_EQ(tokens.total(), 0.0);
  tokens.with({"0"}).add(3);
  tokens.with({"1"}).add(4.5);
  EXPECT_EQ(tokens.total(), 7.5);
  HistogramFamily& steps = registry.histogram("step_tokens", "Per step.", {"engine"}, {1, 10});
  steps.with({"0"}).observe(2);
  steps.with({"1"}).observe(30);
  steps.with({"1"}).observe(0.5);
  EXPECT_EQ(steps.total_sum(), 32.5);
}

TEST(MetricsRegistry, FamiliesWithoutSeriesAreNotRendered) {
  MetricsRegistry registry;
  registry.counter("unused_total", "never used", {"a"});
  EXPECT_EQ(registry.render(), "");
}

TEST(MetricsRegistry, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(escape_help("line\\one\ntwo \"q\""), "line\\\\one\\ntwo \"q\"");
  MetricsRegistry registry;
  registry.counter("esc_total", "Help with a\nnewline.", {"v"}).with({"say \"hi\"\n"}).add();
  const std::string text = registry.render();
  EXPECT_NE(text.find("# HELP esc_total Help with a\\nnewline.\n"), std::string::npos) << text;
  EXPECT_NE(text.find("esc_total{v=\"say \\\"hi\\\"\\n\"} 1\n"), std::string::npos) << text;
  if (auto check = test::promtool_check_metrics(text)) {
    EXPECT_EQ(check->exit_code, 0) << check->output << "\n" << text;
  }
}

TEST(MetricsRegistry, FormatsSpecialValues) {
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_sample_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_sample_value(0.25), "0.25");
  EXPECT_EQ(format_sample_value(42), "42");
}

TEST(MetricsRegistry, RefusesBadNamesDuplicatesAndBuckets) {
  MetricsRegistry registry;
  EXPECT_THROW(registry.counter("vllm:ttft", "colon"), std::invalid_argument);
  EXPECT_THROW(registry.counter("9lives", "digit first"), std::invalid_argument);
  EXPECT_THROW(registry.counter("ok_total", "bad label", {"bad-label"}), std::invalid_argument);
  EXPECT_THROW(registry.counter("ok2_total", "reserved label", {"__x"}), std::invalid_argument);
  registry.counter("dup_total", "first");
  EXPECT_THROW(registry.gauge("dup_total", "second"), std::invalid_argument);
  EXPECT_THROW(registry.histogram("h1", "le label", {"le"}, {1.0}), std::invalid_argument);
  EXPECT_THROW(registry.histogram("h2", "unsorted", {}, {1.0, 0.5}), std::invalid_argument);
  EXPECT_THROW(registry.histogram("h3", "empty", {}, {}), std::invalid_argument);
  CounterFamily& c = registry.counter("arity_total", "two labels", {"a", "b"});
  EXPECT_THROW(c.with({"only one"}), std::invalid_argument);
}

TEST(MetricsRegistry, CountersIgnoreNegativeAmounts) {
  MetricsRegistry registry;
  Counter& c = registry.counter("mono_total", "m").with({});
  c.add(2);
  c.add(-5);
  EXPECT_EQ(c.value(), 2);
}

TEST(MetricsRegistry, ConcurrentRecordingLosesNothing) {
  MetricsRegistry registry;
  CounterFamily& counters = registry.counter("par_total", "p", {"t"});
  HistogramFamily& histograms = registry.histogram("par_seconds", "p", {"t"}, {0.5, 1.5});
  Counter& shared = registry.counter("shared_total", "s").with({});
  constexpr int kThreads = 4;
  constexpr int kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Counter& mine = counters.with({std::to_string(t)});
      Histogram& h = histograms.with({std::to_string(t)});
      for (int i = 0; i < kEach; ++i) {
        mine.add();
        shared.add();
        h.observe(i % 2 == 0 ? 1.0 : 2.0);
      }
    });
  }
  // Rendering concurrently with recording must be safe (TSan checks this test).
  for (int i = 0; i < 20; ++i) (void)registry.render();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(shared.value(), kThreads * kEach);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(counters.with({std::to_string(t)}).value(), kEach);
    const Histogram::Snapshot s = histograms.with({std::to_string(t)}).snapshot();
    EXPECT_EQ(s.count, static_cast<uint64_t>(kEach));
    EXPECT_EQ(s.cumulative[0], 0u);
    EXPECT_EQ(s.cumulative[1], static_cast<uint64_t>(kEach / 2));
    EXPECT_EQ(s.sum, 1.5 * kEach);
  }
}

// Every refusal reason is exported at 0 before the first refusal: a rate() over a series that
// appears only at its first increment misses that increment.
TEST(ServingMetrics, RefusalReasonsStartAtZero) {
  ServingMetrics metrics;
  const std::string text = metrics.render();
  for (const char* reason : {"invalid", "queue_full", "unavailable", "internal", "unauthorized"}) {
    EXPECT_NE(
        text.find("headway_request_rejected_total{reason=\"" + std::string(reason) + "\"} 0\n"),
        std::string::npos)
        << reason << "\n"
        << text;
  }
}

TEST(ServingMetrics, EverySeriesPassesPromtool) {
  ServingMetrics metrics;
  EngineSeries e = metrics.engine(0, "short");
  RequestSeries r = metrics.request(0, "short", "chat");
  e.running.set(2);
  e.kv_usage.set(0.25);
  e.prefill_tokens_per_step.observe(128);
  r.time_to_first_token->observe(0.02);
  r.finished_with(Finish::kStop).add();
  r.finished_with(Finish::kError).add();
  metrics.rejected(Rejection::kQueueFull);
  const std::string text = metrics.render();
  EXPECT_NE(text.find("headway_request_success_total{engine=\"0\",pool=\"short\","
                      "request_class=\"chat\",finished_reason=\"stop\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("headway_request_rejected_total{reason=\"queue_full\"} 1\n"),
            std::string::npos);
  auto check = test::promtool_check_metrics(text);
  if (!check) GTEST_SKIP() << "promtool is not installed (Debian package 'prometheus')";
  EXPECT_EQ(check->exit_code, 0) << check->output << "\n" << text;
}

}  // namespace
}  // namespace headway::serving
