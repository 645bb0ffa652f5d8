// Measures the heap a scheduler keeps for requests that are gone. The ABI tells a scheduler nothing
// when a request finishes or is aborted: the request simply no longer appears in the snapshot. A
// plugin that keeps state per request id (an arrival time for aging, a class, a counter) must drop
// the ids that left, or its memory grows with every request the server has ever served, which the
// steady-state test (one snapshot replanned) cannot see.
//
// Threading: one thread.
#pragma once

#include <headway/conformance/suite.h>

#include <cstdint>
#include <string>

#include "../heap_growth.h"

namespace headway::conformance {

struct RequestChurn {
  HeapGrowth heap;  // over the measured calls; units: the requests that left the snapshots
  uint32_t running = 0;
  uint32_t waiting = 0;
  uint32_t calls = 0;
  std::string snapshot_write;  // what the first write into the snapshot changed (warm-up calls)
  uint32_t checked_calls = 0;  // calls watched for such writes
  std::string error;           // when the scheduler could not be created or failed
};

// Calls schedule() `warm_up_calls` + `calls` times on snapshots whose running and waiting queues
// each lose their oldest kRequestTurnover requests and gain as many new ones (new ids) every
// call; the heap is watched over the last `calls`.
inline constexpr uint32_t kRequestTurnover = 4;
RequestChurn measure_request_churn(const PluginUnderTest& scheduler, uint32_t warm_up_calls,
                                   uint32_t calls);

}  // namespace headway::conformance
