// A router process's copy of one engine process's plugin metrics (model, scheduler, router, KV
// transport): engine processes have no HTTP listener, so they report their headway_plugin_total and
// headway_plugin_value series with each ClusterInfo answer and the router exports them under its
// own labels: `engine` names the engine process (for every kind), `pool` is the router's for it.
//
// Counters count from the router's start, as its other forwarded counters do: what the process
// counted before the first report taken with `baseline` is left out, and a series whose count fell
// or that the caller knows restarted (its incarnation changed), adds its whole new count. A process
// running several engines reports a series per engine; their counts add up, and so do their
// gauges (the router sees such a process as one engine whose load is their sum: a plugin whose
// gauge is not a quantity, a ratio, reads their sum). A gauge reads 0 while the process is down and
// once a report lacks it (what no running process holds is not added to a dashboard's sums, as
// the router's running and waiting gauges).
//
// Ownership: references the ServingMetrics it was made with, and points into its series: their
// values must not be touched once it is gone (the destructor touches neither). Threading: not
// thread-safe; the router's poll thread calls it (and its constructor before that thread starts).
#pragma once

#include <headway/serving/generation_service.h>
#include <headway/serving/metrics_serving.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace headway::serving {

class ForwardedPluginMetrics {
 public:
  // At most this many series of one engine process are forwarded (the process bounds the names
  // of each plugin instance already; this bounds a process that reports more than its own).
  static constexpr size_t kMaxSeries = 1024;

  // `engine` and `pool`: the router's labels for the process; `address` names it in the warning.
  ForwardedPluginMetrics(ServingMetrics& metrics, uint32_t engine, std::string pool,
                         std::string address);

  // The process's series as of its latest report. With `baseline`, the counters' values are taken
  // as already counted (the first report since the router started); with `restarted`, the process
  // started again since the last report and every count is new.
  void take(const std::vector<PluginMetricSample>& samples, bool baseline, bool restarted = false);
  // The process is down: its gauges read 0 until it reports again.
  void process_down();

 private:
  struct ForwardedCounter {
    Counter* series = nullptr;
    double counted = 0.0;  // the process's value when last added
  };
  using Labels = std::vector<std::string>;  // engine, pool, kind, plugin, metric

  // The router's labels for a sample of the process.
  Labels router_labels(const PluginMetricSample& sample) const;
  // Whether another series may be made; warns once when not.
  bool room_for_another();

  ServingMetrics& metrics_;
  const std::string engine_;
  const std::string pool_;
  const std::string address_;
  std::map<Labels, ForwardedCounter> counters_;  // by the process's own labels
  std::map<Labels, Gauge*> gauges_;              // by the router's labels
  bool warned_ = false;
};

}  // namespace headway::serving
