// Replays a workload against a deployment on the virtual clock: the production engines, schedulers
// and router, driven by a discrete-event loop instead of threads. Each engine keeps its own clock;
// the loop always handles the earliest event next (an arrival, or the step of the engine whose
// clock is furthest behind), so an hour of traffic takes as long as its steps take to plan.
//
// Threading: single-threaded; the caller owns everything it passes.
#pragma once

#include <headway/core/deployment_config.h>
#include <headway/core/engine.h>
#include <headway/core/plugin_metrics_report.h>
#include <headway/core/request_record.h>
#include <headway/core/step_trace.h>
#include <headway/core/workload.h>

#include <string>
#include <vector>

namespace headway::core {

struct SimulationResult {
  std::vector<RequestRecord> records;  // one per workload request, in workload order
  std::vector<EngineCounters> engines;
  std::vector<uint32_t> kv_blocks_total;  // per engine
  std::vector<StepRecord> step_records;   // every step of every engine, in simulation order
  uint64_t steps = 0;
  uint64_t preemptions = 0;
  uint64_t rejected = 0;      // requests an engine refused (reason in the log)
  uint64_t kv_transfers = 0;  // disaggregated requests whose KV moved between engines
  // Conversation turns never sent: a turn before them got no answer (arrival_schedule.h). Their
  // records stay unfinished.
  uint64_t unsent_turns = 0;
  std::vector<PluginMetricReading> plugin_metrics;  // what the plugins counted (host services)
  double simulated_seconds = 0.0;  // first arrival to last event, on the run's clock
  double wall_seconds = 0.0;
};

struct SimulationOptions {
  StepTraceWriter* step_trace = nullptr;  // borrowed; may be null
  // Which run this is, when a command makes several of one deployment (" (the run without the
  // long classes)"): appended to the deployment's name in the run's warnings.
  std::string run_label;
  // A plugin call of the run (an engine's step, the router's route(), a KV transport's start or
  // poll) that has not returned after this many seconds of wall time is logged, and again each
  // time its age doubles (as serve's stats line names a long step). 0: not watched.
  double long_call_warning_seconds = 30.0;
  // Whether a run whose queue grew from its beginning to its end (grown_queue(), queue_growth.h)
  // is warned of; off for a capacity search's probes, which look for that on purpose.
  bool warn_of_grown_queue = true;
};

// With a model that reports step durations this runs on the virtual clock as fast as the steps can
// be planned; with a real model it releases arrivals on the wall clock and steps the engines in
// turn on this thread (results are then measurements). Prompts of models that read token ids are
// synthetic (deterministic per request id), and outputs run to the workload's lengths (EOS is
// ignored). Throws Error when an engine stops making progress with requests left.
SimulationResult simulate(const DeploymentConfig& deployment, const Workload& workload,
                          const SimulationOptions& options = {});

}  // namespace headway::core
