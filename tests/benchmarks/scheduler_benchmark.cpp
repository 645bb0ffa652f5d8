// Cost of one scheduler step at 1,000 running and 10,000 waiting requests, and the heap
// allocations it makes per step (goal: <= 20 us, 0 in steady state). Schedulers are called through
// the C ABI exactly as the engine calls them. mixed = 0: every running request decodes, every
// prompt is short; mixed = 1: one running request in ten is mid-prefill (half of those long) and
// one prompt in fifty is long, so that partial_prefill's prefill count, budget split and deferral
// of long prompts all run; priorities vary, so that its priority policy has to order both queues.
// mixed = 2: as 1, but the waiting requests' arrival times are not in queue order, which sends the
// priority policy to its comparison-sort path (queue_groups.h).
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

// One step of `plugin` with `options_text`, over generated queues (see the header comment).
void run_scheduler_step(benchmark::State& state, const char* plugin_name,
                        const std::string& options_text, uint32_t running, uint32_t waiting,
                        int shape) {
  const bool mixed = shape != 0;
  PluginRegistry registry;
  registry.add_search_directory(HEADWAY_PLUGIN_DIR);
  const LoadedPlugin& plugin = registry.find(plugin_name, HW_KIND_STEP_SCHEDULER);
  toml::table options = toml::parse(options_text);
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
                              shape == 2   ? 1.0 + ((i * 7919u) % waiting) * 1e-3
                              : shape == 1 ? 1.0 + i * 1e-3
                                           : 1.0,
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

// Args: running, waiting.
void BM_ChunkedSchedulerStep(benchmark::State& state) {
  run_scheduler_step(state, "chunked", "max_num_batched_tokens = 8192\nmax_num_seqs = 2048\n",
                     static_cast<uint32_t>(state.range(0)), static_cast<uint32_t>(state.range(1)),
                     0);
}
BENCHMARK(BM_ChunkedSchedulerStep)
    ->ArgNames({"running", "waiting"})
    ->Args({1000, 10000})
    ->Args({100, 100})
    ->Unit(benchmark::kMicrosecond);

// Args: running, waiting, P, policy (0 fcfs, 1 priority), mixed.
void BM_PartialPrefillSchedulerStep(benchmark::State& state) {
  const std::string options =
      "max_num_batched_tokens = 8192\nmax_num_seqs = 2048\n"
      "max_num_partial_prefills = " +
      std::to_string(state.range(2)) + "\nmax_long_partial_prefills = 1\npolicy = \"" +
      (state.range(3) != 0 ? "priority" : "fcfs") + "\"\n";
  run_scheduler_step(state, "partial_prefill", options, static_cast<uint32_t>(state.range(0)),
                     static_cast<uint32_t>(state.range(1)), static_cast<int>(state.range(4)));
}
BENCHMARK(BM_PartialPrefillSchedulerStep)
    ->ArgNames({"running", "waiting", "P", "priority", "mixed"})
    ->Args({1000, 10000, 4, 0, 0})
    ->Args({1000, 10000, 4, 0, 1})
    ->Args({1000, 10000, 4, 1, 0})
    ->Args({1000, 10000, 4, 1, 1})
    ->Args({1000, 10000, 4, 1, 2})
    ->Args({1000, 10000, 1, 0, 0})
    ->Args({100, 100, 4, 0, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
