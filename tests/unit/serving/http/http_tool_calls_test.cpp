// Tool calls through the HTTP frontend: what a chat request with tools hands the service (the tools
// and the calls and results of earlier turns, for the template), and how an answer that calls
// tools comes back, whole and streamed, with the server's tool call parser.
#include <algorithm>
#include <cctype>
#include <string>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using nlohmann::json;

const std::string kWeatherTool =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather now",)"
    R"( "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})";

const std::string kHermesAnswer =
    "Checking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call>";

class HttpToolCallsTest : public HttpFrontendTest {
 protected:
  void use_parser(const std::string& parser) {
    HttpOptions options;
    options.tool_call_parser = parser;
    start_frontend(options);
  }
  // A chat request with the weather tool, answered with `answer` (its whole length).
  std::string request(const std::string& answer, const std::string& extra = "") {
    service_.set_script(answer);
    return R"({"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [)" +
           kWeatherTool + "], \"max_tokens\": " + std::to_string(answer.size()) + extra + "}";
  }
};

TEST_F(HttpToolCallsTest, AnAnswerThatCallsAToolComesBackAsToolCalls) {
  use_parser("hermes");
  auto result = post_json("/v1/chat/completions", request(kHermesAnswer));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json choice = json::parse(result->body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& message = choice["message"];
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["content"], "Checking.");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  const json& call = message["tool_calls"][0];
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("chatcmpl-tool-"));
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  // OpenAI's arguments are JSON text.
  ASSERT_TRUE(call["function"]["arguments"].is_string());
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));

  // The tools reach the service as the client wrote them, keys in its order, for the template.
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].tools_json,
            nlohmann::ordered_json::parse("[" + kWeatherTool + "]").dump());
  EXPECT_EQ(submitted[0].tools_json.find("\"type\""), 2u);  // "type" first, as sent
}

TEST_F(HttpToolCallsTest, OnlyCallsGiveANullContent) {
  use_parser("llama3_json");
  const std::string answer =
      R"({"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_weather", )"
      R"("parameters": {"city": "Lyon"}})";
  auto result = post_json("/v1/chat/completions", request(answer));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json message = json::parse(result->body)["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 2u);
  EXPECT_EQ(json::parse(message["tool_calls"][1]["function"]["arguments"].get<std::string>()),
            json({{"city", "Lyon"}}));
  // parallel_tool_calls = false: the first call only.
  result = post_json("/v1/chat/completions", request(answer, R"(, "parallel_tool_calls": false)"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_EQ(json::parse(result->body)["choices"][0]["message"]["tool_calls"].size(), 1u);
}

// tool_choice naming a function or "required": the service is asked for guided output (the
// function's parameters, or vLLM's array of {"name", "parameters"}), and the answer is read as
// calls whatever the server's parser, here none.
TEST_F(HttpToolCallsTest, AForcedChoiceAsksForGuidedOutputAndReadsTheAnswerAsCalls) {
  start_frontend(HttpOptions{});
  auto result = post_json(
      "/v1/chat/completions",
      request(R"({"city": "Paris"})",
              R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  json message = json::parse(result->body)["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].guided.kind, GuidedOutput::Kind::kJsonSchema);
  EXPECT_EQ(submitted[0].guided.field, "tools[0].function.parameters");
  EXPECT_EQ(submitted[0].guided.schema_json,
            R"({"type":"object","properties":{"city":{"type":"string"}}})");

  const std::string two_calls = R"([{"name": "get_weather", "parameters": {"city": "Paris"}}, )"
                                R"({"name": "get_weather", "parameters": {"city": "Lyon"}}])";
  result = post_json("/v1/chat/completions", request(two_calls, R"(, "tool_choice": "required")"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  message = json::parse(result->body)["choices"][0]["message"];
  ASSERT_EQ(message["tool_calls"].size(), 2u);
  EXPECT_EQ(json::parse(message["tool_calls"][1]["function"]["arguments"].get<std::string>()),
            json({{"city", "Lyon"}}));
  submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 2u);
  EXPECT_EQ(submitted[1].guided.field, "tool_choice");
  const json schema = json::parse(submitted[1].guided.schema_json);
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  EXPECT_FALSE(schema.contains("maxItems"));
  EXPECT_EQ(schema["items"]["anyOf"][0]["properties"]["name"]["enum"], json({"get_weather"}));

  // A tool whose parameters refer to their own definitions keeps them when it joins the list.
  const std::string nested_tool =
      R"({"type": "function", "function": {"name": "book", "parameters": {"type": "object", )"
      R"("properties": {"guest": {"$ref": "#/$defs/Person"}}, "$defs": {"Person": {"type": )"
      R"("object", "properties": {"name": {"type": "string"}, "friend": {"$ref": "#"}}}}}}})";
  service_.set_script(R"([{"name": "book", "parameters": {"guest": {"name": "Ann"}}}])");
  result = post_json("/v1/chat/completions",
                     R"({"messages": [{"role": "user", "content": "Hi"}], "tool_choice": )"
                     R"("required", "max_tokens": 100, "tools": [)" +
                         kWeatherTool + ", " + nested_tool + "]}");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json rebased = json::parse(service_.submitted().back().guided.schema_json);
  const json& book = rebased["items"]["anyOf"][1]["properties"]["parameters"];
  EXPECT_EQ(book["properties"]["guest"]["$ref"],
            "#/items/anyOf/1/properties/parameters/$defs/Person");
  EXPECT_EQ(book["$defs"]["Person"]["properties"]["friend"]["$ref"],
            "#/items/anyOf/1/properties/parameters");

  // A tool the guide cannot force is refused naming the part of its schema.
  service_.set_script("x");
  result = post_json("/v1/chat/completions",
                     R"({"messages": [{"role": "user", "content": "Hi"}], "tool_choice": )"
                     R"("required", "tools": [{"type": "function", "function": {"name": "f", )"
                     R"("parameters": {"type": "object", "properties": {"zip": {"type": )"
                     R"("string", "pattern": "\\b[0-9]"}}}}}]})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400) << result->body;
  EXPECT_EQ(json::parse(result->body)["error"]["param"],
            "tools[0].function.parameters.properties.zip.pattern");
}

// From helper-200's review: "parameters": null reads as absent where the tool is checked, but a
// forced choice compiled the null as a schema (400, "a schema must be an object or a boolean").
// It asks for any object, as a tool without parameters does.
TEST_F(HttpToolCallsTest, AToolWhoseParametersAreNullTakesAnyObject) {
  start_frontend(HttpOptions{});
  service_.set_script(R"([{"name": "f", "parameters": {}}])");
  const auto result = post_json(
      "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", )"
      R"("function": {"name": "f", "parameters": null}}], "tool_choice": "required", )"
      R"("max_tokens": 64})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  const json schema = json::parse(submitted[0].guided.schema_json);
  EXPECT_EQ(schema["items"]["anyOf"][0]["properties"]["parameters"], json({{"type", "object"}}))
      << schema;
}

// With a reasoning parser the model thinks first: the service is asked to apply the shape after
// "</think>", and the answer's thinking and content are split as for any answer.
TEST_F(HttpToolCallsTest, AGuidedAnswerOfAReasoningModelThinksFirst) {
  HttpOptions options;
  options.reasoning_parser = "deepseek_r1";
  start_frontend(options);
  const std::string answer = "Let me see.</think>\n\n{\"a\": 1}";
  service_.set_script(answer);
  auto result = post_json("/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": )" +
                              std::to_string(answer.size()) +
                              R"(, "response_format": {"type": "json_object"}})");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json message = json::parse(result->body)["choices"][0]["message"];
  EXPECT_EQ(message["reasoning"], "Let me see.");
  EXPECT_EQ(json::parse(message["content"].get<std::string>()), json({{"a", 1}}));
  ASSERT_EQ(service_.submitted().size(), 1u);
  EXPECT_EQ(service_.submitted()[0].guided.starts_after, "</think>");
  // R1's template opens the thinking in the prompt: no opening tag is looked for.
  EXPECT_TRUE(service_.submitted()[0].guided.reasoning_opener.empty());
  // Qwen3's parser takes an answer that does not open with "<think>" for all content: the guide
  // is told so (it shapes such an answer from its first token).
  // A JSON object answered at once, on a server started with `server_options`.
  const auto json_object_answer = [&](const HttpOptions& server_options) {
    start_frontend(server_options);
    service_.set_script(R"({"a": 1})");
    return post_json("/v1/chat/completions",
                     R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, )"
                     R"("response_format": {"type": "json_object"}})");
  };
  options.reasoning_parser = "qwen3";
  result = json_object_answer(options);
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_EQ(service_.submitted().back().guided.starts_after, "</think>");
  EXPECT_EQ(service_.submitted().back().guided.reasoning_opener, "<think>");
  EXPECT_EQ(json::parse(result->body)["choices"][0]["message"]["content"], R"({"a": 1})");
  // Without a reasoning parser the shape applies from the first token.
  result = json_object_answer(HttpOptions{});
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_TRUE(service_.submitted().back().guided.starts_after.empty());
}

// mistral: the calls follow the [TOOL_CALLS] special token, so the request asks the service to
// keep special tokens in the text (as vLLM does), whatever the client sent; the ids are Mistral's.
TEST_F(HttpToolCallsTest, MistralAnswersKeepSpecialTokensAndGiveMistralIds) {
  use_parser("mistral");
  const std::string answer =
      "Checking.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}]";
  auto result =
      post_json("/v1/chat/completions", request(answer, R"(, "skip_special_tokens": true)"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json choice = json::parse(result->body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  const std::string id = call["id"];
  EXPECT_EQ(id.size(), 9u) << id;
  EXPECT_TRUE(std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(c) != 0; }));
  // tool_choice "none": the answer is text, and special tokens are skipped as the client asks.
  result = post_json("/v1/chat/completions", request("It is sunny.", R"(, "tool_choice": "none")"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 2u);
  EXPECT_FALSE(submitted[0].skip_special_tokens);
  EXPECT_TRUE(submitted[1].skip_special_tokens);
  // A forced call gets Mistral's id too: the template refuses any other when it comes back.
  for (const std::string choice :
       {R"({"type": "function", "function": {"name": "get_weather"}})", R"("required")"}) {
    const std::string forced = choice == R"("required")"
                                   ? R"([{"name": "get_weather", "parameters": {"city": "Lyon"}}])"
                                   : R"({"city": "Lyon"})";
    result = post_json("/v1/chat/completions", request(forced, ", \"tool_choice\": " + choice));
    ASSERT_TRUE(result);
    ASSERT_EQ(result->status, 200) << result->body;
    const std::string forced_id =
        json::parse(result->body)["choices"][0]["message"]["tool_calls"][0]["id"];
    EXPECT_EQ(forced_id.size(), 9u) << choice << ": " << forced_id;
    EXPECT_TRUE(std::all_of(forced_id.begin(), forced_id.end(), [](char c) {
      return std::isalnum(c) != 0;
    })) << forced_id;
  }
}

TEST_F(HttpToolCallsTest, AnAnswerWithoutCallsIsPlainContent) {
  use_parser("hermes");
  auto result = post_json("/v1/chat/completions", request("It is sunny."));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json choice = json::parse(result->body)["choices"][0];
  EXPECT_EQ(choice["message"], json({{"role", "assistant"}, {"content", "It is sunny."}}));
  EXPECT_EQ(choice["finish_reason"], "length");
}

TEST_F(HttpToolCallsTest, StreamedCallsComeAsToolCallDeltas) {
  use_parser("hermes");
  auto result =
      post_json("/v1/chat/completions",
                request(kHermesAnswer + "\n<tool_call>{\"name\": \"get_time\"}</tool_call>",
                        R"(, "stream": true)"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  std::string content;
  json calls = json::array();
  json finish_reason;
  for (const std::string& data : sse_data(result->body)) {
    if (data == "[DONE]") break;
    const json choice = json::parse(data)["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      for (const json& call : delta["tool_calls"]) calls.push_back(call);
    }
    if (!choice["finish_reason"].is_null()) finish_reason = choice["finish_reason"];
  }
  EXPECT_EQ(content, "Checking.");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[1]["index"], 1);
  EXPECT_EQ(calls[1]["function"]["name"], "get_time");
  EXPECT_EQ(calls[1]["function"]["arguments"], "{}");
  EXPECT_EQ(calls[1]["type"], "function");
  EXPECT_EQ(finish_reason, "tool_calls");
}

// Held mode, a token at a time: text goes out as it comes, a partial tag waits, a call goes out
// when its closing tag arrives; a failure sends what was held back before its error event.
TEST_F(HttpToolCallsTest, AStreamSendsEachCallWhenItClosesAndFlushesOnFailure) {
  use_parser("hermes");
  service_.set_hold(true);
  const std::string answer = "Hi.<tool_call>{\"name\": \"f\"}</tool_call><tool_";
  service_.set_script(answer);
  RawConnection connection(port());
  const std::string body =
      R"({"messages": [{"role": "user", "content": "x"}], "stream": true, "max_tokens": 99,)"
      R"( "tools": [{"function": {"name": "f"}}]})";
  connection.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_TRUE(service_.wait_for_submits(1, 30.0));
  const std::string id = service_.submitted()[0].request_id;
  service_.push(id, 5);  // "Hi.<t"
  std::string seen = connection.read_until("\"content\":\"Hi.\"");
  EXPECT_NE(seen.find("\"content\":\"Hi.\""), std::string::npos) << seen;
  service_.push(id, 34);  // up to and with "</tool_call>"
  seen = connection.read_until("\"tool_calls\"");
  EXPECT_NE(seen.find("\"name\":\"f\""), std::string::npos) << seen;
  EXPECT_EQ(seen.find("<t"), std::string::npos) << seen;  // the tag never went out as text
  service_.push(id, 6);                                   // "<tool_": held, as it may open a call
  service_.finish(id, Finish::kError, "engine failed");
  const std::string rest = connection.read_until("data: [DONE]");
  const size_t held = rest.find("\"content\":\"<tool_\"");
  const size_t error = rest.find("engine failed");
  ASSERT_NE(held, std::string::npos) << rest;
  ASSERT_NE(error, std::string::npos) << rest;
  EXPECT_LT(held, error);
}

TEST_F(HttpToolCallsTest, AutoWithoutAParserIsRefusedAndNoneRendersTheTools) {
  // The default frontend has no parser: "auto" (the default with tools) is refused by name.
  auto result = post_json("/v1/chat/completions", request(kHermesAnswer));
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400);
  const json error = error_of(result->body);
  EXPECT_EQ(error["param"], "tool_choice");
  EXPECT_NE(error["message"].get<std::string>().find("tool_call_parser"), std::string::npos);
  EXPECT_TRUE(service_.submitted().empty());
  EXPECT_EQ(service_.refused_by_frontend(), 1u);

  // "none": the tools still go to the template, and the answer is text.
  result = post_json("/v1/chat/completions", request(kHermesAnswer, R"(, "tool_choice": "none")"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const json choice = json::parse(result->body)["choices"][0];
  EXPECT_EQ(choice["message"]["content"], kHermesAnswer);
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  ASSERT_EQ(service_.submitted().size(), 1u);
  EXPECT_FALSE(service_.submitted()[0].tools_json.empty());
}

TEST_F(HttpToolCallsTest, EarlierCallsAndTheirResultsReachTheTemplate) {
  use_parser("hermes");
  const std::string body = R"({"messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"unit\": \"C\", \"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "21"}],
    "tools": [)" + kWeatherTool +
                           "], \"max_tokens\": 3}";
  auto result = post_json("/v1/chat/completions", body);
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const auto submitted = service_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  const auto& messages = submitted[0].messages;
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[1].role, "assistant");
  EXPECT_EQ(messages[1].content, "");
  // The arguments as an object (templates index into them), in the client's key order.
  EXPECT_EQ(messages[1].fields_json,
            R"({"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather",)"
            R"("arguments":{"unit":"C","city":"Paris"}}}]})");
  EXPECT_EQ(messages[2].role, "tool");
  EXPECT_EQ(messages[2].content, "21");
  EXPECT_EQ(messages[2].fields_json, R"({"tool_call_id":"call_1"})");
}

}  // namespace
}  // namespace headway::serving::testing
