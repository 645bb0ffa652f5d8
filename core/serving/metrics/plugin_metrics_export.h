// One plugin instance's counters and gauges in serve's /metrics: the sink its host services send
// them to (core::PluginMetricsSink), recording into headway_plugin_total and
// headway_plugin_value under the instance's labels and the metric's name.
//
// A plugin chooses its names at run time, so the series are bounded: at most kMaxNames names an
// instance, each 1 to kMaxNameBytes bytes of UTF-8 (a Prometheus label value); others are kept by
// the host but not exported, with one warning per instance and reason naming the first.
//
// Ownership: owned by ServingMetrics; the recorders reference series of its registry. Threading:
// called under the host services' lock; recording is lock-free (metrics_registry.h).
#pragma once

#include <headway/core/plugin_metrics_sink.h>
#include <headway/serving/metrics_registry.h>

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

namespace headway::serving {

class PluginMetricsExport final : public core::PluginMetricsSink {
 public:
  static constexpr size_t kMaxNames = 64;
  static constexpr size_t kMaxNameBytes = 128;

  // `labels`: the instance's label values (engine, pool, kind, plugin); the metric's name follows.
  PluginMetricsExport(CounterFamily& counters, GaugeFamily& gauges,
                      std::vector<std::string> labels);

  core::PluginMetricRecorder* counter(const std::string& name) override;
  core::PluginMetricRecorder* gauge(const std::string& name) override;

 private:
  class CounterRecorder final : public core::PluginMetricRecorder {
   public:
    explicit CounterRecorder(Counter& series) : series_(series) {}
    void record(double increment) override { series_.add(increment); }

   private:
    Counter& series_;
  };
  class GaugeRecorder final : public core::PluginMetricRecorder {
   public:
    explicit GaugeRecorder(Gauge& series) : series_(series) {}
    void record(double value) override { series_.set(value); }

   private:
    Gauge& series_;
  };

  // The label values of `name`'s series, or empty when it is not exported (and warns once).
  std::vector<std::string> labels_of(const std::string& name);

  CounterFamily& counters_;
  GaugeFamily& gauges_;
  std::vector<std::string> labels_;
  size_t names_ = 0;
  unsigned warned_ = 0;                            // the reasons already warned about (labels_of())
  std::deque<CounterRecorder> counter_recorders_;  // deque: recorders stay where they are
  std::deque<GaugeRecorder> gauge_recorders_;
};

}  // namespace headway::serving
