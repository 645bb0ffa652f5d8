// Prefix caching in core::Engine with the real CPU model (a tiny random checkpoint; and once with
// the simulated model, on a workload with shared beginnings): a request whose prompt begins with
// tokens computed before takes their KV blocks instead of computing them, and gets the tokens it
// would have got without the cache; blocks are shared between running requests (only while idle
// with a scheduler of ABI 1.2), evicted deepest first, and the books balance under preemption and
// aborts.
#include <gtest/gtest.h>
#include <headway/core/deployment_config.h>
#include <headway/core/engine.h>
#include <headway/core/error.h>
#include <headway/core/plugin_registry.h>
#include <headway/core/report.h>
#include <headway/core/request_record.h>
#include <headway/core/simulator.h>
#include <headway/core/workload.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../test_support/built_plugins.h"
#include "../test_support/tiny_checkpoint_dir.h"

namespace headway::core {
namespace {

namespace fs = std::filesystem;

// One tiny checkpoint for the whole test process.
fs::path checkpoint() { return test::shared_tiny_checkpoint().path / "tiny"; }

struct Spec {
  bool prefix_caching = true;
  uint32_t kv_blocks = 64;
  uint32_t budget = 256;
  uint32_t max_model_len = 512;
  uint32_t long_prefill_threshold = 0;  // the chunked scheduler's per-request cap per step
  // A scheduler built against ABI 1.2 (tests/conformance/older_minor_scheduler.cpp: a fixed budget
  // of 2048 tokens), which does not know hw_request_view.blocks_shared: cached blocks are then
  // reused only while no request holds them.
  bool older_scheduler = false;
  std::string scheduler;  // a scheduler table of its own, instead of the two above
};

std::string scheduler_of(const Spec& spec) {
  if (!spec.scheduler.empty()) return spec.scheduler;
  if (spec.older_scheduler) return "{ plugin = \"" HEADWAY_OLDER_MINOR_SCHEDULER "\" }";
  return "{ plugin = \"chunked\", options = { max_num_batched_tokens = " +
         std::to_string(spec.budget) +
         ", long_prefill_token_threshold = " + std::to_string(spec.long_prefill_threshold) + " } }";
}

struct TestEngine {
  explicit TestEngine(const Spec& spec)
      : config(parse_deployment(
            "[model]\nplugin = \"cpu\"\noptions = { path = \"" + checkpoint().string() +
                "\", threads = 1, max_model_len = 1024 }\n[[engines]]\nblock_size = 16\n"
                "kv_blocks = " +
                std::to_string(spec.kv_blocks) +
                "\nmax_model_len = " + std::to_string(spec.max_model_len) +
                "\nprefix_caching = " + (spec.prefix_caching ? "true" : "false") +
                "\nscheduler = " + scheduler_of(spec) + "\n",
            checkpoint() / "deploy.toml", test::built_plugins())),
        engine(std::make_unique<Engine>(config.engines[0], config)) {}
  DeploymentConfig config;
  std::unique_ptr<Engine> engine;
  Engine* operator->() { return engine.get(); }
};

std::vector<int32_t> random_ids(uint32_t seed, uint32_t count) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(count);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 256);
  return ids;
}

// A greedy request for exactly `outputs` tokens.
NewRequest greedy(uint64_t id, std::vector<int32_t> prompt, uint32_t outputs,
                  RequestRecord* record) {
  NewRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_output_tokens = outputs;
  r.sampling.ignore_eos = true;
  r.record = record;
  return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs until idle, checking the KV books after every step.
void run(Engine& engine) {
  while (engine.step()) {
    std::string why;
    ASSERT_TRUE(engine.kv().consistent(&why))
        << "after step " << engine.counters().steps << ": " << why;
  }
}

// Greedy generation of `outputs` tokens for `prompt`, alone on `engine`.
struct Generated {
  std::vector<int32_t> ids;
  uint64_t hit_tokens = 0;       // found cached
  uint64_t computed_tokens = 0;  // prompt tokens the engine computed for it
};
Generated generate(TestEngine& engine, uint64_t id, const std::vector<int32_t>& prompt,
                   uint32_t outputs) {
  const EngineCounters before = engine->counters();
  RequestRecord record;
  engine->add_request(greedy(id, prompt, outputs, &record));
  run(*engine.engine);
  EXPECT_TRUE(record.finished) << "request " << id;
  const EngineCounters& after = engine->counters();
  return Generated{record.token_ids, after.prefix_cache_hit_tokens - before.prefix_cache_hit_tokens,
                   after.prefill_tokens - before.prefill_tokens};
}

TEST(EnginePrefixCaching, TheSamePromptAgainReusesItsKvAndGivesTheSameTokens) {
  TestEngine cached(Spec{});
  ASSERT_TRUE(cached->prefix_caching());
  const std::vector<int32_t> prompt = random_ids(1, 100);
  const Generated first = generate(cached, 1, prompt, 8);
  EXPECT_EQ(first.hit_tokens, 0u);
  EXPECT_EQ(first.computed_tokens, 100u);
  const Generated again = generate(cached, 2, prompt, 8);
  // Six full blocks of 16; the last four prompt tokens are computed (the last one always is).
  EXPECT_EQ(again.hit_tokens, 96u);
  EXPECT_EQ(again.computed_tokens, 4u);
  EXPECT_EQ(again.ids, first.ids);
  EXPECT_EQ(cached->counters().prefix_cache_queried_tokens, 200u);

  TestEngine plain(Spec{.prefix_caching = false});
  EXPECT_FALSE(plain->prefix_caching());
  const Generated uncached = generate(plain, 1, prompt, 8);
  EXPECT_EQ(uncached.ids, first.ids);
  EXPECT_EQ(generate(plain, 2, prompt, 8).computed_tokens, 100u);
  EXPECT_EQ(plain->counters().prefix_cache_queried_tokens, 0u);
}

TEST(EnginePrefixCaching, APromptOfWholeBlocksStillComputesItsLastToken) {
  TestEngine engine(Spec{});
  const std::vector<int32_t> prompt = random_ids(2, 64);
  const Generated first = generate(engine, 1, prompt, 4);
  const Generated again = generate(engine, 2, prompt, 4);
  EXPECT_EQ(again.hit_tokens, 48u);  // three of the four blocks: the fourth holds the last token
  EXPECT_EQ(again.computed_tokens, 16u);
  EXPECT_EQ(again.ids, first.ids);
}

TEST(EnginePrefixCaching, AFollowUpTurnReusesThePromptAndTheAnswerBeforeIt) {
  TestEngine cached(Spec{});
  const std::vector<int32_t> prompt = random_ids(3, 90);
  const Generated answer = generate(cached, 1, prompt, 20);
  // The next turn: the conversation so far, then new text.
  const std::vector<int32_t> turn = concat(concat(prompt, answer.ids), random_ids(4, 30));
  const Generated next = generate(cached, 2, turn, 6);
  // 109 positions had KV (the last output never does): six full blocks, past the 90-token prompt.
  EXPECT_EQ(next.hit_tokens, 96u);
  EXPECT_EQ(next.computed_tokens, turn.size() - 96);

  TestEngine plain(Spec{.prefix_caching = false});
  EXPECT_EQ(generate(plain, 2, turn, 6).ids, next.ids);
}

TEST(EnginePrefixCaching, RequestsAdmittedInOneStepBothComputeAndALaterOneReuses) {
  TestEngine engine(Spec{});
  const std::vector<int32_t> prompt = random_ids(5, 100);
  std::vector<RequestRecord> records(2);
  for (uint64_t id = 0; id < 2; ++id) {
    engine->add_request(greedy(id, prompt, 5, &records[id]));
  }
  run(*engine.engine);
  EXPECT_EQ(engine->counters().prefix_cache_hit_tokens, 0u);
  EXPECT_EQ(engine->counters().prefill_tokens, 200u);
  EXPECT_EQ(records[0].token_ids, records[1].token_ids);
  // Nothing was cached when both were admitted. One copy of the prompt's blocks is cached (the
  // other's were duplicates, freed); it is reused.
  EXPECT_EQ(engine->kv().idle_cached(), 6u);
  EXPECT_EQ(engine->kv().used(), 0u);
  const Generated later = generate(engine, 2, prompt, 5);
  EXPECT_EQ(later.hit_tokens, 96u);
  EXPECT_EQ(later.ids, records[0].token_ids);
}

// With a scheduler that knows shared blocks, two requests waiting for the same cached beginning
// both take it; with an older one, the first in queue order takes it and the other computes it.
void two_requests_wait_for_one_beginning(bool older_scheduler, uint64_t hit_tokens) {
  TestEngine engine(Spec{.older_scheduler = older_scheduler});
  const std::vector<int32_t> prompt = random_ids(8, 100);
  const Generated first = generate(engine, 1, prompt, 4);
  // Both wait at once and are admitted in one step: the first in queue order takes the blocks.
  std::vector<RequestRecord> records(2);
  for (uint64_t i = 0; i < 2; ++i) {
    engine->add_request(greedy(10 + i, prompt, 4, &records[i]));
  }
  const EngineCounters before = engine->counters();
  run(*engine.engine);
  EXPECT_EQ(engine->counters().prefix_cache_hit_tokens - before.prefix_cache_hit_tokens,
            hit_tokens);
  EXPECT_EQ(engine->counters().prefill_tokens - before.prefill_tokens, 200u - hit_tokens);
  EXPECT_EQ(records[0].token_ids, first.ids);
  EXPECT_EQ(records[1].token_ids, first.ids);
  EXPECT_EQ(engine->kv().used(), 0u);
}

TEST(EnginePrefixCaching, TwoRequestsWaitingForOneCachedBeginningBothTakeIt) {
  two_requests_wait_for_one_beginning(false, 2 * 96);
}

TEST(EnginePrefixCaching, WithAnOlderSchedulerOnlyOneOfTwoWaitingRequestsTakesIt) {
  two_requests_wait_for_one_beginning(true, 96);
}

// A request that arrives while another holds the blocks of its beginning shares them; the view
// tells the scheduler that preempting either would not free those.
TEST(EnginePrefixCaching, ALaterRequestSharesTheBlocksOfARunningOne) {
  for (const bool older : {false, true}) {
    SCOPED_TRACE(older ? "older scheduler" : "scheduler of ABI 1.3");
    TestEngine engine(Spec{.older_scheduler = older});
    const std::vector<int32_t> prompt = random_ids(9, 100);
    RequestRecord long_record, late_record;
    engine->add_request(greedy(1, prompt, 40, &long_record));
    for (int s = 0; s < 3; ++s) ASSERT_TRUE(engine->step());  // prefilled, decoding
    engine->add_request(greedy(2, prompt, 4, &late_record));
    ASSERT_TRUE(engine->step());
    const uint64_t hits = engine->counters().prefix_cache_hit_tokens;
    EXPECT_EQ(hits, older ? 0u : 96u);
    EXPECT_EQ(engine->kv().used(), older ? 14u : 8u);  // 7 + 7 blocks, or 7 + 1 of its own
    run(*engine.engine);
    EXPECT_EQ(late_record.token_ids, std::vector<int32_t>(long_record.token_ids.begin(),
                                                          long_record.token_ids.begin() + 4));
    EXPECT_EQ(engine->kv().used(), 0u);
  }
}

TEST(EnginePrefixCaching, EvictionTakesTheDeepestBlocksFirstAndKeepsTheBeginning) {
  // 20 blocks: room for max_model_len (256 + 64 tokens), not for two long prompts' caches.
  TestEngine engine(Spec{.kv_blocks = 20, .max_model_len = 320});
  const std::vector<int32_t> prompt = random_ids(6, 100);
  const Generated first = generate(engine, 1, prompt, 8);
  EXPECT_EQ(engine->kv().idle_cached(), 6u);
  // 258 positions need 17 blocks: the 14 never cached, then three of the six cached ones.
  generate(engine, 2, random_ids(7, 250), 8);
  const Generated again = generate(engine, 3, prompt, 8);
  EXPECT_EQ(again.hit_tokens, 48u);  // blocks 0-2 stayed; 3-5 were evicted
  EXPECT_EQ(again.ids, first.ids);
}

// KV runs out while the request admitted last shares two of its three blocks with the request
// that needs room: preempting it frees one block, not three (hw_request_view.blocks_shared), so the
// scheduler preempts the needy request too instead of planning blocks that are not there.
TEST(EnginePrefixCaching, PreemptingARequestThatSharesItsBlocksFreesOnlyItsOwn) {
  const std::vector<int32_t> long_prompt = random_ids(30, 120);
  std::vector<int32_t> sharing(long_prompt.begin(), long_prompt.begin() + 32);
  sharing.push_back(7);
  auto run_steps = [&](bool prefix_caching, EngineCounters& after_step4) {
    // 8 blocks of 16 tokens; 64 tokens a step, at most 32 of them for one request.
    TestEngine engine(Spec{.prefix_caching = prefix_caching,
                           .kv_blocks = 8,
                           .budget = 64,
                           .max_model_len = 128,
                           .long_prefill_threshold = 32});
    std::map<uint64_t, RequestRecord> records;
    auto add = [&](uint64_t id, const std::vector<int32_t>& prompt, uint32_t outputs) {
      engine->add_request(greedy(id, prompt, outputs, &records[id]));
    };
    auto step = [&] {
      EXPECT_TRUE(engine->step());
      std::string why;
      EXPECT_TRUE(engine->kv().consistent(&why)) << why;
    };
    add(0, random_ids(31, 2), 10);
    add(1, long_prompt, 1);
    step();  // request 0: 2 tokens (1 block); request 1: 32 tokens (2 blocks, recorded)
    add(2, sharing, 4);
    step();  // request 1: 32 more; request 2 takes request 1's first 2 blocks and computes 1 token
    step();  // request 1: 32 more; the cache is full
    step();  // request 1 needs 2 blocks: preempting request 2 frees 1, so request 1 goes too
    after_step4 = engine->counters();
    run(*engine.engine);
    EXPECT_EQ(engine->kv().used(), 0u);
    std::map<uint64_t, std::vector<int32_t>> tokens;
    for (const auto& [id, record] : records) {
      EXPECT_TRUE(record.finished) << "request " << id;
      tokens[id] = record.token_ids;
    }
    return tokens;
  };
  EngineCounters cached, plain;
  const auto with_cache = run_steps(true, cached);
  EXPECT_EQ(cached.prefix_cache_hit_tokens, 32u);
  EXPECT_EQ(cached.preemptions, 2u);
  EXPECT_EQ(with_cache, run_steps(false, plain));
}

// Many requests over three shared beginnings, arriving in waves into a cache too small for them
// all (so that requests are preempted and cached blocks evicted), some aborted: every request that
// finishes has the tokens it has without the cache, and every block comes back.
TEST(EnginePrefixCaching, SharedBeginningsUnderPreemptionKeepTokensAndBooks) {
  const std::vector<std::vector<int32_t>> beginnings = {random_ids(10, 70), random_ids(11, 40),
                                                        random_ids(12, 130)};
  struct Planned {
    uint64_t id;
    std::vector<int32_t> prompt;
    uint32_t outputs;
    size_t wave;
    bool abort;
  };
  std::mt19937 rng(2026);
  std::vector<Planned> plan;
  for (uint64_t id = 0; id < 36; ++id) {
    const auto& beginning = beginnings[rng() % beginnings.size()];
    plan.push_back(Planned{id, concat(beginning, random_ids(100 + id, 1 + rng() % 40)),
                           static_cast<uint32_t>(4 + rng() % 24), id / 6, rng() % 9 == 0});
  }
  auto run_plan = [&](bool prefix_caching, bool older_scheduler,
                      std::map<uint64_t, std::vector<int32_t>>& out) {
    TestEngine engine(Spec{.prefix_caching = prefix_caching,
                           .kv_blocks = 24,
                           .budget = 96,
                           .max_model_len = 320,
                           .older_scheduler = older_scheduler});
    std::map<uint64_t, RequestRecord> records;
    const auto step_and_check = [&] {
      if (!engine->step()) return false;
      std::string why;
      EXPECT_TRUE(engine->kv().consistent(&why)) << why;
      // An older scheduler counts every block a request holds as freed by preempting it: no
      // block may then have two owners.
      for (uint32_t b = 0; older_scheduler && b < engine->kv().total(); ++b) {
        EXPECT_LE(engine->kv().ref_count(b), 1u)
            << "block " << b << " after step " << engine->counters().steps;
      }
      return true;
    };
    for (size_t wave = 0; wave * 6 < plan.size(); ++wave) {
      for (const Planned& p : plan) {
        if (p.wave != wave) continue;
        engine->add_request(greedy(p.id, p.prompt, p.outputs, &records[p.id]));
      }
      // A few steps, then abort this wave's marked requests wherever they are.
      for (int s = 0; s < 3 && step_and_check(); ++s) {
      }
      for (const Planned& p : plan) {
        if (p.wave == wave && p.abort) engine->abort(p.id);
      }
    }
    while (step_and_check()) {
    }
    EXPECT_EQ(engine->kv().used(), 0u);
    // An aborted request may have finished first in one run and not in the other: only the
    // others are compared, and each of them must finish.
    for (const Planned& p : plan) {
      if (p.abort) continue;
      EXPECT_TRUE(records[p.id].finished) << "request " << p.id;
      out[p.id] = records[p.id].token_ids;
    }
    return engine->counters();
  };
  std::map<uint64_t, std::vector<int32_t>> shared, exclusive, without_cache;
  const EngineCounters cached = run_plan(true, false, shared);
  const EngineCounters cached_exclusive = run_plan(true, true, exclusive);
  const EngineCounters plain = run_plan(false, false, without_cache);
  EXPECT_EQ(shared, without_cache);
  EXPECT_EQ(exclusive, without_cache);
  EXPECT_GT(cached_exclusive.prefix_cache_hit_tokens, 0u);
  // The paths this test is for were taken.
  EXPECT_GT(cached.prefix_cache_hit_tokens, 0u);
  EXPECT_GT(cached.preemptions, 0u);
  EXPECT_LT(cached.prefill_tokens, plain.prefill_tokens);
}

// The priority policy admits the most urgent waiting request from anywhere in the queue. Its
// beginning is found although more requests wait before it than the engine looks up each step
// (the first max(64, max_num_seqs) in queue order, while all priorities are equal).
TEST(EnginePrefixCaching, AnUrgentRequestBehindALongQueueReusesItsBeginning) {
  TestEngine engine(Spec{.kv_blocks = 512,
                         .scheduler = "{ plugin = \"partial_prefill\", options = { "
                                      "max_num_batched_tokens = 256, max_num_seqs = 8, "
                                      "policy = \"priority\" } }"});
  const std::vector<int32_t> beginning = random_ids(20, 96);
  generate(engine, 1, concat(beginning, random_ids(21, 5)), 2);
  constexpr size_t kBefore = 80;
  std::vector<RequestRecord> records(kBefore + 1);
  for (size_t i = 0; i < kBefore; ++i) {
    NewRequest r = greedy(100 + i, random_ids(static_cast<uint32_t>(200 + i), 20), 2, &records[i]);
    r.priority = 1;
    engine->add_request(std::move(r));
  }
  RequestRecord& urgent = records[kBefore];
  engine->add_request(greedy(500, concat(beginning, random_ids(22, 7)), 2, &urgent));
  run(*engine.engine);
  EXPECT_TRUE(urgent.finished);
  EXPECT_EQ(urgent.cached_tokens, 96u);
  // What the test is about: it was admitted before the requests queued ahead of it.
  for (size_t i = 0; i < kBefore; ++i) EXPECT_LE(urgent.scheduled, records[i].scheduled) << i;
}

// Requests of mixed priorities over shared beginnings, in waves deeper than the engine looks up
// each step, into a cache too small for them all: every request has the tokens it has without the
// cache, and every block comes back, under the priority policy, under one that admits from
// anywhere in the queue (fcfs deferring long prompts: short ones overtake them, neither the head
// nor the most urgent), and without sharing.
TEST(EnginePrefixCaching, MixedPrioritiesBehindLongQueuesKeepTokensAndBooks) {
  const std::vector<std::vector<int32_t>> beginnings = {random_ids(30, 70), random_ids(31, 40),
                                                        random_ids(32, 100)};
  struct Planned {
    uint64_t id;
    std::vector<int32_t> prompt;
    uint32_t outputs;
    int32_t priority;
    size_t wave;
  };
  std::mt19937 rng(2027);
  std::vector<Planned> plan;
  for (uint64_t id = 0; id < 240; ++id) {
    const auto& beginning = beginnings[rng() % beginnings.size()];
    plan.push_back(Planned{id, concat(beginning, random_ids(300 + id, 1 + rng() % 30)),
                           static_cast<uint32_t>(4 + rng() % 24),
                           static_cast<int32_t>(rng() % 4) - 1, id / 80});
  }
  const std::string partial_prefill =
      "{ plugin = \"partial_prefill\", options = { max_num_batched_tokens = 96, "
      "max_num_seqs = 6, ";
  const std::string by_priority = partial_prefill + "policy = \"priority\" } }";
  const std::string deferring_long = partial_prefill +
                                     "max_num_partial_prefills = 4, max_long_partial_prefills = 1, "
                                     "long_prefill_token_threshold = 60 } }";
  auto run_plan = [&](bool prefix_caching, bool older_scheduler, const std::string& scheduler,
                      std::map<uint64_t, std::vector<int32_t>>& out) {
    TestEngine engine(Spec{.prefix_caching = prefix_caching,
                           .kv_blocks = 24,
                           .max_model_len = 320,
                           .older_scheduler = older_scheduler,
                           .scheduler = scheduler});
    std::map<uint64_t, RequestRecord> records;
    for (size_t wave = 0; wave * 80 < plan.size(); ++wave) {
      for (const Planned& p : plan) {
        if (p.wave != wave) continue;
        NewRequest r = greedy(p.id, p.prompt, p.outputs, &records[p.id]);
        r.priority = p.priority;
        engine->add_request(std::move(r));
      }
      for (int s = 0; s < 20 && engine->step(); ++s) {
        std::string why;
        EXPECT_TRUE(engine->kv().consistent(&why)) << why;
      }
    }
    run(*engine.engine);
    EXPECT_EQ(engine->kv().used(), 0u);
    for (const Planned& p : plan) {
      EXPECT_TRUE(records[p.id].finished) << "request " << p.id;
      out[p.id] = records[p.id].token_ids;
    }
    return engine->counters();
  };
  std::map<uint64_t, std::vector<int32_t>> shared, deferring, exclusive, without_cache;
  const EngineCounters cached = run_plan(true, false, by_priority, shared);
  const EngineCounters cached_deferring = run_plan(true, false, deferring_long, deferring);
  const EngineCounters cached_exclusive = run_plan(true, true, "", exclusive);
  run_plan(false, false, by_priority, without_cache);
  EXPECT_EQ(shared, without_cache);
  EXPECT_EQ(deferring, without_cache);
  EXPECT_EQ(exclusive, without_cache);
  EXPECT_GT(cached.prefix_cache_hit_tokens, 0u);
  EXPECT_GT(cached_deferring.prefix_cache_hit_tokens, 0u);
  EXPECT_GT(cached_exclusive.prefix_cache_hit_tokens, 0u);
  EXPECT_GT(cached.preemptions, 0u);
}

// With a scheduler built before ABI 1.3 a cached block is reused only while idle, by one waiting
// request a step. A waiting request keeps what it matched from one step to the next, so the
// match must be re-checked: a request preempted meanwhile comes back at the head of the queue and
// may claim the same blocks first. Requests arriving in bursts compute the same beginnings side
// by side, and a small pool preempts them; after every step no block has two owners.
TEST(EnginePrefixCaching, WithAnOlderSchedulerNoBlockEverHasTwoOwners) {
  const std::vector<std::vector<int32_t>> beginnings = {random_ids(20, 48), random_ids(21, 80)};
  uint64_t hits = 0, preemptions = 0;
  for (uint32_t seed = 0; seed < 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TestEngine engine(Spec{.kv_blocks = 20, .max_model_len = 320, .older_scheduler = true});
    std::mt19937 rng(seed);
    std::map<uint64_t, RequestRecord> records;
    uint64_t id = 0;
    for (int burst = 0; burst < 8; ++burst) {
      for (int i = 0; i < 5; ++i, ++id) {
        engine->add_request(greedy(
            id, concat(beginnings[rng() % 2], random_ids(1000 + seed * 100 + id, 1 + rng() % 24)),
            static_cast<uint32_t>(8 + rng() % 48), &records[id]));
      }
      for (int s = 0; s < 6 + static_cast<int>(rng() % 10) && engine->step(); ++s) {
        for (uint32_t b = 0; b < engine->kv().total(); ++b) {
          ASSERT_LE(engine->kv().ref_count(b), 1u)
              << "block " << b << " after step " << engine->counters().steps;
        }
      }
    }
    run(*engine.engine);
    for (const auto& [request, record] : records) EXPECT_TRUE(record.finished) << request;
    hits += engine->counters().prefix_cache_hit_tokens;
    preemptions += engine->counters().preemptions;
  }
  EXPECT_GT(hits, 0u);
  EXPECT_GT(preemptions, 0u);
}

// The report of `workload` simulated on the deployment written in `deployment_toml`.
Report simulated_report(const std::string& deployment_toml, const Workload& workload) {
  const DeploymentConfig deployment =
      parse_deployment(deployment_toml, "sim.toml", test::built_plugins());
  const SimulationResult result = simulate(deployment, workload);
  return build_report(workload, result.records, result.steps, result.simulated_seconds,
                      result.wall_seconds);
}

// The simulated model reads no ids, but a workload's shared beginnings come with ids, which the
// engine's prefix cache recognises: on the virtual clock the reused prefill is not paid for.
TEST(EnginePrefixCaching, ASimulatedDeploymentReusesAWorkloadsSharedBeginnings) {
  const Workload workload = parse_workload(R"(
seed = 3
count = 40
[arrival]
process = "poisson"
rate = 4
[[classes]]
name = "chat"
share = 1
shared_prefix = { tokens = 2048, count = 2 }
prompt = { dist = "uniform", min = 16, max = 128 }
output = { dist = "fixed", value = 16 }
)",
                                           "shared.toml");
  const Report cached =
      simulated_report("[model]\nplugin = \"sim\"\n[[engines]]\nprefix_caching = true\n", workload);
  const Report plain = simulated_report(
      "[model]\nplugin = \"sim\"\n[[engines]]\nprefix_caching = false\n", workload);
  EXPECT_EQ(cached.overall.finished, 40u);
  EXPECT_EQ(plain.overall.finished, 40u);
  EXPECT_EQ(plain.cached_prompt_tokens, 0u);
  // The first request of each beginning, and those admitted before its blocks were recorded,
  // compute it; the others find it.
  EXPECT_GT(cached.cached_prompt_tokens, 20u * 2048u);
  EXPECT_LT(cached.overall.ttft.mean, plain.overall.ttft.mean);
}

// A conversation's later turn begins with the turn before it (its prompt, then the workload's
// stand-in for its answer): with turns far enough apart for each to finish first, one engine finds
// every whole block of the previous turn's prompt cached, and no more (the model's answer is not
// the stand-in). Without `conversation` the requests share nothing.
TEST(EnginePrefixCaching, AConversationsLaterTurnFindsThePreviousTurnsPromptCached) {
  const std::string classes = R"(
seed = 4
count = 6
[arrival]
process = "poisson"
rate = 0.05
[[classes]]
name = "chat"
share = 1
prompt = { dist = "uniform", min = 100, max = 400 }
output = { dist = "fixed", value = 16 }
)";
  const Workload talks =
      parse_workload(classes + "conversation = { turns = 3, gap = 10.0 }\n", "talks.toml");
  const Workload alone = parse_workload(classes, "alone.toml");
  const std::string engine = "[model]\nplugin = \"sim\"\n[[engines]]\nblock_size = 16\n";
  uint64_t expected = 0;
  std::map<uint64_t, uint32_t> previous_prompt;
  for (const WorkloadRequest& r : talks.requests) {
    if (r.turn > 0) expected += previous_prompt.at(r.conversation_id()) / 16 * 16;
    previous_prompt[r.conversation_id()] = r.prompt_tokens;
  }
  ASSERT_GT(talks.requests.size(), 12u);
  EXPECT_EQ(simulated_report(engine, talks).cached_prompt_tokens, expected);
  EXPECT_EQ(simulated_report(engine, alone).cached_prompt_tokens, 0u);
}

// With wait_for_answer a turn is sent its gap after the turn before ended, carrying that turn's
// answer as the engine produced it, which the engine cached: each later turn finds the previous
// prompt and answer cached, up to the answer's last token (whose KV was never computed) and in
// whole blocks. The open loop above finds only the previous prompt.
TEST(EnginePrefixCaching, AConversationThatWaitsForAnswersFindsThePreviousAnswerCachedToo) {
  const Workload talks = parse_workload(R"(
seed = 4
count = 6
[arrival]
process = "poisson"
rate = 0.05
[[classes]]
name = "chat"
share = 1
prompt = { dist = "uniform", min = 100, max = 400 }
output = { dist = "fixed", value = 16 }
conversation = { turns = 3, gap = 10.0, wait_for_answer = true }
)",
                                        "talks.toml");
  const DeploymentConfig deployment =
      parse_deployment("[model]\nplugin = \"sim\"\n[[engines]]\nblock_size = 16\n", "sim.toml",
                       test::built_plugins());
  const SimulationResult result = simulate(deployment, talks);
  ASSERT_EQ(result.records.size(), talks.requests.size());
  EXPECT_EQ(result.unsent_turns, 0u);
  // The previous turn of each conversation, by conversation, as the run went.
  std::map<uint64_t, size_t> previous;
  uint64_t expected = 0, cached = 0;
  size_t later_turns = 0;
  for (size_t i = 0; i < talks.requests.size(); ++i) {
    const WorkloadRequest& r = talks.requests[i];
    const RequestRecord& record = result.records[i];
    ASSERT_TRUE(record.finished) << "request " << r.id;
    cached += record.cached_tokens;
    if (r.turn > 0) {
      const RequestRecord& before = result.records[previous.at(r.conversation_id())];
      ++later_turns;
      EXPECT_DOUBLE_EQ(record.arrival, before.finish + 10.0) << "turn " << r.turn;
      EXPECT_EQ(record.prompt_tokens, r.prompt_tokens);
      expected += (before.prompt_tokens + before.output_tokens - 1) / 16 * 16;
    }
    previous[r.conversation_id()] = i;
  }
  ASSERT_EQ(later_turns, talks.requests.size() * 2 / 3);
  EXPECT_EQ(cached, expected);
}

// A turn the deployment refuses ends its conversation: the turns after it are never sent, counted
// as such, and their records stay unfinished without an arrival.
TEST(SimulatedConversations, ARefusedTurnEndsAConversationThatWaitsForAnswers) {
  // The conversation's class is the second, so that a record left without its class would count
  // in the first.
  const Workload talks = parse_workload(R"(
[arrival]
process = "fixed"
times = [0]
[[classes]]
name = "question"
share = 0.000001
prompt = { dist = "fixed", value = 10 }
output = { dist = "fixed", value = 2 }
[[classes]]
name = "chat"
share = 1
prompt = { dist = "fixed", value = 300 }
output = { dist = "fixed", value = 16 }
conversation = { turns = 4, gap = 1.0, wait_for_answer = true }
)",
                                        "talks.toml");
  ASSERT_EQ(talks.requests.size(), 4u);
  ASSERT_EQ(talks.requests[0].class_index, 1u);
  // Room for the first turn (300 + 16) only: the second's 616-token prompt is refused.
  const DeploymentConfig deployment =
      parse_deployment("[model]\nplugin = \"sim\"\n[[engines]]\nmax_model_len = 512\n", "sim.toml",
                       test::built_plugins());
  const SimulationResult result = simulate(deployment, talks);
  EXPECT_EQ(result.rejected, 1u);
  EXPECT_EQ(result.unsent_turns, 2u);
  EXPECT_TRUE(result.records[0].finished);
  EXPECT_FALSE(result.records[1].finished);
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_FALSE(result.records[i].finished);
    EXPECT_TRUE(std::isnan(result.records[i].arrival)) << i;
    EXPECT_EQ(result.records[i].id, talks.requests[i].id);
  }
  // Counted, unfinished, in their own class.
  const Report report = build_report(talks, result.records, result.steps, result.simulated_seconds,
                                     result.wall_seconds);
  EXPECT_EQ(report.classes[0].requests, 0u);
  EXPECT_EQ(report.classes[1].requests, 4u);
  EXPECT_EQ(report.classes[1].finished, 1u);
}

// Behind the prefix_aware router a simulated deployment hands each prompt's beginning to the router
// (Cluster::submit hashes the workload's ids), so questions about one of 16 documents go where that
// document is: each of the two engines, with room for about 10 of the 16, keeps about half of them,
// where behind least_loaded both are sent every document and evict them in turn.
TEST(EnginePrefixCaching, BehindPrefixAwareEachEngineKeepsItsShareOfTheBeginnings) {
  const Workload workload = parse_workload(R"(
seed = 5
count = 300
[arrival]
process = "poisson"
rate = 8
[[classes]]
name = "question"
share = 1
shared_prefix = { tokens = 1024, count = 16 }
prompt = { dist = "uniform", min = 16, max = 64 }
output = { dist = "fixed", value = 16 }
)",
                                           "documents.toml");
  const std::string engines =
      "[model]\nplugin = \"sim\"\n[[engines]]\ncount = 2\nkv_blocks = 700\nmax_model_len = 4096\n";
  const Report spread =
      simulated_report(engines + "[router]\nplugin = \"least_loaded\"\n", workload);
  const Report kept = simulated_report(engines + "[router]\nplugin = \"prefix_aware\"\n", workload);
  EXPECT_EQ(spread.overall.finished, 300u);
  EXPECT_EQ(kept.overall.finished, 300u);
  // Each document's first question on an engine computes it: 16 behind prefix_aware, about 32 and
  // every eviction's recomputation behind least_loaded.
  EXPECT_GT(kept.cached_prompt_tokens, spread.cached_prompt_tokens + 30u * 1024u)
      << "least_loaded " << spread.cached_prompt_tokens << ", prefix_aware "
      << kept.cached_prompt_tokens;
}

TEST(EnginePrefixCaching, TheOptionMustBeABoolean) {
  const std::string text = "[model]\nplugin = \"sim\"\n[[engines]]\nprefix_caching = 1\n";
  try {
    parse_deployment(text, "deploy.toml", test::built_plugins());
    FAIL() << "prefix_caching = 1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("engines[0].prefix_caching"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("true or false"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headway::core
