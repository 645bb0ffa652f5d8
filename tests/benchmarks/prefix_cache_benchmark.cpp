// The prefix cache's per-block costs, which the engine pays on its thread: a lookup walks a
// waiting request's beginning block by block (a hash of block_size ids and an exact comparison),
// and a step records each block it filled (an insert; when the cache is full, an eviction first).
// Then what an engine step pays for waiting requests whose long beginnings are cached.
#include <benchmark/benchmark.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/engine.h>
#include <headway/core/host_services.h>
#include <headway/core/kv_block_manager.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/prefix_cache.h>
#include <headway/core/route_prefix.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <vector>

namespace {

using headway::core::KvBlockManager;
using headway::core::KvEventLog;
using headway::core::PrefixCache;

constexpr uint32_t kBlockSize = 16;
constexpr uint32_t kTotalBlocks = 65536;  // 1M tokens of KV

std::vector<int32_t> random_ids(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(count);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 128256);
  return ids;
}

// Records `tokens` as one chain in fresh blocks of `table`; returns the chain's links.
std::vector<PrefixCache::Link> record(KvBlockManager& kv, PrefixCache& cache,
                                      std::span<const int32_t> tokens,
                                      std::vector<uint32_t>& table) {
  const uint32_t blocks = static_cast<uint32_t>(tokens.size() / kBlockSize);
  kv.allocate(blocks, table);
  std::vector<PrefixCache::Link> links;
  PrefixCache::Link after = PrefixCache::kStart;
  for (uint32_t b = 0; b < blocks; ++b) {
    after = *cache.insert(after, tokens.subspan(b * kBlockSize, kBlockSize),
                          table[table.size() - blocks + b]);
    links.push_back(after);
  }
  return links;
}

// A waiting request whose whole beginning (argument: its blocks) is cached, looked up from the
// start: the engine's per-step work for such a request.
void BM_PrefixCacheMatch(benchmark::State& state) {
  const auto blocks = static_cast<uint32_t>(state.range(0));
  KvBlockManager kv(kTotalBlocks);
  PrefixCache cache(kv, kBlockSize);
  // Other chains fill most of the index, so that probes meet neighbours as in a full cache.
  std::vector<uint32_t> others;
  for (uint32_t seed = 1; kv.free() > 2 * blocks + 1024; ++seed) {
    record(kv, cache, random_ids(static_cast<size_t>(1024) * kBlockSize, seed), others);
  }
  const std::vector<int32_t> prompt = random_ids(static_cast<size_t>(blocks) * kBlockSize, 0);
  std::vector<uint32_t> table;
  record(kv, cache, prompt, table);
  const std::span<const int32_t> ids(prompt);
  for (auto _ : state) {
    PrefixCache::Link after = PrefixCache::kStart;
    uint32_t found = 0;
    for (uint32_t b = 0; b < blocks; ++b) {
      const uint32_t block = cache.find(after, ids.subspan(b * kBlockSize, kBlockSize));
      if (block == PrefixCache::kNoBlock) break;
      after = cache.link_of(block);
      ++found;
    }
    benchmark::DoNotOptimize(found);
  }
  state.SetItemsProcessed(state.iterations() * blocks);
  state.counters["index_entries"] = cache.entries();
}
BENCHMARK(BM_PrefixCacheMatch)->Arg(1)->Arg(64)->Arg(2048);

// A request that computes and records a chain of 64 blocks in a full cache, then ends: each block
// it takes evicts an idle one (and its index entry) and is recorded in turn. Arg 1: the cache also
// logs KV events (a router reads them, ABI 1.9), drained after each request as a route would.
void BM_PrefixCacheRecordWithEviction(benchmark::State& state) {
  constexpr uint32_t kChain = 64;
  KvBlockManager kv(kTotalBlocks);
  PrefixCache cache(kv, kBlockSize);
  KvEventLog log(4 * size_t{kTotalBlocks} + 64);
  std::vector<hw_kv_event> drained;
  drained.reserve(log.capacity());
  if (state.range(0) != 0) cache.report_to(&log);
  std::vector<uint32_t> table;
  uint32_t seed = 1;
  // Until no block is left that was never cached: every later allocation evicts.
  while (kv.free() - kv.idle_cached() >= kChain) {
    record(kv, cache, random_ids(kChain * kBlockSize, seed++), table);
    kv.release(table);
  }
  // A new first id each time makes every chain new (no duplicate of one still cached).
  std::vector<int32_t> prompt = random_ids(kChain * kBlockSize, 0);
  int32_t first = 0;
  for (auto _ : state) {
    prompt[0] = first++;
    record(kv, cache, prompt, table);
    kv.release(table);
    drained.clear();
    log.move_into(drained);
  }
  state.SetItemsProcessed(state.iterations() * kChain);
  state.counters["index_entries"] = cache.entries();
}
BENCHMARK(BM_PrefixCacheRecordWithEviction)->Arg(0)->Arg(1);

// An engine step (the simulated 8B model, chunked scheduler) while 64 requests wait, each behind
// a cached beginning of `state.range(0)` tokens, none of them admitted (two long decodes hold the
// only two running places): the engine looks each one's beginning up every step.
void BM_EngineStepWithCachedBeginningsWaiting(benchmark::State& state) {
  using namespace headway::core;
  const auto beginning = static_cast<uint32_t>(state.range(0));
  PluginRegistry registry;
  registry.add_search_directory(HEADWAY_PLUGIN_DIR);
  const DeploymentConfig deployment = parse_deployment(
      "name = \"bench\"\n[model]\nplugin = \"sim\"\n[[engines]]\nkv_blocks = 16384\n"
      "max_model_len = 65536\nscheduler = { plugin = \"chunked\", options = { "
      "max_num_batched_tokens = 8192, max_num_seqs = 2 } }\n",
      "prefix_cache_benchmark.toml", registry);
  Engine engine(deployment.engines.at(0), deployment);
  const std::vector<int32_t> shared = random_ids(beginning, 0);
  uint64_t id = 0;
  const auto request = [&](std::vector<int32_t> prompt, uint32_t outputs) {
    NewRequest r;
    r.id = ++id;
    r.prompt = std::move(prompt);
    r.max_output_tokens = outputs;
    return r;
  };
  // The beginning is computed once and cached; then two decodes take both running places.
  engine.add_request(request(shared, 1));
  while (engine.has_work()) engine.step();
  for (int i = 0; i < 2; ++i) engine.add_request(request(random_ids(16, 100 + i), 60000));
  engine.step();
  for (uint32_t i = 0; i < 64; ++i) {
    std::vector<int32_t> prompt = shared;
    const std::vector<int32_t> own = random_ids(64, 1000 + i);
    prompt.insert(prompt.end(), own.begin(), own.end());
    engine.add_request(request(std::move(prompt), 16));
  }
  engine.step();
  for (auto _ : state) engine.step();
  state.counters["waiting"] = static_cast<double>(engine.waiting_size());
  state.counters["running"] = static_cast<double>(engine.running_size());
}
// A decode step of 128 running requests, each with a 2k-token prompt of its own (128 blocks, all
// recorded in the cache), with the cache on (argument 1) and off (0): what the running requests'
// views cost when the engine counts each one's shared blocks every step.
void BM_EngineDecodeStepOverRecordedPrompts(benchmark::State& state) {
  using namespace headway::core;
  const bool caching = state.range(0) != 0;
  PluginRegistry registry;
  registry.add_search_directory(HEADWAY_PLUGIN_DIR);
  const DeploymentConfig deployment = parse_deployment(
      std::string("name = \"bench\"\n[model]\nplugin = \"sim\"\n[[engines]]\n"
                  "max_model_len = 16384\nprefix_caching = ") +
          (caching ? "true" : "false") +
          "\nscheduler = { plugin = \"chunked\", options = { max_num_batched_tokens = 65536, "
          "max_num_seqs = 128 } }\n",
      "prefix_cache_benchmark.toml", registry);
  Engine engine(deployment.engines.at(0), deployment);
  for (uint32_t i = 0; i < 128; ++i) {
    NewRequest r;
    r.id = i + 1;
    r.prompt = random_ids(2048, 5000 + i);
    r.max_output_tokens = 2000;
    engine.add_request(std::move(r));
  }
  while (engine.waiting_size() > 0 || engine.last_step().prefill_tokens > 0) engine.step();
  for (auto _ : state) engine.step();
  state.counters["running"] = static_cast<double>(engine.running_size());
  state.counters["decode_tokens"] = static_cast<double>(engine.last_step().decode_tokens);
}
BENCHMARK(BM_EngineDecodeStepOverRecordedPrompts)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(1000);

BENCHMARK(BM_EngineStepWithCachedBeginningsWaiting)
    ->Arg(1024)
    ->Arg(32768)
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(2000);

// What a router that reads how prompts begin costs per request (ABI 1.8): the host hashing a
// prompt of `state.range(0)` tokens (before the service's lock), ...
void BM_RoutePrefixHashes(benchmark::State& state) {
  const std::vector<int32_t> prompt = random_ids(static_cast<size_t>(state.range(0)), 7);
  std::vector<uint64_t> hashes;
  for (auto _ : state) {
    headway::core::route_prefix_hashes(prompt, hashes);
    benchmark::DoNotOptimize(hashes.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_RoutePrefixHashes)->Arg(1024)->Arg(32768)->Arg(131072);

// ... and prefix_aware's route() (under the lock) for such a prompt, whose whole beginning one of
// four engines is believed to hold: a match on each engine and the beginning recorded again.
void BM_PrefixAwareRoute(benchmark::State& state) {
  using namespace headway::core;
  PluginRegistry registry;
  const LoadedPlugin& plugin = registry.load_path(std::filesystem::path(HEADWAY_PLUGIN_DIR) /
                                                  "headway_router_prefix_aware.so");
  PluginChoice choice;
  choice.where = "bench: router";
  choice.plugin = &plugin;
  choice.options = std::make_shared<const PluginOptions>(
      PluginOptions::from_toml(*plugin.descriptor, nullptr, "bench: router.options"));
  std::vector<hw_engine_load> engines(4);
  for (uint32_t e = 0; e < 4; ++e) {
    engines[e].engine_index = e;
    engines[e].alive = 1;
    engines[e].kv_blocks_total = kTotalBlocks;
    engines[e].kv_blocks_free = kTotalBlocks;
    engines[e].block_size = kBlockSize;
  }
  VirtualClock clock;
  HostServices host("router", &clock);
  RouterInstance router(choice, engines, host);
  std::vector<uint64_t> hashes;
  route_prefix_hashes(random_ids(static_cast<size_t>(state.range(0)), 9), hashes);
  const auto prompt_tokens = static_cast<uint32_t>(state.range(0));
  hw_route_request request{1, prompt_tokens, 16, 0, hw_str{"bench", 5}};
  benchmark::DoNotOptimize(router.route(request, engines, hashes));  // held from here on
  for (auto _ : state) {
    ++request.id;
    benchmark::DoNotOptimize(router.route(request, engines, hashes));
  }
  state.counters["pieces"] = static_cast<double>(hashes.size());
}
BENCHMARK(BM_PrefixAwareRoute)->Arg(1024)->Arg(32768)->Arg(131072)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
