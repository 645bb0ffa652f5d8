// The engine loop on the wall clock with the real CPU model: a small mixed workload (one long
// prompt, several short ones) runs to completion through `simulate`, and greedy tokens do not
// depend on the step scheduler (chunked vs partial_prefill split prompts differently).
#include <gtest/gtest.h>
#include <headway/core/deployment_config.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/request_record.h>
#include <headway/core/simulator.h>
#include <headway/core/workload.h>
#include <tiny_checkpoint.h>

#include <filesystem>
#include <string>

#include "../unit/test_support/built_plugins.h"

namespace headway::core {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir()
      : path(fs::temp_directory_path() / ("headway_real_clock_" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

PluginRegistry& registry() { return test::built_plugins(); }

// The two tests' checkpoint: 2 layers, hidden size 128, F32 weights.
void write_small_model(const fs::path& dir) {
  models::cpu::TinyModelSpec spec;
  spec.layers = 2;
  spec.hidden = 128;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.ffn = 256;
  spec.dtype = models::cpu::DType::kF32;
  models::cpu::write_tiny_checkpoint(spec, dir);
}

DeploymentConfig deployment(const fs::path& dir, const std::string& scheduler) {
  const std::string text = "[model]\nplugin = \"cpu\"\noptions = { path = \"" + dir.string() +
                           "\", threads = 1, kv_cache_gb = 0.05, max_model_len = 1024 }\n"
                           "[[engines]]\nmax_model_len = 1024\nscheduler = " +
                           scheduler + "\n";
  return parse_deployment(text, dir / "deploy.toml", registry());
}

Workload mixed_workload() {
  Workload w;
  w.source = "in-test";
  w.classes = {RequestClass{"short", false}, RequestClass{"long", true}};
  // A 400-token prompt first, then short prompts arriving while it prefills.
  w.requests.push_back(WorkloadRequest{0, 1, 0.0, 400, 6, 0});
  for (uint64_t i = 1; i <= 6; ++i) {
    w.requests.push_back(WorkloadRequest{i, 0, 0.002 * static_cast<double>(i),
                                         static_cast<uint32_t>(8 + 5 * i), 6, 0});
  }
  return w;
}

TEST(CpuModelOnTheWallClock, MixedWorkloadCompletesWithSchedulerIndependentTokens) {
  TempDir dir;
  write_small_model(dir.path);
  const Workload workload = mixed_workload();

  const SimulationResult chunked = simulate(
      deployment(dir.path, "{ plugin = \"chunked\", options = { max_num_batched_tokens = 64 } }"),
      workload);
  const SimulationResult partial = simulate(
      deployment(dir.path,
                 "{ plugin = \"partial_prefill\", options = { max_num_batched_tokens = 64, "
                 "max_num_partial_prefills = 4, long_prefill_token_threshold = 100 } }"),
      workload);

  for (const SimulationResult* run : {&chunked, &partial}) {
    EXPECT_EQ(run->rejected, 0u);
    ASSERT_EQ(run->records.size(), workload.requests.size());
    for (const RequestRecord& r : run->records) {
      EXPECT_TRUE(r.finished) << "request " << r.id;
      EXPECT_EQ(r.output_tokens, 6u) << "request " << r.id;
      EXPECT_EQ(r.token_ids.size(), 6u) << "request " << r.id;
      EXPECT_GE(r.first_token, r.arrival) << "request " << r.id;
      EXPECT_GE(r.finish, r.first_token) << "request " << r.id;
    }
    // The 400-token prompt needs at least 7 steps of 64 tokens.
    EXPECT_GE(run->steps, 7u);
  }
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    EXPECT_EQ(chunked.records[i].token_ids, partial.records[i].token_ids) << "request " << i;
  }
}

// A conversation that waits for answers on the wall clock: each later turn goes its gap after the
// turn before ended, carrying the ids the model generated, which the engine's prefix cache holds.
// Assertions are on the order of events and on counts, never on durations.
TEST(CpuModelOnTheWallClock, AConversationThatWaitsSendsEachTurnAfterTheModelsAnswer) {
  TempDir dir;
  write_small_model(dir.path);
  const Workload talks = parse_workload(R"(
seed = 2
[arrival]
process = "fixed"
times = [0, 0.01]
[[classes]]
name = "talk"
share = 1
prompt = { dist = "fixed", value = 40 }
output = { dist = "fixed", value = 9 }
conversation = { turns = 3, gap = 0.02, wait_for_answer = true }
)",
                                        dir.path / "talks.toml");
  ASSERT_EQ(talks.requests.size(), 6u);
  const SimulationResult run = simulate(
      deployment(dir.path, "{ plugin = \"chunked\", options = { max_num_batched_tokens = 64 } }"),
      talks);
  EXPECT_EQ(run.rejected, 0u);
  EXPECT_EQ(run.unsent_turns, 0u);
  for (size_t i = 0; i < talks.requests.size(); ++i) {
    const WorkloadRequest& r = talks.requests[i];
    const RequestRecord& record = run.records[i];
    ASSERT_TRUE(record.finished) << "request " << r.id;
    if (r.turn == 0) continue;
    size_t before = i;
    for (size_t j = 0; j < i; ++j) {
      if (talks.requests[j].conversation_id() == r.conversation_id() &&
          talks.requests[j].turn + 1 == r.turn) {
        before = j;
      }
    }
    ASSERT_LT(before, i);
    const RequestRecord& earlier = run.records[before];
    // (Up to rounding: the schedule adds the gap on the workload's clock, then shifts it back.)
    EXPECT_GE(record.arrival, earlier.finish + 0.02 - 1e-9) << "request " << r.id;
    // The previous prompt and answer but its last token, in whole blocks of 16: unless the blocks
    // were evicted, which 0.05 GB of KV for six short prompts does not do.
    EXPECT_EQ(record.cached_tokens, (earlier.prompt_tokens + earlier.output_tokens - 1) / 16 * 16)
        << "request " << r.id;
  }
}

}  // namespace
}  // namespace headway::core
