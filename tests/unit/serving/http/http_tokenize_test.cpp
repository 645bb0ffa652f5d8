// vLLM's /tokenize and /detokenize through the frontend: the request forms, vLLM's answer shapes,
// the refusals that name their field, and the key.
#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

TEST_F(HttpFrontendTest, TokenizeAnswersTheCountTheContextAndTheIds) {
  auto result = post_json("/tokenize", R"({"model": "fake-model", "prompt": "abc"})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_EQ(json::parse(result->body), json({{"count", 3},
                                             {"max_model_len", FakeGenerationService::kMaxModelLen},
                                             {"tokens", {'a', 'b', 'c'}},
                                             {"token_strs", nullptr}}));
  const auto seen = service_.tokenized();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].model, "fake-model");
  EXPECT_EQ(seen[0].prompt_kind, GenerateInput::PromptKind::kText);
  EXPECT_EQ(seen[0].prompt_text, "abc");
  EXPECT_TRUE(service_.submitted().empty());  // nothing ran
}

TEST_F(HttpFrontendTest, TokenizeTakesTokenIdsAndChatMessages) {
  // Ids are taken as given, with or without add_special_tokens.
  auto ids = post_json("/tokenize", R"({"prompt": [7, 8], "add_special_tokens": false})");
  ASSERT_TRUE(ids);
  ASSERT_EQ(ids->status, 200) << ids->body;
  EXPECT_EQ(json::parse(ids->body)["tokens"], json({7, 8}));

  auto chat = post_json("/tokenize", R"({"messages": [{"role": "system", "content": "s"},
      {"role": "user", "content": [{"type": "text", "text": "u"}]}]})");
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  EXPECT_EQ(json::parse(chat->body)["count"], 2);
  const auto seen = service_.tokenized();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].prompt_kind, GenerateInput::PromptKind::kChat);
  ASSERT_EQ(seen[1].messages.size(), 2u);
  EXPECT_EQ(seen[1].messages[1].content, "u");
}

// vLLM's add_special_tokens, either way for either form (its defaults when unset: the service's).
TEST_F(HttpFrontendTest, TokenizePassesAddSpecialTokensOn) {
  for (const char* body : {R"({"prompt": "a", "add_special_tokens": false})",
                           R"({"messages": [{"role": "user", "content": "b"}],
                               "add_special_tokens": true})",
                           R"({"prompt": "a"})"}) {
    SCOPED_TRACE(body);
    auto result = post_json("/tokenize", body);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 200) << result->body;
  }
  const auto seen = service_.tokenized();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].add_special_tokens, false);
  EXPECT_EQ(seen[1].prompt_kind, GenerateInput::PromptKind::kChat);
  EXPECT_EQ(seen[1].add_special_tokens, true);
  EXPECT_EQ(seen[2].add_special_tokens, std::nullopt);
}

TEST_F(HttpFrontendTest, TokenizeRefusesWhatItCannotAnswerNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({})", "prompt"},
      {R"({"prompt": ["a", "b"]})", "prompt"},
      {R"({"prompt": "a", "messages": [{"role": "user", "content": "b"}]})", "prompt"},
      {R"({"prompt": "a", "add_special_tokens": "no"})", "add_special_tokens"},
      {R"({"messages": [{"role": "user", "content": "b"}], "add_special_tokens": 1})",
       "add_special_tokens"},
      {R"({"messages": [{"role": "user", "content": "b"}], "continue_final_message": true})",
       "continue_final_message"},
      {R"({"messages": [{"role": "function", "content": "b"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "tool", "content": "b"}]})", "messages[0].tool_call_id"},
      {R"({"messages": [{"role": "user", "content": "b"}], "tools": [{"type": "function"}]})",
       "tools[0].function"},
      {R"({"prompt": "a", "return_token_strs": true})", "return_token_strs"},
  };
  for (const auto& [body, field] : cases) {
    SCOPED_TRACE(body);
    auto result = post_json("/tokenize", body);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 400) << result->body;
    EXPECT_EQ(error_of(result->body)["param"], field) << result->body;
  }
  EXPECT_TRUE(service_.tokenized().empty());
}

TEST_F(HttpFrontendTest, DetokenizeAnswersThePrompt) {
  auto result = post_json("/detokenize", R"({"model": "fake-model", "tokens": [0, 1, 2]})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_EQ(json::parse(result->body), json({{"prompt", "abc"}}));

  for (const auto& [body, field] :
       std::vector<std::pair<std::string, std::string>>{{R"({})", "tokens"},
                                                        {R"({"tokens": "abc"})", "tokens"},
                                                        {R"({"tokens": [1, -1]})", "tokens[1]"}}) {
    SCOPED_TRACE(body);
    auto refused = post_json("/detokenize", body);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400) << refused->body;
    EXPECT_EQ(error_of(refused->body)["param"], field) << refused->body;
  }
}

TEST_F(HttpFrontendTest, TokenizeAndDetokenizeWantTheKeyAndAPost) {
  start_frontend("s3cret");
  for (const char* path : {"/tokenize", "/detokenize"}) {
    SCOPED_TRACE(path);
    auto denied = post_json(path, R"({"prompt": "x", "tokens": [1]})");
    ASSERT_TRUE(denied);
    EXPECT_EQ(denied->status, 401) << denied->body;
    auto allowed =
        post_json(path, R"({"prompt": "x", "tokens": [1]})", {{"Authorization", "Bearer s3cret"}});
    ASSERT_TRUE(allowed);
    EXPECT_EQ(allowed->status, 200) << allowed->body;
    auto get = client().Get(path, {{"Authorization", "Bearer s3cret"}});
    ASSERT_TRUE(get);
    EXPECT_EQ(get->status, 405) << get->body;
  }
}

}  // namespace
}  // namespace headway::serving::testing
