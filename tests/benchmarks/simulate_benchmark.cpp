// Wall time of `simulate` on the 58-minute Azure conversation trace (19,366 requests) with
// Llama-3.3-70B TP4 on H100 and the baseline scheduler (configs/llama70b_h100_tp4_chunked.toml with
// configs/workloads/azure_conv_trace.toml).
#include <benchmark/benchmark.h>
#include <headway/core/deployment_config.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/simulator.h>
#include <headway/core/workload.h>

namespace {

using namespace headway::core;
const std::filesystem::path kSource(HEADWAY_SOURCE_DIR);

void BM_SimulateAzureConv70bTp4(benchmark::State& state) {
  PluginRegistry registry;
  registry.add_search_directory(HEADWAY_PLUGIN_DIR);
  DeploymentConfig config =
      load_deployment(kSource / "configs/llama70b_h100_tp4_chunked.toml", registry);
  Workload workload = load_workload(kSource / "configs/workloads/azure_conv_trace.toml");
  // Argument 0: simulate's long-call watch off, 1: on (its default), which stores atomics around
  // every step: its cost.
  SimulationOptions options;
  if (state.range(0) == 0) options.long_call_warning_seconds = 0;
  uint64_t steps = 0;
  for (auto _ : state) {
    SimulationResult result = simulate(config, workload, options);
    steps = result.steps;
    benchmark::DoNotOptimize(result.records.data());
  }
  state.counters["requests"] = static_cast<double>(workload.requests.size());
  state.counters["steps"] = static_cast<double>(steps);
}
BENCHMARK(BM_SimulateAzureConv70bTp4)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_LoadAzureConvTrace(benchmark::State& state) {
  for (auto _ : state) {
    Workload workload = load_workload(kSource / "configs/workloads/azure_conv_trace.toml");
    benchmark::DoNotOptimize(workload.requests.data());
  }
}
BENCHMARK(BM_LoadAzureConvTrace)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
