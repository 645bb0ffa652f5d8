// The periodic stats line of `headway serve` (vLLM's "Avg prompt throughput: ... tokens/s, Avg
// generation throughput: ..., Running: N reqs, Waiting: M reqs, GPU KV cache usage: X%"), which
// operators read in the log to see at a glance what a server is doing: one reading of the
// service's counters and load per interval, and a line for the difference between two readings.
//
// Threading: pure functions; take_stats_sample() calls the service's thread-safe getters.
#pragma once

#include <headway/serving/generation_service.h>

#include <string>

namespace headway::serving {

struct StatsSample {
  double seconds = 0.0;  // when it was read, on a monotonic clock
  ServiceTotals totals;
  uint32_t running = 0;  // over the engines
  uint32_t waiting = 0;
  uint64_t kv_blocks_used = 0;
  uint64_t kv_blocks_total = 0;
  // The engine whose KV cache is fullest, as a fraction: a sum over engines of different sizes
  // (a small decode process behind a large prefill one) hides a full one.
  double fullest_kv_fraction = 0.0;
  uint32_t fullest_kv_engine = 0;
  uint32_t engines_alive = 0;
  uint32_t engines_total = 0;
  double longest_step_seconds = 0.0;  // of the steps running now
  uint32_t longest_step_engine = 0;
};

// Reads `service` now (`seconds`: the caller's monotonic time).
StatsSample take_stats_sample(const GenerationService& service, double seconds);

// "prompt 812.4 tokens/s, generation 95.0 tokens/s, running 8, waiting 2, KV cache 41.3% used,
// prefix cache 83.1% hit, 2 preemptions". The prompt rate is of the tokens the engines' steps
// computed (a router process, which runs no steps, counts the prompts it admitted); the prefix
// cache figure is of the interval's lookups and shows only when there were some; preemptions
// only when there were some; "(engine 1 at 68.0%)" after the KV use when an engine's cache is
// fuller than the sum by 10 points or more; "engines 1 of 2 alive" only when some engine is down.
// Empty when the interval did nothing and nothing is running or waiting, so that an idle server
// stays quiet.
std::string stats_line(const StatsSample& before, const StatsSample& now);

}  // namespace headway::serving
