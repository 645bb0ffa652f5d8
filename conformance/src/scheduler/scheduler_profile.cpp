// step-scheduler-core: generated traces on a real engine over the simulated model, then a cost
// measurement. See docs/conformance.md for each test's rule.
#include <fmt/format.h>
#include <headway/conformance/child_process.h>
#include <headway/conformance/suite.h>
#include <headway/conformance/test_recorder.h>
#include <headway/core/clock.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>

#include <algorithm>
#include <barrier>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../call_waits.h"
#include "request_churn.h"
#include "step_cost.h"
#include "trace.h"
#include "trace_runner.h"

namespace headway::conformance {
namespace {

constexpr uint32_t kTraces = 40;             // five of each kind
constexpr uint32_t kDeterminismTraces = 12;  // the first ones, replayed
constexpr uint32_t kIndependenceTraces = 4;  // of those, each run again on two threads at once
// scheduler.deep_queue: a burst far past the engine's room (64 requests run at once).
constexpr uint32_t kDeepQueueRequests = 4000;
constexpr uint32_t kCostRunning = 1000;
constexpr uint32_t kCostCalls = 1000;        // timed, and watched for heap kept (steady_state_heap)
constexpr double kCostFailSeconds = 1e-3;    // far beyond any reasonable scheduler
constexpr double kCostWarnSeconds = 100e-6;  // a tenth of a millisecond: a quality floor
// scheduler.step_cost_tail warns when the p99 call is this many times the mean (and above the
// floor): calls on one snapshot should cost about the same.
constexpr double kTailWarnRatio = 10.0;
// ... and fails calls of this much CPU seen more than once: a rare stall (50 ms in one call of 200)
// hides under the 1% rule, and every running stream of the engine waits it out (CPU time: the
// machine's other work does not count; twice, so that one page fault under memory pressure or a
// sanitizer's shadow reset charged to the call does not fail a plugin).
constexpr double kCostStallSeconds = 10e-3;
// scheduler.per_request_heap: 8,000 running and 8,000 waiting requests leave the snapshots while
// the heap is watched, after 24,000 that warm the plugin's maps up to the size of the live set (and
// fill any bounded cache of fewer requests).
constexpr uint32_t kChurnWarmUpCalls = 3000;
constexpr uint32_t kChurnCalls = 2000;

// The first step at which two runs of one trace planned differently.
size_t first_difference(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  return k;
}

// A trace one instance planned the same way twice, and those plans.
struct PlannedTrace {
  const TraceSpec* trace = nullptr;
  std::vector<uint64_t> hashes;
};

// Runs two traces on two engines, each with its own instance of the scheduler, on two threads at
// once (as the engines of one deployment do, each with its own options: a prefill pool's budget
// beside a decode pool's). Empty when each planned step for step as it did alone, else what
// differed.
std::string run_beside_another(const PluginUnderTest& p, const core::PluginChoice& model,
                               const PlannedTrace& first, const PlannedTrace& second) {
  const PlannedTrace* runs[2] = {&first, &second};
  TraceOutcome outcomes[2];
  std::string errors[2];
  // In lockstep: both instances plan step k after the barrier of step k, so their calls overlap on
  // every step however the machine schedules the two threads. (Started together but free-running,
  // one thread could finish a short trace before the other began, and the shared state went unseen:
  // seen once in CI on two busy cores.) A run that ends, however, drops out of the barrier, so the
  // other goes on alone.
  std::barrier lockstep(2);
  const std::function<void()> in_step = [&lockstep] { lockstep.arrive_and_wait(); };
  const auto run = [&](int which) {
    try {
      outcomes[which] = run_trace(p, model, *runs[which]->trace, in_step);
    } catch (const std::exception& e) {
      errors[which] = e.what();
    } catch (...) {
      errors[which] = "an exception that is not a std::exception";
    }
    lockstep.arrive_and_drop();
  };
  std::thread other(run, 1);
  run(0);
  other.join();
  for (int which = 0; which < 2; ++which) {
    const TraceOutcome& out = outcomes[which];
    const TraceSpec& trace = *runs[which]->trace;
    const std::vector<uint64_t>& alone = runs[which]->hashes;
    if (!errors[which].empty()) return fmt::format("trace {}: {}", trace.name, errors[which]);
    if (!out.created) {
      return fmt::format("trace {}: beside another instance, an engine could not start: {}",
                         trace.name, out.create_error);
    }
    if (!out.invalid_plan.empty() || out.step_hashes != alone) {
      return fmt::format(
          "trace {}: beside another instance planning trace {} at once, it planned differently "
          "from step {} on (state shared between instances?){}",
          trace.name, runs[1 - which]->trace->name, first_difference(out.step_hashes, alone),
          out.invalid_plan.empty() ? "" : ": " + out.invalid_plan);
    }
  }
  return {};
}

// Compares the step hashes `json` (what `--replay scheduler-plans` printed) with `planned`, those
// of this process for the traces that planned the same way twice here (empty for the others): empty
// when all agree, else the first trace that differs and where.
std::string compare_with_other_process(const nlohmann::json& json,
                                       const std::vector<TraceSpec>& traces,
                                       const std::vector<std::vector<uint64_t>>& planned) try {
  const nlohmann::json& runs = json.at("traces");
  for (size_t i = 0; i < planned.size(); ++i) {
    if (planned[i].empty()) continue;
    if (i >= runs.size() || runs[i].at("name") != traces[i].name) {
      return fmt::format("the other process did not plan trace {} (a suite of another version?)",
                         traces[i].name);
    }
    const auto other = runs[i].at("hashes").get<std::vector<uint64_t>>();
    if (other != planned[i]) {
      return fmt::format(
          "trace {}: another process (this suite run again, with the same plugin, options and "
          "seed) planned differently from step {} on, where this one plans the same way each "
          "time: a plan that depends on the process (a seed from std::random_device, the clock "
          "or the pid, or an address) makes simulations of one deployment differ run to run",
          traces[i].name, first_difference(planned[i], other));
    }
  }
  return {};
} catch (const nlohmann::json::exception& e) {
  return fmt::format(
      "the other process printed plans of another shape (a suite of another version?): {}",
      e.what());
}

std::vector<TestResult> all_skipped(const std::string& reason) {
  std::vector<TestResult> results;
  for (const char* id :
       {"scheduler.create", "scheduler.plans_valid", "scheduler.all_finish",
        "scheduler.no_starvation", "scheduler.deterministic", "scheduler.same_across_processes",
        "scheduler.survives_aborts", "scheduler.survives_preemptions",
        "scheduler.independent_instances", "scheduler.honours_options", "scheduler.deep_queue",
        "scheduler.running_progress"}) {
    TestRecorder t(id, "");
    t.skip(reason);
    results.push_back(t.finish());
  }
  return results;
}

// The simulated model the traces run on. Throws core::Error when it cannot be found.
core::PluginChoice simulated_model(const PluginUnderTest& p) {
  core::PluginChoice model;
  model.plugin = &p.registry->find("sim", HW_KIND_MODEL);
  model.where = "conformance model (sim)";
  model.options = parse_options(*model.plugin->descriptor, "");
  return model;
}

}  // namespace

nlohmann::json scheduler_plan_hashes(const SuiteContext& context) {
  const core::PluginChoice model = simulated_model(context.plugin);
  const std::vector<TraceSpec> traces = generate_traces(context.options.seed, kTraces);
  nlohmann::json runs = nlohmann::json::array();
  for (uint32_t i = 0; i < kDeterminismTraces; ++i) {
    const TraceOutcome out = run_trace(context.plugin, model, traces[i]);
    // Replayed as the profile replays it, so that both processes have made the same calls before
    // each trace (a scheduler that shares state between instances fails another test, not this).
    (void)run_trace(context.plugin, model, traces[i]);
    runs.push_back({{"name", traces[i].name}, {"hashes", out.step_hashes}});
  }
  return {{"traces", std::move(runs)}};
}

std::vector<TestResult> run_step_scheduler_profile(const SuiteContext& context) {
  const PluginUnderTest& p = context.plugin;
  core::PluginChoice model;
  try {
    model = simulated_model(p);
  } catch (const core::Error& e) {
    return all_skipped(std::string("the simulated model plugin is needed to drive an engine: ") +
                       e.what());
  }

  try {
    // One instance up front, with the user's options alone (no default the suite adds) on a usual
    // engine shape: options it refuses are the command's usage error, not a FAIL of every trace.
    core::VirtualClock clock;
    core::HostServices host("conformance", &clock);
    const hw_engine_facts facts{sizeof(hw_engine_facts), 16, 4096, 4096, HW_ENGINE_ROLE_MIXED};
    core::SchedulerInstance preflight(p.choice(), facts, host);
  } catch (const core::Error& e) {
    throw_if_options_refused(p, e);
  }

  TestRecorder create("scheduler.create",
                      "creates with every generated engine shape and declares usable limits");
  TestRecorder valid("scheduler.plans_valid",
                     "every plan passes core::PlanValidator (budget, max seqs, KV room, slices)");
  TestRecorder finish("scheduler.all_finish", "every request of every trace finishes");
  TestRecorder starve("scheduler.no_starvation",
                      fmt::format("the waiting queue's head is admitted within {} steps that "
                                  "have room for all of it",
                                  kStarvationBound));
  TestRecorder progress("scheduler.running_progress",
                        fmt::format("no running request is left out of more than {} plans that "
                                    "had room for its next token since it was last planned",
                                    kStarvationBound));
  TestRecorder same("scheduler.deterministic", "the same trace gives the same plans, step by step");
  TestRecorder aborts("scheduler.survives_aborts",
                      "aborts of requests mid-prefill and waiting leave the engine consistent");
  TestRecorder preempt("scheduler.survives_preemptions",
                       "traces with KV pressure drain, with preemptions and recomputation");
  TestRecorder apart("scheduler.independent_instances",
                     "two instances planning different traces at once on two threads plan as "
                     "each does alone");
  TestRecorder across("scheduler.same_across_processes",
                      fmt::format("another process plans the first {} traces as this one does",
                                  kDeterminismTraces));
  TestRecorder honours("scheduler.honours_options",
                       "declared limits stay within the max_num_batched_tokens and max_num_seqs "
                       "options the instance was given");
  std::vector<PlannedTrace> alone;  // traces planned the same way twice
  // The first kDeterminismTraces traces' plans where they ran to their end the same way twice,
  // for scheduler.same_across_processes; empty for the others.
  std::vector<std::vector<uint64_t>> planned_twice(kDeterminismTraces);
  bool limits_checked = false;

  const std::vector<TraceSpec> traces = generate_traces(context.options.seed, kTraces);
  uint64_t steps = 0, preemptions = 0, aborted_mid_prefill = 0, completed = 0;
  uint64_t prefix_hit_tokens = 0, moved_requests = 0;
  uint32_t worst_wait = 0;
  for (size_t i = 0; i < traces.size(); ++i) {
    const TraceSpec& trace = traces[i];
    TraceOutcome out = run_trace(p, model, trace);
    if (!out.created) {
      create.fail(out.create_error);
      continue;
    }
    limits_checked |= out.limits_checked;
    if (!out.limits_beyond_options.empty()) honours.fail(out.limits_beyond_options);
    steps += out.steps;
    preemptions += out.preemptions;
    aborted_mid_prefill += out.aborted_mid_prefill;
    prefix_hit_tokens += out.prefix_hit_tokens;
    moved_requests += out.moved_requests;
    worst_wait = std::max(worst_wait, out.worst_free_wait);
    if (!out.invalid_plan.empty()) {
      valid.fail(out.invalid_plan);
      continue;  // the trace stopped there; its other checks mean nothing
    }
    ++completed;
    const bool is_abort = !trace.abort_steps.empty();
    const bool is_pressure = trace.name.starts_with("kv_pressure");
    if (!out.unfinished.empty()) {
      finish.fail(out.unfinished);
      if (is_abort) aborts.fail(out.unfinished);
      if (is_pressure) preempt.fail(out.unfinished);
    }
    if (!out.abort_error.empty()) aborts.fail(out.abort_error);
    if (!out.starvation.empty()) starve.fail(out.starvation);
    if (!out.running_starvation.empty()) progress.fail(out.running_starvation);
    if (i < kDeterminismTraces) {
      TraceOutcome again = run_trace(p, model, trace);
      if (again.step_hashes != out.step_hashes) {
        same.fail(fmt::format("trace {}: the replay planned differently from step {} on",
                              trace.name, first_difference(out.step_hashes, again.step_hashes)));
      } else {
        planned_twice[i] = out.step_hashes;
        if (alone.size() < kIndependenceTraces) {
          alone.push_back(PlannedTrace{&trace, std::move(out.step_hashes)});
        }
      }
    }
  }
  const size_t compared = static_cast<size_t>(std::count_if(
      planned_twice.begin(), planned_twice.end(), [](const auto& h) { return !h.empty(); }));
  if (compared == 0 && !context.suite_executable.empty()) {
    across.skip("no trace ran to its end the same way twice");
  } else if (const std::optional<nlohmann::json> other = replay_in_other_process(
                 context, "scheduler-plans", "plan the traces", {{"traces", compared}}, across)) {
    if (std::string problem = compare_with_other_process(*other, traces, planned_twice);
        !problem.empty()) {
      across.fail(problem);
    } else {
      across.note(fmt::format("{} {} planned alike", compared, compared == 1 ? "trace" : "traces"));
    }
  }
  // Only traces one instance plans the same way twice: a scheduler that is not deterministic
  // alone fails scheduler.deterministic, not this. Each beside the next (of another kind, so with
  // other options: a budget kept in a static shows).
  for (size_t k = 0; k < alone.size(); ++k) {
    const PlannedTrace& other = alone[(k + 1) % alone.size()];
    if (std::string problem = run_beside_another(p, model, alone[k], other); !problem.empty()) {
      apart.fail(problem);
    }
  }
  if (!limits_checked && !honours.failed()) {
    honours.not_supported(
        "no integer option max_num_batched_tokens or max_num_seqs given (the suite sets them "
        "where the plugin declares them): limits of its own");
  }

  TestRecorder deep(
      "scheduler.deep_queue",
      fmt::format("{} requests waiting at once: valid plans, all finish", kDeepQueueRequests));
  const TraceOutcome queued =
      run_trace(p, model, deep_queue_trace(context.options.seed, kDeepQueueRequests));
  if (!queued.created) {
    deep.fail(queued.create_error);
  } else if (!queued.invalid_plan.empty()) {
    deep.fail(queued.invalid_plan);
  } else if (!queued.unfinished.empty()) {
    deep.fail(queued.unfinished);
  } else {
    deep.note(fmt::format("{} steps", queued.steps));
  }
  apart.metrics() = {{"traces", alone.size()}};
  if (alone.empty() && !apart.failed()) {
    apart.skip("no trace ran to its end the same way twice");
  }
  for (TestRecorder* t : {&valid, &finish, &starve, &progress, &same, &aborts, &preempt}) {
    if (completed == 0 && !t->failed()) t->skip("no trace ran to its end");
  }
  valid.metrics() = {{"traces", traces.size()},
                     {"steps", steps},
                     {"prefix_hit_tokens", prefix_hit_tokens},
                     {"moved_requests", moved_requests}};
  finish.metrics() = {{"traces_completed", completed}};
  starve.metrics() = {{"bound_steps", kStarvationBound}, {"worst_wait_steps", worst_wait}};
  aborts.metrics() = {{"aborted_mid_prefill", aborted_mid_prefill}};
  preempt.metrics() = {{"preemptions", preemptions}};
  valid.note(fmt::format(
      "{} traces, {} steps; waiting requests with computed tokens: {} prompt tokens found in the "
      "prefix cache, {} requests arrived with moved KV",
      traces.size(), steps, prefix_hit_tokens, moved_requests));
  starve.note(
      fmt::format("worst wait with room: {} steps (bound {})", worst_wait, kStarvationBound));
  aborts.note(fmt::format("{} requests aborted mid-prefill", aborted_mid_prefill));
  preempt.note(preemptions == 0 ? "no preemption happened (the scheduler avoided KV pressure)"
                                : fmt::format("{} preemptions", preemptions));

  TestRecorder cost("scheduler.step_cost",
                    fmt::format("schedule() with {} requests running costs under {:.0f} us",
                                kCostRunning, kCostFailSeconds * 1e6));
  const StepCost measured = measure_step_cost(p, kCostRunning, kCostCalls);
  if (!measured.error.empty()) {
    cost.fail(measured.error);
  } else {
    const double us = measured.mean_seconds * 1e6;
    cost.metrics() = {{"mean_us", us}, {"running", measured.running}, {"calls", measured.calls}};
    const std::string text =
        fmt::format("mean {:.1f} us per step with {} running", us, measured.running);
    if (measured.mean_seconds > kCostFailSeconds) {
      cost.fail(text);
    } else if (measured.mean_seconds > kCostWarnSeconds) {
      cost.warn(text + fmt::format(" (above the {:.0f} us floor)", kCostWarnSeconds * 1e6));
    } else {
      cost.note(text);
    }
  }
  TestRecorder tail("scheduler.step_cost_tail",
                    fmt::format("at most 1% of those schedule() calls take over {:.0f} ms of CPU, "
                                "at most one over {:.0f} ms",
                                kCostFailSeconds * 1e3, kCostStallSeconds * 1e3));
  if (!measured.error.empty()) {
    tail.skip("the scheduler could not be measured (scheduler.step_cost says why)");
  } else {
    tail.metrics() = {{"cpu_p99_us", measured.cpu_p99_seconds * 1e6},
                      {"cpu_max_us", measured.cpu_max_seconds * 1e6},
                      {"calls_over_1ms", measured.calls_over_1ms_cpu},
                      {"calls_over_10ms", measured.calls_over_10ms_cpu},
                      {"calls", measured.calls}};
    const std::string text =
        fmt::format("CPU per call: p99 {:.1f} us, max {:.1f} us; {} of {} calls over {:.0f} ms",
                    measured.cpu_p99_seconds * 1e6, measured.cpu_max_seconds * 1e6,
                    measured.calls_over_1ms_cpu, measured.calls, kCostFailSeconds * 1e3);
    if (measured.calls_over_1ms_cpu * 100 > measured.calls) {
      // One step in a hundred or more holds every running stream back by over a millisecond.
      tail.fail(text);
    } else if (measured.calls_over_10ms_cpu >= 2) {
      tail.fail(text + fmt::format(" ({} calls over {:.0f} ms: stalls of every running stream)",
                                   measured.calls_over_10ms_cpu, kCostStallSeconds * 1e3));
    } else if (measured.cpu_p99_seconds > kCostWarnSeconds &&
               measured.cpu_p99_seconds > kTailWarnRatio * measured.mean_seconds) {
      tail.warn(text + fmt::format(" (a heavy tail: p99 above {:.0f}x the mean)", kTailWarnRatio));
    } else {
      tail.note(text);
    }
  }
  TestRecorder waits("scheduler.never_waits",
                     fmt::format("at most 1% of those schedule() calls wait over {:.0f} ms off the "
                                 "CPU (sleep, blocking I/O, a contended lock)",
                                 kCostFailSeconds * 1e3));
  if (!measured.error.empty()) {
    waits.skip("the scheduler could not be measured (scheduler.step_cost says why)");
  } else {
    // Every stream of the engine waits with the scheduler: the engine's thread runs the steps.
    judge_waits(waits, "scheduler", measured.calls, measured.voluntary_switches,
                measured.calls_waiting_over_1ms, measured.waited_max_seconds);
  }
  TestRecorder heap("scheduler.steady_state_heap",
                    "replanning one snapshot keeps no heap memory from call to call");
  if (!measured.error.empty()) {
    heap.skip("the scheduler could not be measured (scheduler.step_cost says why)");
  } else {
    judge_heap_growth(heap, measured.heap, kPerCallHeapBounds, "schedule() calls", "call");
  }
  TestRecorder kept("scheduler.per_request_heap",
                    "requests that came and went leave no heap memory behind in the scheduler");
  const RequestChurn churn = measure_request_churn(p, kChurnWarmUpCalls, kChurnCalls);
  if (!churn.error.empty()) {
    kept.fail(churn.error);
  } else {
    judge_heap_growth(kept, churn.heap, kPerRequestHeapBounds, "requests that came and went",
                      "request");
  }
  TestRecorder read_only("scheduler.snapshot_read_only",
                         "schedule() writes nothing into the snapshot it borrows");
  const uint32_t checked = measured.checked_calls + churn.checked_calls;
  read_only.metrics() = {{"calls_checked", checked}};
  if (!measured.snapshot_write.empty() || !churn.snapshot_write.empty()) {
    // The waiting queue a snapshot shows is the engine's own: a write reorders or corrupts it.
    read_only.fail(fmt::format(
        "schedule() changed the snapshot it borrowed read-only: {}",
        measured.snapshot_write.empty() ? churn.snapshot_write : measured.snapshot_write));
  } else if (checked == 0) {
    read_only.skip("the scheduler could not be measured (scheduler.step_cost says why)");
  } else {
    read_only.note(fmt::format("nothing written in {} calls", checked));
  }
  std::vector<TestResult> results;
  for (TestRecorder* t :
       {&create, &valid, &finish, &starve, &progress, &same, &across, &aborts, &preempt, &apart,
        &honours, &deep, &cost, &tail, &waits, &heap, &kept, &read_only}) {
    results.push_back(t->finish());
  }
  return results;
}

}  // namespace headway::conformance
