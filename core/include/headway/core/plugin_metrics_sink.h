// Where a plugin instance's counters and gauges go besides the host's own record of them: serve's
// /metrics (serving::ServingMetrics::plugin()). The host services (host_services.h) ask a sink for
// one recorder per name, the first time the plugin uses that name, and send it every update.
//
// Ownership: the sink owns its recorders; both outlive the HostServices they are attached to, or
// are detached from it first (HostServices::export_metrics(nullptr)). Threading: called under the
// HostServices' lock, from whichever thread the plugin called from.
#pragma once

#include <string>

namespace headway::core {

// One exported metric of one plugin instance.
class PluginMetricRecorder {
 public:
  // A counter's increment (never negative: the host passes none) or a gauge's new value.
  virtual void record(double value) = 0;

 protected:
  ~PluginMetricRecorder() = default;
};

class PluginMetricsSink {
 public:
  virtual ~PluginMetricsSink() = default;
  // The recorder of counter / gauge `name`, or null when this name is not exported (the sink's
  // limit on names per instance, or a name it cannot carry); asked once per name.
  virtual PluginMetricRecorder* counter(const std::string& name) = 0;
  virtual PluginMetricRecorder* gauge(const std::string& name) = 0;
};

}  // namespace headway::core
