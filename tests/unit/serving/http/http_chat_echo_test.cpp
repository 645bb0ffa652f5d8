// vLLM's echo on /v1/chat/completions: an answer to a conversation that ends with an assistant
// message starts with that message's text (whole and streamed), so that a continued message comes
// back whole; after any other final message echo changes nothing.
#include <string>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

// The fake service answers "abc" (ids 0, 1, 2) without a script.
const std::string kContinued = R"({"messages": [{"role": "user", "content": "Spell it."},
    {"role": "assistant", "content": [{"type": "text", "text": "It is"}, {"type": "text",
    "text": "x: "}]}], "add_generation_prompt": false, "continue_final_message": true,
    "max_tokens": 3, "echo": true)";

json message_of(const httplib::Result& result) {
  EXPECT_TRUE(result);
  if (!result) return json();
  EXPECT_EQ(result->status, 200) << result->body;
  return json::parse(result->body)["choices"][0]["message"];
}

TEST_F(HttpFrontendTest, ChatEchoPutsTheFinalAssistantMessageBeforeTheAnswer) {
  // Text parts are joined with newlines, as the template reads them.
  json message = message_of(post_json("/v1/chat/completions", kContinued + "}"));
  EXPECT_EQ(message, json({{"role", "assistant"}, {"content", "It is\nx: abc"}}));
  EXPECT_FALSE(service_.submitted().back().add_generation_prompt);
  EXPECT_TRUE(service_.submitted().back().continue_final_message);
  const auto result = post_json("/v1/chat/completions", kContinued + R"(, "n": 2})");
  ASSERT_TRUE(result);
  const json body = json::parse(result->body);
  ASSERT_EQ(body["choices"].size(), 2u) << body;
  EXPECT_EQ(body["choices"][1]["message"]["content"], "It is\nx: abc");
  // The echoed text is not generated: the usage counts the answer's tokens only.
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);

  // A final user message is not the answer's role: nothing is echoed (as in vLLM).
  message = message_of(post_json("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "hi"}], "max_tokens": 3, "echo": true})"));
  EXPECT_EQ(message["content"], "abc");
  // A final assistant turn with a generation prompt after it is still echoed, as vLLM does.
  message = message_of(post_json("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "hi"}, {"role": "assistant", "content": "Hello. "}], "max_tokens": 3,
      "echo": true})"));
  EXPECT_EQ(message["content"], "Hello. abc");
  // Without echo the answer is the generated text alone.
  message = message_of(post_json("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "hi"}, {"role": "assistant", "content": "Hello. "}], "max_tokens": 3,
      "echo": false})"));
  EXPECT_EQ(message["content"], "abc");
}

// Streamed: every choice's role chunk, then every choice's echo as content of its own, then the
// tokens.
TEST_F(HttpFrontendTest, StreamedChatEchoFollowsTheRoleChunks) {
  const auto result = post_json("/v1/chat/completions", kContinued + R"(, "n": 2,
      "stream": true, "stream_options": {"include_usage": true}, "logprobs": true})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const std::vector<json> events = json_events(sse_data(result->body));
  ASSERT_GE(events.size(), 5u) << result->body;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(events[i]["choices"][0]["index"], i);
    EXPECT_EQ(events[i]["choices"][0]["delta"]["role"], "assistant");
    const json& echo = events[2 + i]["choices"][0];
    EXPECT_EQ(echo["index"], i);
    EXPECT_EQ(echo["delta"], json({{"content", "It is\nx: "}}));
    EXPECT_TRUE(echo["logprobs"].is_null());
    EXPECT_TRUE(echo["finish_reason"].is_null());
  }
  std::string rest[2];
  for (size_t i = 4; i < events.size(); ++i) {
    if (events[i]["choices"].empty()) {
      EXPECT_EQ(events[i]["usage"]["completion_tokens"], 6);
      continue;
    }
    const json& choice = events[i]["choices"][0];
    if (choice["delta"].contains("content")) {
      rest[choice["index"].get<size_t>()] += choice["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(rest[0], "abc");
  EXPECT_EQ(rest[1], "abc");

  // Nothing to echo: no event for it.
  const auto plain = post_json("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "x"}], "max_tokens": 3, "echo": true, "stream": true})");
  ASSERT_TRUE(plain);
  std::string content;
  for (const json& event : json_events(sse_data(plain->body))) {
    const json& delta = event["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(content, "abc");
}

// With a reasoning parser the echo is content, added after the answer was taken apart: its text
// is not read as thinking, and the thinking still comes back apart.
class HttpChatEchoReasoningTest : public HttpFrontendTest {
 protected:
  void SetUp() override {
    HttpOptions options;
    options.reasoning_parser = "qwen3";
    start_frontend(options);
  }
};

TEST_F(HttpChatEchoReasoningTest, TheEchoIsContentBeforeTheAnswersContent) {
  const std::string answer = "<think>short</think>done";
  service_.set_script(answer);
  const auto result = post_json("/v1/chat/completions",
                                R"({"messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": "<think>"}], "echo": true, "max_tokens": )" +
                                    std::to_string(answer.size()) + "}");
  const json message = message_of(result);
  EXPECT_EQ(message["content"], "<think>done");
  EXPECT_EQ(message["reasoning"], "short");

  // An answer of thinking alone has a null content, but an empty one when echo was asked (vLLM
  // adds the echo, maybe "", to every answer's content).
  const std::string thinking = "<think>short</think>";
  service_.set_script(thinking);
  const std::string body = R"({"messages": [{"role": "user", "content": "q"}], "max_tokens": )" +
                           std::to_string(thinking.size());
  EXPECT_TRUE(message_of(post_json("/v1/chat/completions", body + "}"))["content"].is_null());
  EXPECT_EQ(message_of(post_json("/v1/chat/completions", body + R"(, "echo": true})"))["content"],
            "");
}

}  // namespace
}  // namespace headway::serving::testing
