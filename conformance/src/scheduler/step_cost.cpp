#include "step_cost.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/percentiles.h>
#include <headway/core/plan_validator.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "measured_scheduler.h"

namespace headway::conformance {

namespace {

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double wall_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Nanoseconds the calling thread has spent ready to run but waiting for a CPU (the second field of
// /proc/thread-self/schedstat); 0 where the kernel does not say.
uint64_t run_queue_wait_ns() {
  std::FILE* file = std::fopen("/proc/thread-self/schedstat", "r");
  if (file == nullptr) return 0;
  unsigned long long on_cpu = 0, waiting = 0;
  const int read = std::fscanf(file, "%llu %llu", &on_cpu, &waiting);
  std::fclose(file);
  return read == 2 ? waiting : 0;
}

// Times the calling thread left the CPU: by its own doing (sleep, a blocking read, a contended
// lock: ru_nvcsw) and preempted by other work on the machine (ru_nivcsw), which is not the
// plugin's doing, so a busy machine does not make a scheduler look blocking.
struct ContextSwitches {
  uint64_t voluntary = 0;
  uint64_t involuntary = 0;
  bool operator==(const ContextSwitches&) const = default;
};

ContextSwitches context_switches() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return {static_cast<uint64_t>(usage.ru_nvcsw), static_cast<uint64_t>(usage.ru_nivcsw)};
}

}  // namespace

StepCost measure_step_cost(const PluginUnderTest& p, uint32_t running, uint32_t calls) {
  StepCost cost;
  constexpr uint32_t kBlockSize = MeasuredScheduler::kBlockSize;
  constexpr uint32_t kWaiting = 256;
  constexpr uint32_t kWarmUpCalls = 10;  // each watched for writes into the snapshot
  std::unique_ptr<MeasuredScheduler> scheduler;
  try {
    scheduler = std::make_unique<MeasuredScheduler>(p, running, kWaiting);
  } catch (const core::Error& e) {
    cost.error = e.what();
    return cost;
  }
  cost.running = std::min(running, scheduler->limits().max_num_seqs);
  cost.waiting = kWaiting;
  std::vector<hw_request_view> run(cost.running), wait(cost.waiting);
  uint32_t used = 0;
  for (uint32_t i = 0; i < cost.running; ++i) {
    hw_request_view& r = run[i];
    r.id = i + 1;
    r.state = HW_REQUEST_DECODING;
    r.prompt_tokens = 512 + (i % 7) * 64;
    r.output_tokens = 1 + i % 50;
    r.total_tokens = r.prompt_tokens + r.output_tokens;
    r.computed_tokens = r.total_tokens - 1;
    r.max_output_tokens = 256;
    r.blocks_held = (r.computed_tokens + kBlockSize - 1) / kBlockSize;
    r.admission_order = i;
    used += r.blocks_held;
  }
  for (uint32_t i = 0; i < cost.waiting; ++i) {
    hw_request_view& r = wait[i];
    r.id = 100000 + i;
    r.state = HW_REQUEST_WAITING;
    r.prompt_tokens = r.total_tokens = 256 + (i % 13) * 97;
    r.max_output_tokens = 128;
    r.arrival_time = 0.001 * i;
  }
  core::PlanValidator validator;
  auto call = [&](uint64_t step) { return scheduler->plan(step, run, wait, used); };
  try {
    // Warm-up calls, validated and watched for writes into the snapshot, are not timed.
    for (uint64_t i = 0; i < kWarmUpCalls; ++i) {
      std::string writes;
      const MeasuredScheduler::Step step = scheduler->plan(i, run, wait, used, &writes);
      cost.checked_calls = static_cast<uint32_t>(i + 1);
      if (!writes.empty() && cost.snapshot_write.empty()) {
        cost.snapshot_write = fmt::format("step {}: {}", i, writes);
      }
      if (auto broken = validator.validate(step.snapshot, step.plan, scheduler->limits())) {
        cost.error = "invalid plan: " + *broken;
        return cost;
      }
    }
    // Allocated before the heap is watched: the suite's own memory is not the plugin's.
    std::vector<double> cpu_seconds(std::max(calls, 1u));
    const HeapWatch heap;
    const auto begin = std::chrono::steady_clock::now();
    double cpu_before = thread_cpu_seconds();
    double wall_before = wall_seconds();
    ContextSwitches switches_before = context_switches();
    // Read only around calls that left the CPU (a file read per call would weigh on the mean).
    // Time ready for a CPU accrues only after the thread left it, so re-reading after every
    // such call, preempted or not, charges each call with its own delay and no earlier one's.
    uint64_t run_queue_before = run_queue_wait_ns();
    for (uint32_t i = 0; i < calls; ++i) {
      call(kWarmUpCalls + i);
      const double cpu_after = thread_cpu_seconds();
      const double wall_after = wall_seconds();
      const ContextSwitches switches_after = context_switches();
      cpu_seconds[i] = cpu_after - cpu_before;
      if (!(switches_after == switches_before)) {
        const uint64_t run_queue_after = run_queue_wait_ns();
        const double ready = 1e-9 * static_cast<double>(run_queue_after - run_queue_before);
        run_queue_before = run_queue_after;
        if (switches_after.voluntary != switches_before.voluntary) {
          // Off the CPU by its own doing: the time not spent computing was spent waiting, less
          // the time spent ready for a CPU again (a busy machine's delay, not the plugin's).
          const double waited = (wall_after - wall_before) - cpu_seconds[i] - ready;
          cost.voluntary_switches += switches_after.voluntary - switches_before.voluntary;
          cost.waited_max_seconds = std::max(cost.waited_max_seconds, waited);
          if (waited > 1e-3) ++cost.calls_waiting_over_1ms;
        }
      }
      if (switches_after == switches_before) {
        cpu_before = cpu_after;
        wall_before = wall_after;
        switches_before = switches_after;
      } else {  // taken after the file read, so that the next call is not charged with it
        cpu_before = thread_cpu_seconds();
        wall_before = wall_seconds();
        switches_before = context_switches();
      }
    }
    cost.mean_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() / calls;
    cost.heap = heap.stop(calls);
    cost.calls = calls;
    cost.calls_over_1ms_cpu = static_cast<uint32_t>(
        std::count_if(cpu_seconds.begin(), cpu_seconds.end(), [](double s) { return s > 1e-3; }));
    std::sort(cpu_seconds.begin(), cpu_seconds.end());
    cost.cpu_p99_seconds = core::percentile_sorted(cpu_seconds, 99);
    cost.cpu_max_seconds = cpu_seconds.back();
  } catch (const core::Error& e) {
    cost.error = e.what();
  }
  return cost;
}

}  // namespace headway::conformance
