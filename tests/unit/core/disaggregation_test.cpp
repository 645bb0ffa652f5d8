// Prefill/decode disaggregation and length routing end to end, with the real plugins: the sim model
// (Llama-3.1-8B on an H100), the chunked scheduler, the disaggregated and length routers and the
// host_copy KV transport (simulated transfers over its pcie5 preset: 10 us + bytes / 51.2 GB/s).
//
// core::simulate runs the workloads; its step trace (one JSON line per step, naming the engine
// and each slice's request, start and kind) shows which engine computed which positions of which
// request. core::Cluster is also driven directly, step by step, to watch KV transfers wait for
// room on a decode engine (backpressure) and to check that every KV block is free at the end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/cluster.h>
#include <headway/core/deployment_config.h>
#include <headway/core/engine.h>
#include <headway/core/error.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/request_record.h>
#include <headway/core/simulator.h>
#include <headway/core/step_trace.h>
#include <headway/core/workload.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../test_support/built_plugins.h"

namespace headway::core {
namespace {

using ::testing::HasSubstr;

PluginRegistry& registry() { return test::built_plugins(); }

constexpr uint32_t kBlock = 16;
// Llama-3.1-8B: 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes = 131,072 bytes per token.
constexpr double kKvBytesPerToken = 131072.0;
// host_copy's pcie5 preset: 64 GB/s at the default 80 % efficiency, 10 us per transfer.
constexpr double kPcie5BytesPerSecond = 64e9 * 0.8;
constexpr double kPcie5Latency = 10e-6;

uint32_t blocks_for(uint64_t tokens) {
  return static_cast<uint32_t>((tokens + kBlock - 1) / kBlock);
}

// The modelled duration of moving a prefilled prompt's KV: its computed positions (the prompt; the
// first token's KV is computed on the decode engine) in whole blocks.
double pcie5_transfer_seconds(uint32_t prompt) {
  return kPcie5Latency + blocks_for(prompt) * kBlock * kKvBytesPerToken / kPcie5BytesPerSecond;
}

struct PdSpec {
  int64_t local_prefill_max_tokens = 0;
  bool local_prefill_where_cached = false;
  uint32_t prefill_kv_blocks = 4096;
  uint32_t prefill_max_model_len = 16384;
  uint32_t decode_kv_blocks = 4096;
  uint32_t decode_max_model_len = 16384;
  std::string decode_moved_kv_blocks = "all";
  uint32_t budget = 2048;
  uint32_t decode_budget = 0;  // 0: budget
  uint32_t max_num_seqs = 64;
  std::string kv_transport = "plugin = \"host_copy\"\noptions = { link = \"pcie5\" }\n";
};

// Engine 0: prefill; engine 1: decode.
std::string pd_toml(const PdSpec& s) {
  const auto scheduler_of = [&](uint32_t budget) {
    return "scheduler = { plugin = \"chunked\", options = { max_num_batched_tokens = " +
           std::to_string(budget) + ", max_num_seqs = " + std::to_string(s.max_num_seqs) + " } }\n";
  };
  const std::string scheduler = scheduler_of(s.budget);
  const std::string decode_scheduler =
      scheduler_of(s.decode_budget != 0 ? s.decode_budget : s.budget);
  return "name = \"pd-test\"\n"
         "[model]\n"
         "plugin = \"sim\"\n"
         "options = { gpu = \"h100\", model = \"llama-3.1-8b\" }\n"
         "[[engines]]\n"
         "role = \"prefill\"\n"
         "kv_blocks = " +
         std::to_string(s.prefill_kv_blocks) +
         "\nmax_model_len = " + std::to_string(s.prefill_max_model_len) + "\n" + scheduler +
         "[[engines]]\n"
         "role = \"decode\"\n"
         "kv_blocks = " +
         std::to_string(s.decode_kv_blocks) +
         "\nmax_model_len = " + std::to_string(s.decode_max_model_len) + "\nmoved_kv_blocks = \"" +
         s.decode_moved_kv_blocks + "\"\n" + decode_scheduler +
         "[router]\n"
         "plugin = \"disaggregated\"\n"
         "options = { local_prefill_max_tokens = " +
         std::to_string(s.local_prefill_max_tokens) +
         (s.local_prefill_where_cached ? ", local_prefill_where_cached = true" : "") +
         " }\n"
         "[kv_transport]\n" +
         s.kv_transport;
}

DeploymentConfig pd_deployment(const PdSpec& spec) {
  return parse_deployment(pd_toml(spec), "pd_test.toml", registry());
}

// A decode engine of 40 blocks (640 tokens) and max_model_len 640 on both engines, its moved
// requests reserving `moved_kv_blocks`.
PdSpec forty_block_decode_engine(const std::string& moved_kv_blocks) {
  PdSpec spec;
  spec.decode_kv_blocks = 40;
  spec.decode_max_model_len = 640;
  spec.prefill_max_model_len = 640;
  spec.decode_moved_kv_blocks = moved_kv_blocks;
  return spec;
}

// A prefill engine of `prefill_blocks` KV blocks holding `prefill_len` tokens, and a decode engine
// of `decode_blocks` holding `decode_len`.
PdSpec sized_engines(uint32_t prefill_blocks, uint32_t prefill_len, uint32_t decode_blocks,
                     uint32_t decode_len) {
  PdSpec spec;
  spec.prefill_kv_blocks = prefill_blocks;
  spec.prefill_max_model_len = prefill_len;
  spec.decode_kv_blocks = decode_blocks;
  spec.decode_max_model_len = decode_len;
  return spec;
}

struct Req {
  double arrival;
  uint32_t prompt;
  uint32_t output;
  uint32_t max_tokens = 0;  // what the client asks for; 0: the output exactly
};

// A workload written out request by request: ids 0..n-1 in arrival order; class "long" for prompts
// over 2048 tokens, "short" otherwise (labels only).
Workload workload_of(const std::vector<Req>& requests) {
  Workload w;
  w.source = "<test>";
  w.classes = {RequestClass{"short", false, 0, 0.5, 0.0}, RequestClass{"long", true, 0, 0.5, 0.0}};
  for (size_t i = 0; i < requests.size(); ++i) {
    const Req& r = requests[i];
    w.requests.push_back(WorkloadRequest{i, r.prompt > 2048 ? 1u : 0u, r.arrival, r.prompt,
                                         r.output, 0, 0, 0, r.max_tokens});
  }
  return w;
}

// A mix around a 512-token threshold: at it, one above, well above, long prompts, and outputs of
// one token (done on the engine that prefilled them) and more.
std::vector<Req> mixed_requests() {
  const uint32_t prompts[] = {100, 512, 513, 2000, 6000, 300, 9000, 40, 511, 1024, 12000, 700};
  const uint32_t outputs[] = {20, 16, 64, 3, 16, 128, 2, 50, 1, 1, 40, 32};
  std::vector<Req> requests;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < std::size(prompts); ++i) {
      requests.push_back(
          Req{0.02 * static_cast<double>(requests.size()), prompts[i], outputs[i] + round});
    }
  }
  return requests;
}

// One slice of one step, as the step trace wrote it.
struct TracedSlice {
  uint32_t engine;
  uint64_t step;
  uint64_t request;
  uint32_t start;
  uint32_t tokens;
  std::string kind;
};

struct TracedRun {
  SimulationResult result;
  std::vector<TracedSlice> slices;
};

// Runs the simulation with a step trace in a temporary file and reads the trace back.
TracedRun simulate_traced(const DeploymentConfig& deployment, const Workload& workload,
                          const std::string& name) {
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / ("disaggregation_" + name + ".jsonl");
  TracedRun run;
  {
    StepTraceWriter trace(file);
    SimulationOptions options;
    options.step_trace = &trace;
    run.result = simulate(deployment, workload, options);
  }
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json step = nlohmann::json::parse(line);
    if (step.contains("model")) continue;  // an engine's model line
    for (const nlohmann::json& s : step.at("slices")) {
      run.slices.push_back(
          TracedSlice{step.at("engine").get<uint32_t>(), step.at("step").get<uint64_t>(),
                      s.at("request").get<uint64_t>(), s.at("start").get<uint32_t>(),
                      s.at("tokens").get<uint32_t>(), s.at("kind").get<std::string>()});
    }
  }
  std::filesystem::remove(file);
  return run;
}

void expect_all_finished(const SimulationResult& result, const Workload& workload) {
  EXPECT_EQ(result.rejected, 0u);
  ASSERT_EQ(result.records.size(), workload.requests.size());
  for (size_t i = 0; i < result.records.size(); ++i) {
    const RequestRecord& r = result.records[i];
    const WorkloadRequest& w = workload.requests[i];
    EXPECT_TRUE(r.finished) << "request " << w.id;
    EXPECT_EQ(r.output_tokens, w.output_tokens) << "request " << w.id;
    EXPECT_EQ(r.token_times.size(), w.output_tokens) << "request " << w.id;
    EXPECT_GE(r.scheduled, r.arrival) << "request " << w.id;
    EXPECT_GE(r.first_token, r.scheduled) << "request " << w.id;
    EXPECT_GE(r.finish, r.first_token) << "request " << w.id;
  }
}

// The positions each engine computed of each request must be those of its role:
// - the prefill engine (0) computes only prompt positions of requests that move;
// - the decode engine (1) computes no prompt position of a request that moved, only its decodes.
// Returns the number of violations (each one reported).
int check_roles(const TracedRun& run, const Workload& workload, int64_t local_max) {
  int violations = 0;
  for (const TracedSlice& s : run.slices) {
    const WorkloadRequest& w = workload.requests.at(s.request);
    const bool moved = w.prompt_tokens > local_max;
    if (s.engine == 0) {
      if (!moved || s.start + s.tokens > w.prompt_tokens || s.kind != "prefill") {
        ++violations;
        ADD_FAILURE() << "prefill engine step " << s.step << " computed [" << s.start << ", "
                      << s.start + s.tokens << ") (" << s.kind << ") of request " << s.request
                      << " (prompt " << w.prompt_tokens << ", moved " << moved << ")";
      }
    } else if (moved && (s.start < w.prompt_tokens || s.kind != "decode")) {
      ++violations;
      ADD_FAILURE() << "decode engine step " << s.step << " computed [" << s.start << ", "
                    << s.start + s.tokens << ") (" << s.kind << ") of moved request " << s.request
                    << " (prompt " << w.prompt_tokens << ")";
    }
  }
  return violations;
}

// -------------------------------------------------------------------------------------------------
// simulate
// -------------------------------------------------------------------------------------------------

TEST(Disaggregation, ConditionalThresholdMovesOnlyPromptsAboveIt) {
  const int64_t threshold = 512;
  PdSpec spec;
  spec.local_prefill_max_tokens = threshold;
  const Workload workload = workload_of(mixed_requests());
  const TracedRun run = simulate_traced(pd_deployment(spec), workload, "conditional");
  const SimulationResult& result = run.result;
  expect_all_finished(result, workload);
  EXPECT_EQ(result.preemptions, 0u);  // ample KV on both engines

  uint64_t moved_transfers = 0, moved_prompt_tokens = 0, local_prompt_tokens = 0;
  uint64_t later_tokens = 0;
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    const WorkloadRequest& w = workload.requests[i];
    const RequestRecord& r = result.records[i];
    later_tokens += w.output_tokens - 1;
    if (w.prompt_tokens <= threshold) {
      // Local: prefilled and decoded on the decode engine; nothing moved.
      local_prompt_tokens += w.prompt_tokens;
      EXPECT_EQ(r.engine, 1u) << "request " << w.id;
      EXPECT_EQ(r.kv_transfer_seconds, 0.0) << "request " << w.id;
      continue;
    }
    moved_prompt_tokens += w.prompt_tokens;
    if (w.output_tokens == 1) {
      // Done with its first token, sampled on the prefill engine: there is nothing to move.
      EXPECT_EQ(r.engine, 0u) << "request " << w.id;
      EXPECT_EQ(r.kv_transfer_seconds, 0.0) << "request " << w.id;
      continue;
    }
    ++moved_transfers;
    EXPECT_EQ(r.engine, 1u) << "request " << w.id;
    EXPECT_GT(r.kv_transfer_seconds, 0.0) << "request " << w.id;
    EXPECT_NEAR(r.kv_transfer_seconds, pcie5_transfer_seconds(w.prompt_tokens), 1e-9)
        << "request " << w.id << " (prompt " << w.prompt_tokens << ")";
    // Its second token comes from the decode engine, after its KV arrived there.
    ASSERT_GE(r.token_times.size(), 2u);
    EXPECT_GE(r.token_times[1], r.first_token + r.kv_transfer_seconds) << "request " << w.id;
  }
  EXPECT_EQ(result.kv_transfers, moved_transfers);
  EXPECT_GT(moved_transfers, 0u);

  // Token accounting per engine: the prefill engine computed exactly the moved prompts and never a
  // decode; the decode engine the local prompts and every token after each request's first.
  ASSERT_EQ(result.engines.size(), 2u);
  EXPECT_EQ(result.engines[0].prefill_tokens, moved_prompt_tokens);
  EXPECT_EQ(result.engines[0].decode_tokens, 0u);
  EXPECT_EQ(result.engines[1].prefill_tokens, local_prompt_tokens);
  EXPECT_EQ(result.engines[1].decode_tokens, later_tokens);

  EXPECT_EQ(check_roles(run, workload, threshold), 0);
}

TEST(Disaggregation, ThresholdZeroMovesEveryPrompt) {
  PdSpec spec;  // local_prefill_max_tokens = 0
  const Workload workload = workload_of(mixed_requests());
  const TracedRun run = simulate_traced(pd_deployment(spec), workload, "always");
  expect_all_finished(run.result, workload);
  uint64_t expected_transfers = 0;
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    const WorkloadRequest& w = workload.requests[i];
    if (w.output_tokens == 1) continue;
    ++expected_transfers;
    EXPECT_NEAR(run.result.records[i].kv_transfer_seconds, pcie5_transfer_seconds(w.prompt_tokens),
                1e-9)
        << "request " << w.id;
  }
  EXPECT_EQ(run.result.kv_transfers, expected_transfers);
  EXPECT_EQ(run.result.engines[1].prefill_tokens, 0u);  // the decode engine never prefilled
  EXPECT_EQ(check_roles(run, workload, 0), 0);
}

TEST(Disaggregation, AThresholdAboveEveryPromptMovesNothing) {
  PdSpec spec;
  spec.local_prefill_max_tokens = 100000;
  const Workload workload = workload_of(mixed_requests());
  const SimulationResult result = simulate(pd_deployment(spec), workload);
  expect_all_finished(result, workload);
  EXPECT_EQ(result.kv_transfers, 0u);
  EXPECT_EQ(result.engines[0].steps, 0u);  // the prefill engine stayed idle
  for (const RequestRecord& r : result.records) {
    EXPECT_EQ(r.engine, 1u) << "request " << r.id;
    EXPECT_EQ(r.kv_transfer_seconds, 0.0) << "request " << r.id;
  }
}

// Questions arriving at `times` (a TOML array), each one 1,024-token document (the same for all)
// and 100 tokens of its own, answered with `output` tokens.
Workload questions_about_one_document(const std::string& times, uint32_t output) {
  return parse_workload("[arrival]\nprocess = \"fixed\"\ntimes = " + times +
                            "\n[[classes]]\nname = \"question\"\nshare = 1\n"
                            "shared_prefix = { tokens = 1024, count = 1 }\n"
                            "prompt = { dist = \"fixed\", value = 100 }\n"
                            "output = { dist = \"fixed\", value = " +
                            std::to_string(output) + " }\n",
                        "questions.toml");
}

// Every prompt moves (threshold 0), three requests one after another, each a 1,024-token document
// and 100 tokens of its own. The first's KV is copied whole; the decode engine keeps it in its
// prefix cache, so the next two take the document's 64 blocks from that cache and the transfer
// copies only their other 7 blocks (the 100 tokens and the last, partial block). The same with
// moved_kv_blocks "as_needed", whose reservation is smaller.
TEST(Disaggregation, AMovedPromptCopiesOnlyTheBlocksTheDecodeEnginesCacheLacks) {
  const Workload documents = questions_about_one_document("[0, 5, 10]", 8);
  for (const char* moved : {"all", "as_needed"}) {
    SCOPED_TRACE(moved);
    PdSpec spec;
    spec.decode_moved_kv_blocks = moved;
    const SimulationResult result = simulate(pd_deployment(spec), documents);
    ASSERT_EQ(result.records.size(), 3u);
    for (const RequestRecord& r : result.records) ASSERT_TRUE(r.finished) << r.id;
    EXPECT_NEAR(result.records[0].kv_transfer_seconds, pcie5_transfer_seconds(1124), 1e-12);
    const double seven_blocks =
        kPcie5Latency + 7 * kBlock * kKvBytesPerToken / kPcie5BytesPerSecond;
    EXPECT_NEAR(result.records[1].kv_transfer_seconds, seven_blocks, 1e-12);
    EXPECT_NEAR(result.records[2].kv_transfer_seconds, seven_blocks, 1e-12);
    EXPECT_EQ(result.kv_transfers, 3u);
    ASSERT_EQ(result.engines.size(), 2u);
    EXPECT_EQ(result.engines[1].moved_kv_cached_tokens, 2u * 1024u);
    EXPECT_EQ(result.engines[0].moved_kv_cached_tokens, 0u);
  }
}

// Three questions about one 1,024-token document, moved while the ones before still decode: each
// later one shares the document's 64 blocks that the first holds (the scheduler counts shared
// blocks, ABI 1.3), so with moved_kv_blocks "all" the decode engine holds 75 blocks for the
// first (its 1,124 + 64 tokens) and 11 for each other one: 97 at its peak, where copies of the
// document would need 225.
TEST(Disaggregation, MovedRequestsShareTheBlocksOfADocumentTheDecodeEngineHolds) {
  const Workload questions = questions_about_one_document("[0, 0.05, 0.1]", 64);
  const SimulationResult result = simulate(pd_deployment(PdSpec{}), questions);
  for (const RequestRecord& r : result.records) ASSERT_TRUE(r.finished) << r.id;
  // They overlap on the decode engine: each arrives before the one before it finished.
  EXPECT_LT(result.records[2].first_token, result.records[0].finish);
  EXPECT_EQ(result.engines[1].moved_kv_cached_tokens, 2u * 1024u);
  uint32_t peak = 0;
  for (const StepRecord& step : result.step_records) {
    if (step.engine == 1) peak = std::max(peak, step.kv_blocks_used);
  }
  EXPECT_EQ(peak, 75u + 11u + 11u);
}

// Conditional disaggregation where cached (local_prefill_where_cached), with conversations that
// wait for answers: the first request (a
// 512-token system prompt and a 100-token message, over the 200-token threshold) moves, and the
// decode engine keeps its KV and the answer it decodes. Every request after it has at most 200
// tokens not held there: another conversation's first turn holds the system prompt there, a later
// turn the turn before, prompt and answer up to its last token (adding the answer and 100 tokens).
// Each is prefilled on the decode engine, finds that cached in whole blocks, and nothing moves.
TEST(Disaggregation, AConversationsLaterTurnsArePrefilledWhereItsEarlierTurnsDecoded) {
  const Workload talks = parse_workload(R"(
seed = 8
count = 4
[arrival]
process = "poisson"
rate = 0.05
[[classes]]
name = "chat"
share = 1
shared_prefix = { tokens = 512, count = 1 }
prompt = { dist = "fixed", value = 100 }
output = { dist = "fixed", value = 16 }
conversation = { turns = 3, gap = 5.0, wait_for_answer = true }
)",
                                        "talks.toml");
  PdSpec spec;
  spec.local_prefill_max_tokens = 200;
  spec.local_prefill_where_cached = true;
  const SimulationResult result = simulate(pd_deployment(spec), talks);
  ASSERT_EQ(result.records.size(), 12u);
  std::map<uint64_t, size_t> previous;  // by conversation, the turn before
  for (size_t i = 0; i < talks.requests.size(); ++i) {
    const WorkloadRequest& w = talks.requests[i];
    const RequestRecord& r = result.records[i];
    ASSERT_TRUE(r.finished) << "request " << w.id;
    EXPECT_GT(w.prompt_tokens, 200u);
    EXPECT_EQ(r.engine, 1u) << "request " << w.id;
    if (i == 0) {
      EXPECT_GT(r.kv_transfer_seconds, 0.0);
    } else if (w.turn == 0) {
      EXPECT_EQ(r.kv_transfer_seconds, 0.0) << "request " << w.id;
      EXPECT_EQ(r.cached_tokens, 512u) << "request " << w.id;
    } else {
      const RequestRecord& before = result.records[previous.at(w.conversation_id())];
      EXPECT_EQ(r.kv_transfer_seconds, 0.0) << "request " << w.id;
      EXPECT_EQ(r.cached_tokens,
                (before.prompt_tokens + before.output_tokens - 1) / kBlock * kBlock)
          << "request " << w.id << ", turn " << w.turn;
    }
    previous[w.conversation_id()] = i;
  }
  EXPECT_EQ(result.kv_transfers, 1u);
  EXPECT_EQ(result.engines[0].prefill_tokens, talks.requests[0].prompt_tokens);
  const auto local = std::find_if(
      result.plugin_metrics.begin(), result.plugin_metrics.end(),
      [](const PluginMetricReading& m) { return m.metric == "router_local_prefills_cached"; });
  ASSERT_NE(local, result.plugin_metrics.end());
  EXPECT_EQ(local->value, 11.0);
}

// A transport whose transfers fail, or never end, stops a simulation with an error that names it
// and what its poll() answered (a simulated link does not fail; under serve the decode engine
// prefills such a request itself, tests/unit/serving/service/disaggregated_service_test.cpp).
TEST(Disaggregation, ATransportThatFailsOrNeverEndsIsNamed) {
  PdSpec spec;
  spec.local_prefill_max_tokens = 512;
  const Workload workload = workload_of(mixed_requests());
  const std::string failing =
      "plugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) + "/test_failing_transport.so\"\n";
  const auto simulation_error = [&](const std::string& transport) {
    spec.kv_transport = transport;
    try {
      simulate(pd_deployment(spec), workload);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(the simulation ran to its end)");
  };
  EXPECT_THAT(simulation_error(failing),
              HasSubstr("KV transport 'test_failing': poll() answered FAILED for the transfer of "
                        "request "));
  // A simulated transfer answers within 2 s of wall time (here, after waiting that long).
  const std::string never = simulation_error(failing + "options = { pending_s = 3600.0 }\n");
  EXPECT_THAT(never, HasSubstr("KV transport 'test_failing': a simulated transfer (request "));
  EXPECT_THAT(never, HasSubstr("still answered PENDING 2 s after it started"));
}

// A transport may answer a simulated transfer's modelled duration from a thread of its own, a
// little after start(): the simulation waits for the answer (helper-120's walk: the transfers were
// never polled again and the run ended with every one PENDING).
TEST(Disaggregation, ASimulatedTransferMayAnswerAfterItsStart) {
  PdSpec spec;
  spec.local_prefill_max_tokens = 512;
  spec.kv_transport = "plugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
                      "/test_failing_transport.so\"\n"
                      "options = { pending_s = 0.01, simulated_done = true }\n";
  const Workload workload = workload_of(mixed_requests());
  const SimulationResult result = simulate(pd_deployment(spec), workload);
  expect_all_finished(result, workload);
  EXPECT_GT(result.kv_transfers, 0u);
  for (const RequestRecord& r : result.records) {
    if (r.engine == 1 && r.kv_transfer_seconds > 0) EXPECT_NEAR(r.kv_transfer_seconds, 1e-3, 1e-9);
  }
}

TEST(Disaggregation, IsDeterministic) {
  PdSpec spec;
  spec.local_prefill_max_tokens = 512;
  const DeploymentConfig deployment = pd_deployment(spec);
  const Workload workload = workload_of(mixed_requests());
  const SimulationResult a = simulate(deployment, workload);
  const SimulationResult b = simulate(deployment, workload);
  ASSERT_EQ(a.records.size(), b.records.size());
  EXPECT_EQ(a.steps, b.steps);
  for (size_t i = 0; i < a.records.size(); ++i) {
    EXPECT_EQ(a.records[i].token_times, b.records[i].token_times) << "request " << i;
    EXPECT_EQ(a.records[i].kv_transfer_seconds, b.records[i].kv_transfer_seconds);
  }
}

// A decode engine whose KV holds one long request at a time (72 blocks = 1152 tokens) behind a
// prefill engine that prefills a burst of them at once: the transfers must queue for room rather
// than fail, and every request must still finish with all its tokens.
TEST(Disaggregation, BackpressureOnATinyDecodeKvStillServesEveryRequest) {
  PdSpec spec;
  spec.decode_kv_blocks = 72;
  spec.decode_max_model_len = 1152;
  spec.prefill_max_model_len = 1152;
  std::vector<Req> requests;
  const uint32_t prompts[] = {1000, 900, 800, 1050, 700, 950, 600, 1000};
  for (size_t i = 0; i < std::size(prompts); ++i) {
    requests.push_back(Req{0.001 * static_cast<double>(i), prompts[i], 100});
  }
  const Workload workload = workload_of(requests);
  const TracedRun run = simulate_traced(pd_deployment(spec), workload, "backpressure");
  expect_all_finished(run.result, workload);
  EXPECT_EQ(run.result.kv_transfers, workload.requests.size());
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    EXPECT_NEAR(run.result.records[i].kv_transfer_seconds,
                pcie5_transfer_seconds(workload.requests[i].prompt_tokens), 1e-9)
        << "request " << i;
  }
  // Any two of these prompts' KV together exceed 72 blocks (600 + 700 tokens need 38 + 44), so the
  // decode engine ran one request at a time: its steps never held more than 72 blocks, and it
  // needed no preemption.
  EXPECT_EQ(run.result.preemptions, 0u);
  for (const StepRecord& s : run.result.step_records) {
    if (s.engine == 1) EXPECT_LE(s.batch_size, 1u) << "decode step " << s.step;
  }
  // The last decode step freed the last request's blocks.
  const StepRecord* last_decode = nullptr;
  for (const StepRecord& s : run.result.step_records) {
    if (s.engine == 1) last_decode = &s;
  }
  ASSERT_NE(last_decode, nullptr);
  EXPECT_EQ(last_decode->kv_blocks_used, 0u);
  EXPECT_EQ(check_roles(run, workload, 0), 0);
}

// Runs simulate, turning an Error into a test failure with its message (so that the expectations
// after it still report what they can).
SimulationResult simulate_or_fail(const DeploymentConfig& deployment, const Workload& workload,
                                  TracedRun* traced = nullptr, const std::string& name = "") {
  try {
    if (traced != nullptr) {
      *traced = simulate_traced(deployment, workload, name);
      return traced->result;
    }
    return simulate(deployment, workload);
  } catch (const Error& e) {
    ADD_FAILURE() << "simulate threw: " << e.what();
    return SimulationResult{};
  }
}

// Two moved requests that fit side by side on a small decode engine when their KV arrives (16 + 16
// of its 40 blocks), but not once they have decoded their outputs (29 blocks each by the end): the
// decode engine runs out of KV mid-decode and preempts one of them.
//
// Regression: with moved_kv_blocks = "all" (the default) a moved request reserves on the decode
// engine all the KV it will ever hold there (Engine::reserve_incoming), so the decode engine is
// never over-committed by transfers and never has to preempt (and recompute the prompt of) a moved
// request; transfers wait for room instead.
TEST(Disaggregation, DecodeKvPressureNeverRecomputesAMovedPromptOnTheDecodeEngine) {
  const PdSpec spec = forty_block_decode_engine("all");
  const Workload workload = workload_of({Req{0.0, 256, 200}, Req{0.0, 256, 200}});
  TracedRun run;
  simulate_or_fail(pd_deployment(spec), workload, &run, "pressure");
  expect_all_finished(run.result, workload);
  EXPECT_EQ(check_roles(run, workload, 0), 0)
      << "preemptions: " << run.result.preemptions
      << " (a moved request preempted on the decode engine is recomputed there)";
}

// The same two requests with moved_kv_blocks = "as_needed": each reserves only the blocks its KV
// and next token fill (17 of 40), so both decode side by side; they outgrow the cache (20 blocks
// each at 320 tokens), one is preempted and prefilled again on the decode engine, and both finish
// with every token and every block free. With "all" (above) the second waits for the first.
TEST(Disaggregation, MovedRequestsWithBlocksAsNeededDecodeSideBySideAndARecomputeEndsThem) {
  const PdSpec spec = forty_block_decode_engine("as_needed");
  const Workload workload = workload_of({Req{0.0, 256, 200}, Req{0.0, 256, 200}});
  TracedRun run;
  simulate_or_fail(pd_deployment(spec), workload, &run, "as_needed");
  expect_all_finished(run.result, workload);
  uint32_t widest_decode_step = 0;
  const StepRecord* last_decode = nullptr;
  for (const StepRecord& s : run.result.step_records) {
    if (s.engine != 1) continue;
    widest_decode_step = std::max(widest_decode_step, s.batch_size);
    last_decode = &s;
  }
  EXPECT_EQ(widest_decode_step, 2u) << "both moved requests decode in one step";
  EXPECT_GE(run.result.preemptions, 1u);
  // The preempted request's prompt and outputs so far are computed again on the decode engine.
  uint64_t recomputed = 0;
  for (const TracedSlice& s : run.slices) {
    if (s.engine == 1 && s.kind == "prefill") recomputed += s.tokens;
  }
  EXPECT_GT(recomputed, 256u);
  ASSERT_NE(last_decode, nullptr);
  EXPECT_EQ(last_decode->kv_blocks_used, 0u);
}

// Answers that end long before the max_tokens their clients ask for (50 of 300 tokens after a
// 256-token prompt): with "all" each moved request holds 35 of the decode engine's 40 blocks for
// its whole answer, so the two decode one after the other; with "as_needed" each holds 17, then at
// most 20, and they decode side by side with no preemption. Either way each ends at 50 tokens.
TEST(Disaggregation, AnswersEndingBeforeTheirMaxTokensDecodeSideBySideOnlyWithBlocksAsNeeded) {
  const Workload workload = workload_of({Req{0.0, 256, 50, 300}, Req{0.0, 256, 50, 300}});
  for (const char* moved_kv_blocks : {"all", "as_needed"}) {
    SCOPED_TRACE(moved_kv_blocks);
    const PdSpec spec = forty_block_decode_engine(moved_kv_blocks);
    const SimulationResult result = simulate_or_fail(pd_deployment(spec), workload);
    expect_all_finished(result, workload);  // 50 tokens each
    EXPECT_EQ(result.preemptions, 0u);
    uint32_t widest_decode_step = 0;
    for (const StepRecord& s : result.step_records) {
      if (s.engine == 1) widest_decode_step = std::max(widest_decode_step, s.batch_size);
    }
    EXPECT_EQ(widest_decode_step, std::string(moved_kv_blocks) == "all" ? 1u : 2u);
  }
}

// Three moved requests behind a decode engine of 40 blocks (640 tokens; any one request fits on
// its own): two transfers fit (16 + 16 blocks), the third waits for room. That is backpressure, and
// every request must still finish.
//
// Regression: transferred requests used to wait at the back of the queue holding their blocks,
// behind a preempted request that could then never fit again (a deadlock). Moved requests now
// reserve all their KV up front and join the head of the queue, ready to decode.
TEST(Disaggregation, TransfersIntoBlocksFreedByAPreemptionDoNotDeadlockTheDecodeEngine) {
  const PdSpec spec = forty_block_decode_engine("all");
  const Workload workload =
      workload_of({Req{0.0, 256, 200}, Req{0.0, 256, 200}, Req{0.0, 256, 200}});
  const SimulationResult result = simulate_or_fail(pd_deployment(spec), workload);
  expect_all_finished(result, workload);
}

// A prefill engine whose KV is full of prefilled requests waiting for room on the decode engine
// plans nothing (it stalls) until a transfer frees its blocks. Its clock must stand at that
// transfer's end when it steps again, not where its last step ended: it cannot have admitted the
// requests that arrived meanwhile before they arrived, nor into blocks freed later.
//
// Regression (helper-180): a stalled engine's clock stayed at its last step, so its later steps
// ran in the past. In docs/performance.md's "all" run at 1.5 x 40 req/s, 786 of 3,000 requests had
// their first token before their arrival, which made "all" look faster than "as_needed".
TEST(Disaggregation, AnEngineStalledForKvStepsAgainOnlyOnceTheTransferThatFreesItEnds) {
  // Prompts of 200 tokens (13 blocks) with 400 outputs: the decode engine ("all") reserves 38 of
  // its 40 blocks for each, so it holds one at a time, and the prefill engine's 40 blocks hold
  // three prefilled prompts. A request arrives every 0.1 s, while each decodes for seconds.
  PdSpec spec = forty_block_decode_engine("all");
  spec.prefill_kv_blocks = 40;
  std::vector<Req> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(Req{0.1 * i, 200, 400});
  const Workload workload = workload_of(requests);
  const SimulationResult result = simulate_or_fail(pd_deployment(spec), workload);
  expect_all_finished(result, workload);
  // Request 0 moves at once; 1-3 wait on the prefill engine with their KV; 4 waits for their
  // blocks (a chunk of it may take the one block left). The blocks of its prompt are freed when
  // request 1's KV moves, once request 0 has finished and left the decode engine its blocks.
  EXPECT_GE(result.records[4].first_token, result.records[0].finish);
  // Request 1 waited for room on the decode engine from its prefill's end (its first token) until
  // request 0 finished there; request 0 waited for nothing.
  EXPECT_DOUBLE_EQ(result.records[0].kv_wait_seconds, 0.0);
  EXPECT_DOUBLE_EQ(result.records[1].kv_wait_seconds,
                   result.records[0].finish - result.records[1].first_token);
  for (size_t i = 1; i < result.records.size(); ++i) {
    EXPECT_GE(result.records[i].finish, result.records[i - 1].finish) << "request " << i;
  }
}

// A transfer needs room on its decode engine, and that engine's blocks are as of its own clock:
// room a decode step frees is there from the step's end. A transfer that a prefill engine's step
// starts, at that step's end, must not start before the decode engine's clock when the decode
// step that freed its blocks ends later.
//
// Regression (helper-182's fuzzing): the transfer was placed at the prefill's end, so it copied
// into blocks request 0 held until its decode step ended, and a request arriving 0.1 s later
// finished 50 ms earlier than one arriving at 1.5 s.
TEST(Disaggregation, ATransferStartsNoEarlierThanTheDecodeStepThatFreedItsBlocks) {
  // The decode engine's 16 blocks hold one moved request (16 prompt + 240 max_tokens, "all"); its
  // steps are slow (about 0.19 s, at 0.1 TB/s) and each transfer takes 50 ms.
  const std::string toml =
      "name = \"causal\"\n[model]\nplugin = \"sim\"\noptions = { model = \"llama-3.1-8b\" }\n"
      "[[engines]]\nrole = \"prefill\"\nmax_model_len = 256\nkv_blocks = 64\n"
      "[[engines]]\nrole = \"decode\"\nmax_model_len = 256\nkv_blocks = 16\n"
      "model_options = { hbm_tb_per_s = 0.1 }\n"
      "[router]\nplugin = \"disaggregated\"\n"
      "[kv_transport]\nplugin = \"host_copy\"\n"
      "options = { link = \"custom\", bandwidth_gb_per_s = 1000.0, latency_us = 50000.0 }\n";
  const DeploymentConfig deployment = parse_deployment(toml, "causal.toml", registry());
  const auto run = [&](double second_arrival) {
    const Workload workload =
        workload_of({Req{0.0, 16, 10, 240}, Req{second_arrival, 16, 10, 240}});
    const SimulationResult result = simulate_or_fail(deployment, workload);
    expect_all_finished(result, workload);
    return result;
  };
  // At 1.6 s request 1's prefill ends inside the decode step that ends request 0 (its last).
  const SimulationResult later = run(1.6);
  const RequestRecord& first = later.records[0];
  const RequestRecord& second = later.records[1];
  const double transfer_start = second.first_token + second.kv_wait_seconds;
  EXPECT_GE(transfer_start, first.finish) << "request 1's KV moved into blocks request 0 held";
  EXPECT_GE(second.token_times[1], first.finish + 0.05);
  // Arriving later cannot finish sooner.
  const SimulationResult earlier = run(1.5);
  EXPECT_GE(second.finish, earlier.records[1].finish);
}

// From helper-210's review: each simulated transfer had its link's whole bandwidth however many
// were in flight, so disaggregation looked faster than its link allows. Transfers on one link now
// take turns (link_schedule.h): those out of one prefill engine, and those into one decode engine.
namespace link_sharing {
// Each transfer carries 7 blocks of 16 tokens of Llama-3.1-8B KV (128 KiB a token, 14.7 MB) at
// 8 MB/s (10 MB/s at the default efficiency of 0.8): about 1.8 s, against prefill steps of
// milliseconds.
std::string deployment_toml(int prefill_engines) {
  std::string toml =
      "name = \"one link\"\n[model]\nplugin = \"sim\"\n"
      "options = { model = \"llama-3.1-8b\" }\n";
  for (int i = 0; i < prefill_engines; ++i) {
    toml += "[[engines]]\nrole = \"prefill\"\nmax_model_len = 1024\nkv_blocks = 1024\n";
  }
  toml +=
      "[[engines]]\nrole = \"decode\"\nmax_model_len = 1024\nkv_blocks = 1024\n"
      "[router]\nplugin = \"disaggregated\"\n[kv_transport]\nplugin = \"host_copy\"\n"
      "options = { link = \"custom\", bandwidth_gb_per_s = 0.01, latency_us = 0.0 }\n";
  return toml;
}

// Each moved request's transfer as (start, end), in order of start.
std::vector<std::pair<double, double>> transfers_of(const SimulationResult& result) {
  std::vector<std::pair<double, double>> transfers;
  for (const RequestRecord& r : result.records) {
    EXPECT_GT(r.kv_transfer_seconds, 1.0) << "request " << r.id;
    const double start = r.first_token + r.kv_wait_seconds;
    transfers.emplace_back(start, start + r.kv_transfer_seconds);
  }
  std::sort(transfers.begin(), transfers.end());
  return transfers;
}
}  // namespace link_sharing

TEST(Disaggregation, SimulatedTransfersFromOneEngineTakeTheirLinkInTurn) {
  const DeploymentConfig deployment =
      parse_deployment(link_sharing::deployment_toml(1), "one_link.toml", registry());
  const Workload workload =
      workload_of({Req{0.0, 100, 10, 20}, Req{0.0, 100, 10, 20}, Req{0.01, 100, 10, 20}});
  const SimulationResult result = simulate_or_fail(deployment, workload);
  expect_all_finished(result, workload);
  const auto transfers = link_sharing::transfers_of(result);
  ASSERT_EQ(transfers.size(), 3u);
  for (size_t i = 1; i < transfers.size(); ++i) {
    EXPECT_GE(transfers[i].first, transfers[i - 1].second - 1e-9) << "transfer " << i;
  }
  // The last one's KV waited for the two before it.
  EXPECT_GE(result.records[2].kv_wait_seconds, 3.0);
}

// Two prefill engines, one decode engine: the transfers leave on two links but arrive on one.
TEST(Disaggregation, SimulatedTransfersIntoOneEngineTakeItsLinkInTurn) {
  const DeploymentConfig deployment =
      parse_deployment(link_sharing::deployment_toml(2), "two_links_in.toml", registry());
  const Workload workload = workload_of({Req{0.0, 100, 10, 20}, Req{0.0, 100, 10, 20}});
  const SimulationResult result = simulate_or_fail(deployment, workload);
  expect_all_finished(result, workload);
  std::set<uint32_t> prefilling;
  for (const StepRecord& step : result.step_records) {
    if (step.prefill_tokens > 0) prefilling.insert(step.engine);
  }
  ASSERT_EQ(prefilling, (std::set<uint32_t>{0, 1})) << "one prompt on each prefill engine";
  const auto transfers = link_sharing::transfers_of(result);
  ASSERT_EQ(transfers.size(), 2u);
  EXPECT_GE(transfers[1].first, transfers[0].second - 1e-9);
}

// A prompt the prefill engine accepts but the decode engine never could (its max_model_len is
// 128): that request cannot be served, but it must not take the others down with it.
//
// Regression: such a request is refused at submit (Cluster::submit checks that the decode engine
// holds prompt + max_tokens), counted in result.rejected, before any prefill is spent on it.
TEST(Disaggregation, ARequestNoDecodeEngineCanHoldIsRefusedNotFatal) {
  const PdSpec spec = sized_engines(64, 1024, 8, 128);
  const Workload workload = workload_of({Req{0.0, 500, 4}, Req{0.01, 50, 4}});
  const SimulationResult result = simulate_or_fail(pd_deployment(spec), workload);
  ASSERT_EQ(result.records.size(), 2u);
  EXPECT_FALSE(result.records[0].finished);
  EXPECT_EQ(result.rejected, 1u);
  EXPECT_TRUE(result.records[1].finished);
  EXPECT_EQ(result.records[1].output_tokens, 4u);
}

// A request that ends at its first token never moves: its prefill engine samples that token and
// finishes it. So a prompt of max_model_len - 1 with one output token is served, as one engine
// serves it; a request that would move is held to its decode engine's max_model_len. (The router
// still places only requests both engines hold: prompt + max_tokens within each max_model_len.)
//
// Regression: Cluster::submit asked the decode engine to hold the prompt and one more token
// whatever max_tokens was, and refused the first (helper-179's fuzzing).
TEST(Disaggregation, APromptOneTokenShortOfMaxModelLenIsServedWithOneOutputToken) {
  const PdSpec spec = sized_engines(64, 128, 64, 128);
  const Workload workload = workload_of({Req{0.0, 127, 1}, Req{0.01, 126, 2}, Req{0.02, 100, 20}});
  const SimulationResult result = simulate_or_fail(pd_deployment(spec), workload);
  expect_all_finished(result, workload);
  // The first never reaches the decode engine; the others move there and decode.
  EXPECT_EQ(result.records[0].engine, 0u);
  EXPECT_EQ(result.records[1].engine, 1u);
  EXPECT_EQ(result.records[2].engine, 1u);
  EXPECT_EQ(result.kv_transfers, 2u);
}

// -------------------------------------------------------------------------------------------------
// core::Cluster driven step by step
// -------------------------------------------------------------------------------------------------

NewRequest new_request(uint64_t id, uint32_t prompt, uint32_t output, RequestRecord* record) {
  NewRequest r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.max_output_tokens = output;
  r.record = record;
  r.sampling.seed = id;
  return r;
}

hw_route_request route_request(uint64_t id, uint32_t prompt, uint32_t output) {
  return hw_route_request{id, prompt, output, 0, hw_str{"test", 4}};
}

// Requests routed to a decode engine count in its load from their routing, not only once their
// KV has arrived: a burst routed while its requests still prefill elsewhere spreads over the
// decode engines by the work each has and is promised. Before, the loads showed none of them, and
// all ten went to the decode engine that looked idle beside the one holding a long request
// (helper-170: 20 of 20 on one of two).
TEST(Disaggregation, ABurstSpreadsOverTheDecodeEnginesBeforeItsKvArrives) {
  PdSpec spec;
  std::string toml = pd_toml(spec);
  const std::string one_decode = "role = \"decode\"\n";
  toml.replace(toml.find(one_decode), one_decode.size(), one_decode + "count = 2\n");
  const DeploymentConfig deployment = parse_deployment(toml, "pd_test.toml", registry());
  ASSERT_EQ(deployment.engines.size(), 3u);
  // A long answer decoding on one engine, then ten requests at one instant.
  std::vector<Req> requests = {{0.0, 600, 2000}};
  for (int i = 0; i < 10; ++i) requests.push_back({1.0, 600, 400});
  const Workload workload = workload_of(requests);
  const SimulationResult result = simulate(deployment, workload);
  expect_all_finished(result, workload);
  const uint32_t long_engine = result.records[0].engine;
  ASSERT_TRUE(long_engine == 1 || long_engine == 2) << long_engine;
  uint32_t beside_it = 0;
  for (size_t i = 1; i < result.records.size(); ++i) {
    beside_it += result.records[i].engine == long_engine ? 1 : 0;
  }
  // At the burst the long request has some 1,800 tokens still to decode: the other engine takes
  // the first answers of 400, until what it is promised passes that; then they alternate.
  EXPECT_GT(beside_it, 0u) << "every request of the burst went to the other decode engine";
  EXPECT_LT(beside_it, 5u) << "the engine with the long request took as many as the other";
}

// Drives decode engine 1 of `cluster` until it and the transfers headed to it are done. After each
// of its steps `before_transfers` sees the step, transfers start where blocks were freed, and
// `after_transfers` runs; transfers in flight complete when the decode engine's clock reaches
// them. A test failure when nothing progresses, or when transfers wait at an idle engine.
void drive_decode(Cluster& cluster,
                  const std::function<void(const StepDetail&)>& before_transfers = {},
                  const std::function<void()>& after_transfers = {}) {
  Engine& decode = cluster.engine(1);
  int guard = 0;
  while (decode.has_work() || cluster.transfers_in_flight() > 0 ||
         cluster.transfers_waiting() > 0) {
    ASSERT_LT(++guard, 10000) << "no progress";
    if (decode.has_work()) {
      ASSERT_TRUE(decode.step());
      if (before_transfers) before_transfers(decode.last_step());
      cluster.start_transfers(1, decode.clock().now());
      if (after_transfers) after_transfers();
    }
    std::optional<double> next = cluster.next_transfer_completion();
    if (next && (!decode.has_work() || *next <= decode.clock().now())) {
      cluster.complete_transfers(*next);
    }
    if (!decode.has_work() && cluster.transfers_in_flight() == 0 &&
        cluster.transfers_waiting() > 0) {
      ADD_FAILURE() << "transfers wait on an idle decode engine with " << decode.kv().free()
                    << " free blocks";
      return;
    }
  }
}

// A request longer than every engine that could hold it is refused naming the limit, as `serve`
// refuses it (the router's "no live decode engine holds a request of N tokens" named only the
// request's length: an operator's walkthrough, helper-224). Prefill engine 1,024, decode 128: a
// request that decodes must fit the decode engine, one that ends at its first token the prefill
// engine.
TEST(DisaggregationCluster, ARequestNoEngineHoldsIsRefusedNamingTheLargestMaxModelLen) {
  const DeploymentConfig deployment = pd_deployment(sized_engines(64, 1024, 8, 128));
  Cluster cluster(deployment);
  RequestRecord record;
  try {
    cluster.submit(new_request(7, 1020, 5, &record), route_request(7, 1020, 5));
    FAIL() << "a request of 1,025 tokens was placed";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "request 7: 1020 prompt tokens and 5 output tokens exceed max_model_len 128, "
                 "the largest of the deployment's engines that decode");
  }
  try {
    cluster.submit(new_request(8, 1024, 1, &record), route_request(8, 1024, 1));
    FAIL() << "a request of 1,025 tokens was placed";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "request 8: 1024 prompt tokens and 1 output tokens exceed max_model_len 1024, "
                 "the largest of the deployment's engines");
  }
}

// Decode engine: 8 blocks of 16 (128 tokens, max_model_len 128). Three requests of 100 prompt
// tokens (7 blocks) and 20 outputs (8 blocks by the end): one fits at a time.
TEST(DisaggregationCluster, TransfersWaitForKvRoomAndEveryBlockIsFreeAtTheEnd) {
  const PdSpec spec = sized_engines(64, 128, 8, 128);
  const DeploymentConfig deployment = pd_deployment(spec);
  Cluster cluster(deployment);
  ASSERT_EQ(cluster.size(), 2u);
  Engine& prefill = cluster.engine(0);
  Engine& decode = cluster.engine(1);

  std::vector<RequestRecord> records(3);
  for (uint64_t id = 0; id < 3; ++id) {
    EXPECT_EQ(cluster.submit(new_request(id, 100, 20, &records[id]), route_request(id, 100, 20)),
              0u)
        << "prefilled on engine 0";
  }
  // One step of the prefill engine prefills all three (300 tokens within the 2048 budget) and
  // samples their first tokens; they wait there, holding 3 x 7 blocks, for their transfers.
  ASSERT_TRUE(prefill.step());
  EXPECT_EQ(prefill.last_step().prefill_tokens, 300u);
  EXPECT_FALSE(prefill.has_work());
  EXPECT_EQ(prefill.kv().used(), 21u);
  for (const RequestRecord& r : records) EXPECT_EQ(r.output_tokens, 1u);

  // Only the first fits on the decode engine: it reserves what it will ever hold there, 100 + 20
  // tokens = all 8 blocks (7 arrive, 1 for the outputs to come); the others wait.
  const double prefilled_at = prefill.clock().now();
  cluster.collect_prefilled(0, prefilled_at);
  EXPECT_EQ(cluster.transfers_started(), 1u);
  EXPECT_EQ(cluster.transfers_in_flight(), 1u);
  EXPECT_EQ(cluster.transfers_waiting(), 2u);
  EXPECT_EQ(decode.kv().free(), 0u);
  EXPECT_FALSE(decode.has_work()) << "its KV has not arrived yet";

  // The transfer completes after 10 us + 7 x 16 x 131072 B / 51.2 GB/s.
  std::optional<double> done = cluster.next_transfer_completion();
  ASSERT_TRUE(done.has_value());
  EXPECT_NEAR(*done - prefilled_at, pcie5_transfer_seconds(100), 1e-12);
  EXPECT_EQ(cluster.complete_transfers(*done), 1u);
  EXPECT_EQ(records[0].kv_transfer_seconds, *done - prefilled_at);
  EXPECT_EQ(prefill.kv().used(), 14u);  // the prefill engine freed request 0's copy
  EXPECT_TRUE(decode.has_work());

  size_t max_waiting_while_busy = 0;
  drive_decode(cluster, [&](const StepDetail&) {
    max_waiting_while_busy = std::max(max_waiting_while_busy, cluster.transfers_waiting());
  });
  EXPECT_EQ(max_waiting_while_busy, 2u) << "both later transfers waited while request 0 decoded";
  EXPECT_EQ(cluster.transfers_started(), 3u);
  EXPECT_EQ(decode.counters().preemptions, 0u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_TRUE(records[i].finished) << "request " << i;
    EXPECT_EQ(records[i].output_tokens, 20u) << "request " << i;
    EXPECT_EQ(records[i].engine, 1u) << "request " << i;
    EXPECT_NEAR(records[i].kv_transfer_seconds, pcie5_transfer_seconds(100), 1e-12);
  }
  // Requests finish in order: each transfer started only once the previous request was done.
  EXPECT_LT(records[0].finish, records[1].token_times[1]);
  EXPECT_LT(records[1].finish, records[2].token_times[1]);
  // Nothing is left holding KV on either engine.
  EXPECT_EQ(prefill.kv().free(), prefill.kv().total());
  EXPECT_EQ(decode.kv().free(), decode.kv().total());
  EXPECT_FALSE(prefill.has_work());
  EXPECT_FALSE(decode.has_work());
}

// moved_kv_blocks = "as_needed" on a decode engine of 40 blocks with steps of 64 tokens: two moved
// requests of 256 + 200 tokens take 17 blocks each (their KV and next token); two of 64 + 200 wait
// (5 blocks each, and one free block for each of the two). The first two outgrow the cache and one
// is preempted; its recompute takes several steps. Until it has been prefilled again (it samples
// its next token), no transfer may take the blocks its preemption freed or those its recompute
// needs (they would hold it back until the arrivals stopped).
TEST(DisaggregationCluster, WithBlocksAsNeededAPreemptedRequestGoesBeforeNewTransfers) {
  PdSpec spec = forty_block_decode_engine("as_needed");
  spec.decode_budget = 64;
  const DeploymentConfig deployment = pd_deployment(spec);
  Cluster cluster(deployment);
  Engine& prefill = cluster.engine(0);
  Engine& decode = cluster.engine(1);
  std::vector<RequestRecord> records(4);
  const uint32_t prompts[] = {256, 256, 64, 64};
  for (uint64_t id = 0; id < records.size(); ++id) {
    ASSERT_EQ(cluster.submit(new_request(id, prompts[id], 200, &records[id]),
                             route_request(id, prompts[id], 200)),
              0u);
  }
  ASSERT_TRUE(prefill.step());  // all four prompts, 640 tokens, in one step
  cluster.collect_prefilled(0, prefill.clock().now());
  EXPECT_EQ(cluster.transfers_started(), 2u);
  EXPECT_EQ(decode.kv().free(), 40u - 2 * 17);

  std::set<uint64_t> awaiting_recompute;
  size_t steps_with_one_waiting = 0;
  size_t started = 0;
  size_t waiting = 0;
  uint64_t step = 0;
  drive_decode(
      cluster,
      [&](const StepDetail& detail) {
        for (size_t i = 0; i < detail.slices.size(); ++i) {
          if (detail.slice_samples[i] != 0) awaiting_recompute.erase(detail.slices[i].request_id);
        }
        for (uint64_t id : detail.preempted) awaiting_recompute.insert(id);
        started = cluster.transfers_started();
        waiting = cluster.transfers_waiting();
        step = detail.step;
      },
      [&] {
        if (awaiting_recompute.empty() || waiting == 0) return;
        ++steps_with_one_waiting;
        EXPECT_EQ(cluster.transfers_started(), started)
            << "a transfer started while request " << *awaiting_recompute.begin()
            << " was still to be prefilled again (step " << step << ")";
      });
  EXPECT_GE(decode.counters().preemptions, 1u);
  EXPECT_GT(steps_with_one_waiting, 0u) << "no step had a preempted request and a transfer waiting";
  EXPECT_EQ(cluster.transfers_started(), 4u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_TRUE(records[i].finished) << "request " << i;
    EXPECT_EQ(records[i].output_tokens, 200u) << "request " << i;
  }
  EXPECT_EQ(prefill.kv().free(), prefill.kv().total());
  EXPECT_EQ(decode.kv().free(), decode.kv().total());
}

// moved_kv_blocks = "as_needed": a transfer leaves a free block for each request holding KV on the
// decode engine (its next one). Two requests of 100 prompt tokens reserve 7 of 40 blocks each; a
// third of 400 needs 26, exactly what is left, and waits until a block more is free, though it
// would fit.
TEST(DisaggregationCluster, WithBlocksAsNeededATransferLeavesEachHolderItsNextBlock) {
  const PdSpec spec = forty_block_decode_engine("as_needed");
  const DeploymentConfig deployment = pd_deployment(spec);
  Cluster cluster(deployment);
  Engine& prefill = cluster.engine(0);
  Engine& decode = cluster.engine(1);
  std::vector<RequestRecord> records(3);
  const uint32_t prompts[] = {100, 100, 400};
  for (uint64_t id = 0; id < records.size(); ++id) {
    ASSERT_EQ(cluster.submit(new_request(id, prompts[id], 20, &records[id]),
                             route_request(id, prompts[id], 20)),
              0u);
  }
  ASSERT_TRUE(prefill.step());  // 600 prompt tokens in one step
  cluster.collect_prefilled(0, prefill.clock().now());
  EXPECT_EQ(cluster.transfers_started(), 2u);
  EXPECT_EQ(cluster.transfers_waiting(), 1u);
  EXPECT_EQ(decode.kv().free(), 26u);
  drive_decode(cluster);
  EXPECT_EQ(decode.counters().preemptions, 0u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_TRUE(records[i].finished) << "request " << i;
    EXPECT_EQ(records[i].output_tokens, 20u) << "request " << i;
  }
  // The third started only once the first two were done (each of their 120 tokens fits the 8
  // blocks they reached, so no block was freed earlier).
  EXPECT_GT(records[2].token_times[1], std::max(records[0].finish, records[1].finish));
  EXPECT_EQ(decode.kv().free(), decode.kv().total());
}

// A request prefilled elsewhere arriving at `decode` now: `prompt` tokens and its first output,
// KV for the prompt, 10 outputs at most.
IncomingTransfer moved_request(Engine& decode, uint64_t id, uint32_t prompt,
                               RequestRecord* record) {
  IncomingTransfer moved;
  moved.id = id;
  moved.prompt_tokens = prompt;
  moved.output_tokens = 1;
  moved.computed_tokens = prompt;
  moved.max_output_tokens = 10;
  moved.arrival = decode.clock().now();
  moved.record = record;
  return moved;
}

// A decode engine (the default moved_kv_blocks = "all", steps of 64 tokens, 40 blocks) prefills a
// 400-token prompt of its own (as after a failed transfer, or under conditional disaggregation).
// Midway, with 20 blocks taken, two moved requests reserve the other 20 and wait at the head of the
// queue. The prompt's next chunk has no block, so it is preempted. It must queue behind the moved
// requests, which need no new block to decode and free theirs when done; then it is prefilled
// again.
//
// Regression (helper-178): it was queued at the very head, readmitted, filled the step with its
// first chunks, found no block for the next and preempted itself again, for ever, while the moved
// requests held their blocks and never got a step.
TEST(DisaggregationCluster, APreemptedPromptQueuesBehindRequestsHoldingMovedKv) {
  PdSpec spec = forty_block_decode_engine("all");
  spec.budget = 64;
  const DeploymentConfig deployment = pd_deployment(spec);
  Cluster cluster(deployment);
  Engine& decode = cluster.engine(1);
  std::vector<RequestRecord> records(3);
  decode.add_request(new_request(0, 400, 10, &records[0]));
  int guard = 0;
  while (decode.kv().used() < 20) {
    ASSERT_LT(++guard, 100);
    ASSERT_TRUE(decode.step());
  }
  for (uint64_t id : {1, 2}) {
    ASSERT_TRUE(decode.reserve_incoming(moved_request(decode, id, 150, &records[id])))
        << "request " << id;
    decode.complete_transfer(id);
  }
  ASSERT_EQ(decode.kv().free(), 0u);
  while (decode.has_work()) {
    ASSERT_LT(++guard, 10000) << "no progress: request 0 preempted " << records[0].preemptions
                              << " times, moved requests at " << records[1].output_tokens << " and "
                              << records[2].output_tokens << " tokens";
    ASSERT_TRUE(decode.step());
  }
  EXPECT_GE(records[0].preemptions, 1u);
  for (const RequestRecord& r : records) {
    EXPECT_TRUE(r.finished) << "request " << r.id;
    EXPECT_EQ(r.output_tokens, 10u) << "request " << r.id;
  }
  EXPECT_LT(std::max(records[1].finish, records[2].finish), records[0].first_token);
  EXPECT_EQ(decode.kv().free(), decode.kv().total());
}

// KV for every position of a request leaves it nothing to compute where it continues, which no
// scheduler can plan: refused at the reservation, holding nothing (helper-204's review: it was
// queued, and its step of zero tokens failed the engine).
TEST(DisaggregationCluster, KvForEveryPositionIsRefusedAtTheReservation) {
  const DeploymentConfig deployment = pd_deployment(forty_block_decode_engine("all"));
  Cluster cluster(deployment);
  Engine& decode = cluster.engine(1);
  RequestRecord record;
  IncomingTransfer moved = moved_request(decode, 1, 150, &record);
  moved.computed_tokens = 151;
  try {
    decode.reserve_incoming(std::move(moved));
    ADD_FAILURE() << "reserved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV for 151 positions arrives for 151 tokens"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(decode.kv().free(), decode.kv().total());
  EXPECT_FALSE(decode.has_work());
}

TEST(DisaggregationCluster, ARequestThatCanNeverFitOnTheDecodeEngineIsAnError) {
  // The decode engine's max_model_len (128) is below the prompt; the prefill engine takes it. The
  // transfer can never be placed: an error (at submit or when its prefill is done), not a silent
  // wait forever.
  const PdSpec spec = sized_engines(64, 1024, 8, 128);
  Cluster cluster(pd_deployment(spec));
  RequestRecord record;
  EXPECT_THROW(
      {
        cluster.submit(new_request(0, 500, 4, &record), route_request(0, 500, 4));
        cluster.engine(0).step();
        cluster.collect_prefilled(0, cluster.engine(0).clock().now());
      },
      Error);
}

// A wall-clock model that describes no KV memory (as the cuda model under tensor parallelism) has
// nothing a transport could copy: its prefill and decode engines are refused at load, naming the
// engine, instead of each transfer "completing" with the decode engine's blocks left as they were.
TEST(DisaggregationCluster, AWallClockModelWithoutKvMemoryCannotHandKvOver) {
  const std::string toml =
      "[model]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
      "/test_id_blind_model.so\"\n"
      "[[engines]]\nrole = \"prefill\"\nkv_blocks = 64\n"
      "[[engines]]\nrole = \"decode\"\nkv_blocks = 64\n"
      "[router]\nplugin = \"disaggregated\"\n[kv_transport]\nplugin = \"host_copy\"\n";
  try {
    Cluster cluster(parse_deployment(toml, "pd_blind.toml", registry()));
    ADD_FAILURE() << "a model without KV memory was given prefill and decode engines";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("pd_blind.toml: engines (engine0): model 'test_id_blind_model' "
                                    "describes no KV memory a transport could copy"));
    EXPECT_THAT(e.what(), HasSubstr("through [kv_transport] 'host_copy'"));
  }
  // The same model on mixed engines moves nothing and is served.
  const std::string mixed = "[model]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
                            "/test_id_blind_model.so\"\n[[engines]]\nkv_blocks = 64\n"
                            "[kv_transport]\nplugin = \"host_copy\"\n";
  EXPECT_NO_THROW(Cluster(parse_deployment(mixed, "mixed_blind.toml", registry())));
}

// What the plugins counted through the host services comes back with the run (simulate's report
// prints it): here the test router's count of its route() calls, one per request, and its gauge.
TEST(SimulatedPluginMetrics, TheRunCarriesWhatThePluginsCounted) {
  const std::string toml =
      "[model]\nplugin = \"sim\"\noptions = { gpu = \"h100\", model = \"llama-3.1-8b\" }\n"
      "[[engines]]\ncount = 2\n[router]\nplugin = \"" +
      std::string(HEADWAY_TEST_PLUGIN_DIR) + "/test_metrics_router.so\"\n";
  const SimulationResult result =
      simulate(parse_deployment(toml, "metrics.toml", registry()),
               workload_of({{0.0, 100, 4}, {0.1, 300, 4}, {0.2, 50, 4}}));
  const auto find = [&](const std::string& metric) -> const PluginMetricReading* {
    for (const PluginMetricReading& r : result.plugin_metrics) {
      if (r.instance == "router test_metrics_router" && r.metric == metric) return &r;
    }
    return nullptr;
  };
  ASSERT_NE(find("routes"), nullptr);
  EXPECT_TRUE(find("routes")->counter);
  EXPECT_EQ(find("routes")->value, 3.0);
  ASSERT_NE(find("last_prompt_tokens"), nullptr);
  EXPECT_FALSE(find("last_prompt_tokens")->counter);
  EXPECT_EQ(find("last_prompt_tokens")->value, 50.0);
  const nlohmann::json json = plugin_metrics_to_json(result.plugin_metrics);
  EXPECT_NE(std::find(json.begin(), json.end(),
                      nlohmann::json{{"instance", "router test_metrics_router"},
                                     {"metric", "routes"},
                                     {"type", "counter"},
                                     {"value", 3.0}}),
            json.end())
      << json.dump();
}

// -------------------------------------------------------------------------------------------------
// Length routing end to end
// -------------------------------------------------------------------------------------------------

const std::filesystem::path kData =
    std::filesystem::path(HEADWAY_SOURCE_DIR) / "tests/integration/data";

TEST(LengthRouting, EveryPromptInOneLengthClassIsServedByThatPool) {
  // Engines 0 and 1 in pool "short" (< 4096 tokens), engine 2 in pool "long".
  const DeploymentConfig deployment = load_deployment(kData / "length_pools_8b.toml", registry());
  ASSERT_EQ(deployment.engines.size(), 3u);

  std::vector<Req> shorts, longs;
  for (uint32_t i = 0; i < 16; ++i) {
    shorts.push_back(Req{0.01 * i, 100 + 250 * i, 8 + i});  // 100 .. 3850 tokens
    longs.push_back(Req{0.01 * i, 4096 + 500 * i, 8 + i});  // 4096 .. 11596 tokens
  }
  const Workload short_workload = workload_of(shorts);
  SimulationResult result = simulate(deployment, short_workload);
  expect_all_finished(result, short_workload);
  EXPECT_GT(result.engines[0].steps, 0u);
  EXPECT_GT(result.engines[1].steps, 0u);
  EXPECT_EQ(result.engines[2].steps, 0u);
  for (const RequestRecord& r : result.records) EXPECT_LT(r.engine, 2u) << "request " << r.id;

  const Workload long_workload = workload_of(longs);
  result = simulate(deployment, long_workload);
  expect_all_finished(result, long_workload);
  EXPECT_EQ(result.engines[0].steps, 0u);
  EXPECT_EQ(result.engines[1].steps, 0u);
  for (const RequestRecord& r : result.records) EXPECT_EQ(r.engine, 2u) << "request " << r.id;

  std::vector<Req> both = shorts;
  for (const Req& r : longs) both.push_back(Req{r.arrival + 0.005, r.prompt, r.output});
  std::sort(both.begin(), both.end(),
            [](const Req& a, const Req& b) { return a.arrival < b.arrival; });
  const Workload mixed = workload_of(both);
  result = simulate(deployment, mixed);
  expect_all_finished(result, mixed);
  for (size_t i = 0; i < mixed.requests.size(); ++i) {
    EXPECT_EQ(result.records[i].engine == 2, mixed.requests[i].prompt_tokens >= 4096)
        << "request " << i << " (prompt " << mixed.requests[i].prompt_tokens << ")";
  }
}

TEST(LengthRouting, ADownPoolFallsBackToTheOtherPool) {
  const DeploymentConfig deployment = load_deployment(kData / "length_pools_8b.toml", registry());
  Cluster cluster(deployment);
  RequestRecord records[3];
  cluster.set_alive(2, false);  // the whole long pool
  EXPECT_LT(cluster.submit(new_request(0, 6000, 4, &records[0]), route_request(0, 6000, 4)), 2u);
  cluster.set_alive(2, true);
  EXPECT_EQ(cluster.submit(new_request(1, 6000, 4, &records[1]), route_request(1, 6000, 4)), 2u);
  cluster.set_alive(0, false);
  cluster.set_alive(1, false);  // the whole short pool
  EXPECT_EQ(cluster.submit(new_request(2, 100, 4, &records[2]), route_request(2, 100, 4)), 2u);
  cluster.set_alive(2, false);
  try {
    cluster.submit(new_request(3, 100, 4, nullptr), route_request(3, 100, 4));
    ADD_FAILURE() << "placed a request with every engine down";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), HW_UNAVAILABLE);
  }
}

}  // namespace
}  // namespace headway::core
