// The services table (log, clock, metrics, allocation) the host hands to each plugin instance.
//
// Ownership: a HostServices outlives every plugin instance created with it (the owner, an engine or
// a cluster, destroys its plugin instances first). Threading: every service is thread-safe.
#pragma once

#include <headway/abi.h>
#include <headway/core/clock.h>

#include <map>
#include <mutex>
#include <string>

namespace headway::core {

class HostServices {
 public:
  // `owner` prefixes log lines ("engine0/chunked"); `clock` is borrowed and must outlive this.
  HostServices(std::string owner, const Clock* clock);
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  const hw_host_services* table() const { return &table_; }
  const std::string& owner() const { return owner_; }
  // Rebinds the clock before any instance reads it (an engine learns its clock from its model).
  void set_clock(const Clock* clock) { clock_ = clock; }

  // Plugin-defined metrics, by name.
  std::map<std::string, double> counters() const;
  std::map<std::string, double> gauges() const;

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
  mutable std::mutex mutex_;
  std::map<std::string, double> counters_;
  std::map<std::string, double> gauges_;
};

}  // namespace headway::core
