#include "step_cost.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/percentiles.h>
#include <headway/core/plan_validator.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "../call_waits.h"
#include "measured_scheduler.h"

namespace headway::conformance {

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
    CallWaits waits;
    for (uint32_t i = 0; i < calls; ++i) {
      call(kWarmUpCalls + i);
      cpu_seconds[i] = waits.call_ended();
    }
    cost.voluntary_switches = waits.voluntary_switches();
    cost.waited_max_seconds = waits.waited_max_seconds();
    cost.calls_waiting_over_1ms = waits.calls_waiting_over_1ms();
    cost.mean_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() / calls;
    cost.heap = heap.stop(calls);
    cost.calls = calls;
    cost.calls_over_1ms_cpu = static_cast<uint32_t>(
        std::count_if(cpu_seconds.begin(), cpu_seconds.end(), [](double s) { return s > 1e-3; }));
    cost.calls_over_10ms_cpu = static_cast<uint32_t>(
        std::count_if(cpu_seconds.begin(), cpu_seconds.end(), [](double s) { return s > 10e-3; }));
    std::sort(cpu_seconds.begin(), cpu_seconds.end());
    cost.cpu_p99_seconds = core::percentile_sorted(cpu_seconds, 99);
    cost.cpu_max_seconds = cpu_seconds.back();
  } catch (const core::Error& e) {
    cost.error = e.what();
  }
  return cost;
}

}  // namespace headway::conformance
