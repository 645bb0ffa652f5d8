// Reasoning through the HTTP frontend: with the server's reasoning parser a chat answer's
// thinking comes back apart ("reasoning", and "reasoning_content" as older clients read it),
// whole and streamed, together with tool calls made after it; completions are left alone.
#include <string>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

const std::string kAnswer = "<think>Paris is in France.</think>\n\nParis.";

class HttpReasoningTest : public HttpFrontendTest {
 protected:
  void SetUp() override {
    HttpOptions options;
    options.reasoning_parser = "qwen3";
    options.tool_call_parser = "hermes";
    start_frontend(options);
  }
  // A chat request answered with `answer` (its whole length).
  std::string request(const std::string& answer, const std::string& extra = "") {
    service_.set_script(answer);
    return R"({"messages": [{"role": "user", "content": "Capital?"}], "max_tokens": )" +
           std::to_string(answer.size()) + extra + "}";
  }
};

TEST_F(HttpReasoningTest, TheThinkingComesBackApart) {
  auto result = post_json("/v1/chat/completions", request(kAnswer));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json message = json::parse(result->body)["choices"][0]["message"];
  EXPECT_EQ(message["content"], "\n\nParis.");
  EXPECT_EQ(message["reasoning"], "Paris is in France.");
  EXPECT_EQ(message["reasoning_content"], "Paris is in France.");
  EXPECT_FALSE(message.contains("tool_calls"));

  // No thinking: the fields are there, null (the server parses reasoning).
  result = post_json("/v1/chat/completions", request("Paris."));
  ASSERT_TRUE(result);
  const json plain = json::parse(result->body)["choices"][0]["message"];
  EXPECT_EQ(plain["content"], "Paris.");
  EXPECT_TRUE(plain["reasoning"].is_null());

  // Only thinking (cut short): the content is null.
  result = post_json("/v1/chat/completions", request("<think>Paris is"));
  ASSERT_TRUE(result);
  const json thinking = json::parse(result->body)["choices"][0]["message"];
  EXPECT_TRUE(thinking["content"].is_null());
  EXPECT_EQ(thinking["reasoning"], "Paris is");

  // An empty answer after the thinking: null content, as vLLM gives it.
  result = post_json("/v1/chat/completions", request("<think>x</think>"));
  ASSERT_TRUE(result);
  EXPECT_TRUE(json::parse(result->body)["choices"][0]["message"]["content"].is_null());

  // include_reasoning = false: the thinking is dropped, not returned as content.
  result = post_json("/v1/chat/completions", request(kAnswer, R"(, "include_reasoning": false)"));
  ASSERT_TRUE(result);
  const json dropped = json::parse(result->body)["choices"][0]["message"];
  EXPECT_EQ(dropped["content"], "\n\nParis.");
  EXPECT_FALSE(dropped.contains("reasoning"));
}

TEST_F(HttpReasoningTest, StreamedThinkingComesAsReasoningDeltasThenCalls) {
  const std::string answer =
      kAnswer + "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
  auto result = post_json(
      "/v1/chat/completions",
      request(answer, R"(, "stream": true, "tools": [{"function": {"name": "get_weather"}}])"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  std::string reasoning;
  std::string content;
  size_t calls = 0;
  json finish_reason;
  for (const std::string& data : sse_data(result->body)) {
    if (data == "[DONE]") break;
    const json choice = json::parse(data)["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("reasoning")) {
      EXPECT_EQ(delta["reasoning"], delta["reasoning_content"]);
      reasoning += delta["reasoning"].get<std::string>();
    }
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) calls += delta["tool_calls"].size();
    if (!choice["finish_reason"].is_null()) finish_reason = choice["finish_reason"];
  }
  EXPECT_EQ(reasoning, "Paris is in France.");
  EXPECT_EQ(content, "\n\nParis.");
  EXPECT_EQ(calls, 1u);
  EXPECT_EQ(finish_reason, "tool_calls");
}

// Qwen3-Thinking-2507's template opens the thinking in the prompt ("<think>\n"), so the answer has
// only the closing tag: what comes before it is reasoning, whole and streamed (it was content, tag
// and all). The frontend asks the service where the prompt left the thinking.
TEST_F(HttpReasoningTest, APromptThatOpenedTheThinkingSplitsATaglessAnswer) {
  service_.set_prompt_reasoning(PromptReasoning::kOpen);
  const std::string answer = "Paris is in France.</think>\n\nParis.";
  auto result = post_json("/v1/chat/completions", request(answer));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json message = json::parse(result->body)["choices"][0]["message"];
  EXPECT_EQ(message["reasoning"], "Paris is in France.");
  EXPECT_EQ(message["content"], "\n\nParis.");
  ASSERT_EQ(service_.submitted().size(), 1u);
  EXPECT_EQ(service_.submitted()[0].reasoning_end, "</think>");

  result = post_json("/v1/chat/completions", request(answer, R"(, "stream": true)"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  std::string reasoning;
  std::string content;
  for (const std::string& data : sse_data(result->body)) {
    if (data == "[DONE]") break;
    const json delta = json::parse(data)["choices"][0]["delta"];
    if (delta.contains("reasoning")) reasoning += delta["reasoning"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Paris is in France.");
  EXPECT_EQ(content, "\n\nParis.");

  // A prompt that closed the thinking (Qwen3's enable_thinking off): a tagless answer is content.
  service_.set_prompt_reasoning(PromptReasoning::kEnded);
  result = post_json("/v1/chat/completions", request("Paris."));
  ASSERT_TRUE(result);
  const json plain = json::parse(result->body)["choices"][0]["message"];
  EXPECT_EQ(plain["content"], "Paris.");
  EXPECT_TRUE(plain["reasoning"].is_null());
}

// deepseek_r1 takes a tagless answer for all reasoning (R1's template opens the thinking in the
// prompt), unless the prompt closed the thinking (a template with thinking off): then it is the
// content, whole and streamed (it came back as reasoning, with null content).
class HttpDeepSeekReasoningTest : public HttpFrontendTest {
 protected:
  void SetUp() override {
    HttpOptions options;
    options.reasoning_parser = "deepseek_r1";
    start_frontend(options);
  }
};

TEST_F(HttpDeepSeekReasoningTest, APromptThatClosedTheThinkingMakesATaglessAnswerContent) {
  const std::string chat = R"({"messages": [{"role": "user", "content": "Capital?"}],
                              "max_tokens": 6)";
  service_.set_script("Paris.");
  auto result = post_json("/v1/chat/completions", chat + "}");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json thinking = json::parse(result->body)["choices"][0]["message"];
  EXPECT_EQ(thinking["reasoning"], "Paris.");  // neither: the parser's own rule
  EXPECT_TRUE(thinking["content"].is_null());

  service_.set_prompt_reasoning(PromptReasoning::kEnded);
  result = post_json("/v1/chat/completions", chat + ", \"n\": 2}");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json choices = json::parse(result->body)["choices"];
  ASSERT_EQ(choices.size(), 2u) << result->body;
  for (const json& choice : choices) {
    EXPECT_EQ(choice["message"]["content"], "Paris.") << choice;
    EXPECT_TRUE(choice["message"]["reasoning"].is_null()) << choice;
  }
  result = post_json("/v1/chat/completions", chat + R"(, "stream": true})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  std::string content;
  for (const std::string& data : sse_data(result->body)) {
    if (data == "[DONE]") break;
    const json delta = json::parse(data)["choices"][0]["delta"];
    EXPECT_FALSE(delta.contains("reasoning")) << data;
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(content, "Paris.");
}

// chat_template_kwargs reach the service for the template (Qwen3's switch).
TEST_F(HttpReasoningTest, TemplateKwargsReachTheService) {
  auto result =
      post_json("/v1/chat/completions",
                request("Paris.", R"(, "chat_template_kwargs": {"enable_thinking": false})"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  ASSERT_EQ(service_.submitted().size(), 1u);
  EXPECT_EQ(service_.submitted()[0].template_kwargs_json, R"({"enable_thinking":false})");
}

TEST_F(HttpReasoningTest, CompletionsAreNotParsed) {
  service_.set_script(kAnswer);
  auto result = post_json("/v1/completions", R"({"prompt": "x", "max_tokens": )" +
                                                 std::to_string(kAnswer.size()) + "}");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_EQ(json::parse(result->body)["choices"][0]["text"], kAnswer);
}

TEST_F(HttpReasoningTest, EarlierThinkingReachesTheTemplateUnderBothNames) {
  auto result = post_json("/v1/chat/completions", R"({"messages": [
      {"role": "user", "content": "Capital?"},
      {"role": "assistant", "content": "Paris.", "reasoning": "It is Paris."},
      {"role": "user", "content": "Sure?"}], "max_tokens": 2})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].messages[1].fields_json,
            R"({"reasoning":"It is Paris.","reasoning_content":"It is Paris."})");
}

}  // namespace
}  // namespace headway::serving::testing
