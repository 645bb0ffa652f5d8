// One engine step with a long waiting queue: the simulated Llama-3.1-8B engine runs one request at
// a time (max_num_seqs = 1), each a 16-token prompt and one token out, so every step finishes one
// request and admits the next from the head of a queue of `waiting` requests (refilled by one per
// step, outside the timing). What the engine does per step besides the scheduler's and the model's
// work must not grow with the queue: an overloaded server's steps would slow down as its queue
// grows, and with them everything it serves.
#include <benchmark/benchmark.h>
#include <headway/core/cluster.h>
#include <headway/core/deployment_config.h>
#include <headway/core/engine.h>
#include <headway/core/plugin_registry.h>

#include <cstdint>
#include <string>

namespace {

using namespace headway::core;

NewRequest short_request(uint64_t id) {
  NewRequest r;
  r.id = id;
  r.prompt_tokens = 16;
  r.max_output_tokens = 1;
  return r;
}

void BM_EngineStepWithWaitingQueue(benchmark::State& state) {
  PluginRegistry registry;
  registry.add_search_directory(HEADWAY_PLUGIN_DIR);
  const DeploymentConfig deployment = parse_deployment(
      "[model]\nplugin = \"sim\"\noptions = { gpu = \"h100\", model = \"llama-3.1-8b\" }\n"
      "[[engines]]\nkv_blocks = 4096\nmax_model_len = 1024\nprefix_caching = false\nscheduler = { "
      "plugin = "
      "\"chunked\", options = { max_num_seqs = 1 } }\n",
      "engine_step_benchmark.toml", registry);
  Cluster cluster(deployment);
  Engine& engine = cluster.engine(0);
  uint64_t id = 0;
  for (int64_t i = 0; i < state.range(0); ++i) engine.add_request(short_request(++id));
  for (auto _ : state) {
    engine.step();
    state.PauseTiming();
    engine.add_request(short_request(++id));
    state.ResumeTiming();
  }
  state.counters["waiting"] = static_cast<double>(engine.load().waiting);
}
BENCHMARK(BM_EngineStepWithWaitingQueue)->Arg(100)->Arg(10000)->Arg(100000);

}  // namespace

BENCHMARK_MAIN();
