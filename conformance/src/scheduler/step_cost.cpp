#include "step_cost.h"

#include <fmt/format.h>
#include <headway/core/clock.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/percentiles.h>
#include <headway/core/plan_validator.h>
#include <headway/core/plugin_instances.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace headway::conformance {

namespace {

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

StepCost measure_step_cost(const PluginUnderTest& p, uint32_t running, uint32_t calls) {
  StepCost cost;
  constexpr uint32_t kBlockSize = 16;
  const hw_engine_facts facts{sizeof(hw_engine_facts), kBlockSize, 1u << 20, 8192,
                              HW_ENGINE_ROLE_MIXED};
  core::VirtualClock clock;
  core::HostServices host("conformance", &clock);
  std::unique_ptr<core::SchedulerInstance> scheduler;
  try {
    // Room for the running requests when the plugin has the usual knob and the user left it.
    const std::string defaults = p.has_option("max_num_seqs", HW_OPTION_INT)
                                     ? fmt::format("max_num_seqs = {}", running + 24)
                                     : std::string();
    scheduler = std::make_unique<core::SchedulerInstance>(p.choice_with(defaults), facts, host);
  } catch (const core::Error& e) {
    cost.error = e.what();
    return cost;
  }
  cost.running = std::min(running, scheduler->limits().max_num_seqs);
  cost.waiting = 256;
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
  std::vector<hw_slice> slices(run.size() + wait.size());
  std::vector<uint64_t> preempted(std::max<size_t>(run.size(), 1));
  core::PlanValidator validator;
  auto call = [&](uint64_t step) {
    hw_scheduler_snapshot snapshot{sizeof(hw_scheduler_snapshot),
                                   step,
                                   clock.now(),
                                   run.data(),
                                   cost.running,
                                   wait.data(),
                                   cost.waiting,
                                   facts.kv_blocks_total - used,
                                   facts.kv_blocks_total,
                                   kBlockSize,
                                   facts.max_model_len};
    hw_scheduler_plan plan{sizeof(hw_scheduler_plan),
                           slices.data(),
                           static_cast<uint32_t>(slices.size()),
                           0,
                           preempted.data(),
                           cost.running,
                           0};
    scheduler->schedule(snapshot, plan);
    return std::make_pair(snapshot, plan);
  };
  try {
    // Warm-up calls (and the one whose plan is validated) are not timed.
    for (uint64_t i = 0; i < 10; ++i) {
      auto [snapshot, plan] = call(i);
      if (auto broken = validator.validate(snapshot, plan, scheduler->limits())) {
        cost.error = "invalid plan: " + *broken;
        return cost;
      }
    }
    // Allocated before the heap is watched: the suite's own memory is not the plugin's.
    std::vector<double> cpu_seconds(std::max(calls, 1u));
    const HeapWatch heap;
    const auto begin = std::chrono::steady_clock::now();
    double cpu_before = thread_cpu_seconds();
    for (uint32_t i = 0; i < calls; ++i) {
      call(10 + i);
      const double cpu_after = thread_cpu_seconds();
      cpu_seconds[i] = cpu_after - cpu_before;
      cpu_before = cpu_after;
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
