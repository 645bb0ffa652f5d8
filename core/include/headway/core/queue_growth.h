// Whether a run's waiting queue grew from its beginning to its end: a deployment offered more than
// it serves. Its latency percentiles then grow with the run's length, not with the deployment, and
// comparing deployments there compares how long each was overloaded. `simulate` warns of it.
//
// Threading: pure functions of their arguments.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "headway/core/request_record.h"

namespace headway::core {

struct QueueGrowth {
  size_t waiting_at_quarter = 0;  // requests arrived and not yet admitted a quarter of the way in
  size_t waiting_at_end = 0;      // ... when the last request arrived
  double end_backlog_s = 0;       // waiting_at_end in seconds of arrivals at the run's mean rate
};

// The backlog of the requests admitted (a simulated run serves every request it does not refuse):
// how many had arrived and were not yet admitted into a step a quarter of the way through the
// arrivals and at the last arrival. A grown queue is one that at the last arrival holds at least
// kGrownBacklogSeconds of arrivals and kGrownQueueFactor times what it held a quarter of the way
// in; nothing otherwise, or with fewer than kMinGrowthRequests admitted requests.
inline constexpr double kGrownBacklogSeconds = 10.0;
inline constexpr double kGrownQueueFactor = 2.0;
inline constexpr size_t kMinGrowthRequests = 40;
std::optional<QueueGrowth> grown_queue(const std::vector<RequestRecord>& records);

}  // namespace headway::core
