// vLLM's prompt_logprobs and OpenAI's echo on /v1/completions (and prompt_logprobs on chat), with
// the fake service's made-up prompt figures (fake_generation_service.h): prompt token p decodes to
// 'a' + p, has logprob -1 - p / 10 and rank 2, and ids p + 1, p + 2, ... as its top tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using json = nlohmann::json;

json body_of(const httplib::Result& result) {
  EXPECT_TRUE(result);
  if (!result) return json();
  EXPECT_EQ(result->status, 200) << result->body;
  return json::parse(result->body);
}

// vLLM's shape: null for the first prompt token, then the token's own entry keyed by its id, then
// the most likely ones (each ranked by its place), none repeated.
TEST_F(HttpFrontendTest, PromptLogprobsListEachPromptTokenWithItsRankAndTheMostLikely) {
  const json body = body_of(post_json(
      "/v1/completions", R"({"prompt": "hello", "max_tokens": 2, "prompt_logprobs": 2})"));
  EXPECT_EQ(service_.submitted().at(0).sampling.prompt_logprobs, 2);
  const json prompt = body["choices"][0]["prompt_logprobs"];
  ASSERT_EQ(prompt.size(), FakeGenerationService::kPromptTokens) << prompt;
  EXPECT_TRUE(prompt[0].is_null());
  const json second = {{"1", {{"logprob", -1.1f}, {"rank", 2}, {"decoded_token", "b"}}},
                       {"2", {{"logprob", -0.25}, {"rank", 1}, {"decoded_token", "c"}}},
                       {"3", {{"logprob", -0.5}, {"rank", 2}, {"decoded_token", "d"}}}};
  EXPECT_EQ(prompt[1], second);
  // The generated text is unchanged, and without echo no prompt text comes back.
  EXPECT_EQ(body["choices"][0]["text"], "ab");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());

  // Not asked: no such key. Asked with 0: the prompt tokens' own entries only.
  EXPECT_FALSE(
      body_of(post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 1})"))["choices"][0]
          .contains("prompt_logprobs"));
  const json zero = body_of(post_json(
      "/v1/completions", R"({"prompt": "hello", "max_tokens": 1, "prompt_logprobs": 0})"));
  EXPECT_EQ(zero["choices"][0]["prompt_logprobs"][6],
            json({{"6", {{"logprob", -1.6f}, {"rank", 2}, {"decoded_token", "g"}}}}));
}

TEST_F(HttpFrontendTest, ChatCarriesPromptLogprobsOnceBesideTheChoices) {
  const json body = body_of(post_json("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "hi"}], "max_tokens": 1, "prompt_logprobs": 1, "n": 2})"));
  ASSERT_TRUE(body.contains("prompt_logprobs")) << body;
  EXPECT_EQ(body["prompt_logprobs"].size(), FakeGenerationService::kPromptTokens);
  EXPECT_EQ(body["prompt_logprobs"][3]["4"]["rank"], 1);
  EXPECT_FALSE(body["choices"][0].contains("prompt_logprobs"));
}

// echo: the prompt's text before the answer; with logprobs, the prompt's tokens before the
// generated ones, the first with nulls; max_tokens 0 gives the prompt alone.
TEST_F(HttpFrontendTest, EchoPutsThePromptBeforeTheAnswerAndItsLogprobsBeforeTheTokens) {
  json body = body_of(
      post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 3, "echo": true})"));
  EXPECT_EQ(body["choices"][0]["text"], "helloabc");
  EXPECT_EQ(service_.submitted().back().sampling.prompt_logprobs, -1);

  body = body_of(post_json("/v1/completions",
                           R"({"prompt": "hello", "max_tokens": 2, "echo": true, "logprobs": 1})"));
  EXPECT_EQ(service_.submitted().back().sampling.prompt_logprobs, 1);
  const json logprobs = body["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], json({"a", "b", "c", "d", "e", "f", "g", "a", "b"}));
  EXPECT_TRUE(logprobs["token_logprobs"][0].is_null());
  EXPECT_FLOAT_EQ(logprobs["token_logprobs"][1].get<float>(), -1.1f);
  EXPECT_FLOAT_EQ(logprobs["token_logprobs"][7].get<float>(), -0.5f);
  EXPECT_TRUE(logprobs["top_logprobs"][0].is_null());
  EXPECT_EQ(logprobs["top_logprobs"][1], json({{"c", -0.25}, {"b", -1.1f}}));
  EXPECT_EQ(logprobs["text_offset"], json({0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_FALSE(body["choices"][0].contains("prompt_logprobs"));

  // max_tokens 0: the prompt alone, nothing generated counted; token ids of the answer: none.
  body = body_of(post_json("/v1/completions", R"({"prompt": [5, 6, 7], "max_tokens": 0,
      "echo": true, "logprobs": 0, "return_token_ids": true})"));
  EXPECT_EQ(service_.submitted().back().max_tokens, 1u);
  EXPECT_EQ(body["choices"][0]["text"], "fgh");  // the ids' text
  EXPECT_EQ(body["choices"][0]["logprobs"]["tokens"].size(), FakeGenerationService::kPromptTokens);
  EXPECT_EQ(body["choices"][0]["token_ids"], json::array());
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 0);
}

// Streamed, a choice's first event is its prompt (text and tokens); the tokens' events follow with
// their offsets after the prompt's text. The prompt alone (max_tokens 0) ends with "length" and
// counts no completion token.
TEST_F(HttpFrontendTest, StreamedEchoSendsThePromptFirst) {
  auto result = post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 2, "echo": true,
      "logprobs": 1, "stream": true})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const std::vector<json> events = json_events(sse_data(result->body));
  ASSERT_GE(events.size(), 2u) << result->body;
  const json& first = events[0]["choices"][0];
  EXPECT_EQ(first["text"], "hello");
  EXPECT_EQ(first["logprobs"]["tokens"].size(), FakeGenerationService::kPromptTokens);
  EXPECT_TRUE(first["logprobs"]["token_logprobs"][0].is_null());
  EXPECT_TRUE(first["finish_reason"].is_null());
  std::string rest;
  std::vector<json> offsets;
  for (size_t i = 1; i < events.size(); ++i) {
    const json& choice = events[i]["choices"][0];
    rest += choice["text"].get<std::string>();
    for (const json& offset : choice["logprobs"]["text_offset"]) offsets.push_back(offset);
  }
  EXPECT_EQ(rest, "ab");
  EXPECT_EQ(offsets, std::vector<json>({7, 8}));

  result = post_json("/v1/completions", R"({"prompt": "hello", "max_tokens": 0, "echo": true,
      "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  std::string text;
  json finish_reason;
  json usage;
  for (const std::string& data : sse_data(result->body)) {
    if (data == "[DONE]") continue;
    const json event = json::parse(data);
    if (!event["usage"].is_null()) usage = event["usage"];
    if (event["choices"].empty()) continue;
    text += event["choices"][0]["text"].get<std::string>();
    if (!event["choices"][0]["finish_reason"].is_null()) {
      finish_reason = event["choices"][0]["finish_reason"];
    }
  }
  EXPECT_EQ(text, "hello");
  EXPECT_EQ(finish_reason, "length");
  EXPECT_EQ(usage["completion_tokens"], 0);
}

TEST_F(HttpFrontendTest, PromptLogprobsAndEchoRefusalsNameTheField) {
  const struct {
    const char* path;
    const char* body;
    const char* param;
    const char* says;
  } cases[] = {
      {"/v1/completions", R"({"prompt": "x", "prompt_logprobs": -1})", "prompt_logprobs",
       "whole vocabulary"},
      {"/v1/completions", R"({"prompt": "x", "prompt_logprobs": 21})", "prompt_logprobs",
       "between -1 and 20"},
      {"/v1/completions", R"({"prompt": "x", "prompt_logprobs": 1, "stream": true})",
       "prompt_logprobs", "not available"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "between 1"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 0,
           "stream": true})",
       "prompt_logprobs", "not available"},
  };
  service_.set_reports_prompt_logprobs(false);
  const auto echoed =
      post_json("/v1/completions", R"({"prompt": "x", "echo": true, "logprobs": 1})");
  ASSERT_TRUE(echoed);
  EXPECT_EQ(echoed->status, 400);
  EXPECT_EQ(error_of(echoed->body)["param"], "echo");
  EXPECT_TRUE(service_.submitted().empty());
  // Echo alone needs nothing of the model.
  EXPECT_EQ(post_json("/v1/completions", R"({"prompt": "x", "echo": true})")->status, 200);
  service_.set_reports_prompt_logprobs(true);
  for (const auto& c : cases) {
    const auto result = post_json(c.path, c.body);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 400) << c.body << " -> " << result->body;
    const json error = error_of(result->body);
    EXPECT_EQ(error["param"], c.param) << c.body;
    EXPECT_NE(error["message"].get<std::string>().find(c.says), std::string::npos)
        << c.body << " -> " << error["message"];
  }
}

}  // namespace
}  // namespace headway::serving::testing
