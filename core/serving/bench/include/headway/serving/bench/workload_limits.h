// --rate-scale, --num-requests and --duration of `headway bench` and `headway simulate`: the
// workload at a multiple of its rate, and a prefix of it, so that a long workload can be measured
// in part. The requests kept are the workload's own (same ids, lengths and classes; arrivals
// divided by the scale), so a prediction of the same prefix stays comparable.
//
// Pure; thread-safe.
#pragma once

#include <headway/core/workload.h>

#include <cstddef>

namespace headway::serving::bench {

// Every arrival divided by `rate_scale` (core::with_rate_factor; 1: as it is), then the requests
// arriving before `duration_s` (0: no limit), then the first `num_requests` of them (0: no limit).
// Throws core::Error naming the option when num_requests exceeds what the workload has, when
// no request is left, or when the requests kept arrive later than core::kMaxArrivalSeconds.
core::Workload limit_workload(const core::Workload& workload, size_t num_requests,
                              double duration_s, double rate_scale = 1);

}  // namespace headway::serving::bench
