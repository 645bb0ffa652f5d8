// A router process's copy of an engine process's plugin metrics: counted from the router's start,
// a restarted process's counts taken whole, several engines' series added up, and bounded.
#include <gtest/gtest.h>
#include <headway/serving/forwarded_plugin_metrics.h>
#include <headway/serving/metrics_serving.h>

#include <string>
#include <vector>

#include "../../test_support/captured_log.h"

namespace headway::serving {
namespace {

PluginMetricSample counter(const std::string& engine, const std::string& metric, double value) {
  return {engine, "", "scheduler", "chunked", metric, true, value};
}

PluginMetricSample gauge(const std::string& engine, const std::string& metric, double value) {
  return {engine, "", "scheduler", "chunked", metric, false, value};
}

// The value of the router's series for engine process 3 (pool "long"); -1 when it has none.
double value_of(const ServingMetrics& metrics, const std::string& family,
                const std::string& metric) {
  const std::string prefix = family +
                             "{engine=\"3\",pool=\"long\",kind=\"scheduler\",plugin=\"chunked\","
                             "metric=\"" +
                             metric + "\"} ";
  const std::string text = metrics.render();
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return -1.0;
  return std::stod(text.substr(at + prefix.size()));
}

double counted(const ServingMetrics& metrics, const std::string& metric) {
  return value_of(metrics, "headway_plugin_total", metric);
}

TEST(ForwardedPluginMetrics, CountersCountFromTheFirstReportTaken) {
  ServingMetrics metrics;
  ForwardedPluginMetrics forwarded(metrics, 3, "long", "127.0.0.1:1");
  forwarded.take({counter("0", "steps", 40)}, /*baseline=*/true);
  // Exported from 0: what the process counted before the router started is not the router's.
  EXPECT_EQ(counted(metrics, "steps"), 0) << metrics.render();
  forwarded.take({counter("0", "steps", 45)}, false);
  forwarded.take({counter("0", "steps", 52)}, false);
  EXPECT_EQ(counted(metrics, "steps"), 12) << metrics.render();
}

TEST(ForwardedPluginMetrics, ASeriesFirstSeenAfterTheBaselineCountsWhole) {
  ServingMetrics metrics;
  ForwardedPluginMetrics forwarded(metrics, 3, "long", "127.0.0.1:1");
  forwarded.take({}, /*baseline=*/true);
  forwarded.take({counter("0", "links", 2)}, false);
  EXPECT_EQ(counted(metrics, "links"), 2) << metrics.render();
}

TEST(ForwardedPluginMetrics, ACountThatFellIsARestartedProcesssWholeCount) {
  ServingMetrics metrics;
  ForwardedPluginMetrics forwarded(metrics, 3, "long", "127.0.0.1:1");
  forwarded.take({counter("0", "steps", 10)}, /*baseline=*/true);
  forwarded.take({counter("0", "steps", 30)}, false);  // +20
  forwarded.take({counter("0", "steps", 5)}, false);   // restarted: +5
  forwarded.take({counter("0", "steps", 8)}, false);   // +3
  EXPECT_EQ(counted(metrics, "steps"), 28) << metrics.render();
}

// A process known to have restarted (its incarnation changed) counts from 0 again, also when its
// new count reached the old one by the next poll (a link joined again: 1 and 1).
TEST(ForwardedPluginMetrics, ARestartedProcessCountsWholeEvenWhereItsCountDidNotFall) {
  ServingMetrics metrics;
  ForwardedPluginMetrics forwarded(metrics, 3, "long", "127.0.0.1:1");
  forwarded.take({counter("0", "links", 0)}, /*baseline=*/true);
  forwarded.take({counter("0", "links", 1)}, false);
  forwarded.take({counter("0", "links", 1)}, false, /*restarted=*/true);
  EXPECT_EQ(counted(metrics, "links"), 2) << metrics.render();
}

// What no running process holds is not added to a dashboard's sums: a down process's gauges, and a
// gauge its later report lacks, read 0.
TEST(ForwardedPluginMetrics, GaugesReadZeroWhileTheProcessIsDownOrOnceItsReportLacksThem) {
  ServingMetrics metrics;
  ForwardedPluginMetrics forwarded(metrics, 3, "long", "127.0.0.1:1");
  forwarded.take({gauge("0", "open", 2), gauge("0", "depth", 5)}, /*baseline=*/true);
  EXPECT_EQ(value_of(metrics, "headway_plugin_value", "open"), 2);
  forwarded.process_down();
  EXPECT_EQ(value_of(metrics, "headway_plugin_value", "open"), 0);
  EXPECT_EQ(value_of(metrics, "headway_plugin_value", "depth"), 0);
  forwarded.take({gauge("0", "open", 1)}, false);
  EXPECT_EQ(value_of(metrics, "headway_plugin_value", "open"), 1);
  EXPECT_EQ(value_of(metrics, "headway_plugin_value", "depth"), 0);
}

// The router sees a process of several engines as one: their series add up under its label.
TEST(ForwardedPluginMetrics, SeveralEnginesOfOneProcessAddUp) {
  ServingMetrics metrics;
  ForwardedPluginMetrics forwarded(metrics, 3, "long", "127.0.0.1:1");
  forwarded.take({counter("0", "steps", 0), counter("1", "steps", 0)}, /*baseline=*/true);
  forwarded.take({counter("0", "steps", 4), counter("1", "steps", 6), gauge("0", "depth", 2),
                  gauge("1", "depth", 5)},
                 false);
  EXPECT_EQ(counted(metrics, "steps"), 10) << metrics.render();
  EXPECT_EQ(value_of(metrics, "headway_plugin_value", "depth"), 7) << metrics.render();
  forwarded.take({gauge("0", "depth", 1), gauge("1", "depth", 0)}, false);
  EXPECT_EQ(value_of(metrics, "headway_plugin_value", "depth"), 1) << metrics.render();
}

TEST(ForwardedPluginMetrics, AProcessReportingTooManySeriesIsCutAndWarnedAboutOnce) {
  test::CapturedLog log;
  ServingMetrics metrics;
  ForwardedPluginMetrics forwarded(metrics, 3, "long", "10.0.0.7:50051");
  std::vector<PluginMetricSample> samples;
  for (size_t i = 0; i < ForwardedPluginMetrics::kMaxSeries + 10; ++i) {
    samples.push_back(counter("0", "m" + std::to_string(i), 1));
  }
  forwarded.take(samples, false);
  forwarded.take(samples, false);
  const std::string text = metrics.render();
  EXPECT_NE(text.find("metric=\"m1023\""), std::string::npos);
  EXPECT_EQ(text.find("metric=\"m1024\""), std::string::npos);
  const std::string warning = "engine3 at 10.0.0.7:50051 reports more than 1024 plugin metric";
  const size_t first = log.text().find(warning);
  EXPECT_NE(first, std::string::npos) << log.text();
  EXPECT_EQ(log.text().find(warning, first + 1), std::string::npos) << log.text();
}

// What an engine process puts in ClusterInfo: every series its plugins' sinks exported.
TEST(ForwardedPluginMetrics, AProcessReportsWhatItsPluginsExported) {
  ServingMetrics metrics;
  core::PluginMetricsSink& sink = metrics.plugin("1", "short", "model", "cpu");
  sink.counter("tokens")->record(3);
  sink.gauge("threads")->record(8);
  const std::vector<PluginMetricSample> samples = metrics.plugin_samples();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].engine, "1");
  EXPECT_EQ(samples[0].pool, "short");
  EXPECT_EQ(samples[0].kind, "model");
  EXPECT_EQ(samples[0].plugin, "cpu");
  EXPECT_EQ(samples[0].metric, "tokens");
  EXPECT_TRUE(samples[0].counter);
  EXPECT_EQ(samples[0].value, 3.0);
  EXPECT_EQ(samples[1].metric, "threads");
  EXPECT_FALSE(samples[1].counter);
  EXPECT_EQ(samples[1].value, 8.0);
}

}  // namespace
}  // namespace headway::serving
