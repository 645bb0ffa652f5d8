#include <headway/core/host_services.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string_view>

namespace headway::core {

HostServices::HostServices(std::string owner, const Clock* clock)
    : owner_(std::move(owner)), clock_(clock) {
  table_ = hw_host_services{
      sizeof(hw_host_services), this, &log, &now, &counter_add, &gauge_set, &allocate, &free_bytes};
}

void HostServices::log(void* context, int32_t level, hw_str message) {
  auto* self = static_cast<HostServices*>(context);
  std::string_view text(message.data, message.size);
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

void HostServices::counter_add(void* context, hw_str name, double delta) {
  auto* self = static_cast<HostServices*>(context);
  std::lock_guard lock(self->mutex_);
  self->counters_[std::string(name.data, name.size)] += delta;
}

void HostServices::gauge_set(void* context, hw_str name, double value) {
  auto* self = static_cast<HostServices*>(context);
  std::lock_guard lock(self->mutex_);
  self->gauges_[std::string(name.data, name.size)] = value;
}

void* HostServices::allocate(void*, uint64_t bytes, uint64_t alignment) {
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
}

void HostServices::free_bytes(void*, void* pointer) { std::free(pointer); }

std::map<std::string, double> HostServices::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

std::map<std::string, double> HostServices::gauges() const {
  std::lock_guard lock(mutex_);
  return gauges_;
}

}  // namespace headway::core
