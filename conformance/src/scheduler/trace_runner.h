// Drives one step-scheduler plugin through one generated trace on a real core::Engine over the
// simulated model, so that every plan goes through core::PlanValidator exactly as in production,
// and checks the suite's invariants as it goes.
//
// The runner mirrors the engine's queues (waiting order, computed tokens, blocks) from what each
// step did, to judge starvation: see docs/conformance.md for the rule and its bound.
//
// Threading: run_trace() builds its own engine and scheduler instance on the calling thread, so
// several threads may run traces at once (scheduler.independent_instances does).
#pragma once

#include <headway/conformance/suite.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trace.h"

namespace headway::conformance {

// Steps a request may stay at the head of the waiting queue, not admitted, while the step had room
// for all of it (see docs/conformance.md, "budget free").
inline constexpr uint32_t kStarvationBound = 16;
// Steps after which a trace that has not drained counts as never finishing.
inline constexpr uint64_t kMaxStepsPerTrace = 100000;

struct TraceOutcome {
  bool created = false;
  std::string create_error;
  std::string invalid_plan;  // first engine error (invalid plan or scheduler failure), if any
  std::string unfinished;    // why not every request finished, if so
  std::string starvation;    // first starvation beyond the bound, if any
  // First running request passed over by more than max(kStarvationBound, running) plans since it
  // was last planned, each decoding a request admitted after it with room for its next token.
  std::string running_starvation;
  std::string abort_error;  // an abort the engine did not accept, if any
  // Declared limits above a max_num_batched_tokens or max_num_seqs option the suite or --options
  // gave the instance, if so; `limits_checked` when it was given either.
  std::string limits_beyond_options;
  bool limits_checked = false;
  uint64_t steps = 0;
  uint64_t preemptions = 0;
  uint64_t aborted_mid_prefill = 0;
  uint64_t aborted = 0;
  uint64_t finished = 0;
  uint64_t prefix_hit_tokens = 0;     // prompt tokens admitted as found in the prefix cache
  uint64_t moved_requests = 0;        // requests that arrived with their KV moved here
  uint32_t worst_free_wait = 0;       // most steps any head request waited with room for it
  std::vector<uint64_t> step_hashes;  // one per step: slices and preemptions
};

// Runs `trace` with the plugin under test as the engine's scheduler and `model` as its model.
// `before_step`, when given, is called before every engine step (scheduler.independent_instances
// keeps two runs in lockstep with it).
TraceOutcome run_trace(const PluginUnderTest& scheduler, const core::PluginChoice& model,
                       const TraceSpec& trace, const std::function<void()>& before_step = {});

}  // namespace headway::conformance
