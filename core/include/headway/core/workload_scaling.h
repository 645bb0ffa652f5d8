// Load changes of a workload that keep its requests: the same lengths, classes, ids and order,
// only the arrival times move. The capacity search (capacity_search.h) walks the load of one
// workload with these, so every probe differs from the others in the rate alone.
//
// Pure functions on values; thread-safe.
#pragma once

#include <cstddef>

#include "headway/core/workload.h"

namespace headway::core {

// Every arrival divided by `rate_factor` (> 0; arrivals count from the workload's start at 0), so
// every gap shrinks by that factor and the request rate is multiplied by it. Throws Error for a
// factor that is not finite and positive.
Workload with_rate_factor(const Workload& workload, double rate_factor);

// The first `count` requests in arrival order (all of them when count is 0 or larger than the
// workload). Used by --capacity-limit to search on a prefix of a long trace.
Workload first_requests(const Workload& workload, size_t count);

// Offered rate, requests/s: the gaps between arrivals (requests - 1) divided by the arrival span
// (last arrival - first arrival). 0 for fewer than two requests or a zero span.
double offered_rate(const Workload& workload);

}  // namespace headway::core
