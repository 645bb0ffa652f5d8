// Disaggregation across processes with both halves in this test process: one engine process's
// service prefills a request (prefill_only) and stages its KV in shared memory; another continues
// it from the stage (kv_source), as a router makes them do. With [kv_transport] host_copy in the
// processes' configs the copies into and out of the stage go through the transport on its own
// thread — the path KV that lives on a GPU takes; without one, the driver threads copy. Either way
// the greedy tokens must be those of one mixed engine, and nothing may stay in /dev/shm.
#include <gtest/gtest.h>
#include <headway/serving/local_generation_service.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../test_support/staged_kv_objects.h"
#include "service_fixture.h"

namespace headway::serving {
namespace {

using test::collect;
using test::handoff_prompts;
using test::prefill_only;
using test::text_request;
using test::tiny_deployment;
using test::TinyCheckpoint;

const std::string kEngine =
    "[[engines]]\nscheduler = { plugin = \"chunked\", options = { max_num_batched_tokens = 64, "
    "max_num_seqs = 16 } }\n";
const std::string kEngineProcess = "[server]\nrole = \"engine\"\n";
const std::string kTransport = "[kv_transport]\nplugin = \"host_copy\"\n";

TinyCheckpoint& checkpoint() { return test::shared_tiny_checkpoint(); }

core::DeploymentConfig engine_process(bool transport) {
  return tiny_deployment(checkpoint(), kEngine, kEngineProcess + (transport ? kTransport : ""));
}

// This process's staged objects still in /dev/shm.
size_t stages_left() { return headway::test::staged_kv_objects_of(::getpid()); }

GenerateInput continuation(const std::string& prompt, uint32_t max_tokens,
                           const test::Collected& from) {
  GenerateInput input = text_request(prompt, max_tokens);
  input.kv_source = from.kv_stage;
  input.generated_ids = from.ids;
  return input;
}

class StagedHandoffTest : public ::testing::TestWithParam<bool> {};

TEST_P(StagedHandoffTest, GreedyTokensEqualThoseOfOneMixedEngine) {
  const bool transport = GetParam();
  std::vector<std::vector<int32_t>> expected;
  {
    LocalGenerationService mixed(tiny_deployment(checkpoint(), kEngine));
    for (const std::string& prompt : handoff_prompts()) {
      expected.push_back(collect(*mixed.submit(text_request(prompt, 12))).ids);
    }
  }
  LocalGenerationService prefill(engine_process(transport));
  LocalGenerationService decode(engine_process(transport));
  for (size_t i = 0; i < handoff_prompts().size(); ++i) {
    SCOPED_TRACE(i);
    const test::Collected first = prefill_only(prefill, handoff_prompts()[i], 12);
    ASSERT_EQ(first.finish, Finish::kHandoff) << first.error;
    ASSERT_TRUE(first.kv_stage.has_value());
    EXPECT_EQ(first.ids.size(), 1u);
    EXPECT_EQ(first.kv_stage->computed_tokens, handoff_prompts()[i].size() + 1);  // BOS + bytes
    const test::Collected rest =
        collect(*decode.submit(continuation(handoff_prompts()[i], 12, first)));
    EXPECT_EQ(rest.finish, Finish::kLength) << rest.error;
    std::vector<int32_t> got = first.ids;
    got.insert(got.end(), rest.ids.begin(), rest.ids.end());
    EXPECT_EQ(got, expected[i]);
    EXPECT_GT(rest.timings.kv_transfer_seconds, 0.0);  // moved, not prefilled again
  }
  EXPECT_EQ(stages_left(), 0u);
  const std::string metrics = decode.metrics_text();
  EXPECT_NE(metrics.find("headway_kv_transfers_total{engine=\"0\",pool=\"\"} 4"), std::string::npos)
      << metrics;
}

// The decode process keeps the KV it read from a stage in its prefix cache: a second prompt that
// begins as the first takes those 12 whole blocks from it and reads only the rest of its stage.
// Its tokens and their log-probabilities equal one mixed engine's (a block left unread changes
// them), and headway_kv_transfer_cached_tokens_total counts the 192 tokens.
TEST_P(StagedHandoffTest, AStagedPromptTakesTheBlocksTheDecodeProcessHoldsFromItsCache) {
  const bool transport = GetParam();
  const std::string document(200, 'd');  // BOS + 200 bytes: 12 whole blocks of 16 in common
  const std::vector<std::string> prompts = {document + " first?", document + " other?"};
  const auto with_logprobs = [](GenerateInput input) {
    input.sampling.logprobs = 1;
    return input;
  };
  std::vector<test::Collected> expected;
  {
    LocalGenerationService mixed(tiny_deployment(checkpoint(), kEngine));
    for (const std::string& prompt : prompts) {
      expected.push_back(collect(*mixed.submit(with_logprobs(text_request(prompt, 6)))));
    }
  }
  LocalGenerationService prefill(engine_process(transport));
  LocalGenerationService decode(engine_process(transport));
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    const test::Collected first = prefill_only(prefill, prompts[i], 6);
    ASSERT_EQ(first.finish, Finish::kHandoff) << first.error;
    const test::Collected rest =
        collect(*decode.submit(with_logprobs(continuation(prompts[i], 6, first))));
    ASSERT_EQ(rest.finish, Finish::kLength) << rest.error;
    EXPECT_GT(rest.timings.kv_transfer_seconds, 0.0);  // moved, not prefilled again
    // The decode process's tokens are the mixed engine's after the first.
    ASSERT_EQ(rest.logprobs.size() + 1, expected[i].logprobs.size());
    for (size_t t = 0; t < rest.logprobs.size(); ++t) {
      EXPECT_EQ(rest.ids[t], expected[i].ids[t + 1]) << "token " << t + 1;
      EXPECT_NEAR(rest.logprobs[t].chosen.logprob, expected[i].logprobs[t + 1].chosen.logprob, 1e-4)
          << "token " << t + 1;
    }
  }
  EXPECT_EQ(stages_left(), 0u);
  EXPECT_EQ(test::sum_of(decode.metrics_text(), "headway_kv_transfer_cached_tokens_total"), 192.0);
}

// A stage that is gone before the decode process reads it: the request is prefilled there, with
// the same tokens. Its prompt's log-probabilities were the prefill process's to report: the
// decode process reports none, whether it moves the KV or computes the prompt again.
TEST_P(StagedHandoffTest, AStageThatIsGoneIsPrefilledInstead) {
  LocalGenerationService prefill(engine_process(GetParam()));
  LocalGenerationService decode(engine_process(GetParam()));
  const std::string prompt = std::string(100, 'w');
  const test::Collected first = prefill_only(prefill, prompt, 8);
  ASSERT_EQ(first.finish, Finish::kHandoff) << first.error;
  const test::Collected again = prefill_only(prefill, prompt, 8);
  ASSERT_EQ(again.finish, Finish::kHandoff) << again.error;
  ::shm_unlink(first.kv_stage->shm_name.c_str());
  GenerateInput gone = continuation(prompt, 8, first);
  GenerateInput there = continuation(prompt, 8, again);
  gone.sampling.prompt_logprobs = 2;
  there.sampling.prompt_logprobs = 2;
  const test::Collected prefilled_here = collect(*decode.submit(gone));
  const test::Collected moved = collect(*decode.submit(there));
  EXPECT_TRUE(prefilled_here.prompt_logprobs.empty());
  EXPECT_TRUE(moved.prompt_logprobs.empty());
  EXPECT_EQ(prefilled_here.finish, Finish::kLength) << prefilled_here.error;
  EXPECT_EQ(prefilled_here.timings.kv_transfer_seconds, 0.0);
  EXPECT_GT(moved.timings.kv_transfer_seconds, 0.0);
  EXPECT_EQ(prefilled_here.ids, moved.ids);
  EXPECT_EQ(stages_left(), 0u);
}

// Aborts at any moment of staging (queued, prefilling, being copied into the stage): every
// request ends, no KV block stays held and no object stays in /dev/shm once the stages handed out
// are read or discarded.
TEST_P(StagedHandoffTest, AbortsWhileStagingLeaveNoBlockAndNoObjectBehind) {
  LocalGenerationService prefill(engine_process(GetParam()));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int round = 0; round < 40; ++round) {
    GenerateInput input = text_request(std::string(10 + 37 * (round % 9), 'a' + round % 26), 8);
    input.prefill_only = true;
    auto stream = prefill.submit(input);
    streams.push_back(stream);
    if (round % 2 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(300 * (round % 7)));
      prefill.abort(stream->id());
    }
  }
  size_t handed_out = 0;
  for (auto& stream : streams) {
    const test::Collected got = collect(*stream);
    if (got.finish == Finish::kHandoff) {
      ASSERT_TRUE(got.kv_stage.has_value());
      ::shm_unlink(got.kv_stage->shm_name.c_str());  // what a router does with one it drops
      ++handed_out;
    }
    EXPECT_TRUE(got.finish == Finish::kHandoff || got.finish == Finish::kAbort)
        << static_cast<int>(got.finish) << " " << got.error;
  }
  EXPECT_GE(handed_out, 20u);  // the 20 never aborted
  test::wait_idle(prefill);
  for (const EngineSummary& engine : prefill.cluster_info().engines) {
    EXPECT_EQ(engine.kv_blocks_free, engine.kv_blocks_total);
  }
  EXPECT_EQ(stages_left(), 0u);
}

// The transport is on both paths: one whose every copy fails ends the prefill process's request
// with an error that names it (and leaves no object), and makes the decode process prefill the
// request it cannot copy in (same tokens as when the copy works).
TEST(StagedHandoffThroughAFailingTransport, FailsTheHandOffOrIsPrefilledInstead) {
  const std::string failing = "[kv_transport]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
                              "/test_failing_transport.so\"\n";
  const std::string prompt = std::string(70, 'f');
  {
    LocalGenerationService prefill(
        tiny_deployment(checkpoint(), kEngine, kEngineProcess + failing));
    const test::Collected got = prefill_only(prefill, prompt, 6);
    EXPECT_EQ(got.finish, Finish::kError);
    EXPECT_NE(got.error.find("failed to copy its KV into shared memory"), std::string::npos)
        << got.error;
    EXPECT_FALSE(got.kv_stage.has_value());
    test::wait_idle(prefill);
    for (const EngineSummary& engine : prefill.cluster_info().engines) {
      EXPECT_EQ(engine.kv_blocks_free, engine.kv_blocks_total);
    }
  }
  EXPECT_EQ(stages_left(), 0u);
  LocalGenerationService prefill(engine_process(/*transport=*/true));
  LocalGenerationService good(engine_process(/*transport=*/true));
  LocalGenerationService bad(tiny_deployment(checkpoint(), kEngine, kEngineProcess + failing));
  const test::Collected first = prefill_only(prefill, prompt, 6);
  const test::Collected again = prefill_only(prefill, prompt, 6);
  ASSERT_TRUE(first.kv_stage && again.kv_stage) << first.error << again.error;
  const test::Collected moved = collect(*good.submit(continuation(prompt, 6, first)));
  const test::Collected prefilled_here = collect(*bad.submit(continuation(prompt, 6, again)));
  EXPECT_EQ(moved.finish, Finish::kLength) << moved.error;
  EXPECT_EQ(prefilled_here.finish, Finish::kLength) << prefilled_here.error;
  EXPECT_GT(moved.timings.kv_transfer_seconds, 0.0);
  EXPECT_EQ(prefilled_here.timings.kv_transfer_seconds, 0.0);
  EXPECT_EQ(prefilled_here.ids, moved.ids);
  EXPECT_EQ(stages_left(), 0u);
}

// A transport whose copies stay in flight for `pending_s`, then fail: requests are caught in the
// middle of a copy, deterministically.
std::string slow_failing_transport(double pending_s) {
  return "[kv_transport]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
         "/test_failing_transport.so\"\noptions = { pending_s = " + std::to_string(pending_s) +
         " }\n";
}

// Reads `stream` until its first token: a prefill_only request's prefill is over, and its KV
// is being copied out (the driver stages it in the same loop turn that streamed the token).
bool read_first_token(RequestStream& stream) {
  StreamChunk chunk;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (std::chrono::steady_clock::now() < give_up) {
    if (!stream.next(chunk, std::chrono::milliseconds(100))) continue;
    if (!chunk.token_ids.empty()) return chunk.finish == Finish::kNone;
    if (chunk.finish != Finish::kNone) return false;
  }
  return false;
}

TEST(StagedHandoffWhileCopying, AnAbortEndsTheRequestAndRemovesItsStage) {
  LocalGenerationService prefill(
      tiny_deployment(checkpoint(), kEngine, kEngineProcess + slow_failing_transport(0.5)));
  GenerateInput input = text_request(std::string(90, 'a'), 6);
  input.prefill_only = true;
  std::shared_ptr<RequestStream> stream = prefill.submit(input);
  ASSERT_TRUE(read_first_token(*stream));
  prefill.abort(stream->id());
  // Not aborted, the failing copy would end it with an error.
  const test::Collected rest = collect(*stream);
  EXPECT_EQ(rest.finish, Finish::kAbort) << rest.error;
  test::wait_idle(prefill);
  for (const EngineSummary& engine : prefill.cluster_info().engines) {
    EXPECT_EQ(engine.kv_blocks_free, engine.kv_blocks_total);
  }
  EXPECT_EQ(stages_left(), 0u);
}

TEST(StagedHandoffWhileCopying, ShuttingDownThePrefillProcessAbortsAndLeavesNoStage) {
  auto prefill = std::make_unique<LocalGenerationService>(
      tiny_deployment(checkpoint(), kEngine, kEngineProcess + slow_failing_transport(0.5)));
  GenerateInput input = text_request(std::string(90, 'b'), 6);
  input.prefill_only = true;
  std::shared_ptr<RequestStream> stream = prefill->submit(input);
  ASSERT_TRUE(read_first_token(*stream));
  prefill.reset();  // waits for the copy in flight, then ends the request
  const test::Collected rest = collect(*stream);
  EXPECT_EQ(rest.finish, Finish::kAbort) << rest.error;
  EXPECT_EQ(stages_left(), 0u);
}

TEST(StagedHandoffWhileCopying, ShuttingDownTheDecodeProcessAbortsAndRemovesTheStage) {
  LocalGenerationService prefill(engine_process(/*transport=*/true));
  const std::string prompt = std::string(90, 'c');
  const test::Collected first = prefill_only(prefill, prompt, 6);
  ASSERT_TRUE(first.kv_stage.has_value()) << first.error;
  auto decode = std::make_unique<LocalGenerationService>(
      tiny_deployment(checkpoint(), kEngine, kEngineProcess + slow_failing_transport(0.5)));
  std::shared_ptr<RequestStream> stream = decode->submit(continuation(prompt, 6, first));
  // Blocks reserved for it are published once its copy started (same loop turn).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  for (;;) {
    const EngineSummary engine = decode->cluster_info().engines[0];
    if (engine.kv_blocks_free < engine.kv_blocks_total ||
        std::chrono::steady_clock::now() > give_up) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  decode.reset();
  const test::Collected got = collect(*stream);
  EXPECT_EQ(got.finish, Finish::kAbort) << got.error;
  EXPECT_EQ(stages_left(), 0u);  // nobody else would remove it before the prefill side's janitor
}

// max_waiting bounds hand-offs too: one whose KV is still being copied in counts as waiting, so
// a decode process with max_waiting = 1 refuses the next one (the router then gives it up and
// removes its stage) instead of queueing without bound.
TEST(StagedHandoffWhileCopying, HandOffsWaitingForTheirCopyCountTowardMaxWaiting) {
  LocalGenerationService prefill(engine_process(/*transport=*/true));
  const std::string prompt = std::string(40, 'm');
  const test::Collected first = prefill_only(prefill, prompt, 4);
  const test::Collected second = prefill_only(prefill, prompt, 4);
  ASSERT_TRUE(first.kv_stage && second.kv_stage) << first.error << second.error;
  const std::string one_waiting =
      "[[engines]]\nmax_waiting = 1\nscheduler = { plugin = \"chunked\", options = { "
      "max_num_batched_tokens = 64 } }\n";
  LocalGenerationService decode(
      tiny_deployment(checkpoint(), one_waiting, kEngineProcess + slow_failing_transport(0.5)));
  std::shared_ptr<RequestStream> stream = decode.submit(continuation(prompt, 4, first));
  try {
    decode.submit(continuation(prompt, 4, second));
    ADD_FAILURE() << "a second hand-off was queued behind one waiting for its copy";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted) << e.what();
  }
  ::shm_unlink(second.kv_stage->shm_name.c_str());
  // The first one goes on: its copy fails after 0.5 s, and it is prefilled here instead.
  const test::Collected got = collect(*stream);
  EXPECT_EQ(got.finish, Finish::kLength) << got.error;
  EXPECT_EQ(stages_left(), 0u);
}

INSTANTIATE_TEST_SUITE_P(CopiedBy, StagedHandoffTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "KvTransport" : "DriverThread";
                         });

}  // namespace
}  // namespace headway::serving
