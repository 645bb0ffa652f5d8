// Measures what one schedule() call costs with many requests running: the scheduler runs on the
// engine's thread before every forward pass, so its cost adds to every step.
//
// Threading: one thread.
#pragma once

#include <headway/conformance/suite.h>

#include <string>

#include "../heap_growth.h"

namespace headway::conformance {

struct StepCost {
  double mean_seconds = 0.0;
  // The tail of the same calls: a scheduler that is cheap on average but now and then spends
  // milliseconds (a periodic re-sort, a rebuild) stalls every stream on those steps. In CPU time
  // of the calling thread, so that other work on the machine (a parallel test run preempting this
  // thread for a few ms) does not count; a plugin that sleeps or blocks is seen below.
  double cpu_p99_seconds = 0.0;
  double cpu_max_seconds = 0.0;
  uint32_t calls_over_1ms_cpu = 0;
  uint32_t calls_over_10ms_cpu = 0;
  // Waiting inside the same calls, which CPU time does not see: calls during which the thread gave
  // up the CPU itself (getrusage's voluntary context switches: a sleep, blocking I/O, a contended
  // lock), and how long such calls spent off the CPU (wall time less CPU time).
  uint64_t voluntary_switches = 0;
  uint32_t calls_waiting_over_1ms = 0;
  double waited_max_seconds = 0.0;
  uint32_t running = 0;
  uint32_t waiting = 0;
  uint32_t calls = 0;
  HeapGrowth heap;  // over the timed calls, which replan one snapshot and should keep nothing
  std::string snapshot_write;  // what the first write into the snapshot changed (warm-up calls)
  uint32_t checked_calls = 0;  // calls watched for such writes
  std::string error;           // when the scheduler failed or planned an invalid step
};

// Calls schedule() repeatedly on one snapshot of `running` decoding requests and a waiting queue.
StepCost measure_step_cost(const PluginUnderTest& scheduler, uint32_t running, uint32_t calls);

}  // namespace headway::conformance
