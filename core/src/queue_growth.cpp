#include "headway/core/queue_growth.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace headway::core {

std::optional<QueueGrowth> grown_queue(const std::vector<RequestRecord>& records) {
  double first = std::numeric_limits<double>::infinity();
  double last = -first;
  size_t admitted = 0;
  for (const RequestRecord& r : records) {
    if (std::isnan(r.arrival) || std::isnan(r.scheduled)) continue;  // refused, or never sent
    first = std::min(first, r.arrival);
    last = std::max(last, r.arrival);
    ++admitted;
  }
  if (admitted < kMinGrowthRequests || !(last > first)) return std::nullopt;
  const double quarter = first + (last - first) / 4;
  QueueGrowth growth;
  for (const RequestRecord& r : records) {
    if (std::isnan(r.arrival) || std::isnan(r.scheduled)) continue;
    if (r.arrival <= quarter && r.scheduled > quarter) ++growth.waiting_at_quarter;
    if (r.scheduled > last) ++growth.waiting_at_end;  // every one had arrived by the last
  }
  growth.end_backlog_s =
      static_cast<double>(growth.waiting_at_end) * (last - first) / static_cast<double>(admitted);
  if (growth.end_backlog_s < kGrownBacklogSeconds ||
      static_cast<double>(growth.waiting_at_end) <
          kGrownQueueFactor * static_cast<double>(growth.waiting_at_quarter)) {
    return std::nullopt;
  }
  return growth;
}

}  // namespace headway::core
