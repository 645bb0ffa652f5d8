#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/utf8.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace headway::core {

HostServices::HostServices(std::string owner, const Clock* clock)
    : owner_(std::move(owner)), clock_(clock) {
  table_ = hw_host_services{
      sizeof(hw_host_services), this, &log, &now, &counter_add, &gauge_set, &allocate, &free_bytes};
}

namespace {

// The lines create() logged while a RepeatedCreateLinesAtDebug lives (null: none lives).
std::mutex create_lines_mutex;
std::set<std::string, std::less<>>* create_lines = nullptr;

// Whether this line comes from a plugin's create() and was logged before, while a
// RepeatedCreateLinesAtDebug lives. The owner names the engine, so a line of another engine's
// instance is not a repeat.
bool repeats_a_create_line(const std::string& owner, std::string_view text) {
  const char* kind = nullptr;
  std::string_view name;
  const char* function = nullptr;
  if (!current_plugin_call_parts(kind, name, function) || std::string_view(function) != "create") {
    return false;
  }
  std::string key = owner;
  key += '\n';
  key += text;
  const std::lock_guard lock(create_lines_mutex);
  return create_lines != nullptr && !create_lines->insert(std::move(key)).second;
}

// A plugin's string: none where it passed NULL, whatever size it gave (a view of NULL with a size
// would be read).
std::string_view text_of(hw_str s) {
  return s.data != nullptr ? std::string_view(s.data, s.size) : std::string_view();
}

}  // namespace

RepeatedCreateLinesAtDebug::RepeatedCreateLinesAtDebug() {
  const std::lock_guard lock(create_lines_mutex);
  if (create_lines == nullptr) create_lines = &lines_;
}

RepeatedCreateLinesAtDebug::~RepeatedCreateLinesAtDebug() {
  const std::lock_guard lock(create_lines_mutex);
  if (create_lines == &lines_) create_lines = nullptr;
}

void HostServices::log(void* context, int32_t level, hw_str message) {
  auto* self = static_cast<HostServices*>(context);
  const std::string_view text = text_of(message);
  // A repeat of create()'s line is kept for --log-level debug.
  if (level != HW_LOG_DEBUG && repeats_a_create_line(self->owner_, text)) level = HW_LOG_DEBUG;
  switch (level) {
    case HW_LOG_DEBUG:
      spdlog::debug("[{}] {}", self->owner_, text);
      break;
    case HW_LOG_INFO:
      spdlog::info("[{}] {}", self->owner_, text);
      break;
    case HW_LOG_WARN:
      spdlog::warn("[{}] {}", self->owner_, text);
      break;
    default:
      spdlog::error("[{}] {}", self->owner_, text);
      break;
  }
}

double HostServices::now(void* context) {
  auto* self = static_cast<HostServices*>(context);
  return self->clock_ != nullptr ? self->clock_->now() : 0.0;
}

HostServices::Metric& HostServices::metric(Metrics& metrics, hw_str name, bool counter) {
  const std::string_view key = text_of(name);
  auto it = metrics.find(key);
  if (it == metrics.end()) {
    if (metrics.size() >= kMaxMetricNames) {
      bool& warned = counter ? warned_of_counters_ : warned_of_gauges_;
      if (!warned) {
        warned = true;
        std::string shown;  // the name as the plugin wrote it, cut and made valid text
        utf8::append_valid(key.substr(0, 64), shown);
        const char* kind = counter ? "counter" : "gauge";
        spdlog::warn(
            "[{}] the plugin's {} '{}' is dropped, as is every new {} name from now on: {} {} "
            "names are kept already (a name per request or per id grows without end)",
            owner_, kind, shown, kind, kMaxMetricNames, kind);
      }
      dropped_ = Metric{};
      return dropped_;
    }
    it = metrics.emplace(std::string(key), Metric{}).first;
    if (sink_ != nullptr)
      it->second.exported = counter ? sink_->counter(it->first) : sink_->gauge(it->first);
  }
  return it->second;
}

void HostServices::counter_add(void* context, hw_str name, double delta) {
  auto* self = static_cast<HostServices*>(context);
  std::lock_guard lock(self->mutex_);
  Metric& m = self->metric(self->counters_, name, true);
  m.value += delta;
  // A counter only goes up, by finite steps: what a scrape has seen never goes back, and one +inf
  // would pin the series there (NaN fails the test too).
  if (std::isfinite(delta) && delta > 0.0) {
    m.exported_total += delta;
    if (m.exported != nullptr) m.exported->record(delta);
  }
}

void HostServices::gauge_set(void* context, hw_str name, double value) {
  auto* self = static_cast<HostServices*>(context);
  std::lock_guard lock(self->mutex_);
  Metric& m = self->metric(self->gauges_, name, false);
  m.value = value;
  if (m.exported != nullptr) m.exported->record(value);
}

void HostServices::export_metrics(PluginMetricsSink* sink) {
  std::lock_guard lock(mutex_);
  sink_ = sink;
  for (auto& [name, m] : counters_) {
    m.exported = sink != nullptr ? sink->counter(name) : nullptr;
    // What live export would have sent: the finite increments above 0.
    if (m.exported != nullptr && m.exported_total > 0.0) m.exported->record(m.exported_total);
  }
  for (auto& [name, m] : gauges_) {
    m.exported = sink != nullptr ? sink->gauge(name) : nullptr;
    if (m.exported != nullptr) m.exported->record(m.value);
  }
}

void* HostServices::allocate(void*, uint64_t bytes, uint64_t alignment) {
  // abi.h: a power of two. Anything else, and a size that rounding up would wrap past 2^64 (a
  // negative size cast to unsigned), gets NULL, as a failed allocation: never a small block that
  // the plugin would then write past.
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return nullptr;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if (bytes > std::numeric_limits<uint64_t>::max() - (alignment - 1)) return nullptr;
  const uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
}

void HostServices::free_bytes(void*, void* pointer) { std::free(pointer); }

std::map<std::string, double> HostServices::values_of(const Metrics& metrics) {
  std::map<std::string, double> values;
  for (const auto& [name, m] : metrics) values.emplace(name, m.value);
  return values;
}

std::map<std::string, double> HostServices::counters() const {
  std::lock_guard lock(mutex_);
  return values_of(counters_);
}

std::map<std::string, double> HostServices::gauges() const {
  std::lock_guard lock(mutex_);
  return values_of(gauges_);
}

}  // namespace headway::core
