// core::Engine with real plugins (the simulated model and the chunked scheduler): request
// lifecycle, token accounting, KV bookkeeping, aborts, admission checks, preemption under KV
// pressure, refusal of an invalid plan, and determinism of the simulator.
#include "headway/core/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../test_support/built_plugins.h"
#include "../test_support/captured_log.h"
#include "headway/core/deployment_config.h"
#include "headway/core/error.h"
#include "headway/core/plugin_registry.h"
#include "headway/core/request_record.h"
#include "headway/core/simulator.h"
#include "headway/core/workload.h"

namespace headway::core {
namespace {

using ::testing::HasSubstr;

// One registry for the whole test process: it owns the plugin libraries, which must outlive every
// engine created from them.
PluginRegistry& registry() { return test::built_plugins(); }

struct EngineSpec {
  uint32_t budget = 256;
  uint32_t max_num_seqs = 256;
  uint32_t kv_blocks = 1000;
  uint32_t block_size = 16;
  uint32_t max_model_len = 8192;
  uint32_t max_waiting = 0;
  std::string scheduler = "chunked";  // or a path to a scheduler plugin
  std::string scheduler_options;      // for a plugin path: its options table's contents
};

std::string deployment_toml(const EngineSpec& s) {
  std::string scheduler =
      s.scheduler == "chunked"
          ? "{ plugin = \"chunked\", options = { max_num_batched_tokens = " +
                std::to_string(s.budget) + ", max_num_seqs = " + std::to_string(s.max_num_seqs) +
                " } }"
          : "{ plugin = \"" + s.scheduler + "\", options = { " + s.scheduler_options + " } }";
  return "name = \"engine_test\"\n"
         "[model]\n"
         "plugin = \"sim\"\n"
         "[[engines]]\n"
         "block_size = " +
         std::to_string(s.block_size) + "\nkv_blocks = " + std::to_string(s.kv_blocks) +
         "\nmax_model_len = " + std::to_string(s.max_model_len) +
         "\nmax_waiting = " + std::to_string(s.max_waiting) + "\nscheduler = " + scheduler + "\n";
}

// A deployment and an engine built from its first engine table.
struct TestEngine {
  explicit TestEngine(const EngineSpec& spec)
      : config(parse_deployment(deployment_toml(spec), "test.toml", registry())),
        engine(std::make_unique<Engine>(config.engines[0], config)) {}
  DeploymentConfig config;
  std::unique_ptr<Engine> engine;
  Engine& operator*() { return *engine; }
  Engine* operator->() { return engine.get(); }
};

NewRequest request(uint64_t id, uint32_t prompt, uint32_t output, RequestRecord* record = nullptr,
                   double arrival = 0.0) {
  NewRequest r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.max_output_tokens = output;
  r.arrival = arrival;
  r.sampling.seed = id;
  r.record = record;
  return r;
}

// Steps until the engine has nothing it can run; returns the number of steps that ran. Checks the
// KV bookkeeping after every step.
int run(Engine& engine, int max_steps = 100000) {
  int steps = 0;
  while (steps < max_steps && engine.step()) {
    ++steps;
    std::string why;
    EXPECT_TRUE(engine.kv().consistent(&why)) << "after step " << steps << ": " << why;
  }
  return steps;
}

class RecordingListener : public EngineListener {
 public:
  void on_token(uint64_t id, int32_t, double time, const SampledLogprobs*) override {
    tokens.push_back({id, time});
  }
  void on_finished(uint64_t id, FinishReason reason, double time) override {
    finished.push_back({id, reason, time});
  }
  struct Token {
    uint64_t id;
    double time;
  };
  struct Finished {
    uint64_t id;
    FinishReason reason;
    double time;
  };
  std::vector<Token> tokens;
  std::vector<Finished> finished;
};

// The code and message of the Error that add_request throws, or code HW_OK when it throws none.
struct Rejection {
  int32_t code = HW_OK;
  std::string message;
};
Rejection try_add(Engine& engine, NewRequest r) {
  try {
    engine.add_request(std::move(r));
  } catch (const Error& e) {
    return Rejection{e.code(), e.what()};
  }
  return Rejection{};
}

// ------------------------------------------------------------------------------------------------

TEST(Engine, OneRequestAlonePrefillsInChunksThenDecodes) {
  TestEngine e({.budget = 256, .kv_blocks = 1000});
  RecordingListener listener;
  e->set_listener(&listener);
  RequestRecord record;
  e->add_request(request(7, 1000, 5, &record));

  EXPECT_TRUE(e->has_work());
  EXPECT_EQ(e->waiting_size(), 1u);
  EXPECT_EQ(e->running_size(), 0u);
  hw_engine_load load = e->load();
  EXPECT_EQ(load.waiting, 1u);
  EXPECT_EQ(load.queued_prefill_tokens, 1000u);
  EXPECT_EQ(load.outstanding_tokens, 1005u);
  EXPECT_EQ(load.kv_blocks_free, 1000u);
  EXPECT_EQ(record.id, 7u);
  EXPECT_EQ(record.prompt_tokens, 1000u);
  EXPECT_DOUBLE_EQ(record.arrival, 0.0);
  EXPECT_TRUE(std::isnan(record.scheduled));

  // 1000 tokens with a budget of 256: chunks of 256, 256, 256 and 232; the last one samples.
  const uint32_t chunks[] = {256, 256, 256, 232};
  uint32_t computed = 0;
  for (int i = 0; i < 4; ++i) {
    const double before = e->clock().now();
    ASSERT_TRUE(e->step());
    const StepDetail& d = e->last_step();
    ASSERT_EQ(d.slices.size(), 1u);
    EXPECT_EQ(d.slices[0].request_id, 7u);
    EXPECT_EQ(d.slices[0].start, computed);
    EXPECT_EQ(d.slices[0].tokens, chunks[i]);
    EXPECT_EQ(d.slice_is_decode[0], 0);
    EXPECT_EQ(d.slice_samples[0], i == 3 ? 1 : 0);  // only the prompt's last chunk samples
    EXPECT_EQ(d.prefill_tokens, chunks[i]);
    EXPECT_EQ(d.decode_tokens, 0u);
    EXPECT_GT(e->clock().now(), before);  // the simulated step took time
    computed += chunks[i];
    EXPECT_EQ(e->running_size(), 1u);
    EXPECT_EQ(e->waiting_size(), 0u);
    EXPECT_EQ(e->kv().used(), (computed + 15) / 16);
    if (i == 0) {
      EXPECT_DOUBLE_EQ(record.scheduled, 0.0);
    }
    if (i < 3) {
      EXPECT_TRUE(std::isnan(record.first_token));
      EXPECT_EQ(e->load().queued_prefill_tokens, 1000u - computed);
      EXPECT_EQ(e->load().outstanding_tokens, 1005u - computed);
    }
  }
  EXPECT_DOUBLE_EQ(record.first_token, e->clock().now());
  EXPECT_EQ(record.output_tokens, 1u);
  EXPECT_EQ(e->load().queued_prefill_tokens, 0u);  // decoding now
  EXPECT_EQ(e->load().outstanding_tokens, 4u);

  // Four decodes, one token each, at positions 1000..1003.
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(e->step());
    const StepDetail& d = e->last_step();
    ASSERT_EQ(d.slices.size(), 1u);
    EXPECT_EQ(d.slices[0].start, 1000u + i);
    EXPECT_EQ(d.slices[0].tokens, 1u);
    EXPECT_EQ(d.slice_is_decode[0], 1);
    EXPECT_EQ(d.slice_samples[0], 1);
    EXPECT_EQ(d.decode_tokens, 1u);
    EXPECT_EQ(d.prefill_tokens, 0u);
  }
  EXPECT_FALSE(e->has_work());
  EXPECT_FALSE(e->step());
  EXPECT_EQ(e->running_size(), 0u);

  const EngineCounters& c = e->counters();
  EXPECT_EQ(c.steps, 8u);
  EXPECT_EQ(c.prefill_tokens, 1000u);
  EXPECT_EQ(c.decode_tokens, 4u);
  EXPECT_EQ(c.finished, 1u);
  EXPECT_EQ(c.aborted, 0u);
  EXPECT_EQ(c.preemptions, 0u);
  EXPECT_NEAR(c.busy_seconds, e->clock().now(), 1e-9);

  EXPECT_TRUE(record.finished);
  EXPECT_EQ(record.output_tokens, 5u);
  ASSERT_EQ(record.token_times.size(), 5u);
  EXPECT_DOUBLE_EQ(record.token_times.front(), record.first_token);
  EXPECT_DOUBLE_EQ(record.finish, record.token_times.back());
  for (size_t i = 1; i < record.token_times.size(); ++i) {
    EXPECT_GT(record.token_times[i], record.token_times[i - 1]);
  }
  EXPECT_EQ(record.preemptions, 0u);

  EXPECT_EQ(e->kv().free(), e->kv().total());
  EXPECT_TRUE(e->kv().consistent());

  ASSERT_EQ(listener.tokens.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(listener.tokens[i].id, 7u);
    EXPECT_DOUBLE_EQ(listener.tokens[i].time, record.token_times[i]);
  }
  ASSERT_EQ(listener.finished.size(), 1u);
  EXPECT_EQ(listener.finished[0].id, 7u);
  EXPECT_EQ(listener.finished[0].reason, FinishReason::kLength);
  EXPECT_DOUBLE_EQ(listener.finished[0].time, record.finish);
}

// Alone, a prompt of N tokens with budget B and M outputs takes ceil(N / B) prefill steps (the last
// one samples the first token) and M - 1 decode steps.
TEST(Engine, StepCountOfALoneRequestIsPrefillChunksPlusDecodes) {
  struct Case {
    uint32_t prompt, budget, output;
  };
  for (const Case& c : {Case{1, 256, 1}, Case{256, 256, 3}, Case{257, 256, 1}, Case{5000, 512, 10},
                        Case{100, 8192, 20}}) {
    SCOPED_TRACE("N=" + std::to_string(c.prompt) + " B=" + std::to_string(c.budget) +
                 " M=" + std::to_string(c.output));
    TestEngine e({.budget = c.budget, .kv_blocks = 1000});
    RequestRecord record;
    e->add_request(request(1, c.prompt, c.output, &record));
    const int expected = static_cast<int>((c.prompt + c.budget - 1) / c.budget + c.output - 1);
    EXPECT_EQ(run(*e), expected);
    EXPECT_EQ(e->counters().prefill_tokens, c.prompt);
    EXPECT_EQ(e->counters().decode_tokens, c.output - 1);
    EXPECT_TRUE(record.finished);
    EXPECT_EQ(record.output_tokens, c.output);
    EXPECT_EQ(record.token_times.size(), c.output);
    EXPECT_FALSE(std::isnan(record.first_token));
    EXPECT_EQ(e->kv().free(), e->kv().total());
  }
}

TEST(Engine, AnOutputReachingMaxModelLenFinishes) {
  TestEngine e({.budget = 4096, .kv_blocks = 1000, .max_model_len = 1024});
  RequestRecord record;
  e->add_request(request(1, 1000, 24, &record));  // exactly the room there is
  run(*e);
  EXPECT_TRUE(record.finished);
  EXPECT_EQ(record.output_tokens, 24u);
  EXPECT_EQ(record.token_times.size(), 24u);
  EXPECT_EQ(e->kv().free(), e->kv().total());
}

TEST(Engine, AbortOfAWaitingAndOfARunningRequest) {
  TestEngine e({.budget = 256, .kv_blocks = 1000});
  RecordingListener listener;
  e->set_listener(&listener);
  RequestRecord long_record, short_record;
  e->add_request(request(1, 1000, 5, &long_record));
  e->add_request(request(2, 100, 5, &short_record));

  // The long prompt takes the whole budget: the short one is still waiting after the step.
  ASSERT_TRUE(e->step());
  EXPECT_EQ(e->running_size(), 1u);
  EXPECT_EQ(e->waiting_size(), 1u);
  EXPECT_EQ(e->kv().used(), 16u);
  EXPECT_EQ(e->load().queued_prefill_tokens, 744u + 100u);

  EXPECT_TRUE(e->abort(2));
  EXPECT_FALSE(e->abort(2));
  EXPECT_EQ(e->waiting_size(), 0u);
  EXPECT_EQ(e->running_size(), 1u);
  EXPECT_EQ(e->kv().used(), 16u);  // the running request's blocks are untouched
  EXPECT_EQ(e->load().queued_prefill_tokens, 744u);
  EXPECT_EQ(e->load().outstanding_tokens, 744u + 5u);
  EXPECT_FALSE(short_record.finished);
  EXPECT_DOUBLE_EQ(short_record.finish, e->clock().now());
  EXPECT_EQ(short_record.output_tokens, 0u);
  EXPECT_TRUE(short_record.token_times.empty());
  EXPECT_EQ(e->counters().aborted, 1u);

  ASSERT_TRUE(e->step());
  EXPECT_EQ(e->last_step().slices.size(), 1u);  // only request 1: request 2 is gone
  EXPECT_EQ(e->kv().used(), 32u);

  EXPECT_TRUE(e->abort(1));
  EXPECT_EQ(e->kv().free(), e->kv().total());
  EXPECT_TRUE(e->kv().consistent());
  EXPECT_FALSE(e->has_work());
  EXPECT_FALSE(e->step());
  EXPECT_FALSE(long_record.finished);
  EXPECT_DOUBLE_EQ(long_record.finish, e->clock().now());
  EXPECT_EQ(e->counters().aborted, 2u);
  EXPECT_EQ(e->counters().finished, 0u);
  EXPECT_FALSE(e->abort(99));
  EXPECT_EQ(e->load().queued_prefill_tokens, 0u);
  EXPECT_EQ(e->load().outstanding_tokens, 0u);

  ASSERT_EQ(listener.finished.size(), 2u);
  EXPECT_EQ(listener.finished[0].id, 2u);
  EXPECT_EQ(listener.finished[0].reason, FinishReason::kAborted);
  EXPECT_EQ(listener.finished[1].id, 1u);
  EXPECT_EQ(listener.finished[1].reason, FinishReason::kAborted);

  // The id is free again once the request is gone.
  EXPECT_EQ(try_add(*e, request(1, 10, 1)).code, HW_OK);
}

// A plan that admits from the middle of the waiting queue (partial_prefill's priority policy takes
// priority 0 before the priority-1 requests queued ahead of them): the engine takes exactly those
// out of its queue, stopping once it found them (helper-204's review made it stop early), and the
// others keep their order. Each request prefills 16 tokens and ends with its one output.
TEST(Engine, RequestsAdmittedFromTheMiddleOfTheQueueLeaveItAndTheRestKeepTheirOrder) {
  EngineSpec spec;
  spec.scheduler = "partial_prefill";
  spec.scheduler_options = "policy = \"priority\", max_num_seqs = 2";
  TestEngine e(spec);
  RecordingListener listener;
  e->set_listener(&listener);
  for (uint64_t id = 1; id <= 7; ++id) {
    NewRequest r = request(id, 16, 1);
    r.priority = id % 3 == 0 ? 0 : 1;  // 3 and 6 first
    e->add_request(std::move(r));
  }
  ASSERT_TRUE(e->step());
  EXPECT_EQ(e->waiting_size(), 5u);
  run(*e);
  std::vector<uint64_t> order;
  for (const RecordingListener::Finished& f : listener.finished) order.push_back(f.id);
  EXPECT_EQ(order, (std::vector<uint64_t>{3, 6, 1, 2, 4, 5, 7}));
  EXPECT_EQ(e->waiting_size(), 0u);
  EXPECT_EQ(e->kv().free(), e->kv().total());
}

TEST(Engine, AbortOfADecodingRequestKeepsItsTokens) {
  TestEngine e({.budget = 256, .kv_blocks = 1000});
  RequestRecord record;
  e->add_request(request(1, 100, 10, &record));
  ASSERT_TRUE(e->step());  // prefill + first token
  ASSERT_TRUE(e->step());  // second token
  EXPECT_TRUE(e->abort(1));
  EXPECT_FALSE(record.finished);
  EXPECT_EQ(record.output_tokens, 2u);
  EXPECT_EQ(record.token_times.size(), 2u);
  EXPECT_EQ(e->kv().free(), e->kv().total());
  EXPECT_TRUE(e->kv().consistent());
}

TEST(Engine, RejectsRequestsThatCanNeverRunOrDoNotFit) {
  {
    TestEngine e({.budget = 4096, .kv_blocks = 1000, .max_model_len = 1024, .max_waiting = 2});
    RequestRecord record;
    Rejection r = try_add(*e, request(1, 1024, 1, &record));  // no room for one output
    EXPECT_EQ(r.code, HW_INVALID_ARGUMENT);
    EXPECT_THAT(r.message, HasSubstr("max_model_len 1024"));
    EXPECT_EQ(record.prompt_tokens, 0u);  // a refused request leaves its record alone
    EXPECT_EQ(e->waiting_size(), 0u);

    r = try_add(*e, request(2, 10, 0));
    EXPECT_EQ(r.code, HW_INVALID_ARGUMENT);
    EXPECT_THAT(r.message, HasSubstr("max_output_tokens"));

    r = try_add(*e, request(3, 0, 1));
    EXPECT_EQ(r.code, HW_INVALID_ARGUMENT);
    EXPECT_THAT(r.message, HasSubstr("empty prompt"));

    EXPECT_EQ(try_add(*e, request(4, 1023, 1)).code, HW_OK);
    r = try_add(*e, request(4, 10, 1));
    EXPECT_EQ(r.code, HW_INVALID_ARGUMENT);
    EXPECT_THAT(r.message, HasSubstr("duplicate"));
    EXPECT_THAT(r.message, HasSubstr("request 4"));

    // max_waiting = 2: the third waiting request is refused, with a code a client can retry on.
    EXPECT_EQ(try_add(*e, request(5, 10, 1)).code, HW_OK);
    r = try_add(*e, request(6, 10, 1));
    EXPECT_EQ(r.code, HW_RESOURCE_EXHAUSTED);
    EXPECT_THAT(r.message, HasSubstr("waiting queue is full"));
    EXPECT_EQ(e->waiting_size(), 2u);
    ASSERT_TRUE(e->step());  // admits both
    EXPECT_EQ(e->waiting_size(), 0u);
    EXPECT_EQ(try_add(*e, request(6, 10, 1)).code, HW_OK);
  }
  {
    // 8 blocks of 16 tokens hold max_model_len 128: a prompt must leave room for one output token.
    TestEngine e({.kv_blocks = 8, .max_model_len = 128});
    Rejection r = try_add(*e, request(1, 128, 1));
    EXPECT_EQ(r.code, HW_INVALID_ARGUMENT);
    EXPECT_THAT(r.message, HasSubstr("leaves no room for output within max_model_len 128"));
    EXPECT_EQ(e->waiting_size(), 0u);
    RequestRecord record;
    EXPECT_EQ(try_add(*e, request(2, 127, 1, &record)).code, HW_OK);
    run(*e);
    EXPECT_TRUE(record.finished);
    EXPECT_EQ(e->kv().free(), 8u);
  }
}

// The simulated model neither returns logits nor reads token ids: a request that asks for logits
// processing (penalties, min_tokens, logit_bias) is refused by name, never run without it.
TEST(Engine, LogitsProcessingIsRefusedForAModelThatReturnsNoLogits) {
  TestEngine e({});
  for (int field = 0; field < 4; ++field) {
    NewRequest r = request(static_cast<uint64_t>(field + 1), 10, 4);
    if (field == 0) r.sampling.presence_penalty = 0.5f;
    if (field == 1) r.sampling.min_tokens = 2;
    if (field == 2) r.sampling.logit_bias = {{3, 1.0f}};
    if (field == 3) r.sampling.logprobs = 0;
    const Rejection rejection = try_add(*e, std::move(r));
    EXPECT_EQ(rejection.code, HW_INVALID_ARGUMENT) << field;
    EXPECT_THAT(rejection.message, HasSubstr("need a model that returns logits")) << field;
    EXPECT_THAT(rejection.message, HasSubstr("request " + std::to_string(field + 1))) << field;
  }
  EXPECT_EQ(e->waiting_size(), 0u);
  EXPECT_EQ(try_add(*e, request(5, 10, 4)).code, HW_OK);
}

// A request the engine accepts must be able to finish: an engine whose KV cache cannot hold
// max_model_len tokens is refused at start-up (as vLLM does), and a request whose prompt + output
// exceed max_model_len is refused.
TEST(Engine, KvCacheSmallerThanMaxModelLenIsRefusedAtStartup) {
  try {
    TestEngine e({.kv_blocks = 8, .max_model_len = 4096});
    FAIL() << "an engine whose KV cache holds 128 tokens accepted max_model_len 4096";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("holds 128 tokens"));
    EXPECT_THAT(error.what(), HasSubstr("fewer than max_model_len 4096"));
  }
}

// kv_blocks only shrinks the cache: more blocks than the model's memory holds (the sim's 8B on an
// H100 holds about 25,700 blocks of 16) is refused by name rather than simulated or allocated.
TEST(Engine, KvBlocksBeyondTheModelsMemoryAreRefusedAtStartup) {
  for (const uint32_t blocks : {100000u, 4294967295u}) {
    try {
      TestEngine e({.kv_blocks = blocks});
      FAIL() << "kv_blocks " << blocks << " accepted";
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr("test.toml: engines (engine0): kv_blocks " +
                                          std::to_string(blocks) + " exceeds the "));
      EXPECT_THAT(error.what(), HasSubstr("blocks of 16 tokens"));
    }
  }
}

// Prompt + output past max_model_len is refused, as `headway serve` refuses it (and vLLM): it was
// accepted and cut short, so a simulated run reported fewer output tokens than its workload asked
// for, without a word (helper-144: 117 requests of an Azure trace on Llama 2's 4,096 context).
TEST(Engine, ARequestWhoseOutputWouldPassMaxModelLenIsRefused) {
  TestEngine e({.kv_blocks = 8, .max_model_len = 128});
  const Rejection r = try_add(*e, request(1, 100, 29));
  EXPECT_EQ(r.code, HW_INVALID_ARGUMENT);
  EXPECT_THAT(r.message, HasSubstr("request 1: 100 prompt tokens and 29 output tokens exceed "
                                   "max_model_len 128"));
  EXPECT_EQ(e->waiting_size(), 0u);
  RequestRecord record;
  ASSERT_EQ(try_add(*e, request(2, 100, 28, &record)).code, HW_OK);  // 100 + 28 = max_model_len
  run(*e, 10000);
  EXPECT_FALSE(e->has_work());
  EXPECT_TRUE(record.finished);
  EXPECT_EQ(record.output_tokens, 28u);
  EXPECT_EQ(e->kv().free(), e->kv().total());
}

TEST(Engine, PreemptionUnderKvPressureLosesNoTokenAndNoBlock) {
  // 24 blocks = 384 tokens for four requests of 100 + 80 tokens (12 blocks each at the end).
  TestEngine e({.budget = 512, .kv_blocks = 24, .max_model_len = 384});
  constexpr int kRequests = 4;
  constexpr uint32_t kOutput = 80;
  std::vector<RequestRecord> records(kRequests);
  for (int i = 0; i < kRequests; ++i) e->add_request(request(i, 100, kOutput, &records[i]));

  // Step 1: three prompts of 7 blocks each are admitted; the fourth (7 > 3 free) waits.
  ASSERT_TRUE(e->step());
  EXPECT_EQ(e->running_size(), 3u);
  EXPECT_EQ(e->waiting_size(), 1u);
  EXPECT_EQ(e->kv().used(), 21u);

  // The first preemption takes the most recently admitted request (2) and admits nobody.
  std::vector<uint64_t> first_preempted;
  bool admitted_3 = false;
  int steps = 1;
  while (e->step()) {
    ++steps;
    ASSERT_LT(steps, 100000);
    std::string why;
    ASSERT_TRUE(e->kv().consistent(&why)) << why;
    ASSERT_LE(e->kv().used(), e->kv().total());
    const StepDetail& d = e->last_step();
    if (first_preempted.empty() && !d.preempted.empty()) {
      first_preempted = d.preempted;
      for (const hw_slice& s : d.slices) EXPECT_NE(s.request_id, 3u) << "admitted while preempting";
      EXPECT_EQ(d.slices.size(), 2u);
    }
    // Request 3 is first admitted when requests 0 and 1 have finished, behind the preempted
    // request 2, which went back to the head of the queue and recomputes its 129 tokens.
    if (!admitted_3 && !d.slices.empty() && d.slices.back().request_id == 3) {
      admitted_3 = true;
      ASSERT_EQ(d.slices.size(), 2u);
      EXPECT_EQ(d.slices[0].request_id, 2u);
      EXPECT_EQ(d.slices[0].start, 0u);
      EXPECT_EQ(d.slices[0].tokens, 129u);
      EXPECT_EQ(d.slices[1].start, 0u);
      EXPECT_EQ(d.slices[1].tokens, 100u);
      EXPECT_EQ(records[0].output_tokens, kOutput);
      EXPECT_EQ(records[1].output_tokens, kOutput);
    }
  }
  EXPECT_TRUE(admitted_3);
  EXPECT_EQ(first_preempted, (std::vector<uint64_t>{2}));
  EXPECT_FALSE(e->has_work());

  uint64_t record_preemptions = 0;
  for (int i = 0; i < kRequests; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_TRUE(records[i].finished);
    EXPECT_EQ(records[i].output_tokens, kOutput);
    EXPECT_EQ(records[i].token_times.size(), kOutput);
    for (size_t t = 1; t < records[i].token_times.size(); ++t) {
      EXPECT_GT(records[i].token_times[t], records[i].token_times[t - 1]);
    }
    record_preemptions += records[i].preemptions;
  }
  EXPECT_GT(records[2].preemptions, 0u);
  EXPECT_GT(e->counters().preemptions, 0u);
  EXPECT_EQ(record_preemptions, e->counters().preemptions);
  EXPECT_EQ(e->counters().finished, static_cast<uint64_t>(kRequests));
  // Hand-worked: requests 0-2 all need a 9th block at position 128; request 0 preempts request 2
  // (then at 129 tokens: 100 + 29 outputs kept), which can only come back, with request 3, once
  // requests 0 and 1 finish. So one preemption; 400 prompt tokens plus 129 recomputed; and 320
  // outputs minus the 5 sampled by a prefill (4 admissions and 1 re-admission) as decodes.
  EXPECT_EQ(e->counters().preemptions, 1u);
  EXPECT_EQ(e->counters().prefill_tokens, kRequests * 100u + 129u);
  EXPECT_EQ(e->counters().decode_tokens, kRequests * kOutput - 5u);
  EXPECT_EQ(e->load().queued_prefill_tokens, 0u);
  EXPECT_EQ(e->load().outstanding_tokens, 0u);
  EXPECT_EQ(e->kv().free(), e->kv().total());
  EXPECT_TRUE(e->kv().consistent());
}

// Random arrivals, aborts and KV pressure: whatever happens, every request that is not aborted
// finishes with all its tokens, the books balance, and no block is lost.
TEST(Engine, RandomLoadWithAbortsKeepsTheBooksBalanced) {
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    // 64 blocks = 1024 tokens; a request needs at most 600 + 200 - 1 positions.
    TestEngine e(
        {.budget = 200 + 50 * seed, .max_num_seqs = 6, .kv_blocks = 64, .max_model_len = 1024});
    std::mt19937 rng(seed);
    std::uniform_int_distribution<uint32_t> prompt(1, 600), output(1, 200), arrivals(0, 3),
        percent(0, 99);
    constexpr uint32_t kRequests = 80;
    std::vector<RequestRecord> records(kRequests);
    std::vector<uint32_t> wanted(kRequests, 0);
    std::vector<bool> aborted(kRequests, false);
    uint32_t next_id = 0;
    int steps = 0;
    while ((next_id < kRequests || e->has_work()) && steps < 200000) {
      for (uint32_t n = arrivals(rng); n > 0 && next_id < kRequests; --n, ++next_id) {
        wanted[next_id] = output(rng);
        e->add_request(
            request(next_id, prompt(rng), wanted[next_id], &records[next_id], e->clock().now()));
      }
      if (percent(rng) < 3 && next_id > 0) {  // abort a random request, if it is still here
        const uint32_t id = std::uniform_int_distribution<uint32_t>(0, next_id - 1)(rng);
        if (e->abort(id)) aborted[id] = true;
      }
      if (!e->has_work()) continue;
      ASSERT_TRUE(e->step()) << "no progress at step " << steps << " with " << e->running_size()
                             << " running and " << e->waiting_size() << " waiting";
      ++steps;
      std::string why;
      ASSERT_TRUE(e->kv().consistent(&why)) << why;
    }
    ASSERT_FALSE(e->has_work());
    uint64_t preemptions = 0, finished = 0, aborts = 0;
    for (uint32_t i = 0; i < kRequests; ++i) {
      SCOPED_TRACE("request " + std::to_string(i));
      preemptions += records[i].preemptions;
      EXPECT_EQ(records[i].token_times.size(), records[i].output_tokens);
      if (aborted[i]) {
        ++aborts;
        EXPECT_FALSE(records[i].finished);
        EXPECT_LE(records[i].output_tokens, wanted[i]);
      } else {
        ++finished;
        EXPECT_TRUE(records[i].finished);
        EXPECT_EQ(records[i].output_tokens, wanted[i]);
      }
    }
    EXPECT_EQ(e->counters().finished, finished);
    EXPECT_EQ(e->counters().aborted, aborts);
    EXPECT_GT(aborts, 0u);
    EXPECT_EQ(e->counters().preemptions, preemptions);
    EXPECT_GT(preemptions, 0u) << "the load was meant to run out of KV blocks";
    EXPECT_EQ(e->kv().free(), e->kv().total());
    EXPECT_EQ(e->load().queued_prefill_tokens, 0u);
    EXPECT_EQ(e->load().outstanding_tokens, 0u);
  }
}

// A model reporting room for more blocks than an engine's tables manage (here 100 TB of HBM; in
// the walk that found it, a capacity given in bytes) is refused naming the figure, instead of
// allocating block tables until the process is killed.
TEST(Engine, MoreKvBlocksThanAnEngineManagesAreRefusedNamingTheCapacity) {
  const DeploymentConfig config = parse_deployment(
      "[model]\nplugin = \"sim\"\noptions = { gpu = \"h100\", model = \"llama-3.1-8b\", "
      "kv_heads = 1, head_dim = 1 }\n[[engines]]\n",
      "big.toml", registry());
  try {
    Engine engine(config.engines[0], config);
    ADD_FAILURE() << "an engine of " << engine.kv().total() << " blocks was made";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("big.toml: engines (engine0): "));
    EXPECT_THAT(e.what(), HasSubstr("model 'sim' reports room for "));
    EXPECT_THAT(e.what(), HasSubstr("more than the 16777216 an engine manages: set kv_blocks, or "
                                    "check that the model reports its capacity in tokens"));
  }
  // kv_blocks within the bound takes a part of that memory.
  const DeploymentConfig bounded = parse_deployment(
      "[model]\nplugin = \"sim\"\noptions = { gpu = \"h100\", model = \"llama-3.1-8b\", "
      "kv_heads = 1, head_dim = 1 }\n[[engines]]\nkv_blocks = 16384\n",
      "big.toml", registry());
  EXPECT_EQ(Engine(bounded.engines[0], bounded).kv().total(), 16384u);
}

// Rows whose best logit is not finite (here every logit NaN) give token 0: the engine says so,
// naming the model, once for the first such row and then at most once a minute, not per token.
TEST(Engine, LogitsWithoutAFiniteValueAreLoggedOnceAMinute) {
  test::CapturedLog log;
  {
    const DeploymentConfig config =
        parse_deployment("[model]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
                             "/test_nan_logits_model.so\"\n[[engines]]\nkv_blocks = 64\n",
                         "nan.toml", registry());
    Engine engine(config.engines[0], config);
    RequestRecord record;
    engine.add_request(request(1, 10, 5, &record));
    while (engine.has_work()) engine.step();
    EXPECT_EQ(record.output_tokens, 5u);
  }
  const std::string logged = log.text();
  const std::string line =
      "engine0: model 'test_nan_logits' gave 1 logits row whose best logit is "
      "not finite";
  const size_t first = logged.find(line);
  EXPECT_NE(first, std::string::npos) << logged;
  EXPECT_EQ(logged.find("whose best logit is not finite", first + line.size()), std::string::npos)
      << logged;
}

// A plan that only preempts runs no forward pass: the step takes no time on the virtual clock
// (the model reports none), and every request still finishes with all its tokens.
TEST(Engine, AStepThatOnlyPreemptsRunsNoForwardPass) {
  EngineSpec spec;
  spec.scheduler = HEADWAY_TEST_PLUGIN_DIR "/test_preempt_only_scheduler.so";
  TestEngine e(spec);
  std::vector<RequestRecord> records(3);
  for (int i = 0; i < 3; ++i) e->add_request(request(i, 40, 6, &records[i]));
  int preempt_only = 0;
  for (int steps = 0; e->has_work(); ++steps) {
    ASSERT_LT(steps, 1000);
    const double before = e->clock().now();
    ASSERT_TRUE(e->step());
    if (e->last_step().slices.empty()) {
      ++preempt_only;
      EXPECT_FALSE(e->last_step().preempted.empty());
      EXPECT_EQ(e->clock().now(), before);
    }
  }
  EXPECT_GT(preempt_only, 0);
  for (const RequestRecord& r : records) EXPECT_EQ(r.output_tokens, 6u);
  EXPECT_EQ(e->kv().free(), e->kv().total());
}

// UINT32_MAX tokens a step and requests running are legal limits (a scheduler with no cap of
// its own): the engine reserved max_num_seqs entries and died allocating 4G of them (helper-164).
TEST(Engine, ASchedulerDeclaringNoLimitsRuns) {
  EngineSpec spec;
  spec.scheduler = HEADWAY_TEST_PLUGIN_DIR "/test_unbounded_scheduler.so";
  TestEngine e(spec);
  EXPECT_EQ(e->scheduler_limits().max_num_seqs, std::numeric_limits<uint32_t>::max());
  std::vector<RequestRecord> records(3);
  for (int i = 0; i < 3; ++i) e->add_request(request(i, 40, 6, &records[i]));
  for (int steps = 0; e->has_work(); ++steps) {
    ASSERT_LT(steps, 1000);
    ASSERT_TRUE(e->step());
  }
  for (const RequestRecord& r : records) EXPECT_EQ(r.output_tokens, 6u);
  EXPECT_EQ(e->kv().free(), e->kv().total());
}

// A scheduler that admits a request and preempts it at the next step, for ever, takes steps
// without end and samples nothing: past livelock_bound() preemptions of that request the step says
// so, naming the scheduler and the request, instead of the simulator spinning for ever.
TEST(Engine, ASchedulerThatPreemptsForEverWithoutATokenIsStoppedAsALivelock) {
  EngineSpec spec;
  spec.scheduler = HEADWAY_TEST_PLUGIN_DIR "/test_livelocking_scheduler.so";
  TestEngine e(spec);
  std::vector<RequestRecord> records(2);
  for (int i = 0; i < 2; ++i) e->add_request(request(i, 40, 6, &records[i]));
  std::string error;
  try {
    for (uint64_t steps = 0; e->has_work(); ++steps) {
      ASSERT_LT(steps, 4 * e->livelock_bound()) << "no livelock found";
      ASSERT_TRUE(e->step());
    }
  } catch (const Error& failure) {
    error = failure.what();
    EXPECT_EQ(failure.code(), HW_INTERNAL);
  }
  EXPECT_THAT(error, HasSubstr("scheduler 'test_livelocking' preempted request 0 " +
                               std::to_string(e->livelock_bound() + 1) + " times without a token"));
  EXPECT_THAT(error, HasSubstr("livelock"));
  EXPECT_EQ(e->counters().preemptions, e->livelock_bound() + 1);
  EXPECT_EQ(records[0].output_tokens, 0u);
}

// The bound itself is allowed: the same scheduler, stopping after livelock_bound() preemptions,
// runs both requests to their last token.
TEST(Engine, PreemptionsUpToTheLivelockBoundAreAllowed) {
  EngineSpec spec;
  spec.scheduler = HEADWAY_TEST_PLUGIN_DIR "/test_livelocking_scheduler.so";
  spec.scheduler_options = "preemptions = " + std::to_string(10000 + spec.max_model_len);
  TestEngine e(spec);
  ASSERT_EQ(e->livelock_bound(), 10000u + spec.max_model_len);
  std::vector<RequestRecord> records(2);
  for (int i = 0; i < 2; ++i) e->add_request(request(i, 40, 6, &records[i]));
  while (e->has_work()) ASSERT_TRUE(e->step());
  EXPECT_EQ(e->counters().preemptions, e->livelock_bound());
  for (const RequestRecord& r : records) EXPECT_EQ(r.output_tokens, 6u);
  EXPECT_EQ(e->kv().free(), e->kv().total());
}

TEST(Engine, AnInvalidPlanIsRejectedAndNothingOfItExecuted) {
  // Declares a budget of 8 tokens, then plans every request's whole remaining work.
  EngineSpec spec;
  spec.scheduler = HEADWAY_TEST_PLUGIN_DIR "/test_over_budget_scheduler.so";
  TestEngine e(spec);
  EXPECT_EQ(e->scheduler_limits().max_num_batched_tokens, 8u);

  RequestRecord record;
  e->add_request(request(1, 100, 3, &record));
  const hw_engine_load before = e->load();
  try {
    e->step();
    FAIL() << "step() accepted a plan over the budget";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("invalid plan"));
    EXPECT_THAT(error.what(), HasSubstr("over the budget"));
    EXPECT_THAT(error.what(), HasSubstr("100 tokens"));
  }
  EXPECT_EQ(e->waiting_size(), 1u);
  EXPECT_EQ(e->running_size(), 0u);
  EXPECT_EQ(e->kv().free(), e->kv().total());
  EXPECT_EQ(e->counters().steps, 0u);
  EXPECT_DOUBLE_EQ(e->clock().now(), 0.0);
  EXPECT_TRUE(std::isnan(record.scheduled));
  EXPECT_EQ(record.output_tokens, 0u);
  const hw_engine_load after = e->load();
  EXPECT_EQ(after.queued_prefill_tokens, before.queued_prefill_tokens);
  EXPECT_EQ(after.outstanding_tokens, before.outstanding_tokens);
  EXPECT_THROW(e->step(), Error);  // same queues, same broken plan

  // The same scheduler's plans within its budget are executed: the rejection is about the plan.
  EXPECT_TRUE(e->abort(1));
  RequestRecord small;
  e->add_request(request(2, 5, 3, &small));
  EXPECT_EQ(run(*e), 3);
  EXPECT_TRUE(small.finished);
  EXPECT_EQ(small.output_tokens, 3u);
}

Workload generated_workload(uint32_t count) {
  Workload w;
  w.source = "engine_test";
  w.seed = 42;
  w.classes = {RequestClass{"short", false, 0, 0.8, 150.0},
               RequestClass{"long", true, 0, 0.2, 3000.0}};
  uint64_t x = 0x2545F4914F6CDD1DULL;
  auto next = [&x](uint32_t lo, uint32_t hi) {  // xorshift64: reproducible everywhere
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return lo + static_cast<uint32_t>(x % (hi - lo + 1));
  };
  for (uint32_t i = 0; i < count; ++i) {
    const bool is_long = i % 5 == 2;
    WorkloadRequest r{};
    r.id = i;
    r.class_index = is_long ? 1 : 0;
    r.arrival = 0.02 * i;
    r.prompt_tokens = is_long ? next(2000, 4000) : next(20, 300);
    r.output_tokens = next(5, 120);
    w.requests.push_back(r);
  }
  return w;
}

TEST(Engine, SimulationIsDeterministic) {
  // Small KV cache so that the run preempts.
  DeploymentConfig config =
      parse_deployment(deployment_toml({.budget = 1024, .kv_blocks = 400, .max_model_len = 6400}),
                       "test.toml", registry());
  const Workload workload = generated_workload(40);
  const SimulationResult a = simulate(config, workload);
  const SimulationResult b = simulate(config, workload);

  EXPECT_EQ(a.rejected, 0u);
  EXPECT_GT(a.preemptions, 0u) << "the workload was meant to exhaust the KV cache";
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.preemptions, b.preemptions);
  EXPECT_EQ(a.simulated_seconds, b.simulated_seconds);
  ASSERT_EQ(a.records.size(), workload.requests.size());
  ASSERT_EQ(b.records.size(), workload.requests.size());
  for (size_t i = 0; i < a.records.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const RequestRecord& x = a.records[i];
    const RequestRecord& y = b.records[i];
    EXPECT_TRUE(x.finished);
    EXPECT_EQ(x.output_tokens, workload.requests[i].output_tokens);
    EXPECT_EQ(x.token_times.size(), workload.requests[i].output_tokens);
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.class_index, y.class_index);
    EXPECT_EQ(x.prompt_tokens, y.prompt_tokens);
    EXPECT_EQ(x.output_tokens, y.output_tokens);
    EXPECT_EQ(x.preemptions, y.preemptions);
    EXPECT_EQ(x.finished, y.finished);
    // Bit-identical times: the virtual clock makes a run a pure function of its inputs.
    EXPECT_EQ(x.arrival, y.arrival);
    EXPECT_EQ(x.scheduled, y.scheduled);
    EXPECT_EQ(x.first_token, y.first_token);
    EXPECT_EQ(x.finish, y.finish);
    EXPECT_EQ(x.token_times, y.token_times);
  }
  ASSERT_EQ(a.engines.size(), 1u);
  EXPECT_EQ(a.engines[0].prefill_tokens, b.engines[0].prefill_tokens);
  EXPECT_EQ(a.engines[0].decode_tokens, b.engines[0].decode_tokens);
  EXPECT_EQ(a.engines[0].busy_seconds, b.engines[0].busy_seconds);
}

}  // namespace
}  // namespace headway::core
