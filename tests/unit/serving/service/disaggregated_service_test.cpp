// Prefill/decode disaggregation served in-process: a prefill engine and a decode engine, each on
// its own driver thread, the disaggregated router, and host_copy moving the KV blocks between
// them. Checks that greedy tokens equal those of one mixed engine (the copied KV is the KV the
// decode engine needs), that aborts at any moment of the hand-off free both engines' blocks, and
// that the transfers show in the metrics and the timings.
#include <gtest/gtest.h>
#include <headway/serving/local_generation_service.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "service_fixture.h"

namespace headway::serving {
namespace {

using test::collect;
using test::handoff_prompts;
using test::sum_of;
using test::text_request;
using test::tiny_deployment;
using test::TinyCheckpoint;

const std::string& kScheduler = test::kSmallStepScheduler;
const std::string& kMixed = test::kMixedEngine;
const std::string& kDisaggregated = test::kPrefillAndDecodeEngines;
const std::string& kRouterAndTransport = test::kDisaggregatedRouter;

class DisaggregatedServiceTest : public ::testing::Test {
 protected:
  static TinyCheckpoint& checkpoint() { return test::shared_tiny_checkpoint(); }
  static core::DeploymentConfig disaggregated() {
    return tiny_deployment(checkpoint(), kDisaggregated, kRouterAndTransport);
  }
};

// Waits until every engine reports all its KV blocks free (or 5 minutes passed: a hang guard, not a
// timing assertion) and returns the engines as they were then. The prefill engine frees its copy
// of a moved request when its driver applies the decode engine's release, which may come just
// after the request finished on the decode engine.
std::vector<EngineSummary> engines_once_free(const LocalGenerationService& service) {
  test::wait_idle(service);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  for (;;) {
    std::vector<EngineSummary> engines = service.cluster_info().engines;
    bool all_free = true;
    for (const EngineSummary& e : engines)
      all_free = all_free && e.kv_blocks_free == e.kv_blocks_total;
    if (all_free || std::chrono::steady_clock::now() > give_up) return engines;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST_F(DisaggregatedServiceTest, GreedyTokensEqualThoseOfOneMixedEngine) {
  std::vector<std::vector<int32_t>> expected;
  {
    LocalGenerationService mixed(tiny_deployment(checkpoint(), kMixed));
    for (const std::string& prompt : handoff_prompts()) {
      expected.push_back(collect(*mixed.submit(text_request(prompt, 12))).ids);
    }
  }
  LocalGenerationService service(disaggregated());
  for (size_t i = 0; i < handoff_prompts().size(); ++i) {
    SCOPED_TRACE(i);
    const test::Collected got = collect(*service.submit(text_request(handoff_prompts()[i], 12)));
    EXPECT_EQ(got.finish, Finish::kLength) << got.error;
    EXPECT_EQ(got.ids, expected[i]);
    EXPECT_GT(got.timings.kv_transfer_seconds, 0.0);
  }
  // Each request moved once, into the decode engine (engine1).
  const std::string metrics = service.metrics_text();
  EXPECT_NE(metrics.find("headway_kv_transfers_total{engine=\"1\",pool=\"\"} 4"), std::string::npos)
      << metrics;
  // Each request's prompt and first token are the prefill engine's, its other 11 tokens and its
  // finish the decode engine's (helper-130's walk: all of it was the prefill engine's).
  const double prompt_tokens = sum_of(metrics, "headway_prompt_tokens_total");
  EXPECT_GT(prompt_tokens, 0.0);
  EXPECT_EQ(sum_of(metrics, "headway_prompt_tokens_total", "engine=\"0\""), prompt_tokens);
  EXPECT_EQ(sum_of(metrics, "headway_time_to_first_token_seconds_count", "engine=\"0\""), 4);
  EXPECT_EQ(sum_of(metrics, "headway_generation_tokens_total", "engine=\"0\""), 4);
  EXPECT_EQ(sum_of(metrics, "headway_generation_tokens_total", "engine=\"1\""), 44);
  EXPECT_EQ(sum_of(metrics, "headway_inter_token_latency_seconds_count", "engine=\"1\""), 44);
  EXPECT_EQ(sum_of(metrics, "headway_inter_token_latency_seconds_count", "engine=\"0\""), 0);
  EXPECT_EQ(sum_of(metrics, "headway_request_success_total", "engine=\"1\""), 4);
  EXPECT_EQ(sum_of(metrics, "headway_request_success_total", "engine=\"0\""), 0);
  EXPECT_EQ(sum_of(metrics, "headway_e2e_request_latency_seconds_count", "engine=\"1\""), 4);
}

// moved_kv_blocks = "as_needed" on a decode engine of 16 blocks (256 tokens): four requests that
// end at about 110 tokens each (7 blocks) arrive with 2-3 blocks of KV, all start decoding, outgrow
// the cache and are preempted there, and each one preempted is prefilled again on the decode engine
// from its prompt and the tokens it had: its tokens still equal one mixed engine's, greedy or
// seeded (the sampler goes on numbering its outputs). With "all" the decode engine would take two
// at a time and preempt none.
TEST_F(DisaggregatedServiceTest, MovedRequestsPreemptedOnTheDecodeEngineKeepTheirTokens) {
  std::vector<GenerateInput> inputs;
  for (int i = 0; i < 4; ++i) {
    inputs.push_back(text_request(std::string(20 + 5 * i, 'k' + i), 85));
    if (i % 2 == 1) {
      inputs.back().sampling.temperature = 0.8f;
      inputs.back().sampling.seed = 1000 + i;
    }
  }
  std::vector<std::vector<int32_t>> expected;
  {
    LocalGenerationService mixed(tiny_deployment(checkpoint(), kMixed));
    for (const GenerateInput& input : inputs) expected.push_back(collect(*mixed.submit(input)).ids);
  }
  const std::string engines = "[[engines]]\nrole = \"prefill\"\n" + kScheduler +
                              "[[engines]]\nrole = \"decode\"\nkv_blocks = 16\n"
                              "max_model_len = 128\nmoved_kv_blocks = \"as_needed\"\n" +
                              kScheduler;
  LocalGenerationService service(tiny_deployment(checkpoint(), engines, kRouterAndTransport));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerateInput& input : inputs) streams.push_back(service.submit(input));
  for (size_t i = 0; i < streams.size(); ++i) {
    SCOPED_TRACE(i);
    const test::Collected got = collect(*streams[i]);
    EXPECT_EQ(got.finish, Finish::kLength) << got.error;
    EXPECT_EQ(got.ids, expected[i]);
  }
  const std::string metrics = service.metrics_text();
  EXPECT_GE(sum_of(metrics, "headway_num_preemptions_total", "engine=\"1\""), 1.0) << metrics;
  EXPECT_EQ(sum_of(metrics, "headway_kv_transfers_total", "engine=\"1\""), 4.0) << metrics;
  // The recomputed prompts are the decode engine's prefill work (each prompt still counts once,
  // on the prefill engine).
  EXPECT_GT(sum_of(metrics, "headway_iteration_prefill_tokens_sum", "engine=\"1\""), 0.0)
      << metrics;
  EXPECT_EQ(sum_of(metrics, "headway_prompt_tokens_total", "engine=\"1\""), 0.0) << metrics;
  for (const EngineSummary& engine : engines_once_free(service)) {
    EXPECT_EQ(engine.kv_blocks_free, engine.kv_blocks_total) << "engine" << engine.index;
    EXPECT_EQ(engine.running + engine.waiting, 0u) << "engine" << engine.index;
  }
}

TEST_F(DisaggregatedServiceTest, ConcurrentRequestsAllFinishAndLeaveNoBlockBehind) {
  LocalGenerationService service(disaggregated());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 24; ++i) {
    streams.push_back(service.submit(text_request(std::string(20 + 13 * i, 'a' + i % 26), 20)));
  }
  for (auto& stream : streams) {
    const test::Collected got = collect(*stream);
    EXPECT_EQ(got.finish, Finish::kLength) << got.error;
    EXPECT_EQ(got.usage.completion_tokens, 20u);
  }
  for (const EngineSummary& engine : engines_once_free(service)) {
    EXPECT_EQ(engine.kv_blocks_free, engine.kv_blocks_total) << "engine" << engine.index;
    EXPECT_EQ(engine.running + engine.waiting, 0u) << "engine" << engine.index;
  }
}

TEST_F(DisaggregatedServiceTest, AbortsAtAnyMomentOfTheHandOffFreeBothEnginesBlocks) {
  LocalGenerationService service(disaggregated());
  std::mt19937 random(7);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int round = 0; round < 60; ++round) {
    auto stream =
        service.submit(text_request(std::string(10 + random() % 300, 'a' + round % 26), 30));
    streams.push_back(stream);
    // Abort some at once (waiting or prefilling), some a little later (being moved, decoding).
    if (round % 3 == 0) service.abort(stream->id());
    if (round % 3 == 1) {
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 3000));
      service.abort(stream->id());
    }
  }
  size_t aborted = 0;
  for (auto& stream : streams) {
    const test::Collected got = collect(*stream);
    EXPECT_TRUE(got.finish == Finish::kAbort || got.finish == Finish::kLength)
        << finish_name(got.finish) << " " << got.error;
    aborted += got.finish == Finish::kAbort;
  }
  EXPECT_GT(aborted, 0u);
  for (const EngineSummary& engine : engines_once_free(service)) {
    EXPECT_EQ(engine.kv_blocks_free, engine.kv_blocks_total) << "engine" << engine.index;
  }
}

// A prefill engine with a shorter max_model_len than the decode engine (ABI 1.7): the service
// admits up to the decode engine's, and a request the prefill engine cannot hold whole (an engine
// admits no less, prefill-only or not) is prefilled on its decode engine, as the disaggregated
// router does when no prefill engine can take it; one it holds is split as usual.
TEST_F(DisaggregatedServiceTest, ARequestThePrefillEngineCannotHoldIsPrefilledOnItsDecodeEngine) {
  const std::string engines = "[[engines]]\nrole = \"prefill\"\nmax_model_len = 64\n" + kScheduler +
                              "[[engines]]\nrole = \"decode\"\n" + kScheduler;
  LocalGenerationService service(tiny_deployment(checkpoint(), engines, kRouterAndTransport));
  EXPECT_EQ(service.model_info().max_model_len, 1024u);
  const test::Collected whole = collect(*service.submit(text_request("long answer", 100)));
  EXPECT_EQ(whole.finish, Finish::kLength) << whole.error;
  EXPECT_EQ(whole.usage.completion_tokens, 100u);
  const test::Collected split = collect(*service.submit(text_request("short answer", 8)));
  EXPECT_EQ(split.finish, Finish::kLength) << split.error;
  const std::string metrics = service.metrics_text();
  // The first prefilled on the decode engine (a fallback), the second on the prefill engine and
  // moved: each engine computed one prompt.
  EXPECT_EQ(test::sum_of(metrics, "headway_prompt_tokens_total", "engine=\"1\""),
            whole.usage.prompt_tokens)
      << metrics;
  EXPECT_EQ(test::sum_of(metrics, "headway_prompt_tokens_total", "engine=\"0\""),
            split.usage.prompt_tokens)
      << metrics;
  EXPECT_EQ(test::sum_of(metrics, "headway_kv_transfers_total", ""), 1.0) << metrics;
  EXPECT_NE(metrics.find("metric=\"router_fallbacks\"} 1"), std::string::npos) << metrics;
  // Without max_tokens, a short prompt is split too, and runs to the end of the shorter context
  // of its two engines: the prefill engine's 64.
  GenerateInput open = text_request("open", 1);
  open.max_tokens_to_context_end = true;
  const test::Collected ended = collect(*service.submit(open));
  EXPECT_EQ(ended.finish, Finish::kLength) << ended.error;
  EXPECT_EQ(ended.usage.prompt_tokens + ended.usage.completion_tokens, 64u);
  EXPECT_EQ(test::sum_of(service.metrics_text(), "headway_kv_transfers_total", ""), 2.0);
}

// A prefill engine and a decode engine of `kv_blocks` blocks of 16, both holding `max_model_len`
// tokens: with "all", requests asking for most of that wait on the decode engine for each other.
core::DeploymentConfig short_of_decode_room(uint32_t max_model_len, uint32_t kv_blocks) {
  const std::string length = "max_model_len = " + std::to_string(max_model_len) + "\n";
  const std::string engines = "[[engines]]\nrole = \"prefill\"\n" + length + kScheduler +
                              "[[engines]]\nrole = \"decode\"\n" + length +
                              "kv_blocks = " + std::to_string(kv_blocks) + "\n" + kScheduler;
  return tiny_deployment(test::shared_tiny_checkpoint(), engines, kRouterAndTransport,
                         max_model_len);
}

// Requests handed to the decode engine that wait there for KV room are its queued work: its load
// (what routers and /metrics see) counts them as waiting, not as nothing.
TEST_F(DisaggregatedServiceTest, HandOffsWaitingForKvRoomCountAsTheDecodeEnginesWaiting) {
  // Room for one request at a time on the decode engine: each reserves its final 4,019 tokens,
  // 252 of the 256 blocks of 16, and holds them for 4,000 steps. (With 100-token requests the
  // state lasted 25-60 ms under ASan, and an observer descheduled that long saw none of it; with
  // 1,000-token ones a loaded machine once kept this thread away for two of them.)
  LocalGenerationService service(short_of_decode_room(/*max_model_len=*/4096, /*kv_blocks=*/256));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(service.submit(text_request(std::string(19, 'a' + i), 4000)));
  }
  // Read until one of them is 100 tokens in: by then the other three were handed off long ago and
  // the decode driver has taken them out of its inbox (where they count as waiting too), so what
  // is seen is the driver's own count of hand-offs waiting for room.
  std::vector<size_t> tokens(streams.size(), 0);
  StreamChunk chunk;
  while (*std::max_element(tokens.begin(), tokens.end()) < 100 && service.in_flight() > 0) {
    for (size_t i = 0; i < streams.size(); ++i) {
      if (streams[i]->next(chunk, std::chrono::milliseconds(1))) {
        tokens[i] += chunk.token_ids.size();
      }
    }
  }
  // One decodes and the others wait for its blocks (at least two still wait even if this thread
  // stalled through the first request's remaining 3,900 steps).
  EXPECT_GE(service.cluster_info().engines[1].waiting, 2u);
  for (auto& stream : streams) service.abort(stream->id());
  for (auto& stream : streams) {
    const test::Collected got = collect(*stream);
    EXPECT_TRUE(got.finish == Finish::kAbort || got.finish == Finish::kLength)
        << finish_name(got.finish) << " " << got.error;
  }
  for (const EngineSummary& engine : engines_once_free(service)) {
    EXPECT_EQ(engine.running + engine.waiting, 0u) << "engine" << engine.index;
    EXPECT_EQ(engine.kv_blocks_free, engine.kv_blocks_total) << "engine" << engine.index;
  }
}

// With room on the decode engine for one request at a time (each reserves its final 620 tokens, 39
// of the 64 blocks), the second request's KV waits after its prefill until the first finishes:
// its timings say how long, and so does the decode engine's headway_kv_transfer_wait_seconds,
// one observation per moved request (the served twin of simulate's "KV wait" table).
TEST_F(DisaggregatedServiceTest, AHandOffWaitingForKvRoomReportsItsWait) {
  LocalGenerationService service(short_of_decode_room(/*max_model_len=*/1024, /*kv_blocks=*/64));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 2; ++i) {
    streams.push_back(service.submit(text_request(std::string(19, 'a' + i), 600)));
  }
  std::vector<double> waits;
  for (auto& stream : streams) {
    const test::Collected got = collect(*stream);
    EXPECT_EQ(got.finish, Finish::kLength) << got.error;
    EXPECT_GT(got.timings.kv_transfer_seconds, 0.0);  // moved, not prefilled on the decode engine
    EXPECT_GE(got.timings.kv_wait_seconds, 0.0);
    waits.push_back(got.timings.kv_wait_seconds);
  }
  // One of them decoded all its 599 tokens while the other's KV waited.
  EXPECT_GT(std::max(waits[0], waits[1]), 0.0);
  const std::string metrics = service.metrics_text();
  EXPECT_EQ(sum_of(metrics, "headway_kv_transfer_wait_seconds_count", "engine=\"1\""), 2.0)
      << metrics;
  EXPECT_NEAR(sum_of(metrics, "headway_kv_transfer_wait_seconds_sum", "engine=\"1\""),
              waits[0] + waits[1], 1e-6);
  EXPECT_EQ(sum_of(metrics, "headway_kv_transfer_wait_seconds_count", "engine=\"0\""), 0.0);
}

// A request routed to a decode engine counts in its load from its routing, not only once its
// hand-off reached it: a burst submitted while its requests still prefill spreads over the decode
// engines by the work each has and is promised. Before, their loads showed none of the burst and
// all ten went to the decode engine beside the one holding a long answer (helper-170).
TEST_F(DisaggregatedServiceTest, ABurstSpreadsOverTheDecodeEnginesBeforeItsKvArrives) {
  const std::string engines = "[[engines]]\nrole = \"prefill\"\n" + kScheduler +
                              "[[engines]]\nrole = \"decode\"\ncount = 2\n" + kScheduler;
  LocalGenerationService service(tiny_deployment(checkpoint(), engines, kRouterAndTransport));
  // A long answer, decoding on one decode engine once its first tokens came.
  const std::shared_ptr<RequestStream> long_answer = service.submit(text_request("long", 1000));
  size_t long_tokens = 0;
  StreamChunk chunk;
  while (long_tokens < 3 && long_answer->next(chunk, std::chrono::seconds(60))) {
    long_tokens += chunk.token_ids.size();
  }
  ASSERT_GE(long_tokens, 3u) << "the long answer did not start";
  std::vector<std::shared_ptr<RequestStream>> burst;
  for (int i = 0; i < 10; ++i)
    burst.push_back(service.submit(text_request("b" + std::to_string(i), 200)));
  for (auto& stream : burst) {
    const test::Collected got = collect(*stream);
    EXPECT_EQ(got.finish, Finish::kLength) << got.error;
  }
  service.abort(long_answer->id());
  collect(*long_answer);
  // Each request of the burst moved its KV once, into the engine it decodes on; the long answer
  // into the one that holds it. The other engine takes answers of 200 until what it is promised
  // passes the long answer's ~1,000 tokens to come; then they alternate.
  const std::string metrics = service.metrics_text();
  const double one = sum_of(metrics, "headway_kv_transfers_total", "engine=\"1\"");
  const double two = sum_of(metrics, "headway_kv_transfers_total", "engine=\"2\"");
  ASSERT_EQ(one + two, 11.0) << metrics;
  const double beside_long = std::min(one, two) - 1.0;
  EXPECT_GT(beside_long, 0.0) << "every request of the burst went to the other decode engine";
  EXPECT_LT(beside_long, 5.0) << "the engine with the long answer took as many as the other";
}

// The disaggregated router reads how prompts begin (ABI 1.8) for its prefill side: a second prompt
// that begins as the first is prefilled on the first's prefill engine and finds its blocks cached
// there. With cached_token_weight = 0 the two idle prefill engines take one each (round-robin
// ties), and the second computes everything again.
TEST_F(DisaggregatedServiceTest, APromptThatBeginsAsAnEarlierOneIsPrefilledWhereItIsCached) {
  const std::string engines = "[[engines]]\nrole = \"prefill\"\ncount = 2\n" + kScheduler +
                              "[[engines]]\nrole = \"decode\"\n" + kScheduler;
  const std::string document(200, 'd');  // BOS + 200 bytes: three whole pieces of 64 ids
  for (const char* weight : {"2.0", "0.0"}) {
    SCOPED_TRACE(weight);
    LocalGenerationService service(tiny_deployment(
        checkpoint(), engines,
        std::string("[router]\nplugin = \"disaggregated\"\noptions = { cached_token_weight = ") +
            weight + " }\n[kv_transport]\nplugin = \"host_copy\"\n"));
    const test::Collected first = collect(*service.submit(text_request(document + " first?", 2)));
    const test::Collected second = collect(*service.submit(text_request(document + " other?", 2)));
    ASSERT_EQ(first.finish, Finish::kLength) << first.error;
    ASSERT_EQ(second.finish, Finish::kLength) << second.error;
    const std::string metrics = service.metrics_text();
    const double prefilled_on_1 = sum_of(metrics, "headway_prompt_tokens_total", "engine=\"1\"");
    if (std::string_view(weight) == "2.0") {
      EXPECT_EQ(prefilled_on_1, 0.0) << metrics;
      EXPECT_EQ(second.usage.cached_prompt_tokens, 192u);  // its 12 whole blocks of 16 in common
    } else {
      EXPECT_GT(prefilled_on_1, 0.0) << metrics;
      EXPECT_EQ(second.usage.cached_prompt_tokens, 0u);
    }
  }
}

// The decode engine keeps the KV moved to it in its prefix cache: a second prompt that begins as
// the first takes those 12 whole blocks from it, and the transfer copies only the rest; the first
// prompt sent again (208 tokens, 13 whole blocks) copies nothing. Greedy tokens and their
// log-probabilities equal one mixed engine's (the blocks taken hold the KV it needs, and the rest
// arrived: a block left uncopied changes them), and the decode engine's
// headway_kv_transfer_cached_tokens_total counts 192 + 208 tokens, with moved_kv_blocks "all" and
// "as_needed".
TEST_F(DisaggregatedServiceTest, AMovedPromptTakesTheBlocksTheDecodeEngineHoldsFromItsCache) {
  const std::string document(200, 'd');  // BOS + 200 bytes: 12 whole blocks of 16 in common
  const std::vector<std::string> prompts = {document + " first?", document + " other?"};
  const auto request = [](const std::string& prompt) {
    GenerateInput input = text_request(prompt, 6);
    input.sampling.logprobs = 1;
    return input;
  };
  std::vector<test::Collected> expected;
  {
    LocalGenerationService mixed(tiny_deployment(checkpoint(), kMixed));
    for (const std::string& prompt : prompts)
      expected.push_back(collect(*mixed.submit(request(prompt))));
  }
  for (const char* moved : {"all", "as_needed"}) {
    SCOPED_TRACE(moved);
    const std::string engines = "[[engines]]\nrole = \"prefill\"\n" + kScheduler +
                                "[[engines]]\nrole = \"decode\"\nmoved_kv_blocks = \"" + moved +
                                "\"\n" + kScheduler;
    LocalGenerationService service(tiny_deployment(checkpoint(), engines, kRouterAndTransport));
    // The first prompt again last: its 13 whole blocks are all cached, and nothing is copied.
    size_t sent = 0;
    for (const size_t i : {0, 1, 0}) {
      const bool again = sent++ == 2;
      const test::Collected got = collect(*service.submit(request(prompts[i])));
      ASSERT_EQ(got.finish, Finish::kLength) << got.error;
      EXPECT_EQ(got.ids, expected[i].ids) << "prompt " << i;
      ASSERT_EQ(got.logprobs.size(), expected[i].logprobs.size());
      for (size_t t = 0; t < got.logprobs.size(); ++t) {
        EXPECT_NEAR(got.logprobs[t].chosen.logprob, expected[i].logprobs[t].chosen.logprob, 1e-4)
            << "prompt " << i << ", token " << t;
      }
      if (again) {
        EXPECT_EQ(got.timings.kv_transfer_seconds, 0.0);
      } else {
        EXPECT_GT(got.timings.kv_transfer_seconds, 0.0) << "prompt " << i;
      }
    }
    const std::string metrics = service.metrics_text();
    EXPECT_EQ(sum_of(metrics, "headway_kv_transfer_cached_tokens_total", "engine=\"1\""),
              192.0 + 208.0)
        << metrics;
    // The one that copied nothing moved all the same.
    EXPECT_EQ(sum_of(metrics, "headway_kv_transfers_total", "engine=\"1\""), 3.0);
    for (const EngineSummary& e : engines_once_free(service)) {
      EXPECT_EQ(e.kv_blocks_free, e.kv_blocks_total) << "engine " << e.index;
    }
  }
}

TEST_F(DisaggregatedServiceTest, ShutdownWithRequestsInEveryStateEndsEachStream) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  {
    LocalGenerationService service(disaggregated());
    for (int i = 0; i < 16; ++i) {
      streams.push_back(service.submit(text_request(std::string(40 + 25 * i, 'k'), 200)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }  // destroyed with requests waiting, prefilling, moving and decoding
  for (auto& stream : streams) {
    const test::Collected got = collect(*stream);
    EXPECT_TRUE(got.finish == Finish::kAbort || got.finish == Finish::kLength)
        << finish_name(got.finish);
  }
}

// A KV transfer that fails is not the client's problem: the decode engine prefills the prompt and
// the first token itself and generates the rest, the same tokens as one mixed engine.
TEST_F(DisaggregatedServiceTest, AFailedKvTransferIsPrefilledOnTheDecodeEngineInstead) {
  std::vector<std::vector<int32_t>> expected;
  {
    LocalGenerationService mixed(tiny_deployment(checkpoint(), kMixed));
    for (const std::string& prompt : handoff_prompts()) {
      expected.push_back(collect(*mixed.submit(text_request(prompt, 12))).ids);
    }
  }
  const std::string failing = std::string(HEADWAY_TEST_PLUGIN_DIR) + "/test_failing_transport.so";
  LocalGenerationService service(tiny_deployment(
      checkpoint(), kDisaggregated,
      "[router]\nplugin = \"disaggregated\"\n[kv_transport]\nplugin = \"" + failing + "\"\n"));
  double prompt_tokens = 0;
  for (size_t i = 0; i < handoff_prompts().size(); ++i) {
    SCOPED_TRACE(i);
    const test::Collected got = collect(*service.submit(text_request(handoff_prompts()[i], 12)));
    EXPECT_EQ(got.finish, Finish::kLength) << got.error;
    EXPECT_EQ(got.ids, expected[i]);
    EXPECT_EQ(got.timings.kv_transfer_seconds, 0.0);
    // Its blocks were reserved before the copy failed, but its KV did not move: no wait to report.
    EXPECT_EQ(got.timings.kv_wait_seconds, 0.0);
    prompt_tokens += got.usage.prompt_tokens;
  }
  for (const EngineSummary& engine : engines_once_free(service)) {
    EXPECT_EQ(engine.kv_blocks_free, engine.kv_blocks_total) << "engine" << engine.index;
  }
  // Each prompt counts once, where it was admitted, though the decode engine prefilled it again.
  EXPECT_EQ(sum_of(service.metrics_text(), "headway_prompt_tokens_total"), prompt_tokens);
}

// A transfer that fails after its request took cached blocks on the decode engine (the first
// prompt, prefilled there when its own transfer failed, left them) releases them with the rest of
// its reservation, and the request is prefilled there instead: the same tokens, no block left
// held, and nothing counted as cached moved KV.
TEST_F(DisaggregatedServiceTest, AFailedTransferIntoCachedBlocksIsPrefilledInsteadAndFreesThem) {
  const std::string document(200, 'd');
  const std::vector<std::string> prompts = {document + " first?", document + " other?"};
  std::vector<std::vector<int32_t>> expected;
  {
    LocalGenerationService mixed(tiny_deployment(checkpoint(), kMixed));
    for (const std::string& prompt : prompts) {
      expected.push_back(collect(*mixed.submit(text_request(prompt, 6))).ids);
    }
  }
  const std::string failing = std::string(HEADWAY_TEST_PLUGIN_DIR) + "/test_failing_transport.so";
  LocalGenerationService service(tiny_deployment(
      checkpoint(), kDisaggregated,
      "[router]\nplugin = \"disaggregated\"\n[kv_transport]\nplugin = \"" + failing + "\"\n"));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const test::Collected got = collect(*service.submit(text_request(prompts[i], 6)));
    EXPECT_EQ(got.finish, Finish::kLength) << got.error;
    EXPECT_EQ(got.ids, expected[i]) << "prompt " << i;
    EXPECT_EQ(got.timings.kv_transfer_seconds, 0.0) << "prompt " << i;
  }
  // The second prompt found the first's 12 blocks cached on the decode engine when prefilled there.
  const std::string metrics = service.metrics_text();
  EXPECT_EQ(sum_of(metrics, "headway_prefix_cache_hits_total", "engine=\"1\""), 192.0) << metrics;
  EXPECT_EQ(sum_of(metrics, "headway_kv_transfer_cached_tokens_total"), 0.0);
  for (const EngineSummary& engine : engines_once_free(service)) {
    EXPECT_EQ(engine.kv_blocks_free, engine.kv_blocks_total) << "engine" << engine.index;
  }
}

// prefill_only and kv_source name shared-memory objects: only an engine process behind a router
// takes them, and only with a staged KV's name.
TEST_F(DisaggregatedServiceTest, HandOffFieldsAreRefusedOutsideAnEngineProcessAndForForeignNames) {
  {
    LocalGenerationService clients(tiny_deployment(checkpoint(), kMixed));
    GenerateInput input = text_request("hello", 4);
    input.prefill_only = true;
    try {
      clients.submit(input);
      ADD_FAILURE() << "prefill_only was accepted by a process that faces clients";
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(e.param(), "prefill_only");
      EXPECT_NE(std::string(e.what()).find("role = \"engine\""), std::string::npos) << e.what();
    }
    // Generated ids alone too (the router process refuses all three the same way).
    input = text_request("hello", 4);
    input.generated_ids = {65};
    try {
      clients.submit(input);
      ADD_FAILURE() << "generated_ids was accepted by a process that faces clients";
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(e.param(), "generated_ids");
      EXPECT_NE(std::string(e.what()).find("role = \"engine\""), std::string::npos) << e.what();
    }
  }
  LocalGenerationService engine(
      tiny_deployment(checkpoint(), kMixed, "[server]\nrole = \"engine\"\n"));
  for (const std::string& name : {std::string("/etc/passwd"), std::string("/other"),
                                  std::string("/headway-kv-1/../x"), std::string()}) {
    GenerateInput input = text_request("hello", 4);
    input.kv_source = KvStage{name, 3, 1, 1024, 16};
    input.generated_ids = {65};
    try {
      engine.submit(input);
      ADD_FAILURE() << "kv_source \"" << name << "\" was accepted";
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(e.param(), "kv_source") << e.what();
    }
  }
  // A well-formed name whose object does not exist: the engine prefills the tokens itself.
  GenerateInput input = text_request("hello", 4);
  input.kv_source = KvStage{"/headway-kv-0-none-0-1", 6, 1, 1024, 16};
  input.generated_ids = {65};
  // ... unless asked to cut the prompt again, which would no longer be the staged KV's.
  GenerateInput cut = input;
  cut.truncate_prompt_tokens = 3;
  try {
    engine.submit(cut);
    ADD_FAILURE() << "kv_source with truncate_prompt_tokens was accepted";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "kv_source") << e.what();
  }
  // KV for every position (7: the prompt's 6 and the generated one) leaves nothing to compute: it
  // was let through, and its step of zero tokens failed the engine with every request on it
  // (helper-204's review).
  GenerateInput whole = input;
  whole.kv_source->computed_tokens = 7;
  try {
    engine.submit(whole);
    ADD_FAILURE() << "kv_source covering every token was accepted";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "kv_source") << e.what();
    EXPECT_NE(std::string(e.what()).find("covers fewer positions than its tokens"),
              std::string::npos)
        << e.what();
  }
  const test::Collected got = collect(*engine.submit(input));
  EXPECT_EQ(got.finish, Finish::kLength) << got.error;
  EXPECT_EQ(got.ids.size(), 3u);  // max_tokens 4, one generated before
}

// An engine process that drains (SIGTERM) takes no new request but still takes the continuation of
// one a router admitted before the drain (its KV staged by a prefill process): refusing it would
// fail the request after its first token reached the client. Health says draining meanwhile, so
// the router sends it nothing new. (The drain keeps going while "running" runs, and for its first
// second whatever runs.)
TEST_F(DisaggregatedServiceTest, ADrainingEngineProcessStillTakesContinuations) {
  LocalGenerationService engine(
      tiny_deployment(checkpoint(), kMixed, "[server]\nrole = \"engine\"\n", 4096));
  GenerateInput running = text_request("still running", 4000);
  running.request_id = "running";
  const std::shared_ptr<RequestStream> stream = engine.submit(running);
  std::thread drainer([&] { engine.drain(600.0); });  // waits for "running"
  for (int i = 0; i < 10000 && engine.health().serving; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const HealthSummary health = engine.health();
  EXPECT_FALSE(health.serving);
  EXPECT_TRUE(health.draining) << health.reason;
  try {
    engine.submit(text_request("new", 4));
    ADD_FAILURE() << "a new request was taken while draining";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();
  }
  // A well-formed stage that is gone: the engine prefills the prompt and the generated token.
  GenerateInput continuation = text_request("hello", 4);
  continuation.kv_source = KvStage{"/headway-kv-0-none-0-2", 6, 1, 1024, 16};
  continuation.generated_ids = {65};
  const test::Collected continued = collect(*engine.submit(continuation));
  EXPECT_EQ(continued.finish, Finish::kLength) << continued.error;
  EXPECT_EQ(continued.ids.size(), 3u);
  engine.abort("running");  // (it may have finished on a machine much faster than this one)
  drainer.join();
  const Finish running_finish = collect(*stream).finish;
  EXPECT_TRUE(running_finish == Finish::kAbort || running_finish == Finish::kLength);
  // Once the drain is over nothing is taken, continuations included.
  try {
    engine.submit(continuation);
    ADD_FAILURE() << "a continuation was taken after the drain";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();
  }
}

}  // namespace
}  // namespace headway::serving
