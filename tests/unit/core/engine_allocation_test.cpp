// Heap allocations of core::Engine::step() in steady state: every request decoding, none arriving,
// finishing or preempted. The step loop (the scheduler's plan, its validation, KV bookkeeping, the
// forward pass, sampling, the listener) is a hot path that must allocate nothing then
// (../shared/DESIGN.md); an allocation there costs every step of every request, and a container
// that grows without bound shows up here as allocations that never stop.
//
// Counted by replacing the global operator new, which is why these tests have a binary of their
// own. The count is exact, not a timing: a test fails on the first allocation a change brings in.
#include <gtest/gtest.h>
#include <tiny_checkpoint.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "../test_support/built_plugins.h"
#include "../test_support/tiny_checkpoint_dir.h"
#include "headway/core/deployment_config.h"
#include "headway/core/engine.h"
#include "headway/core/request_record.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

// The whole family, so that every form is counted and each delete matches its new (under ASan a
// form left out would come from libasan, and its delete here would be a mismatch).
namespace {
void* counted_allocation(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* counted_aligned_allocation(std::size_t size, std::align_val_t alignment) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t a = static_cast<std::size_t>(alignment);
  return std::aligned_alloc(a, (std::max<std::size_t>(size, 1) + a - 1) / a * a);
}
}  // namespace

void* operator new(std::size_t size) {
  if (void* p = counted_allocation(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (void* p = counted_allocation(size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return counted_allocation(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return counted_allocation(size);
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  if (void* p = counted_aligned_allocation(size, alignment)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  if (void* p = counted_aligned_allocation(size, alignment)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace headway::core {
namespace {

// Takes every token and finish, as a serving driver's listener does, without allocating.
class CountingListener : public EngineListener {
 public:
  void on_token(uint64_t, int32_t, double, const SampledLogprobs*) override { ++tokens; }
  void on_finished(uint64_t, FinishReason, double) override { ++finished; }
  uint64_t tokens = 0;
  uint64_t finished = 0;
};

struct SteadyState {
  std::string model_table;       // [model] of the deployment
  std::string scheduler;         // the engine's scheduler table
  uint32_t requests = 64;        // decoding together
  uint32_t warm_up_steps = 200;  // every prompt computed, every container at its size
  uint32_t counted_steps = 500;
};

// Allocations in `counted_steps` steps after `warm_up_steps`, with `requests` requests of
// 10..10+requests prompt tokens (ids, so that prefix caching hashes them) that never finish in
// that time. Fails the test if a request finished or was preempted: then it was not steady.
uint64_t allocations_in_steady_decode(const SteadyState& s) {
  const std::string toml = "name = \"steady\"\n" + s.model_table +
                           "\n[[engines]]\nkv_blocks = 6000\nmax_model_len = 4096\n"
                           "prefix_caching = true\nscheduler = " +
                           s.scheduler + "\n";
  DeploymentConfig config = parse_deployment(toml, "steady.toml", test::built_plugins());
  Engine engine(config.engines[0], config);
  CountingListener listener;
  engine.set_listener(&listener);
  const uint32_t steps = s.warm_up_steps + s.counted_steps;
  std::vector<RequestRecord> records(s.requests);
  for (uint32_t i = 0; i < s.requests; ++i) {
    NewRequest r;
    r.id = i + 1;
    r.prompt_tokens = 10 + i;
    for (uint32_t t = 0; t < r.prompt_tokens; ++t)
      r.prompt.push_back(static_cast<int32_t>((7 * t + i) % 256));
    r.max_output_tokens = steps + 10;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = i;
    r.sampling.ignore_eos = true;
    r.record = &records[i];
    engine.add_request(std::move(r));
  }
  for (uint32_t i = 0; i < s.warm_up_steps; ++i) EXPECT_TRUE(engine.step());
  EXPECT_EQ(engine.running_size(), s.requests) << "not every request is running after the warm-up";
  const uint64_t preemptions = engine.counters().preemptions;
  const uint64_t tokens_before = listener.tokens;
  const uint64_t before = g_allocations.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < s.counted_steps; ++i) engine.step();
  const uint64_t allocations = g_allocations.load(std::memory_order_relaxed) - before;
  EXPECT_EQ(listener.tokens - tokens_before, uint64_t{s.requests} * s.counted_steps)
      << "not every step decoded every request";
  EXPECT_EQ(listener.finished, 0u) << "a request finished: not a steady state";
  EXPECT_EQ(engine.counters().preemptions, preemptions) << "a request was preempted";
  EXPECT_EQ(engine.running_size(), s.requests);
  return allocations;
}

constexpr const char* kSimModel = "[model]\nplugin = \"sim\"";

TEST(EngineAllocation, DecodeStepsOfTheSimModelAllocateNothing) {
  EXPECT_EQ(allocations_in_steady_decode({kSimModel, "{ plugin = \"chunked\" }"}), 0u);
}

TEST(EngineAllocation, DecodeStepsUnderPartialPrefillsAllocateNothing) {
  EXPECT_EQ(allocations_in_steady_decode({kSimModel, "{ plugin = \"partial_prefill\" }"}), 0u);
}

// Headway's own forward pass of the cpu model (the tests' tiny shape), on two OpenMP threads (whose
// allocations count as well): F16 weights and fewer rows than models::cpu::Linear::kGemmRows (16),
// so that every projection runs Headway's GEMV. With more rows, or F32 weights, the projections go
// through oneDNN's sgemm, which allocates its packing buffers inside the library
// (docs/cpu_model.md).
TEST(EngineAllocation, DecodeStepsOfTheCpuModelAllocateNothing) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("headway_allocation_" + std::to_string(::getpid()));
  models::cpu::TinyModelSpec spec = test::tiny_test_spec();
  spec.max_position_embeddings = 4096;
  spec.dtype = models::cpu::DType::kF16;
  models::cpu::write_tiny_checkpoint(spec, dir);
  const std::string model =
      "[model]\nplugin = \"cpu\"\noptions = { path = \"" + dir.string() + "\", threads = 2 }";
  const uint64_t allocations =
      allocations_in_steady_decode({model, "{ plugin = \"chunked\" }", 8, 50, 200});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(allocations, 0u);
}

}  // namespace
}  // namespace headway::core
