#include "plugin_metrics_export.h"

#include <fmt/format.h>
#include <headway/core/utf8.h>
#include <spdlog/spdlog.h>

#include <utility>

namespace headway::serving {

PluginMetricsExport::PluginMetricsExport(CounterFamily& counters, GaugeFamily& gauges,
                                         std::vector<std::string> labels)
    : counters_(counters), gauges_(gauges), labels_(std::move(labels)) {}

std::vector<std::string> PluginMetricsExport::labels_of(const std::string& name) {
  // One warning per reason and instance: a plugin making names per request must not flood the log.
  enum Reason : unsigned { kLength = 1, kEncoding = 2, kTooMany = 4 };
  Reason reason{};
  std::string why;
  if (name.empty() || name.size() > kMaxNameBytes) {
    reason = kLength;
    why = fmt::format("names of 1 to {} bytes are exported", kMaxNameBytes);
  } else if (!core::utf8::is_valid(name)) {
    reason = kEncoding;
    why = "it is not valid UTF-8";
  } else if (names_ >= kMaxNames) {
    reason = kTooMany;
    why = fmt::format("the instance has {} exported names already", kMaxNames);
  }
  if (!why.empty()) {
    if ((warned_ & reason) == 0) {
      warned_ |= reason;
      std::string shown;
      core::utf8::append_valid(name.substr(0, kMaxNameBytes), shown);
      spdlog::warn(
          "{} plugin '{}'{}: metric '{}' is kept but not exported to /metrics ({}); said once "
          "for this reason",
          labels_[2], labels_[3], labels_[0].empty() ? "" : " of engine " + labels_[0], shown, why);
    }
    return {};
  }
  ++names_;
  std::vector<std::string> values = labels_;
  values.push_back(name);
  return values;
}

core::PluginMetricRecorder* PluginMetricsExport::counter(const std::string& name) {
  std::vector<std::string> values = labels_of(name);
  if (values.empty()) return nullptr;
  return &counter_recorders_.emplace_back(counters_.with(values));
}

core::PluginMetricRecorder* PluginMetricsExport::gauge(const std::string& name) {
  std::vector<std::string> values = labels_of(name);
  if (values.empty()) return nullptr;
  return &gauge_recorders_.emplace_back(gauges_.with(values));
}

}  // namespace headway::serving
