// The services table (log, clock, metrics, allocation) the host hands to a plugin instance: one
// HostServices per instance, so that its log lines and metrics say whose they are.
//
// Ownership: a HostServices outlives every plugin instance created with it (the owner, an engine or
// a cluster, destroys its plugin instances first). Threading: every service is thread-safe.
#pragma once

#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/plugin_metrics_sink.h>

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace headway::core {

// While one lives, a line a plugin's create() logs that was logged before in its life goes to the
// debug level. What create() says describes the instance's configuration, and a command that
// builds the same deployment again and again (simulate's capacity search, its seeds) printed it
// each time: a router's warning about the engines it leaves idle, 13 times under --find-capacity
// (helper-185). The first of several living at once takes effect. Threading: lines are logged
// from any thread; make and end it on one.
class RepeatedCreateLinesAtDebug {
 public:
  RepeatedCreateLinesAtDebug();
  ~RepeatedCreateLinesAtDebug();
  RepeatedCreateLinesAtDebug(const RepeatedCreateLinesAtDebug&) = delete;
  RepeatedCreateLinesAtDebug& operator=(const RepeatedCreateLinesAtDebug&) = delete;

 private:
  std::set<std::string, std::less<>> lines_;  // owner, newline, text
};

class HostServices {
 public:
  // `owner` prefixes log lines ("engine0 scheduler chunked", "router length"); `clock` is borrowed
  // and must outlive this.
  HostServices(std::string owner, const Clock* clock);
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  const hw_host_services* table() const { return &table_; }
  const std::string& owner() const { return owner_; }
  // Rebinds the clock before any instance reads it (an engine learns its clock from its model).
  void set_clock(const Clock* clock) { clock_ = clock; }

  // Names kept per kind (counters, gauges). A plugin that puts a request id in a name would grow
  // the maps for the process's life (helper-132): past this many, new names are dropped, with one
  // warning per kind; /metrics exports fewer still (plugin_metrics_export.h).
  static constexpr size_t kMaxMetricNames = 256;

  // Plugin-defined metrics, by name.
  std::map<std::string, double> counters() const;
  std::map<std::string, double> gauges() const;

  // Sends this instance's counters and gauges to `sink` too from now on (null: stops), starting
  // with what they hold already (a counter's total, a gauge's value). `sink` is borrowed: it
  // outlives this HostServices, or is detached first.
  void export_metrics(PluginMetricsSink* sink);

 private:
  static void log(void* context, int32_t level, hw_str message);
  static double now(void* context);
  static void counter_add(void* context, hw_str name, double delta);
  static void gauge_set(void* context, hw_str name, double value);
  static void* allocate(void* context, uint64_t bytes, uint64_t alignment);
  static void free_bytes(void* context, void* pointer);

  std::string owner_;
  const Clock* clock_;
  hw_host_services table_;
  struct Metric {
    double value = 0.0;
    double exported_total = 0.0;  // a counter's finite increments above 0: what export sends
    PluginMetricRecorder* exported = nullptr;  // null when not exported
  };
  // std::less<>: a plugin's call looks its name up without making a std::string of it.
  using Metrics = std::map<std::string, Metric, std::less<>>;
  static std::map<std::string, double> values_of(const Metrics& metrics);
  // The entry of `name`, new ones asked of the sink for a recorder; past kMaxMetricNames names,
  // `dropped_` (kept nowhere). mutex_ held.
  Metric& metric(Metrics& metrics, hw_str name, bool counter);

  mutable std::mutex mutex_;
  Metrics counters_;
  Metrics gauges_;
  Metric dropped_;                   // what names past the bound write to
  bool warned_of_counters_ = false;  // each kind's drop is logged once
  bool warned_of_gauges_ = false;
  PluginMetricsSink* sink_ = nullptr;
};

}  // namespace headway::core
