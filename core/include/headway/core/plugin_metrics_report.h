// The counters and gauges a deployment's plugins kept through the host services during a run
// (counter_add, gauge_set), for simulate's report: `serve` exports them on /metrics instead
// (docs/serving.md), a simulation has no scrape.
//
// Threading: collect_plugin_metrics reads each instance's host services under their locks; the
// others are pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace headway::core {

class Cluster;

struct PluginMetricReading {
  std::string instance;  // the host services' owner: "engine0 scheduler chunked", "router length"
  std::string metric;    // the plugin's name for it
  bool counter = true;   // else a gauge
  double value = 0;      // a counter's total, a gauge's last value
};

// Every metric of every plugin instance of `cluster`: engines in order (model, then scheduler),
// then the router and the KV transport; by name within an instance.
std::vector<PluginMetricReading> collect_plugin_metrics(Cluster& cluster);

// One line per metric under a heading; nothing when there is none.
void print_plugin_metrics(std::ostream& out, const std::vector<PluginMetricReading>& readings);

nlohmann::json plugin_metrics_to_json(const std::vector<PluginMetricReading>& readings);

}  // namespace headway::core
