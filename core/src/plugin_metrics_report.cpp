#include <fmt/format.h>
#include <headway/core/cluster.h>
#include <headway/core/plugin_metrics_report.h>

namespace headway::core {
namespace {

void add_instance(const HostServices& host, std::vector<PluginMetricReading>& out) {
  for (const auto& [name, value] : host.counters()) {
    out.push_back(PluginMetricReading{host.owner(), name, true, value});
  }
  for (const auto& [name, value] : host.gauges()) {
    out.push_back(PluginMetricReading{host.owner(), name, false, value});
  }
}

}  // namespace

std::vector<PluginMetricReading> collect_plugin_metrics(Cluster& cluster) {
  std::vector<PluginMetricReading> out;
  for (size_t e = 0; e < cluster.size(); ++e) {
    add_instance(cluster.engine(e).model_host(), out);
    add_instance(cluster.engine(e).scheduler_host(), out);
  }
  add_instance(cluster.router_host(), out);
  if (const HostServices* transport = cluster.transport_host()) add_instance(*transport, out);
  return out;
}

void print_plugin_metrics(std::ostream& out, const std::vector<PluginMetricReading>& readings) {
  if (readings.empty()) return;
  out << "\nplugin metrics (counter_add, gauge_set):\n";
  for (const PluginMetricReading& r : readings) {
    out << fmt::format("  {}: {} {:g} ({})\n", r.instance, r.metric, r.value,
                       r.counter ? "counter" : "gauge");
  }
}

nlohmann::json plugin_metrics_to_json(const std::vector<PluginMetricReading>& readings) {
  nlohmann::json out = nlohmann::json::array();
  for (const PluginMetricReading& r : readings) {
    out.push_back({{"instance", r.instance},
                   {"metric", r.metric},
                   {"type", r.counter ? "counter" : "gauge"},
                   {"value", r.value}});
  }
  return out;
}

}  // namespace headway::core
