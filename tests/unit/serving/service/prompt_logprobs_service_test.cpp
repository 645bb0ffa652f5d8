// Prompt tokens' log-probabilities (SamplingParams::prompt_logprobs) through LocalGenerationService
// over the CPU model: each position's figures are those a request ending just before it gets for
// its first token, whatever the chunking, the prefix cache or the engines that run the request.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "service_fixture.h"

namespace headway::serving {
namespace {

using test::collect;
using test::tiny_deployment;
using test::TinyCheckpoint;

TinyCheckpoint& checkpoint() { return test::shared_tiny_checkpoint(); }

GenerateInput ids_request(std::vector<int32_t> ids, uint32_t max_tokens) {
  GenerateInput input;
  input.prompt_kind = GenerateInput::PromptKind::kTokenIds;
  input.prompt_ids = std::move(ids);
  input.max_tokens = max_tokens;
  input.sampling.ignore_eos = true;
  return input;
}

// A prompt whose last 8 tokens are the greedy continuation of its first ones: there the prompt
// token is the most likely one (rank 1, the top entry's figure), elsewhere it is random bytes.
std::vector<int32_t> prompt_with_greedy_tail(LocalGenerationService& service) {
  GenerateInput head = test::text_request("The prompt, scored token by token: 0123456789 xyz", 8);
  std::vector<int32_t> ids = service.tokenize(head);
  const test::Collected tail = collect(*service.submit(head));
  EXPECT_EQ(tail.ids.size(), 8u);
  ids.insert(ids.end(), tail.ids.begin(), tail.ids.end());
  return ids;
}

std::vector<PromptLogprobs> prompt_figures(LocalGenerationService& service,
                                           const std::vector<int32_t>& prompt, int32_t top) {
  GenerateInput input = ids_request(prompt, 2);
  input.sampling.prompt_logprobs = top;
  const test::Collected out = collect(*service.submit(input));
  EXPECT_EQ(out.finish, Finish::kLength) << out.error;
  EXPECT_EQ(out.ids.size(), 2u);
  EXPECT_EQ(out.usage.cached_prompt_tokens, 0u) << "a position to report was not computed";
  return out.prompt_logprobs;
}

void expect_same_figures(const std::vector<PromptLogprobs>& got,
                         const std::vector<PromptLogprobs>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t p = 0; p < got.size(); ++p) {
    SCOPED_TRACE("position " + std::to_string(p));
    EXPECT_EQ(got[p].position, want[p].position);
    EXPECT_EQ(got[p].token.token, want[p].token.token);
    EXPECT_NEAR(got[p].token.logprob, want[p].token.logprob, 1e-4);
    EXPECT_EQ(got[p].rank, want[p].rank);
    ASSERT_EQ(got[p].top.size(), want[p].top.size());
    for (size_t k = 0; k < got[p].top.size(); ++k) {
      EXPECT_EQ(got[p].top[k].token, want[p].top[k].token) << k;
      EXPECT_NEAR(got[p].top[k].logprob, want[p].top[k].logprob, 1e-4) << k;
    }
  }
}

// Every position's figures against a request for the prompt up to it (prompt token ids as given),
// whose first token's top list is the distribution there.
TEST(PromptLogprobsService, EachPositionHasTheFiguresOfThePrefixEndingBeforeIt) {
  LocalGenerationService service(tiny_deployment(checkpoint(), test::kMixedEngine));
  const std::vector<int32_t> prompt = prompt_with_greedy_tail(service);
  const std::vector<PromptLogprobs> figures = prompt_figures(service, prompt, 4);
  ASSERT_EQ(figures.size(), prompt.size());
  EXPECT_FALSE(figures[0].has_figures);
  EXPECT_EQ(figures[0].token.token, prompt[0]);
  for (size_t q = 1; q < prompt.size(); ++q) {
    SCOPED_TRACE("position " + std::to_string(q));
    const PromptLogprobs& at = figures[q];
    EXPECT_TRUE(at.has_figures);
    EXPECT_EQ(at.position, q);
    EXPECT_EQ(at.token.token, prompt[q]);
    // The byte tokenizer: an id below 256 is its byte.
    if (prompt[q] < 256) EXPECT_EQ(at.token.bytes, std::string(1, static_cast<char>(prompt[q])));
    GenerateInput prefix = ids_request(std::vector<int32_t>(prompt.begin(), prompt.begin() + q), 1);
    prefix.sampling.logprobs = 4;
    prefix.sampling.temperature = 0.0f;
    const test::Collected alone = collect(*service.submit(prefix));
    ASSERT_EQ(alone.logprobs.size(), 1u) << alone.error;
    const std::vector<TokenCandidate>& want = alone.logprobs[0].top;
    ASSERT_EQ(at.top.size(), 4u);
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(at.top[k].token, want[k].token) << k;
      EXPECT_NEAR(at.top[k].logprob, want[k].logprob, 1e-4) << k;
      if (want[k].token == prompt[q]) {
        EXPECT_EQ(at.rank, k + 1);
        EXPECT_NEAR(at.token.logprob, want[k].logprob, 1e-4);
      }
    }
    EXPECT_LE(at.token.logprob, at.top[0].logprob + 1e-6);
    EXPECT_GE(at.rank, 1u);
    if (q + 8 >= prompt.size()) {  // the greedy tail
      EXPECT_EQ(at.rank, 1u);
      EXPECT_EQ(at.top[0].token, prompt[q]);
    }
  }
}

// The figures do not depend on how the prompt is chunked, on a prefix the cache holds (the request
// computes it all the same), nor on whether prefill and decode run on different engines.
TEST(PromptLogprobsService, ChunkingThePrefixCacheAndDisaggregationDoNotChangeThem) {
  std::vector<int32_t> prompt;
  std::vector<PromptLogprobs> reference;
  {
    LocalGenerationService service(tiny_deployment(checkpoint(), test::kMixedEngine));
    prompt = prompt_with_greedy_tail(service);
    // A prompt of several 16-token blocks and 64-token steps.
    const std::vector<int32_t> head = prompt;
    for (int i = 0; i < 3; ++i) prompt.insert(prompt.end(), head.begin(), head.end());
    reference = prompt_figures(service, prompt, 3);
    // Once the prompt's blocks are in the prefix cache, a request that reports them computes
    // them again (prompt_figures checks the usage says none was found) and gets the same.
    EXPECT_GT(collect(*service.submit(ids_request(prompt, 1))).usage.cached_prompt_tokens, 0u);
    expect_same_figures(prompt_figures(service, prompt, 3), reference);
  }
  {
    SCOPED_TRACE("7-token steps");
    LocalGenerationService service(
        tiny_deployment(checkpoint(),
                        "[[engines]]\nscheduler = { plugin = \"chunked\", options = { "
                        "max_num_batched_tokens = 7, max_num_seqs = 4 } }\n"));
    expect_same_figures(prompt_figures(service, prompt, 3), reference);
  }
  {
    SCOPED_TRACE("prefill and decode engines");
    LocalGenerationService service(
        tiny_deployment(checkpoint(), test::kPrefillAndDecodeEngines, test::kDisaggregatedRouter));
    expect_same_figures(prompt_figures(service, prompt, 3), reference);
  }
}

// Several requests in one step each get their own figures (or none); a one-token prompt gets the
// first token's entry alone; out of range is refused naming the field.
TEST(PromptLogprobsService, BatchedRequestsShortPromptsAndRefusals) {
  LocalGenerationService service(tiny_deployment(checkpoint(), test::kMixedEngine));
  const std::vector<int32_t> a = service.tokenize(test::text_request("first prompt here", 1));
  const std::vector<int32_t> b = service.tokenize(test::text_request("a second, longer one", 1));
  const std::vector<PromptLogprobs> a_alone = prompt_figures(service, a, 2);
  const std::vector<PromptLogprobs> b_alone = prompt_figures(service, b, 5);
  GenerateInput with_a = ids_request(a, 2);
  with_a.sampling.prompt_logprobs = 2;
  GenerateInput plain = ids_request(a, 2);
  GenerateInput with_b = ids_request(b, 2);
  with_b.sampling.prompt_logprobs = 5;
  auto stream_a = service.submit(with_a);
  auto stream_plain = service.submit(plain);
  auto stream_b = service.submit(with_b);
  expect_same_figures(collect(*stream_a).prompt_logprobs, a_alone);
  EXPECT_TRUE(collect(*stream_plain).prompt_logprobs.empty());
  expect_same_figures(collect(*stream_b).prompt_logprobs, b_alone);

  const std::vector<PromptLogprobs> single = prompt_figures(service, {a[0]}, 1);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_FALSE(single[0].has_figures);

  GenerateInput too_many = ids_request(a, 1);
  too_many.sampling.prompt_logprobs = 21;
  try {
    service.submit(too_many);
    ADD_FAILURE() << "prompt_logprobs 21 was taken";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.param(), "prompt_logprobs") << e.what();
  }
}

}  // namespace
}  // namespace headway::serving
