// --num-requests and --duration of `headway bench`: a prefix of a workload, so that a long
// workload can be measured in part. The requests kept are the workload's own (same ids, lengths,
// classes and arrivals), so a prediction of the same prefix stays comparable.
//
// Pure; thread-safe.
#pragma once

#include <headway/core/workload.h>

#include <cstddef>

namespace headway::serving::bench {

// The requests arriving before `duration_s` (0: no limit), then the first `num_requests` of them
// (0: no limit). Throws core::Error naming the option when num_requests exceeds what the workload
// has, or when no request is left.
core::Workload limit_workload(const core::Workload& workload, size_t num_requests,
                              double duration_s);

}  // namespace headway::serving::bench
