#include <headway/serving/forwarded_plugin_metrics.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <utility>

namespace headway::serving {

ForwardedPluginMetrics::ForwardedPluginMetrics(ServingMetrics& metrics, uint32_t engine,
                                               std::string pool, std::string address)
    : metrics_(metrics),
      engine_(std::to_string(engine)),
      pool_(std::move(pool)),
      address_(std::move(address)) {}

ForwardedPluginMetrics::Labels ForwardedPluginMetrics::router_labels(
    const PluginMetricSample& sample) const {
  return {engine_, pool_, sample.kind, sample.plugin, sample.metric};
}

bool ForwardedPluginMetrics::room_for_another() {
  if (counters_.size() + gauges_.size() < kMaxSeries) return true;
  if (!warned_) {
    warned_ = true;
    spdlog::warn(
        "engine{} at {} reports more than {} plugin metric series: the router exports the first "
        "{} only",
        engine_, address_, kMaxSeries, kMaxSeries);
  }
  return false;
}

void ForwardedPluginMetrics::process_down() {
  for (auto& [labels, gauge] : gauges_) gauge->set(0.0);
}

void ForwardedPluginMetrics::take(const std::vector<PluginMetricSample>& samples, bool baseline,
                                  bool restarted) {
  if (restarted) {
    for (auto& [labels, counter] : counters_) counter.counted = 0.0;
  }
  std::map<Labels, double> gauge_sums;
  for (const PluginMetricSample& sample : samples) {
    if (!sample.counter) {
      gauge_sums[router_labels(sample)] += sample.value;
      continue;
    }
    if (!std::isfinite(sample.value)) continue;  // not a count a process exports
    Labels own = {sample.engine, sample.pool, sample.kind, sample.plugin, sample.metric};
    auto it = counters_.find(own);
    if (it == counters_.end()) {
      if (!room_for_another()) continue;
      // A series first seen after the baseline was 0 before it: all of its count is new.
      it = counters_
               .emplace(std::move(own),
                        ForwardedCounter{&metrics_.forwarded_plugin_counter(router_labels(sample)),
                                         baseline ? sample.value : 0.0})
               .first;
    }
    ForwardedCounter& counter = it->second;
    // A count that fell is a restarted process's, counting from 0 again.
    counter.series->add(sample.value >= counter.counted ? sample.value - counter.counted
                                                        : sample.value);
    counter.counted = sample.value;
  }
  for (auto& [labels, sum] : gauge_sums) {
    auto it = gauges_.find(labels);
    if (it == gauges_.end()) {
      if (!room_for_another()) continue;
      it = gauges_.emplace(labels, &metrics_.forwarded_plugin_gauge(labels)).first;
    }
    it->second->set(sum);
  }
  // A gauge the report lacks (a process that restarted without the plugin, or an older build).
  for (auto& [labels, gauge] : gauges_) {
    if (gauge_sums.find(labels) == gauge_sums.end()) gauge->set(0.0);
  }
}

}  // namespace headway::serving
