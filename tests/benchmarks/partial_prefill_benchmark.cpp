// Cost of one step of the partial_prefill scheduler at 1,000 running and 10,000 waiting requests,
// and the heap allocations it makes per step (goal: <= 20 us, 0 in steady state). The scheduler is
// called through the C ABI exactly as the engine calls it. mixed = 0: the very queues of
// scheduler_benchmark.cpp's chunked case (all running requests decode, all prompts short);
// mixed = 1: one running request in ten is mid-prefill (half of those long) and one prompt in fifty
// is long, so that the prefill count, the budget split and the deferral of long prompts all run;
// priorities vary, so that the priority policy has to order both queues.
#include <benchmark/benchmark.h>
#include <headway/core/deployment_config.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_registry.h>
#include <toml++/toml.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace headway::core;

// Args: running, waiting, P, policy (0 fcfs, 1 priority), mixed (see above).
void BM_PartialPrefillSchedulerStep(benchmark::State& state) {
  const uint32_t running = static_cast<uint32_t>(state.range(0));
  const uint32_t waiting = static_cast<uint32_t>(state.range(1));
  const int64_t partial = state.range(2);
  const bool priority = state.range(3) != 0;
  const bool mixed = state.range(4) != 0;
  PluginRegistry registry;
  registry.add_search_directory(HEADWAY_PLUGIN_DIR);
  const LoadedPlugin& plugin = registry.find("partial_prefill", HW_KIND_STEP_SCHEDULER);
  const std::string text =
      "max_num_batched_tokens = 8192\nmax_num_seqs = 2048\n"
      "max_num_partial_prefills = " +
      std::to_string(partial) + "\nmax_long_partial_prefills = 1\npolicy = \"" +
      (priority ? "priority" : "fcfs") + "\"\n";
  toml::table options = toml::parse(text);
  PluginChoice choice{"benchmark", &plugin,
                      std::make_shared<const PluginOptions>(
                          PluginOptions::from_toml(*plugin.descriptor, &options, "benchmark"))};
  VirtualClock clock;
  HostServices host("benchmark", &clock);
  const uint32_t block_size = 16;
  hw_engine_facts facts{sizeof(hw_engine_facts), block_size, 1u << 22, 131072};
  SchedulerInstance scheduler(choice, facts, host);

  // Running: decoding requests with 512..2k tokens of context, one in ten mid-prefill (some long);
  // waiting: fresh prompts, one in fifty long (T is 4% of 131072 = 5242 tokens).
  std::vector<hw_request_view> run(running), wait(waiting);
  for (uint32_t i = 0; i < running; ++i) {
    uint32_t prompt = 512 + (i * 37) % 1536;
    uint32_t out = 1 + i % 200;
    run[i] = hw_request_view{i,
                             HW_REQUEST_DECODING,
                             mixed ? static_cast<int32_t>(i % 3) : 0,
                             prompt,
                             out,
                             prompt + out,
                             prompt + out - 1,
                             256,
                             (prompt + out + block_size - 1) / block_size,
                             0.0,
                             i,
                             0,
                             0};
    if (mixed && i % 10 == 5) {
      const uint32_t p = i % 20 == 5 ? 20000 : prompt;
      run[i] = hw_request_view{
          i, HW_REQUEST_PREFILLING, static_cast<int32_t>(i % 3), p, 0, p, 256, 256, 16, 0.0, i, 0,
          0};
    }
  }
  for (uint32_t i = 0; i < waiting; ++i) {
    uint32_t prompt = mixed && i % 50 == 0 ? 30000 : 64 + (i * 53) % 4096;
    wait[i] = hw_request_view{running + i,
                              HW_REQUEST_WAITING,
                              mixed ? static_cast<int32_t>(i % 5) : 0,
                              prompt,
                              0,
                              prompt,
                              0,
                              256,
                              0,
                              mixed ? 1.0 + i * 1e-3 : 1.0,
                              0,
                              0,
                              0};
  }
  std::vector<hw_slice> slices(running + waiting);
  std::vector<uint64_t> preempted(running);
  hw_scheduler_snapshot snapshot{sizeof(hw_scheduler_snapshot),
                                 0,
                                 1.0,
                                 run.data(),
                                 running,
                                 wait.data(),
                                 waiting,
                                 1u << 21,
                                 1u << 22,
                                 block_size,
                                 131072};
  hw_scheduler_plan plan{
      sizeof(hw_scheduler_plan), slices.data(), running + waiting, 0, preempted.data(), running, 0};
  scheduler.schedule(snapshot, plan);  // warm-up: scratch grows to the queues' sizes here
  const uint64_t allocations_before = g_allocations.load();
  for (auto _ : state) {
    scheduler.schedule(snapshot, plan);
    benchmark::DoNotOptimize(plan.slice_count);
  }
  state.counters["slices"] = plan.slice_count;
  state.counters["allocs_per_step"] =
      benchmark::Counter(static_cast<double>(g_allocations.load() - allocations_before) /
                         static_cast<double>(state.iterations()));
}
BENCHMARK(BM_PartialPrefillSchedulerStep)
    ->ArgNames({"running", "waiting", "P", "priority", "mixed"})
    ->Args({1000, 10000, 4, 0, 0})
    ->Args({1000, 10000, 4, 0, 1})
    ->Args({1000, 10000, 4, 1, 0})
    ->Args({1000, 10000, 4, 1, 1})
    ->Args({1000, 10000, 1, 0, 0})
    ->Args({100, 100, 4, 0, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
