// The host services' metrics: kept per instance, and sent to an export sink from the moment one is
// attached (what was recorded before included), until it is detached.
#include <gtest/gtest.h>
#include <headway/core/clock.h>
#include <headway/core/host_services.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace headway::core {
namespace {

// Records what the host sends, per name; refuses the names listed in `refused`.
class RecordingSink final : public PluginMetricsSink {
 public:
  struct Recorder final : PluginMetricRecorder {
    std::vector<double> values;
    void record(double value) override { values.push_back(value); }
  };
  std::map<std::string, std::unique_ptr<Recorder>> counters;
  std::map<std::string, std::unique_ptr<Recorder>> gauges;
  std::vector<std::string> refused;

  PluginMetricRecorder* counter(const std::string& name) override { return make(counters, name); }
  PluginMetricRecorder* gauge(const std::string& name) override { return make(gauges, name); }

 private:
  PluginMetricRecorder* make(std::map<std::string, std::unique_ptr<Recorder>>& map,
                             const std::string& name) {
    for (const std::string& r : refused) {
      if (r == name) return nullptr;
    }
    EXPECT_EQ(map.count(name), 0u) << "asked twice for " << name;
    return (map[name] = std::make_unique<Recorder>()).get();
  }
};

void add(const HostServices& host, const std::string& name, double delta) {
  host.table()->counter_add(host.table()->context, hw_str{name.data(), name.size()}, delta);
}

void set(const HostServices& host, const std::string& name, double value) {
  host.table()->gauge_set(host.table()->context, hw_str{name.data(), name.size()}, value);
}

TEST(HostServices, MetricsGoToTheSinkFromWhenItIsAttachedUntilItIsDetached) {
  VirtualClock clock;
  HostServices host("engine0 scheduler test", &clock);
  add(host, "early", 2.0);
  add(host, "early", 3.0);
  add(host, "gone_down", -1.0);
  add(host, "mixed", -4.0);
  add(host, "mixed", 1.0);
  set(host, "level", 7.0);

  RecordingSink sink;
  host.export_metrics(&sink);
  // What was recorded before: a counter's total, a gauge's value; a total not above 0 is not sent.
  ASSERT_EQ(sink.counters.count("early"), 1u);
  EXPECT_EQ(sink.counters["early"]->values, std::vector<double>({5.0}));
  ASSERT_EQ(sink.counters.count("gone_down"), 1u);
  EXPECT_TRUE(sink.counters["gone_down"]->values.empty());
  // The increments above 0 (what live export sends), not the net -3.
  EXPECT_EQ(sink.counters["mixed"]->values, std::vector<double>({1.0}));
  EXPECT_EQ(sink.gauges["level"]->values, std::vector<double>({7.0}));

  add(host, "early", 1.0);
  add(host, "early", -4.0);  // kept by the host, never sent: a counter only goes up
  add(host, "late", 1.5);
  add(host, "late", std::numeric_limits<double>::infinity());  // would pin the series at +Inf
  set(host, "level", -3.0);                                    // a gauge may go anywhere
  EXPECT_EQ(sink.counters["early"]->values, std::vector<double>({5.0, 1.0}));
  EXPECT_EQ(sink.counters["late"]->values, std::vector<double>({1.5}));
  EXPECT_EQ(sink.gauges["level"]->values, std::vector<double>({7.0, -3.0}));
  EXPECT_EQ(host.counters().at("early"), 2.0);
  EXPECT_TRUE(std::isinf(host.counters().at("late")));  // the host keeps what it was given
  EXPECT_EQ(host.gauges().at("level"), -3.0);

  host.export_metrics(nullptr);
  add(host, "early", 10.0);
  add(host, "after", 1.0);
  EXPECT_EQ(sink.counters["early"]->values.size(), 2u);
  EXPECT_EQ(sink.counters.count("after"), 0u);
  EXPECT_EQ(host.counters().at("early"), 12.0);
  EXPECT_EQ(host.counters().at("after"), 1.0);
}

// A name per request would grow the host's maps for the process's life: past the bound, new names
// are dropped (and never reach the sink); the names kept go on counting.
TEST(HostServices, NamesPastTheBoundAreDropped) {
  HostServices host("engine0 scheduler x", nullptr);
  RecordingSink sink;
  host.export_metrics(&sink);
  for (size_t i = 0; i < HostServices::kMaxMetricNames + 10; ++i) {
    add(host, "request_" + std::to_string(i), 1.0);
    set(host, "gauge_" + std::to_string(i), 2.0);
  }
  add(host, "request_0", 1.0);
  add(host, "request_" + std::to_string(HostServices::kMaxMetricNames), 5.0);
  const auto counters = host.counters();
  EXPECT_EQ(counters.size(), HostServices::kMaxMetricNames);
  EXPECT_EQ(counters.at("request_0"), 2.0);
  EXPECT_EQ(counters.count("request_" + std::to_string(HostServices::kMaxMetricNames)), 0u);
  EXPECT_EQ(host.gauges().size(), HostServices::kMaxMetricNames);
  EXPECT_EQ(sink.counters.size(), HostServices::kMaxMetricNames);
  EXPECT_EQ(sink.gauges.size(), HostServices::kMaxMetricNames);
  host.export_metrics(nullptr);
}

TEST(HostServices, ANameTheSinkRefusesIsKeptByTheHostOnly) {
  VirtualClock clock;
  HostServices host("router test", &clock);
  RecordingSink sink;
  sink.refused = {"secret"};
  host.export_metrics(&sink);
  add(host, "secret", 1.0);
  add(host, "secret", 1.0);
  add(host, "public", 1.0);
  EXPECT_EQ(sink.counters.count("secret"), 0u);
  EXPECT_EQ(sink.counters["public"]->values, std::vector<double>({1.0}));
  EXPECT_EQ(host.counters().at("secret"), 2.0);
}

// From helper-202's review: bytes + alignment - 1 wrapped past 2^64 for a huge size (a negative one
// cast to unsigned), and the host handed back a block of `alignment` bytes.
TEST(HostServices, AnAllocationItCannotMakeIsNull) {
  VirtualClock clock;
  HostServices host("engine0 model test", &clock);
  const hw_host_services& table = *host.table();
  EXPECT_EQ(table.allocate(table.context, std::numeric_limits<uint64_t>::max(), 64), nullptr);
  EXPECT_EQ(table.allocate(table.context, static_cast<uint64_t>(-8), 16), nullptr);
  EXPECT_EQ(table.allocate(table.context, 64, 24), nullptr);  // not a power of two
  EXPECT_EQ(table.allocate(table.context, 64, 0), nullptr);
  void* block = table.allocate(table.context, 100, 64);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u);
  table.free_bytes(table.context, block);
}

// A NULL string with a size is read as empty, not dereferenced.
TEST(HostServices, ANullStringWithASizeIsEmpty) {
  VirtualClock clock;
  HostServices host("engine0 scheduler test", &clock);
  const hw_host_services& table = *host.table();
  table.log(table.context, HW_LOG_INFO, hw_str{nullptr, 1000});
  table.counter_add(table.context, hw_str{nullptr, 1000}, 1.0);
  table.gauge_set(table.context, hw_str{nullptr, 1000}, 2.0);
  EXPECT_EQ(host.counters().at(""), 1.0);
  EXPECT_EQ(host.gauges().at(""), 2.0);
}

}  // namespace
}  // namespace headway::core
